//! Bad input and faults end a rank with a clear error, never a hang.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Command;

use common::{BIN, free_ports, job_lock, peers_arg, run_ranks, spawn_rank};

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|arg| arg.to_string()).collect()
}

#[test]
fn a_missing_peer_times_out_the_handshake() {
    for proto in ["udp", "tcp"] {
        let peers = peers_arg(&free_ports(2));
        let run = spawn_rank(
            0,
            &peers,
            &args(&["--proto", proto, "--timeout", "0.3", "--iterations", "5"]),
        )
        .wait_with_output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{proto}");
        assert!(stderr.contains("rank 0"), "{proto}: {stderr}");
        assert!(
            stderr.contains("[1]"),
            "{proto}: names the missing rank: {stderr}"
        );
    }
}

#[test]
fn ranks_of_another_job_are_not_accepted() {
    let _serial = job_lock();
    for proto in ["udp", "tcp"] {
        let common = ["--proto", proto, "--timeout", "0.5", "--iterations", "5"];
        let mut first = args(&common);
        first.extend(args(&["--job", "alpha"]));
        let mut second = args(&common);
        second.extend(args(&["--job", "beta"]));
        let runs = run_ranks(&[first, second]);
        for run in &runs {
            assert!(!run.output.status.success(), "{proto} rank {}", run.rank);
        }
        let root = runs[0].stderr();
        assert!(root.contains("[1]"), "{proto}: {root}");
    }
}

#[test]
fn different_run_lengths_are_refused_at_start() {
    let _serial = job_lock();
    for proto in ["udp", "tcp"] {
        let runs = run_ranks(&[
            args(&["--proto", proto, "--timeout", "1", "--iterations", "10"]),
            args(&["--proto", proto, "--timeout", "1", "--iterations", "20"]),
        ]);
        assert!(
            runs.iter().all(|run| !run.output.status.success()),
            "{proto}"
        );
        let root = runs[0].stderr();
        assert!(
            root.contains("--iterations 20") && root.contains("--iterations 10"),
            "{proto}: {root}"
        );
    }
}

#[test]
fn a_killed_peer_is_reported_with_rank_and_iteration() {
    let _serial = job_lock();
    for (proto, symptom) in [
        ("udp", "timed out"),
        ("tcp", "rank 1 closed its connection"),
    ] {
        let peers = peers_arg(&free_ports(2));
        let run_args = args(&[
            "--proto",
            proto,
            "--recv",
            "block",
            "--timeout",
            "0.5",
            "--iterations",
            "1000000000",
        ]);
        let survivor = spawn_rank(0, &peers, &run_args);
        let mut victim = spawn_rank(1, &peers, &run_args);
        let mut lines = BufReader::new(victim.stderr.take().unwrap()).lines();
        let started = lines.next().unwrap().unwrap();
        assert!(started.contains("started"), "{started}");
        victim.kill().unwrap();
        victim.wait().unwrap();
        let output = survivor.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{proto}");
        assert!(stderr.contains(symptom), "{proto}: {stderr}");
        assert!(stderr.contains("rank 0"), "{proto}: {stderr}");
        assert!(stderr.contains("iteration"), "{proto}: {stderr}");
        if proto == "udp" {
            assert!(stderr.contains("from rank(s) [1]"), "{stderr}");
        }
    }
}

#[test]
fn duration_and_iterations_together_are_a_usage_error() {
    let output = Command::new(BIN)
        .args(["--rank", "0", "--size", "1", "--peers", "127.0.0.1:1"])
        .args(["--duration", "1", "--iterations", "5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn invalid_configuration_is_explained() {
    let output = Command::new(BIN)
        .args(["--rank", "0", "--size", "2", "--peers", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--peers lists 1 addresses but --size is 2"),
        "{stderr}"
    );
}

#[test]
fn a_single_rank_runs_alone() {
    let port = free_ports(1)[0];
    let output = Command::new(BIN)
        .args(["--rank", "0", "--size", "1"])
        .args(["--peers", &format!("127.0.0.1:{port}")])
        .args(["--iterations", "7", "--pattern", "all-to-all"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let report: cosched_synth::RunReport = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report.iterations, 7);
    assert_eq!(report.messages_sent, 0);
    assert_eq!(report.messages_received, 0);
}
