//! The real agent's local endpoints under hostile clients: the control
//! socket caps connections, answers every bad line clearly and gives the
//! memory of long lines back; the metrics endpoint caps and times out idle
//! connections, so they cannot use up the file descriptors the control
//! socket needs.
use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::TcpStream,
    os::unix::net::UnixStream,
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::wait_until,
    require_root,
};
use cosched_proto::control::{Reply, Request};

/// The agent's resident memory, MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

/// Sends `bytes` on a fresh connection and returns the reply line.
fn exchange(agent: &TestAgent, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(&agent.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

/// Whether the agent still has `stream` open (it has not closed it).
fn still_open(stream: &mut UnixStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 256];
    let open = matches!(stream.read(&mut byte), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

const CONTROL_CONNECTIONS: usize = 32;
const LONG_LINE: usize = (1 << 20) - 64;

/// Opens `count` connections that each send most of a 1 MiB line and no
/// newline; returns the ones the agent kept.
fn hold_long_lines(agent: &TestAgent, count: usize) -> Vec<UnixStream> {
    let mut line = br#"{"op":"jobs","pad":""#.to_vec();
    line.resize(LONG_LINE, b'x');
    let mut held = Vec::new();
    for _ in 0..count {
        let mut stream = UnixStream::connect(&agent.socket).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Connections over the cap are closed at once: their write fails.
        if stream.write_all(&line).is_ok() {
            held.push(stream);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    held.retain_mut(still_open);
    held
}

#[test]
fn the_control_socket_caps_connections_answers_bad_lines_and_returns_memory() {
    require_root();
    let agent = TestAgent::start(AgentOpts {
        node: "ep0",
        cpus: vec![0],
        ..AgentOpts::default()
    });
    let reply = exchange(&agent, b"{\"op\":\"status\"}\xff\n");
    assert!(reply.contains("not valid UTF-8"), "{reply}");
    let reply = exchange(&agent, b"{\"op\":\"status\",\"verbose\":true}\n");
    assert!(reply.contains("unknown field `verbose`"), "{reply}");
    let reply = exchange(&agent, b"{\"op\":\"status\"\n");
    assert!(reply.contains("malformed request"), "{reply}");

    let baseline = rss_mib(agent.pid());
    // Twice: the second round's buffers come from glibc's heap, where they
    // used to stay after being freed.
    for round in 1..=2 {
        let mut held = hold_long_lines(&agent, CONTROL_CONNECTIONS + 20);
        assert_eq!(
            held.len(),
            CONTROL_CONNECTIONS,
            "round {round}: connections kept beyond the cap"
        );
        let peak = rss_mib(agent.pid());
        assert!(
            peak > baseline + 16.0,
            "round {round}: the long lines were not held ({baseline:.1} -> {peak:.1} MiB)"
        );
        // All but the newest close: its buffer sits on top of the others.
        let newest = held.pop().unwrap();
        drop(held);
        wait_until(
            &format!("round {round}: memory back with one connection left (peak {peak:.1} MiB)"),
            Duration::from_secs(5),
            || rss_mib(agent.pid()) < baseline + 8.0,
        );
        drop(newest);
    }
    // The agent still answers.
    assert!(matches!(
        agent.call(Request::Status),
        Ok(Reply::Status { .. })
    ));
}

/// Sets the agent's open-file limit, as systemd would without LimitNOFILE.
fn limit_files(pid: u32, limit: u64) {
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: plain syscall on another process (root), valid pointers.
    let rc = unsafe {
        libc::prlimit(
            pid as i32,
            libc::RLIMIT_NOFILE,
            &rlimit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn idle_metrics_connections_cannot_use_up_the_file_descriptors_the_control_socket_needs() {
    require_root();
    // The shipped limits: 64 connections, 10 s idle.
    let agent = TestAgent::start(AgentOpts {
        node: "ep1",
        cpus: vec![0],
        ..AgentOpts::default()
    });
    limit_files(agent.pid(), 1024);
    let opened = Instant::now();
    let mut idle: Vec<TcpStream> = (0..1100)
        .map(|_| TcpStream::connect(("127.0.0.1", agent.metrics_port)).unwrap())
        .collect();
    match agent.call(Request::Status) {
        Ok(Reply::Status { .. }) => {}
        other => panic!("the control socket stopped answering: {other:?}"),
    }
    // Over the cap: 503 and closed at once; the rest when idle too long.
    let mut busy = 0;
    for stream in &mut idle[64..] {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        busy += usize::from(answer.starts_with("HTTP/1.1 503"));
    }
    assert_eq!(
        busy,
        1100 - 64,
        "connections over the cap of 64 not refused"
    );
    for stream in &mut idle[..64] {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut rest = Vec::new();
        assert!(
            stream.read_to_end(&mut rest).is_ok(),
            "an idle connection stayed open"
        );
    }
    assert!(
        opened.elapsed() >= Duration::from_secs(2),
        "closed before the idle time-out"
    );
    assert!(agent.metrics().contains("cosched_managed_tasks"));
}
