//! Malformed and unauthenticated wire frames against the real daemons: the
//! coordinator and the agent refuse them, count them by reason in
//! `cosched_wire_rejected_total`, and keep working.
use std::{
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    os::fd::AsRawFd as _,
    time::Duration,
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::{CoordOpts, SECRET, TestCluster, wait_until},
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
