//! Best-effort and real-time jobs together: where the BE/RT policies keep
//! their jobs, and what the core does differently under them.
//!
//! Under `fcfs`, `gang`, `paired-gang` and `fcs` jobs hold cells of the
//! Ousterhout matrix (`Core::matrix`) and real-time jobs are refused. Under
//! the BE/RT policies the matrix stays empty and [`ClassState`] holds the
//! jobs instead:
//! - `one-level-gang`: the 1GS state ([`OneLevelGang`]), whose rotation the
//!   core broadcasts as ordinary slices (the `Rotation::OneLevelGang` seam);
//! - `2dcs-tdm`, `2dcs-ps`: a [`ClassLedger`] of one process per node (an
//!   agent runs one rank of a job), no queue (BE jobs always find nodes, RT
//!   jobs are admitted or rejected), and under 2DCS-TDM the division clock.
//!
//! One file per job: `placement.rs` (a new job, a leaving job), `one_gs.rs`
//! (1GS's waits and satisfied set), `divisions.rs` (2DCS-TDM's
//! broadcasts), `regime.rs` (changing policy or settings under running
//! jobs), `frames.rs` (agents' frame reports), `views.rs`.

mod divisions;
mod frames;
mod one_gs;
pub(super) mod placement;
mod regime;
mod restore;
mod views;

use cosched_policy::{
    classes::{ClassLedger, DivisionClock, OneLevelGang, RtJob, RtSpec, one_level_gang::OneGsJob},
    global::JobId,
};
use cosched_proto::wire::JobClass;
use serde::{Deserialize, Serialize};

pub use frames::FrameBook;

use crate::{config::ClassesConfig, policy::GlobalPolicy};

/// An RT job's standing with admission control (kept with its record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// Placed: it holds its rows (1GS) or its nodes passed the rule (2DCS).
    Admitted,
    /// Waiting for 1GS rows; evicted after `classes.rt_max_wait_ms`.
    Waiting,
    /// Evicted from the 1GS queue, or refused by a policy change.
    Rejected { reason: String },
}

impl Admission {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Admitted => "admitted",
            Self::Waiting => "waiting",
            Self::Rejected { .. } => "rejected",
        }
    }
}

/// Where the jobs of the current policy are kept (besides `Core::matrix`).
#[derive(Debug, Clone)]
pub enum ClassState {
    /// fcfs, gang, paired-gang, fcs: the Ousterhout matrix.
    Matrix,
    /// one-level-gang.
    OneGs(OneLevelGang),
    /// 2dcs-tdm and 2dcs-ps.
    Divided(Divided),
}

/// The 2DCS schemes' placements, and 2DCS-TDM's division clock.
#[derive(Debug, Clone)]
pub struct Divided {
    pub ledger: ClassLedger,
    /// Anchored at the first division boundary planned under 2DCS-TDM.
    pub clock: Option<DivisionTrack>,
}

/// The division clock as broadcast: which division runs, and the counter
/// the divisions of this epoch are numbered with.
#[derive(Debug, Clone)]
pub struct DivisionTrack {
    pub clock: DivisionClock,
    pub current: cosched_policy::classes::Division,
    /// The wire number of `current` (divisions sent in this epoch − 1).
    pub number: u64,
}

impl ClassState {
    /// An empty state for `policy`.
    pub fn new(
        policy: GlobalPolicy,
        classes: &ClassesConfig,
        nodes: usize,
        slice_ns: u64,
        queue: cosched_policy::global::QueuePolicy,
    ) -> Result<Self, String> {
        Ok(match policy {
            GlobalPolicy::OneLevelGang => Self::OneGs(
                OneLevelGang::new(classes.one_gs_config(nodes, slice_ns, queue))
                    .map_err(|error| error.to_string())?,
            ),
            GlobalPolicy::TwoDcsTdm | GlobalPolicy::TwoDcsPs => Self::Divided(Divided {
                ledger: ClassLedger::one_process_per_node(nodes),
                clock: None,
            }),
            GlobalPolicy::Fcfs
            | GlobalPolicy::Gang
            | GlobalPolicy::PairedGang
            | GlobalPolicy::Fcs => Self::Matrix,
        })
    }

    pub fn one_gs(&self) -> Option<&OneLevelGang> {
        match self {
            Self::OneGs(gang) => Some(gang),
            _ => None,
        }
    }

    pub fn ledger(&self) -> Option<&ClassLedger> {
        match self {
            Self::Divided(divided) => Some(&divided.ledger),
            _ => None,
        }
    }
}

/// The RT parameters of a job's class, `None` for BE.
pub fn rt_spec(class: &JobClass) -> Option<RtSpec> {
    match *class {
        JobClass::BestEffort => None,
        JobClass::RealTime {
            period_ns,
            frames,
            work_ns,
        } => Some(RtSpec {
            period_ns,
            frames,
            work_ns,
        }),
    }
}

/// Checks an RT class at submission, so a job no schedule can meet is
/// refused by name instead of missing every frame later.
pub fn validate_class(class: &JobClass) -> Result<(), String> {
    match rt_spec(class) {
        Some(spec) => spec.validate().map_err(|error| {
            format!(
                "real-time class rt:{}:{}:{}: {error}",
                spec.period_ns, spec.frames, spec.work_ns
            )
        }),
        None => Ok(()),
    }
}

/// The job as 1GS sees it: its nodes and, for an RT job, its spec and w.
pub fn one_gs_job(id: u32, nodes: usize, class: &JobClass, classes: &ClassesConfig) -> OneGsJob {
    let id = JobId(u64::from(id));
    match rt_spec(class) {
        Some(spec) => OneGsJob::real_time(id, nodes, spec, classes.max_wait_ns()),
        None => OneGsJob::best_effort(id, nodes),
    }
}

/// An RT job of `nodes` processes that all follow its spec (the coordinator
/// knows one work per frame for the whole job).
pub fn rt_job(id: u32, nodes: usize, spec: RtSpec) -> RtJob {
    RtJob::uniform(JobId(u64::from(id)), spec, nodes)
}
