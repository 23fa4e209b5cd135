//! Command line. Rank, size, peers and job name can also come from the
//! environment so the cosched agent can launch ranks with env only.

use std::path::PathBuf;

use clap::Parser;
use cosched_proto::class::RtParams;

use crate::modes::{Proto, RecvMode, WaitMode};
use crate::pattern::Pattern;

/// One rank of a synthetic parallel job: loops {compute; I/O; send; receive}
/// and prints a JSON result.
#[derive(Debug, Clone, Parser)]
#[command(name = "cosched-synth", version, about)]
pub struct Cli {
    /// This process's rank, 0-based.
    #[arg(long, env = "COSCHED_RANK")]
    pub rank: usize,

    /// Number of ranks in the job.
    #[arg(long, env = "COSCHED_SIZE")]
    pub size: usize,

    /// One host:port per rank, comma-separated; rank r binds the r-th.
    #[arg(
        long,
        env = "COSCHED_PEERS",
        value_delimiter = ',',
        required = true,
        num_args = 1..
    )]
    pub peers: Vec<String>,

    /// Job name; frames of other jobs are rejected.
    #[arg(long, env = "COSCHED_JOB", default_value = "job")]
    pub job: String,

    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,

    #[arg(long, value_enum, default_value_t = Pattern::Ring)]
    pub pattern: Pattern,

    /// Real-time mode: the ranks form a pipeline 0 → 1 → … in which rank 0
    /// releases a frame every PERIOD_NS, every rank computes WORK_NS of CPU
    /// time on it, hands it to the next rank and reports it done through
    /// cosched-rt, and counts its frames per window of FRAMES periods
    /// (deadline misses). The syntax of `cosched submit --class rt:…`.
    /// Replaces --pattern and --compute-us; --iterations counts frames.
    #[arg(
        long,
        value_name = "PERIOD_NS:FRAMES:WORK_NS",
        conflicts_with_all = ["pattern", "compute_us"]
    )]
    pub rt: Option<RtParams>,

    /// How to wait for messages.
    #[arg(long = "recv", value_enum, default_value_t = RecvMode::Spin)]
    pub recv: RecvMode,

    /// How a spinning receive waits, like a message-passing library: `recv`
    /// (non-blocking receives returning EAGAIN), `poll` (poll with timeout 0,
    /// then a read: OpenMPI 4 TCP), `epoll` (epoll_wait with timeout 0, then
    /// a read: OpenMPI 5, UCX), `yield` (sched_yield, then a non-blocking
    /// receive: MPICH). Only with `--recv spin`.
    #[arg(long, value_enum, default_value_t = WaitMode::Recv)]
    pub wait: WaitMode,

    /// CPU time (not wall time) computed per iteration, in microseconds.
    #[arg(long, default_value_t = 20)]
    pub compute_us: u64,

    /// Blocking sleep per I/O step, in microseconds (models disk I/O).
    #[arg(long, default_value_t = 0)]
    pub io_us: u64,

    /// Do the I/O step every K iterations.
    #[arg(long, default_value_t = 1)]
    pub io_every: u64,

    /// Bytes per message, header included.
    #[arg(long, default_value_t = 64)]
    pub msg_bytes: usize,

    /// Measured seconds [default: 5, unless --iterations is given].
    #[arg(long, conflicts_with = "iterations")]
    pub duration: Option<f64>,

    /// Run exactly this many iterations instead of a duration.
    #[arg(long)]
    pub iterations: Option<u64>,

    /// After the start handshake, sleep until this wall-clock time (ns since
    /// the Unix epoch) so several jobs start at the same instant.
    #[arg(long)]
    pub start_at_unix_ns: Option<u64>,

    /// Seconds one receive (or the handshake) may wait before the rank fails.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,

    /// Write the JSON result to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    const BASE: [&str; 7] = [
        "cosched-synth",
        "--rank",
        "1",
        "--size",
        "2",
        "--peers",
        "127.0.0.1:7000,127.0.0.1:7001",
    ];

    fn parse(extra: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(BASE.iter().chain(extra))
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let cli = parse(&[]).unwrap();
        assert_eq!(cli.rank, 1);
        assert_eq!(cli.size, 2);
        assert_eq!(cli.peers, vec!["127.0.0.1:7000", "127.0.0.1:7001"]);
        assert_eq!(cli.job, "job");
        assert_eq!(cli.proto, Proto::Udp);
        assert_eq!(cli.pattern, Pattern::Ring);
        assert_eq!(cli.recv, RecvMode::Spin);
        assert_eq!(cli.wait, WaitMode::Recv);
        assert_eq!(cli.compute_us, 20);
        assert_eq!(cli.io_us, 0);
        assert_eq!(cli.io_every, 1);
        assert_eq!(cli.msg_bytes, 64);
        assert_eq!(cli.duration, None);
        assert_eq!(cli.iterations, None);
        assert_eq!(cli.start_at_unix_ns, None);
        assert_eq!(cli.timeout, 10.0);
        assert_eq!(cli.out, None);
        assert_eq!(cli.rt, None);
    }

    #[test]
    fn rt_takes_the_class_syntax_and_replaces_pattern_and_compute() {
        let cli = parse(&["--rt", "10000000:4:2000000"]).unwrap();
        assert_eq!(
            cli.rt,
            Some(RtParams {
                period_ns: 10_000_000,
                frames: 4,
                work_ns: 2_000_000
            })
        );
        let err = parse(&["--rt", "10000000:4"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        assert!(
            err.to_string().contains("<period_ns>:<frames>:<work_ns>"),
            "{err}"
        );
        for other in [["--pattern", "ring"], ["--compute-us", "5"]] {
            let err = parse(&["--rt", "1000:1:1", other[0], other[1]]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        }
        assert!(
            parse(&["--pattern", "pipeline"]).is_err(),
            "only through --rt"
        );
    }

    #[test]
    fn parses_every_option() {
        let cli = parse(&[
            "--job",
            "j1",
            "--proto",
            "tcp",
            "--pattern",
            "all-to-all",
            "--recv",
            "block",
            "--compute-us",
            "5",
            "--io-us",
            "100",
            "--io-every",
            "3",
            "--msg-bytes",
            "128",
            "--iterations",
            "200",
            "--start-at-unix-ns",
            "123",
            "--timeout",
            "0.5",
            "--out",
            "/tmp/r.json",
        ])
        .unwrap();
        assert_eq!(cli.job, "j1");
        assert_eq!(cli.proto, Proto::Tcp);
        assert_eq!(cli.pattern, Pattern::AllToAll);
        assert_eq!(cli.recv, RecvMode::Block);
        assert_eq!(
            (cli.compute_us, cli.io_us, cli.io_every, cli.msg_bytes),
            (5, 100, 3, 128)
        );
        assert_eq!(cli.iterations, Some(200));
        assert_eq!(cli.start_at_unix_ns, Some(123));
        assert_eq!(cli.timeout, 0.5);
        assert_eq!(cli.out, Some(PathBuf::from("/tmp/r.json")));
    }

    #[test]
    fn pattern_names_are_kebab_case() {
        for (name, pattern) in [
            ("ring", Pattern::Ring),
            ("neighbour", Pattern::Neighbour),
            ("all-to-all", Pattern::AllToAll),
            ("barrier", Pattern::Barrier),
            ("master-worker", Pattern::MasterWorker),
        ] {
            assert_eq!(parse(&["--pattern", name]).unwrap().pattern, pattern);
            assert_eq!(pattern.as_str(), name);
        }
        assert!(parse(&["--pattern", "star"]).is_err());
    }

    #[test]
    fn wait_modes_parse() {
        for (name, mode) in [
            ("recv", WaitMode::Recv),
            ("poll", WaitMode::Poll),
            ("epoll", WaitMode::Epoll),
            ("yield", WaitMode::Yield),
        ] {
            assert_eq!(parse(&["--wait", name]).unwrap().wait, mode);
            assert_eq!(mode.as_str(), name);
        }
        assert!(parse(&["--wait", "select"]).is_err());
    }

    #[test]
    fn duration_and_iterations_are_exclusive() {
        let err = parse(&["--duration", "1", "--iterations", "5"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        assert_eq!(parse(&["--duration", "1.5"]).unwrap().duration, Some(1.5));
    }

    #[test]
    fn rejects_unknown_modes() {
        assert!(parse(&["--proto", "sctp"]).is_err());
        assert!(parse(&["--recv", "yield"]).is_err());
    }
}
