//! Malformed, unauthenticated and idle wire connections against the real
//! daemons: the coordinator and the agent refuse them, count them by reason
//! in `cosched_wire_rejected_total`, and keep working.
use std::{
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    os::fd::AsRawFd as _,
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::{CoordOpts, SECRET, TestCluster, TestCoordinator, exclusive, wait_until},
    require_root,
};
use cosched_proto::wire::{
    Inbound, Message, Role, Session, SessionConfig, SetPolicy, SharedSecret,
};

/// Runs `work` on a thread inside network namespace `ns`.
fn in_netns<T: Send + 'static>(ns: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("netns file");
        // SAFETY: setns on the calling thread only; the fd is valid.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        work()
    })
    .join()
    .expect("netns thread")
}

/// A blocking peer: a stream, a session, and the bytes read but not yet
/// consumed (several frames may arrive in one read).
struct Peer {
    stream: TcpStream,
    session: Session,
    pending: Vec<u8>,
}

impl Peer {
    /// Feeds the session until it yields something.
    fn next_inbound(&mut self) -> Inbound {
        loop {
            if !self.pending.is_empty() {
                let mut input = &self.pending[..];
                let result = self.session.receive(&mut input).expect("valid frames");
                let consumed = self.pending.len() - input.len();
                self.pending.drain(..consumed);
                if let Some(inbound) = result {
                    return inbound;
                }
            }
            let mut buffer = [0u8; 4096];
            let read = self.stream.read(&mut buffer).expect("read");
            assert!(read > 0, "peer closed");
            self.pending.extend_from_slice(&buffer[..read]);
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }
}

#[test]
fn the_coordinator_refuses_garbage_and_strangers_and_keeps_serving() {
    require_root();
    let cluster = TestCluster::start(68, CoordOpts::default(), "");
    let listen = cluster.coordinator.listen.clone();
    in_netns(&cluster.nodes.ns[0], move || {
        // Not a cosched frame at all.
        let mut stream = TcpStream::connect(&listen).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: coordinator\r\n\r\n")
            .unwrap();
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        // A Hello under another secret.
        let stranger = SharedSecret::parse(&SECRET.replace("hex:00", "hex:ff")).unwrap();
        let (_, hello) =
            Session::initiate(SessionConfig::new(Role::Agent, "n0", stranger)).unwrap();
        let mut stream = TcpStream::connect(&listen).unwrap();
        stream.write_all(&hello).unwrap();
        let _ = stream.read_to_end(&mut rest);
    });
    let coordinator = &cluster.coordinator;
    wait_until("rejections counted", Duration::from_secs(3), || {
        coordinator.metric("cosched_wire_rejected_total", &["reason=\"bad_magic\""]) >= 1.0
            && coordinator.metric("cosched_wire_rejected_total", &[]) >= 2.0
    });
    // The real agents are still registered and jobs still run.
    cluster.wait_connected(Duration::from_secs(2));
    let id = coordinator.submit_synth("after", 2, &["--duration", "0.3"]);
    let done = coordinator.wait_job(id, Duration::from_secs(10), |job| job["state"] != "running");
    assert_eq!(done["state"], "completed", "{done:#}");
}

/// Whether the coordinator lists `node` as registered now.
fn node_connected(coordinator: &TestCoordinator, node: &str) -> bool {
    coordinator.call(&["nodes"])["nodes"]["nodes"]
        .as_array()
        .is_some_and(|nodes| {
            nodes
                .iter()
                .any(|entry| entry["name"] == node && entry["connected"] == true)
        })
}

/// The bound: idle or slow peers delay a real agent by at most 1 s.
const MOST_DELAY: Duration = Duration::from_secs(1);
const IDLE_CONNECTIONS: usize = 500;

#[test]
fn idle_connections_cannot_keep_a_restarting_agent_out_and_are_counted() {
    require_root();
    let _timing = exclusive();
    let mut cluster = TestCluster::start(69, CoordOpts::default(), "");
    cluster.agents[0].stop();
    wait_until("n0 seen gone", Duration::from_secs(5), || {
        !node_connected(&cluster.coordinator, "n0")
    });
    // From n0's own address: per-address limits alone would lock it out.
    let listen = cluster.coordinator.listen.clone();
    let flooding = Instant::now();
    let idle = in_netns(&cluster.nodes.ns[0], move || {
        (0..IDLE_CONNECTIONS)
            .map(|_| TcpStream::connect(&listen).expect("connecting an idle peer"))
            .collect::<Vec<_>>()
    });
    // The agent dials the coordinator as soon as its control socket is bound;
    // spawn() returns once it sees the socket (polling every 50 ms), so the
    // delay is measured from there: at most 50 ms short of the true one, and
    // never counting the agent's own start-up.
    eprintln!(
        "{IDLE_CONNECTIONS} idle connections opened in {:?}",
        flooding.elapsed()
    );
    let spawning = Instant::now();
    cluster.agents[0].spawn();
    let started = Instant::now();
    while !node_connected(&cluster.coordinator, "n0") {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "n0 never registered:\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    let with_start_up = spawning.elapsed();
    assert!(
        took < MOST_DELAY,
        "n0 registered {took:?} after restarting behind {IDLE_CONNECTIONS} idle connections:\n{}",
        cluster.logs()
    );
    let coordinator = &cluster.coordinator;
    let idle_rejections = || {
        ["handshake_timeout", "unauthenticated_per_address_limit"]
            .iter()
            .map(|reason| {
                coordinator.metric(
                    "cosched_wire_rejected_total",
                    &[&format!("reason=\"{reason}\"")],
                )
            })
            .sum::<f64>()
    };
    wait_until(
        "every idle connection counted",
        Duration::from_secs(10),
        || idle_rejections() >= IDLE_CONNECTIONS as f64,
    );
    let timed_out = coordinator.metric(
        "cosched_wire_rejected_total",
        &["reason=\"handshake_timeout\""],
    );
    assert!(timed_out >= 1.0, "no handshake time-out counted");
    eprintln!(
        "n0 registered {took:?} after its socket was up ({with_start_up:?} with start-up); idle connections: {timed_out} timed out, {} evicted",
        idle_rejections() - timed_out
    );
    drop(idle);
    cluster.wait_connected(Duration::from_secs(2));
}

#[test]
fn the_agent_refuses_forged_and_garbled_frames_and_reconnects() {
    require_root();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let table = format!(
        "[coordinator]\naddress = \"{address}\"\nsecret = \"{SECRET}\"\nreconnect_min_ms = 50\nreconnect_max_ms = 100\n"
    );
    let agent = TestAgent::start(AgentOpts {
        node: "n0",
        cpus: vec![0],
        netns: None,
        extra: &table,
    });
    listener.set_nonblocking(false).expect("blocking listener");
    let (stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let secret = SharedSecret::parse(SECRET).unwrap();
    let mut peer = Peer {
        stream,
        session: Session::accept(SessionConfig::new(Role::Coordinator, "fake", secret)).unwrap(),
        pending: Vec::new(),
    };
    match peer.next_inbound() {
        Inbound::Reply(ack) => peer.write(&ack),
        other => panic!("expected a Hello, got {other:?}"),
    }
    assert!(matches!(peer.next_inbound(), Inbound::Established { .. }));
    match peer.next_inbound() {
        Inbound::Message(Message::Register(register)) => assert_eq!(register.node_name, "n0"),
        other => panic!("expected Register, got {other:?}"),
    }
    // A frame with a flipped tag bit, then the same frame replayed.
    let policy = Message::SetPolicy(SetPolicy {
        policy: "gang".into(),
    });
    let mut forged = peer.session.seal(&policy).unwrap();
    let last = forged.len() - 1;
    forged[last] ^= 0x80;
    peer.write(&forged);
    let good = peer.session.seal(&policy).unwrap();
    peer.write(&good);
    peer.write(&good);
    wait_until("bad tag and replay counted", Duration::from_secs(3), || {
        agent.metric("cosched_wire_rejected_total", &["reason=\"bad_tag\""]) == 1.0
            && agent.metric("cosched_wire_rejected_total", &["reason=\"replay\""]) == 1.0
    });
    assert_eq!(agent.metric("cosched_coordinator_connected", &[]), 1.0);
    // Garbage breaks framing: the agent drops the link and dials again.
    peer.write(&[0xAB; 64]);
    wait_until("bad magic counted", Duration::from_secs(3), || {
        agent.metric("cosched_wire_rejected_total", &["reason=\"bad_magic\""]) == 1.0
    });
    let (_again, _) = listener.accept().expect("the agent reconnects");
    wait_until("link down counted", Duration::from_secs(3), || {
        agent.metric("cosched_coordinator_link_events_total", &["event=\"down\""]) >= 1.0
    });
}
