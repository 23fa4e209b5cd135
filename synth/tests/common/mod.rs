//! Launching real ranks of the built binary on 127.0.0.1.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::net::{TcpListener, UdpSocket};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use cosched_synth::RunReport;

pub const BIN: &str = env!("CARGO_BIN_EXE_cosched-synth");

/// Below the kernel's ephemeral range (32768+), so outgoing TCP connections
/// of concurrently running jobs cannot take a port handed out here.
const PORT_RANGE: std::ops::Range<u16> = 20_000..32_000;

/// Serialises jobs within one test binary: spinning ranks of two jobs on a
/// two-core machine would mostly measure each other.
pub fn job_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `count` ports free for both TCP and UDP, never handed out twice by this process.
pub fn free_ports(count: usize) -> Vec<u16> {
    static USED: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let mut used = USED.get_or_init(Default::default).lock().unwrap();
    let span = u32::from(PORT_RANGE.end - PORT_RANGE.start);
    let mut candidate = std::process::id().wrapping_mul(7919) % span;
    let mut ports = Vec::with_capacity(count);
    for _ in 0..span {
        candidate = (candidate + 1) % span;
        let port = PORT_RANGE.start + candidate as u16;
        if used.contains(&port) {
            continue;
        }
        let tcp = TcpListener::bind(("127.0.0.1", port));
        let udp = UdpSocket::bind(("127.0.0.1", port));
        if tcp.is_ok() && udp.is_ok() {
            used.insert(port);
            ports.push(port);
            if ports.len() == count {
                return ports;
            }
        }
    }
    panic!("no {count} free ports in {PORT_RANGE:?}");
}

pub fn peers_arg(ports: &[u16]) -> String {
    ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Starts one rank with output captured.
pub fn spawn_rank(rank: usize, peers: &str, args: &[String]) -> Child {
    spawn_rank_with_env(rank, peers, args, &[])
}

/// Starts one rank with output captured and `env` added to its environment.
pub fn spawn_rank_with_env(
    rank: usize,
    peers: &str,
    args: &[String],
    env: &[(&str, &OsStr)],
) -> Child {
    let size = peers.split(',').count();
    Command::new(BIN)
        .args(["--rank", &rank.to_string(), "--size", &size.to_string()])
        .args(["--peers", peers])
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cosched-synth")
}

/// What one rank process left behind.
pub struct RankRun {
    pub rank: usize,
    pub pid: u32,
    pub output: Output,
}

impl RankRun {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The rank's JSON result; panics with its stderr if it failed.
    pub fn report(&self) -> RunReport {
        assert!(
            self.output.status.success(),
            "rank {} exited with {}: {}",
            self.rank,
            self.output.status,
            self.stderr()
        );
        serde_json::from_slice(&self.output.stdout).unwrap_or_else(|err| {
            panic!(
                "rank {} printed no valid JSON ({err}): {:?}",
                self.rank,
                String::from_utf8_lossy(&self.output.stdout)
            )
        })
    }
}

/// Runs `per_rank_args.len()` ranks to completion. Every test passes a
/// short `--timeout`, which bounds how long a broken rank can hang.
pub fn run_ranks(per_rank_args: &[Vec<String>]) -> Vec<RankRun> {
    run_ranks_with_env(per_rank_args, &[])
}

/// [`run_ranks`] with `env` added to every rank's environment.
pub fn run_ranks_with_env(per_rank_args: &[Vec<String>], env: &[(&str, &OsStr)]) -> Vec<RankRun> {
    let peers = peers_arg(&free_ports(per_rank_args.len()));
    let children: Vec<Child> = per_rank_args
        .iter()
        .enumerate()
        .map(|(rank, args)| spawn_rank_with_env(rank, &peers, args, env))
        .collect();
    children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| RankRun {
            rank,
            pid: child.id(),
            output: child.wait_with_output().expect("wait for rank"),
        })
        .collect()
}

/// Runs `size` ranks with the same arguments.
pub fn run_job(size: usize, args: &[&str]) -> Vec<RankRun> {
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    run_ranks(&vec![args; size])
}

/// Runs a job that must succeed and returns its reports in rank order.
pub fn reports(size: usize, args: &[&str]) -> Vec<RunReport> {
    run_job(size, args)
        .iter()
        .map(|run| {
            let report = run.report();
            assert_eq!(report.pid, run.pid, "rank {} reports another pid", run.rank);
            report
        })
        .collect()
}
