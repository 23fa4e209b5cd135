//! A node's timeline recording, as the agent returns it for a `timeline`
//! request: what its eBPF programs saw of the managed tasks on its CPUs
//! (context switches, spin episodes) and what the agent itself did (level
//! changes of its tasks, the coordinator's slices as applied on the node),
//! over one stretch of CLOCK_MONOTONIC.
//!
//! Only managed tasks appear: a switch between two unmanaged tasks is never
//! recorded, so between two switches a CPU runs the managed task switched
//! in, or (`next_job == 0`) something that is not a managed job — another
//! process or the idle task (`next_tid == 0` says idle at that switch).
use serde::{Deserialize, Serialize};

use crate::job::JobId;

/// Longest recording an agent accepts, ms.
pub const MAX_DURATION_MS: u64 = 60_000;
/// Most records (switches, spin records, actions, slices, decisions) one recording
/// keeps; the recording ends early (`truncated`) when it is reached.
pub const MAX_EVENTS: u32 = 500_000;
/// The event cap when the request gives none.
pub const DEFAULT_MAX_EVENTS: u32 = 200_000;

/// One node's recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeTimeline {
    /// The agent's node name.
    pub node: String,
    /// The node's CPUs.
    pub cpus: Vec<u32>,
    /// CLOCK_MONOTONIC at the start and end of the recording, ns.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The jobs the agent knew during the recording.
    pub jobs: Vec<TimelineJob>,
    pub switches: Vec<Switch>,
    pub spins: Vec<Spin>,
    /// The agent's level changes, and at `start_ns` the level every managed
    /// task had then.
    pub actions: Vec<Action>,
    /// The coordinator's slices as the agent applied them.
    pub slices: Vec<Slice>,
    /// The local policy's decisions with their reasons, in the order it
    /// took them: every level change it asked for, and every boost it
    /// refused (`no-boost-…`), which changes no level (absent in
    /// recordings of older agents).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
    /// The event cap was reached: the recording ended before its time
    /// (`end_ns` is when).
    #[serde(default)]
    pub truncated: bool,
    /// Records the eBPF side could not queue (its ring buffer was full).
    #[serde(default)]
    pub lost: u64,
    /// Set when the timestamps were moved onto another machine's clock
    /// (`cosched timeline --coordinator-clock`); absent: the node's own
    /// CLOCK_MONOTONIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockAlignment>,
}

/// How a recording was moved onto a reference clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAlignment {
    /// Whose clock the timestamps are now on ("coordinator").
    pub reference: String,
    /// The node's clock minus the reference clock, ns (subtracted from
    /// every timestamp).
    pub offset_ns: i64,
    /// The true offset lies within `offset_ns ± uncertainty_ns`: two nodes'
    /// events closer than the sum of their uncertainties may be drawn in
    /// the wrong order.
    pub uncertainty_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineJob {
    pub job_id: JobId,
    pub name: String,
}

/// A context switch with a managed task on at least one side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub ts_ns: u64,
    pub cpu: u32,
    pub prev_tid: u32,
    /// 0: not managed.
    pub prev_job: JobId,
    /// 0: the idle task.
    pub next_tid: u32,
    /// 0: not managed.
    pub next_job: JobId,
}

/// The start or end of a managed task's spin episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spin {
    pub ts_ns: u64,
    pub tid: u32,
    pub job: JobId,
    /// true: the episode starts; false: it ends.
    pub start: bool,
}

/// A managed task's level as the agent realised it, from `ts_ns` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub ts_ns: u64,
    pub tid: u32,
    pub job: JobId,
    /// `normal`, `boost`, `background`, `demote` or `stop`.
    pub level: String,
}

/// A local policy decision for a managed task at `ts_ns` (when the agent
/// took it; a level change is realised right after, in `actions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub ts_ns: u64,
    pub tid: u32,
    pub job: JobId,
    /// The policy's reason, e.g. `spin-threshold-block`, `arrival-boost`,
    /// `no-boost-cpu-share` (the agent's `cosched_policy_decisions_total`
    /// labels).
    pub reason: String,
}

/// A coordinator slice applied on the node at `ts_ns`: the jobs it runs
/// (`None`: gang mode ended, every job may run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slice {
    pub ts_ns: u64,
    pub active: Option<Vec<JobId>>,
    /// The coordinator's (epoch, slice) this change applied, when it came
    /// from a slice switch: the same slice on every node, so separate
    /// machines' recordings can be matched switch by switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<SliceNumber>,
}

/// A slice as the coordinator numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SliceNumber {
    pub epoch: u64,
    pub slice: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_round_trips_through_json() {
        let t = NodeTimeline {
            node: "n0".into(),
            cpus: vec![0],
            start_ns: 10,
            end_ns: 20,
            jobs: vec![TimelineJob {
                job_id: 1,
                name: "a".into(),
            }],
            switches: vec![Switch {
                ts_ns: 11,
                cpu: 0,
                prev_tid: 0,
                prev_job: 0,
                next_tid: 5,
                next_job: 1,
            }],
            spins: vec![Spin {
                ts_ns: 12,
                tid: 5,
                job: 1,
                start: true,
            }],
            actions: vec![Action {
                ts_ns: 13,
                tid: 5,
                job: 1,
                level: "boost".into(),
            }],
            slices: vec![Slice {
                ts_ns: 14,
                active: Some(vec![1]),
                number: None,
            }],
            decisions: vec![Decision {
                ts_ns: 13,
                tid: 5,
                job: 1,
                reason: "arrival-boost".into(),
            }],
            truncated: false,
            lost: 0,
            clock: None,
        };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<NodeTimeline>(&j).unwrap(), t);
    }

    #[test]
    fn a_recording_of_an_agent_that_notes_no_decisions_still_reads() {
        let t = NodeTimeline {
            node: "n0".into(),
            ..NodeTimeline::default()
        };
        let j = serde_json::to_string(&t).unwrap();
        assert!(!j.contains("decisions"), "{j}");
        assert_eq!(serde_json::from_str::<NodeTimeline>(&j).unwrap(), t);
    }
}
