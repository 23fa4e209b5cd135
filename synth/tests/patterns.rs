//! Every pattern × {udp, tcp} × {spin, block} as real processes on
//! 127.0.0.1, with exact message accounting.
//!
//! Spin jobs use 2 ranks: more spinning ranks than the machine's 2 cores
//! would mostly measure the (uncoordinated) scheduler, which is the
//! product's job, not this test's.

mod common;

use common::{job_lock, reports};
use cosched_synth::RunReport;
use cosched_synth::modes::{Proto, RecvMode};

const ITERATIONS: u64 = 200;
const MSG_BYTES: u64 = 96;

/// Pattern frames (sent, received) per iteration, written out independently
/// of the library's plans.
fn data_per_iteration(pattern: &str, rank: usize, size: usize) -> (u64, u64) {
    let n = size as u64;
    match pattern {
        "ring" => (1, 1),
        "neighbour" if size == 2 => (1, 1),
        "neighbour" => (2, 2),
        "all-to-all" => (n - 1, n - 1),
        "barrier" | "master-worker" if rank == 0 => (n - 1, n - 1),
        "barrier" | "master-worker" => (1, 1),
        other => panic!("unknown pattern {other}"),
    }
}

/// Ranks whose awaited frame can only be sent after the peer has received
/// theirs (a round trip), so their first poll is empty in practice every
/// iteration. In the symmetric patterns two ranks on two cores can run in
/// lockstep and never find their socket empty.
fn must_wait(pattern: &str, rank: usize) -> bool {
    match pattern {
        "barrier" => rank != 0,
        "master-worker" => true,
        _ => false,
    }
}

fn check_handshake(report: &RunReport, proto: &str) {
    let (rank, others) = (report.rank as u64, report.size as u64 - 1);
    let (sent, received) = (
        report.handshake_messages_sent,
        report.handshake_messages_received,
    );
    match (proto, rank) {
        // Mesh: hello to every lower rank; start from rank 0 to everyone.
        ("tcp", 0) => assert_eq!((sent, received), (others, others)),
        ("tcp", _) => assert_eq!((sent, received), (rank, others - rank + 1)),
        // Hellos are repeated every 50 ms until start arrives, so only
        // lower bounds: an ack and a start per hello heard, at least one hello.
        ("udp", 0) => assert!(
            sent >= 2 * others && received >= others,
            "{sent} {received}"
        ),
        ("udp", _) => assert!(sent >= 1 && received >= 2, "{sent} {received}"),
        _ => unreachable!(),
    }
}

fn check_rank(report: &RunReport, pattern: &str, proto: &str, recv: &str, size: usize) {
    let who = format!("{pattern} {proto} {recv} rank {}", report.rank);
    assert_eq!(report.size, size, "{who}");
    assert_eq!(report.iterations, ITERATIONS, "{who}");
    assert_eq!(report.pattern.as_str(), pattern, "{who}");
    assert_eq!(report.proto.as_str(), proto, "{who}");
    assert_eq!(report.recv_mode.as_str(), recv, "{who}");

    let (sends, receives) = data_per_iteration(pattern, report.rank, size);
    assert_eq!(report.data_messages_sent, ITERATIONS * sends, "{who}");
    assert_eq!(
        report.data_messages_received,
        ITERATIONS * receives,
        "{who}"
    );
    check_handshake(report, proto);
    assert_eq!(
        report.messages_sent,
        report.data_messages_sent + report.handshake_messages_sent,
        "{who}"
    );
    assert_eq!(
        report.messages_received,
        report.data_messages_received + report.handshake_messages_received,
        "{who}"
    );
    assert_eq!(report.rejected_messages, 0, "{who}");
    assert_eq!(report.unexpected_messages, 0, "{who}");
    assert_eq!(report.bytes_sent, report.messages_sent * MSG_BYTES, "{who}");
    assert_eq!(
        report.bytes_received,
        report.messages_received * MSG_BYTES,
        "{who}"
    );

    match report.recv_mode {
        RecvMode::Spin if must_wait(pattern, report.rank) => {
            assert!(report.empty_polls > 0, "{who}: no empty polls")
        }
        RecvMode::Spin => {}
        RecvMode::Block => assert_eq!(report.empty_polls, 0, "{who}"),
    }
    assert!((0.0..=1.0).contains(&report.wait_fraction), "{who}");
    assert!(report.wait_s <= report.elapsed_s, "{who}");
    // Compute is CPU time, so the process used at least that much CPU
    // (rank 0 of master-worker does not compute).
    if !(pattern == "master-worker" && report.rank == 0) {
        assert!(
            report.cpu_s >= ITERATIONS as f64 * 5e-6,
            "{who}: cpu {}",
            report.cpu_s
        );
    }
    assert!(report.started_unix_ns < report.finished_unix_ns, "{who}");
    match report.proto {
        Proto::Udp => assert_eq!(report.udp_drops, Some(0), "{who}"),
        Proto::Tcp => assert_eq!(report.udp_drops, None, "{who}"),
    }
}

fn check_job(pattern: &str, proto: &str, recv: &str, size: usize) {
    let _serial = job_lock();
    let iterations = ITERATIONS.to_string();
    let msg_bytes = MSG_BYTES.to_string();
    let reports = reports(
        size,
        &[
            "--job",
            &format!("{pattern}-{proto}-{recv}"),
            "--pattern",
            pattern,
            "--proto",
            proto,
            "--recv",
            recv,
            "--iterations",
            &iterations,
            "--compute-us",
            "5",
            "--msg-bytes",
            &msg_bytes,
            "--timeout",
            "5",
        ],
    );
    for report in &reports {
        check_rank(report, pattern, proto, recv, size);
    }
    if recv == "spin" {
        // Rank 0 starts first (it sends start and goes), so somebody waits.
        let polls: u64 = reports.iter().map(|r| r.empty_polls).sum();
        assert!(polls > 0, "a spinning job never found an empty socket");
    }
    let sent: u64 = reports.iter().map(|r| r.data_messages_sent).sum();
    let received: u64 = reports.iter().map(|r| r.data_messages_received).sum();
    assert_eq!(sent, received, "every pattern frame sent was received");
}

macro_rules! job_tests {
    ($($name:ident: $pattern:literal $proto:literal $recv:literal $size:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check_job($pattern, $proto, $recv, $size);
            }
        )*
    };
}

job_tests! {
    ring_udp_spin: "ring" "udp" "spin" 2;
    ring_udp_block: "ring" "udp" "block" 3;
    ring_tcp_spin: "ring" "tcp" "spin" 2;
    ring_tcp_block: "ring" "tcp" "block" 4;
    neighbour_udp_spin: "neighbour" "udp" "spin" 2;
    neighbour_udp_block: "neighbour" "udp" "block" 4;
    neighbour_tcp_spin: "neighbour" "tcp" "spin" 2;
    neighbour_tcp_block: "neighbour" "tcp" "block" 3;
    all_to_all_udp_spin: "all-to-all" "udp" "spin" 2;
    all_to_all_udp_block: "all-to-all" "udp" "block" 4;
    all_to_all_tcp_spin: "all-to-all" "tcp" "spin" 2;
    all_to_all_tcp_block: "all-to-all" "tcp" "block" 4;
    barrier_udp_spin: "barrier" "udp" "spin" 2;
    barrier_udp_block: "barrier" "udp" "block" 4;
    barrier_tcp_spin: "barrier" "tcp" "spin" 2;
    barrier_tcp_block: "barrier" "tcp" "block" 3;
    master_worker_udp_spin: "master-worker" "udp" "spin" 2;
    master_worker_udp_block: "master-worker" "udp" "block" 3;
    master_worker_tcp_spin: "master-worker" "tcp" "spin" 2;
    master_worker_tcp_block: "master-worker" "tcp" "block" 4;
}
