//! The workloads of `bench gang`, after the papers' experiments:
//!
//! - `comm`: two fine-grain jobs that spin on every message (the local
//!   bench's `fine-spin`): communication-intensive, where gang scheduling
//!   should win (ClusterSchedSim, Fig. 8b);
//! - `io`: two jobs that spend most of each iteration in blocking I/O (the
//!   local bench's `io-heavy`): I/O-intensive, where dynamic policies should
//!   win because gang scheduling leaves the CPU idle during a job's I/O
//!   (Fig. 8c);
//! - `mix0`..`mix4`: Paired Gang Scheduling's mixes, mix i = i I/O-bound + (4 − i)
//!   compute-bound barrier jobs; progress is barriers per second per job.
//!
//! Every job has one rank on every node.
use serde::Serialize;

use crate::bench::local::workloads::{JobSlot, JobType, Layout, slots_of};

/// Jobs in each of Paired Gang Scheduling's mixes.
pub const MIX_JOBS: usize = 4;

/// A set of jobs that run together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum GangWorkload {
    /// Two fine-grain spinning jobs.
    Comm,
    /// Two I/O-heavy jobs.
    Io,
    /// Four compute-bound barrier jobs.
    Mix0,
    /// One I/O-bound and three compute-bound barrier jobs.
    Mix1,
    /// Two I/O-bound and two compute-bound barrier jobs.
    Mix2,
    /// Three I/O-bound and one compute-bound barrier job.
    Mix3,
    /// Four I/O-bound barrier jobs.
    Mix4,
}

impl GangWorkload {
    pub const ALL: [GangWorkload; 7] = [
        GangWorkload::Comm,
        GangWorkload::Io,
        GangWorkload::Mix0,
        GangWorkload::Mix1,
        GangWorkload::Mix2,
        GangWorkload::Mix3,
        GangWorkload::Mix4,
    ];

    /// What a full run measures: the two contrasts and the three mixes that
    /// have both kinds of job (mix0 and mix4 on request).
    pub const DEFAULT: [GangWorkload; 5] = [
        GangWorkload::Comm,
        GangWorkload::Io,
        GangWorkload::Mix1,
        GangWorkload::Mix2,
        GangWorkload::Mix3,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GangWorkload::Comm => "comm",
            GangWorkload::Io => "io",
            GangWorkload::Mix0 => "mix0",
            GangWorkload::Mix1 => "mix1",
            GangWorkload::Mix2 => "mix2",
            GangWorkload::Mix3 => "mix3",
            GangWorkload::Mix4 => "mix4",
        }
    }

    /// For a mix, its number of I/O-bound jobs.
    pub fn io_bound_jobs(self) -> Option<usize> {
        match self {
            GangWorkload::Comm | GangWorkload::Io => None,
            GangWorkload::Mix0 => Some(0),
            GangWorkload::Mix1 => Some(1),
            GangWorkload::Mix2 => Some(2),
            GangWorkload::Mix3 => Some(3),
            GangWorkload::Mix4 => Some(4),
        }
    }

    /// The job types that run together: I/O-bound jobs first in a mix.
    pub fn job_types(self) -> Vec<JobType> {
        match self.io_bound_jobs() {
            None if self == GangWorkload::Comm => vec![JobType::FineSpin; 2],
            None => vec![JobType::IoHeavy; 2],
            Some(io) => std::iter::repeat_n(JobType::IoBound, io)
                .chain(std::iter::repeat_n(JobType::CpuBound, MIX_JOBS - io))
                .collect(),
        }
    }

    /// The jobs of one run (`io-bound-1`, `cpu-bound-1`, ...).
    pub fn slots(self) -> Vec<JobSlot> {
        let slots = slots_of(self.job_types());
        debug_assert!(
            slots
                .iter()
                .all(|s| s.kind.layout() == Layout::OneRankPerNode),
            "the coordinator runs jobs with one rank per node"
        );
        slots
    }

    /// Jobs per node (the multiprogramming level of the run).
    pub fn mpl(self) -> u32 {
        self.job_types().len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(w: GangWorkload) -> Vec<String> {
        w.slots().into_iter().map(|s| s.label).collect()
    }

    #[test]
    fn mix_i_has_i_io_bound_and_4_minus_i_compute_bound_jobs() {
        for (i, w) in [
            GangWorkload::Mix0,
            GangWorkload::Mix1,
            GangWorkload::Mix2,
            GangWorkload::Mix3,
            GangWorkload::Mix4,
        ]
        .into_iter()
        .enumerate()
        {
            let types = w.job_types();
            assert_eq!(types.len(), 4, "{w:?}");
            assert_eq!(
                types.iter().filter(|t| **t == JobType::IoBound).count(),
                i,
                "{w:?}"
            );
            assert_eq!(
                types.iter().filter(|t| **t == JobType::CpuBound).count(),
                4 - i,
                "{w:?}"
            );
            assert_eq!(w.mpl(), 4);
        }
        assert_eq!(
            labels(GangWorkload::Mix1),
            ["io-bound-1", "cpu-bound-1", "cpu-bound-2", "cpu-bound-3"]
        );
    }

    #[test]
    fn the_contrasts_are_the_local_bench_job_types() {
        assert_eq!(labels(GangWorkload::Comm), ["fine-spin-1", "fine-spin-2"]);
        assert_eq!(labels(GangWorkload::Io), ["io-heavy-1", "io-heavy-2"]);
        assert_eq!(GangWorkload::Comm.mpl(), 2);
        assert_eq!(GangWorkload::Io.io_bound_jobs(), None);
    }

    #[test]
    fn every_job_spans_the_nodes() {
        for w in GangWorkload::ALL {
            for slot in w.slots() {
                assert_eq!(slot.kind.layout(), Layout::OneRankPerNode, "{w:?}");
            }
        }
    }

    #[test]
    fn names_match_the_command_line() {
        use clap::ValueEnum as _;
        for w in GangWorkload::ALL {
            assert_eq!(w.to_possible_value().unwrap().get_name(), w.as_str());
        }
        assert!(GangWorkload::DEFAULT.contains(&GangWorkload::Mix1));
    }
}
