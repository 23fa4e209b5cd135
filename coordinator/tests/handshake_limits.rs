//! The wire port under idle and slow peers (real TCP on 127.0.0.1, the
//! coordinator's accept loop): they are cut at the handshake time-out or
//! evicted by newer connections, every one is counted by reason, and a real
//! agent's handshake goes through at once meanwhile, even from the same
//! address as the flood.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cosched_coordinator::{
    metrics::Metrics,
    net::{ConnContext, ConnEvent, PreAuthGate, accept_loop},
};
use cosched_proto::wire::{
    Message, Register, Role, Session, SessionConfig, SharedSecret,
    stream::{self},
};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{
        TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::mpsc,
};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(500);

fn secret() -> SharedSecret {
    SharedSecret::from_bytes((0..32).collect()).unwrap()
}

struct Coordinator {
    address: std::net::SocketAddr,
    events: mpsc::Receiver<ConnEvent>,
    metrics: Metrics,
}

async fn start(per_address: usize, total: usize) -> Coordinator {
    let listener = cosched_coordinator::net::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr().unwrap();
    let (events_tx, events) = mpsc::channel(16);
    let metrics = Metrics::new();
    let context = Arc::new(ConnContext {
        session: SessionConfig::new(Role::Coordinator, "coordinator", secret()),
        events: events_tx,
        metrics: metrics.clone(),
        heartbeat_interval: Duration::from_secs(10),
        heartbeat_timeout: Duration::from_secs(30),
        handshake_timeout: HANDSHAKE_TIMEOUT,
        gate: Mutex::new(PreAuthGate::new(per_address, total)),
    });
    tokio::spawn(accept_loop(listener, context));
    Coordinator {
        address,
        events,
        metrics,
    }
}

fn rejected(metrics: &Metrics, reason: &str) -> u64 {
    metrics.wire_rejected.with_label_values(&[reason]).get()
}

type Agent = stream::Connection<OwnedReadHalf, OwnedWriteHalf>;

/// Connects as agent `n0`, completes the handshake and registers; returns
/// how long that took until the main loop heard of it, and the connection.
async fn register(coordinator: &mut Coordinator) -> (Duration, Agent) {
    let started = Instant::now();
    let stream = TcpStream::connect(coordinator.address).await.unwrap();
    let (reader, writer) = stream.into_split();
    let mut connection = stream::initiate(
        reader,
        writer,
        SessionConfig::new(Role::Agent, "n0", secret()),
    )
    .await
    .expect("the handshake completes");
    let register = Message::Register(Register {
        node_name: "n0".into(),
        cpus: vec![0],
        agent_addr: "127.0.0.1:1".parse().unwrap(),
        metrics_addr: None,
    });
    connection.writer.send(&register).await.unwrap();
    match coordinator.events.recv().await.unwrap() {
        ConnEvent::Registered { register, .. } => assert_eq!(register.node_name, "n0"),
        other => panic!("expected a registration, got {other:?}"),
    }
    (started.elapsed(), connection)
}

/// Waits until the server closed `stream` (or 10 s passed: a failure).
async fn closed(mut stream: TcpStream) {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "an idle connection was never closed");
}

#[tokio::test]
async fn idle_connections_cannot_keep_an_agent_out_and_are_all_counted() {
    let mut coordinator = start(8, 256).await;
    let mut idle = Vec::new();
    for _ in 0..500 {
        idle.push(TcpStream::connect(coordinator.address).await.unwrap());
    }
    // Same address as the flood: only eviction of the oldest lets it in.
    let (took, _agent) = register(&mut coordinator).await;
    assert!(
        took < Duration::from_secs(1),
        "the agent registered after {took:?} behind 500 idle connections"
    );
    for stream in idle {
        closed(stream).await;
    }
    let metrics = &coordinator.metrics;
    let evicted = rejected(metrics, "unauthenticated_per_address_limit");
    let timed_out = rejected(metrics, "handshake_timeout");
    assert_eq!(
        evicted + timed_out,
        500,
        "evicted {evicted}, timed out {timed_out}"
    );
    assert!(timed_out >= 1, "the newest idle ones time out");
    assert_eq!(
        metrics
            .connections
            .with_label_values(&["handshake_failed"])
            .get(),
        500
    );
}

#[tokio::test]
async fn a_peer_trickling_its_hello_is_cut_at_the_handshake_time_out() {
    let coordinator = start(8, 256).await;
    let (_, hello) = Session::initiate(SessionConfig::new(Role::Agent, "n0", secret())).unwrap();
    let stream = TcpStream::connect(coordinator.address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let trickle = tokio::spawn(async move {
        for byte in hello {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut rest)).await;
    trickle.abort();
    assert!(read.is_ok(), "the slow peer was never cut");
    assert!(started.elapsed() >= HANDSHAKE_TIMEOUT);
    assert_eq!(rejected(&coordinator.metrics, "handshake_timeout"), 1);
}

#[tokio::test]
async fn a_flood_from_many_addresses_is_bounded_in_total() {
    // 127.0.0.0/8 is all loopback: a distinct source address per connection.
    let mut coordinator = start(2, 16).await;
    let mut idle = Vec::new();
    for last in 0..64u8 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 1, last], 0)))
            .unwrap();
        idle.push(socket.connect(coordinator.address).await.unwrap());
    }
    let (took, _agent) = register(&mut coordinator).await;
    assert!(took < Duration::from_secs(1), "registered after {took:?}");
    for stream in idle {
        closed(stream).await;
    }
    let evicted = rejected(&coordinator.metrics, "unauthenticated_limit");
    let timed_out = rejected(&coordinator.metrics, "handshake_timeout");
    assert_eq!(
        evicted + timed_out,
        64,
        "evicted {evicted}, timed out {timed_out}"
    );
    assert!(evicted >= 64 - 16, "evicted {evicted}");
}
