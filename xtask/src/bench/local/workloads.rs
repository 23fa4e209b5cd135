//! The workloads of `bench local`: which job types share the nodes at a given
//! multiprogramming level (MPL), and the `cosched-synth` arguments of each.
//!
//! The job types are the papers' classes: fine- and coarse-grain
//! communication with spinning receives (where plain Linux does worst and
//! coscheduling matters most), blocking receives (the kernel already lets
//! peers run), I/O-bound jobs (frequent voluntary sleeps), and compute-only
//! jobs mixed with a communicating one (the fairness case: a policy that
//! boosts communicators must not starve jobs that never communicate).
use serde::Serialize;

/// A set of jobs that run together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// MPL fine-grain spinning jobs.
    FineSpin,
    /// MPL coarse-grain spinning jobs.
    CoarseSpin,
    /// MPL fine-grain jobs with blocking receives.
    Blocking,
    /// MPL I/O-heavy spinning jobs.
    IoHeavy,
    /// One fine-grain spinning job and MPL-1 compute-only jobs.
    Mix,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Workload::FineSpin,
        Workload::CoarseSpin,
        Workload::Blocking,
        Workload::IoHeavy,
        Workload::Mix,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Workload::FineSpin => "fine-spin",
            Workload::CoarseSpin => "coarse-spin",
            Workload::Blocking => "blocking",
            Workload::IoHeavy => "io-heavy",
            Workload::Mix => "mix",
        }
    }

    /// The job types sharing every node at this MPL (MPL counts all jobs on
    /// a node, the compute-only ones included).
    pub fn job_types(self, mpl: u32) -> Vec<JobType> {
        let mpl = mpl as usize;
        let same = |t| vec![t; mpl];
        match self {
            Workload::FineSpin => same(JobType::FineSpin),
            Workload::CoarseSpin => same(JobType::CoarseSpin),
            Workload::Blocking => same(JobType::Blocking),
            Workload::IoHeavy => same(JobType::IoHeavy),
            Workload::Mix => std::iter::once(JobType::FineSpin)
                .chain(std::iter::repeat_n(
                    JobType::ComputeOnly,
                    mpl.saturating_sub(1),
                ))
                .take(mpl)
                .collect(),
        }
    }

    /// The jobs of one run, named `<type>-<k>` (k counts within the type).
    pub fn slots(self, mpl: u32) -> Vec<JobSlot> {
        slots_of(self.job_types(mpl))
    }
}

/// The jobs of one run of these types, named `<type>-<k>` (k counts within
/// the type).
pub fn slots_of(kinds: impl IntoIterator<Item = JobType>) -> Vec<JobSlot> {
    let mut slots: Vec<JobSlot> = Vec::new();
    for kind in kinds {
        let k = slots.iter().filter(|s| s.kind == kind).count() + 1;
        slots.push(JobSlot {
            label: format!("{}-{k}", kind.as_str()),
            kind,
        });
    }
    slots
}

/// One job of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSlot {
    pub label: String,
    pub kind: JobType,
}

/// How a job's ranks are placed on the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One job, one rank on every node, ranks exchange messages.
    OneRankPerNode,
    /// One independent size-1 job on every node (reported as one job): the
    /// node carries its load, but no rank waits for another.
    OneSoloJobPerNode,
}

/// A kind of job, with its dedicated baseline measured once per bench run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobType {
    /// UDP ring, spinning receives, 20 µs of computation per iteration: the
    /// papers' worst case for uncoordinated scheduling (every iteration needs
    /// the peer to run within microseconds).
    FineSpin,
    /// UDP ring, spinning receives, 2 ms of computation per iteration: a wait
    /// for a descheduled peer costs less relative to the work.
    CoarseSpin,
    /// UDP ring, blocking receives, 20 µs of computation: a waiting rank
    /// sleeps, so the kernel's wake-up already favours the awaited peer.
    Blocking,
    /// UDP ring, spinning receives, 100 µs of computation and a 2 ms
    /// blocking I/O step every iteration: the CPU is idle most of the time.
    IoHeavy,
    /// No communication: 1 ms of computation per iteration, one size-1 job
    /// per node.
    ComputeOnly,
    /// Paired Gang Scheduling's compute-bound job: a barrier (all ranks report to rank 0
    /// and wait for its release, blocking receives) after 5 ms of
    /// computation.
    CpuBound,
    /// Paired Gang Scheduling's I/O-bound job: a barrier after a 5 ms blocking I/O step
    /// and no computation, so a barrier takes about as long as a
    /// compute-bound one's while the CPU is almost idle.
    IoBound,
}

impl JobType {
    pub fn as_str(self) -> &'static str {
        match self {
            JobType::FineSpin => "fine-spin",
            JobType::CoarseSpin => "coarse-spin",
            JobType::Blocking => "blocking",
            JobType::IoHeavy => "io-heavy",
            JobType::ComputeOnly => "compute",
            JobType::CpuBound => "cpu-bound",
            JobType::IoBound => "io-bound",
        }
    }

    pub fn layout(self) -> Layout {
        match self {
            JobType::ComputeOnly => Layout::OneSoloJobPerNode,
            _ => Layout::OneRankPerNode,
        }
    }

    /// `cosched-synth` arguments for a run of `duration_s` measured seconds
    /// (rank, size, peers and the start instant are added by the launcher).
    pub fn synth_args(self, duration_s: f64) -> Vec<String> {
        let pattern = match self {
            JobType::CpuBound | JobType::IoBound => "barrier",
            _ => "ring",
        };
        let common = ["--proto", "udp", "--pattern", pattern];
        let specific: &[&str] = match self {
            JobType::FineSpin => &["--recv", "spin", "--compute-us", "20"],
            JobType::CoarseSpin => &["--recv", "spin", "--compute-us", "2000"],
            JobType::Blocking => &["--recv", "block", "--compute-us", "20"],
            JobType::IoHeavy => &[
                "--recv",
                "spin",
                "--compute-us",
                "100",
                "--io-us",
                "2000",
                "--io-every",
                "1",
            ],
            JobType::ComputeOnly => &["--compute-us", "1000"],
            JobType::CpuBound => &["--recv", "block", "--compute-us", "5000"],
            JobType::IoBound => &[
                "--recv",
                "block",
                "--compute-us",
                "0",
                "--io-us",
                "5000",
                "--io-every",
                "1",
            ],
        };
        common
            .iter()
            .chain(specific)
            .map(|s| s.to_string())
            .chain(["--duration".to_string(), duration_s.to_string()])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homogeneous_workloads_run_mpl_jobs_of_one_type() {
        let slots = Workload::FineSpin.slots(3);
        let labels: Vec<&str> = slots.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["fine-spin-1", "fine-spin-2", "fine-spin-3"]);
        assert!(slots.iter().all(|s| s.kind == JobType::FineSpin));
    }

    #[test]
    fn mix_counts_compute_jobs_in_the_mpl() {
        let slots = Workload::Mix.slots(3);
        let labels: Vec<&str> = slots.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["fine-spin-1", "compute-1", "compute-2"]);
        assert_eq!(Workload::Mix.job_types(1), [JobType::FineSpin]);
        assert_eq!(
            JobType::ComputeOnly.layout(),
            Layout::OneSoloJobPerNode,
            "compute-only ranks must not talk"
        );
    }

    #[test]
    fn synth_args_name_the_documented_settings() {
        let args = JobType::IoHeavy.synth_args(1.5).join(" ");
        assert_eq!(
            args,
            "--proto udp --pattern ring --recv spin --compute-us 100 --io-us 2000 \
             --io-every 1 --duration 1.5"
        );
        let blocking = JobType::Blocking.synth_args(2.0).join(" ");
        assert!(
            blocking.contains("--recv block --compute-us 20"),
            "{blocking}"
        );
    }

    #[test]
    fn seed_001_jobs_synchronise_by_barrier_with_blocking_receives() {
        let cpu = JobType::CpuBound.synth_args(2.0).join(" ");
        assert_eq!(
            cpu,
            "--proto udp --pattern barrier --recv block --compute-us 5000 --duration 2"
        );
        let io = JobType::IoBound.synth_args(2.0).join(" ");
        assert!(
            io.contains("--pattern barrier --recv block --compute-us 0 --io-us 5000"),
            "{io}"
        );
        assert_eq!(JobType::IoBound.layout(), Layout::OneRankPerNode);
    }

    #[test]
    fn workload_names_match_the_command_line() {
        use clap::ValueEnum as _;
        for w in Workload::ALL {
            let value = w.to_possible_value().unwrap();
            assert_eq!(value.get_name(), w.as_str());
        }
    }
}
