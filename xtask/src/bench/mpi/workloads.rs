//! What `bench mpi` runs: our MPI benchmarks, each run for a fixed time
//! (`--max-seconds`: the ranks agree every 50 iterations whether to stop,
//! so a run's length does not depend on how badly it is slowed down), and
//! HPCC (a fixed problem: its whole run is timed).
use serde::Serialize;

use crate::mpi::{Library, programs};

/// More iterations than any run reaches in its time.
const UNBOUNDED_ITERATIONS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MpiWorkload {
    /// Fine grain: 8-byte ping-pong after 20 µs of computation.
    Pingpong,
    /// A 64-byte MPI_Allreduce after 50 µs of computation.
    Allreduce,
    /// Ring halo exchange of 4 KiB each way after 100 µs of computation.
    Halo,
    /// A 1 KiB ring exchange overlapped with 50 µs of computation in 5 µs
    /// pieces, waiting in MPI_Testall loops.
    TestLoop,
    /// The HPC Challenge suite (HPL order 700; OpenMPI only).
    Hpcc,
}

impl MpiWorkload {
    pub const ALL: [MpiWorkload; 5] = [
        MpiWorkload::Pingpong,
        MpiWorkload::Allreduce,
        MpiWorkload::Halo,
        MpiWorkload::TestLoop,
        MpiWorkload::Hpcc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MpiWorkload::Pingpong => "pingpong",
            MpiWorkload::Allreduce => "allreduce",
            MpiWorkload::Halo => "halo",
            MpiWorkload::TestLoop => "test-loop",
            MpiWorkload::Hpcc => "hpcc",
        }
    }

    /// The program's name for [`programs::resolve`].
    pub fn program(self) -> &'static str {
        match self {
            MpiWorkload::Pingpong => "pingpong",
            MpiWorkload::Allreduce => "allreduce",
            MpiWorkload::Halo => "halo",
            MpiWorkload::TestLoop => "testloop",
            MpiWorkload::Hpcc => programs::HPCC,
        }
    }

    pub fn supported(self, lib: Library) -> bool {
        programs::supported(lib, self.program())
    }

    /// Whether the program takes `--start-at` (HPCC does not: its runs
    /// start when launched together, start-up included in its time).
    pub fn synchronised_start(self) -> bool {
        self != MpiWorkload::Hpcc
    }

    /// The program's arguments for a run of `seconds` (timed part).
    pub fn args(self, seconds: f64) -> Vec<String> {
        let rest: &[&str] = match self {
            MpiWorkload::Pingpong => &["--size", "8", "--compute-us", "20"],
            MpiWorkload::Allreduce => &["--size", "64", "--compute-us", "50"],
            MpiWorkload::Halo => &["--size", "4096", "--compute-us", "100"],
            MpiWorkload::TestLoop => &["--size", "1024", "--compute-us", "50", "--chunk-us", "5"],
            MpiWorkload::Hpcc => return Vec::new(),
        };
        rest.iter()
            .map(|s| s.to_string())
            .chain(["--iters".into(), UNBOUNDED_ITERATIONS.to_string()])
            .chain(["--max-seconds".into(), seconds.to_string()])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_command_line_and_runs_are_timed() {
        use clap::ValueEnum as _;
        for w in MpiWorkload::ALL {
            assert_eq!(w.to_possible_value().unwrap().get_name(), w.as_str());
        }
        assert_eq!(
            MpiWorkload::Pingpong.args(1.5).join(" "),
            "--size 8 --compute-us 20 --iters 1000000000 --max-seconds 1.5"
        );
        assert!(MpiWorkload::Hpcc.args(1.0).is_empty());
        assert!(!MpiWorkload::Hpcc.supported(Library::Mpich));
        assert!(MpiWorkload::TestLoop.supported(Library::Mpich));
    }
}
