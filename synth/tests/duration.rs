//! `--duration` runs end by the stop agreement: same iteration count on
//! every rank, whatever the pattern and transport.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{job_lock, reports, run_ranks};
use cosched_synth::pattern::plan;

fn check_duration_job(size: usize, pattern: &str, proto: &str, recv: &str) {
    let _serial = job_lock();
    let reports = reports(
        size,
        &[
            "--pattern",
            pattern,
            "--proto",
            proto,
            "--recv",
            recv,
            "--duration",
            "0.3",
            "--compute-us",
            "20",
            "--timeout",
            "5",
        ],
    );
    let iterations = reports[0].iterations;
    assert!(
        reports.iter().all(|r| r.iterations == iterations),
        "{pattern} {proto} {recv}: {:?}",
        reports.iter().map(|r| r.iterations).collect::<Vec<_>>()
    );
    // Rank 0 decides at some iteration k and the run ends after k + size + 2.
    assert!(iterations >= size as u64 + 3, "{iterations}");
    for report in &reports {
        let plan = plan(report.pattern, report.rank, size);
        assert_eq!(report.unexpected_messages, 0);
        assert_eq!(
            report.data_messages_sent,
            iterations * plan.sends_per_iteration() as u64
        );
        assert_eq!(
            report.data_messages_received,
            iterations * plan.receives_per_iteration() as u64
        );
    }
    let sent: u64 = reports.iter().map(|r| r.data_messages_sent).sum();
    let received: u64 = reports.iter().map(|r| r.data_messages_received).sum();
    assert_eq!(sent, received);
}

#[test]
fn all_to_all_udp_block_duration_run_agrees() {
    check_duration_job(4, "all-to-all", "udp", "block");
}

#[test]
fn ring_tcp_block_duration_run_agrees() {
    check_duration_job(4, "ring", "tcp", "block");
}

#[test]
fn neighbour_udp_spin_duration_run_agrees() {
    check_duration_job(2, "neighbour", "udp", "spin");
}

#[test]
fn master_worker_tcp_spin_duration_run_agrees() {
    check_duration_job(2, "master-worker", "tcp", "spin");
}

#[test]
fn start_at_delays_the_window_and_out_writes_files() {
    let _serial = job_lock();
    let dir = std::env::temp_dir().join(format!("cosched-synth-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let start_at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        + 300_000_000;
    let args: Vec<Vec<String>> = (0..3)
        .map(|rank| {
            [
                "--pattern",
                "barrier",
                "--recv",
                "block",
                "--iterations",
                "50",
                "--io-us",
                "100",
                "--io-every",
                "5",
                "--timeout",
                "5",
                "--start-at-unix-ns",
                &start_at.to_string(),
                "--out",
                dir.join(format!("rank{rank}.json")).to_str().unwrap(),
            ]
            .map(str::to_owned)
            .to_vec()
        })
        .collect();
    for run in run_ranks(&args) {
        assert!(run.output.status.success(), "{}", run.stderr());
        assert!(run.output.stdout.is_empty(), "--out must keep stdout empty");
        let path = dir.join(format!("rank{}.json", run.rank));
        let report: cosched_synth::RunReport =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(report.iterations, 50);
        assert_eq!(report.io_us, 100);
        assert!(
            report.started_unix_ns >= start_at,
            "window began before --start-at-unix-ns"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
