//! Job records: what was submitted, where its ranks are, how they ended.

use cosched_policy::global::NodeIndex;
use cosched_proto::wire::{ExitStatus, JobClass};
use serde::{Deserialize, Serialize};

use crate::admin::protocol::{JobStateView, Submission};

/// Longest job name (the agent's limit; it is also a metric label there).
pub const MAX_NAME_LEN: usize = 64;

/// Checks a submission before it touches the matrix; the error names the
/// offending field.
pub fn validate_submission(job: &Submission) -> Result<(), String> {
    if job.name.is_empty() || job.name.len() > MAX_NAME_LEN {
        return Err(format!("name must be 1..={MAX_NAME_LEN} characters"));
    }
    if job.name.chars().any(char::is_control) {
        return Err("name contains control characters".into());
    }
    if job.nodes == 0 {
        return Err("a job needs at least one node".into());
    }
    if job.command.is_empty() {
        return Err("command is empty".into());
    }
    super::classes::validate_class(&job.class)
}

/// One rank's life as the coordinator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankState {
    /// Not yet sent to its agent (node down or addresses unknown).
    Pending,
    /// `LaunchJob` sent.
    Launched,
    /// The agent reported it among its running jobs after (re)registering.
    Running,
    Exited(ExitStatus),
    /// The agent no longer knows it, or the job was given up while its node
    /// was unreachable.
    Lost {
        reason: String,
    },
}

impl RankState {
    pub fn is_ended(&self) -> bool {
        matches!(self, Self::Exited(_) | Self::Lost { .. })
    }

    /// Launched or confirmed: processes may exist on the node.
    pub fn may_run(&self) -> bool {
        matches!(self, Self::Launched | Self::Running)
    }

    /// An ending that makes the whole job fail.
    pub fn failure(&self) -> Option<String> {
        match self {
            Self::Exited(ExitStatus::Exited { code: 0 }) => None,
            Self::Exited(ExitStatus::Exited { code }) => Some(format!("exited with code {code}")),
            Self::Exited(ExitStatus::Signalled { signal }) => {
                Some(format!("killed by signal {signal}"))
            }
            Self::Exited(ExitStatus::LaunchFailed { reason }) => {
                Some(format!("launch failed: {reason}"))
            }
            Self::Lost { reason } => Some(format!("lost: {reason}")),
            Self::Pending | Self::Launched | Self::Running => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Pending => "pending".into(),
            Self::Launched => "launched".into(),
            Self::Running => "running".into(),
            Self::Exited(ExitStatus::Exited { code }) => format!("exited (code {code})"),
            Self::Exited(ExitStatus::Signalled { signal }) => format!("killed (signal {signal})"),
            Self::Exited(ExitStatus::LaunchFailed { reason }) => {
                format!("launch failed: {reason}")
            }
            Self::Lost { reason } => format!("lost: {reason}"),
        }
    }
}

/// Rank `index` of a job runs on `node`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rank {
    pub node: NodeIndex,
    pub state: RankState,
}

/// Everything the coordinator keeps about a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u32,
    pub submission: Submission,
    pub state: JobStateView,
    pub submitted_unix_ms: u64,
    /// The port every rank listens on (peers are `node address:port`).
    pub port: Option<u16>,
    /// Indexed by rank; rank r runs on the job's r-th column. Empty while
    /// queued.
    pub ranks: Vec<Rank>,
    /// Mean utilisation of the last measured quantum, percent.
    pub last_cpu_percent: Option<f64>,
    /// Why the job failed or was cancelled.
    pub reason: Option<String>,
    /// Launched by something else (`cosched attach`): its ranks are
    /// expected (`ExpectJob`), not launched, and it has no port.
    #[serde(default)]
    pub attached: bool,
    /// RT jobs under the BE/RT policies: admitted, waiting or rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<super::classes::Admission>,
    /// An ended RT job's last frame counts (the agents send them before
    /// the rank's exit), kept for `cosched job`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_frames: Option<crate::admin::protocol::FramesView>,
    /// The uid of the unprivileged user who attached the job on the
    /// coordinator's user socket (None: root). Only that user (or root)
    /// may detach or cancel it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
}

impl JobRecord {
    pub fn new(id: u32, submission: Submission, submitted_unix_ms: u64) -> Self {
        Self {
            id,
            submission,
            state: JobStateView::Queued,
            submitted_unix_ms,
            port: None,
            ranks: Vec::new(),
            last_cpu_percent: None,
            reason: None,
            attached: false,
            admission: None,
            final_frames: None,
            owner: None,
        }
    }

    /// The rank this job runs on `node`, if any.
    pub fn rank_on(&self, node: NodeIndex) -> Option<usize> {
        self.ranks.iter().position(|rank| rank.node == node)
    }

    /// Indices of the ranks that have not ended.
    pub fn live_ranks(&self) -> Vec<usize> {
        self.ranks
            .iter()
            .enumerate()
            .filter(|(_, rank)| !rank.state.is_ended())
            .map(|(index, _)| index)
            .collect()
    }

    /// The nodes of the ranks that have not ended.
    pub fn live_nodes(&self) -> Vec<NodeIndex> {
        self.ranks
            .iter()
            .filter(|rank| !rank.state.is_ended())
            .map(|rank| rank.node)
            .collect()
    }

    pub fn all_ranks_ended(&self) -> bool {
        !self.ranks.is_empty() && self.ranks.iter().all(|rank| rank.state.is_ended())
    }

    /// The first failure among the ranks, as "rank r on node: why".
    pub fn first_failure(&self, node_name: impl Fn(NodeIndex) -> String) -> Option<String> {
        self.ranks.iter().enumerate().find_map(|(index, rank)| {
            rank.state
                .failure()
                .map(|why| format!("rank {index} on {}: {why}", node_name(rank.node)))
        })
    }

    pub fn class_label(&self) -> String {
        match self.submission.class {
            JobClass::BestEffort => "be".into(),
            JobClass::RealTime {
                period_ns,
                frames,
                work_ns,
            } => format!("rt({period_ns}ns/{frames}x{work_ns}ns)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn submission() -> Submission {
        Submission {
            name: "ring".into(),
            nodes: 2,
            command: "/bin/true".into(),
            args: vec![],
            env: BTreeMap::new(),
            class: JobClass::BestEffort,
            exclusive: false,
        }
    }

    #[test]
    fn bad_submissions_name_the_field() {
        let long = Submission {
            name: "x".repeat(65),
            ..submission()
        };
        assert!(validate_submission(&long).unwrap_err().contains("name"));
        let empty = Submission {
            nodes: 0,
            ..submission()
        };
        assert!(validate_submission(&empty).unwrap_err().contains("node"));
        let no_command = Submission {
            command: String::new(),
            ..submission()
        };
        assert!(
            validate_submission(&no_command)
                .unwrap_err()
                .contains("command")
        );
        validate_submission(&submission()).unwrap();
        let zero_frames = Submission {
            class: JobClass::RealTime {
                period_ns: 10,
                frames: 0,
                work_ns: 1,
            },
            ..submission()
        };
        let error = validate_submission(&zero_frames).unwrap_err();
        assert!(
            error.contains("rt:10:0:1: frames must be at least 1"),
            "{error}"
        );
        let too_much = Submission {
            class: JobClass::RealTime {
                period_ns: 10,
                frames: 1,
                work_ns: 11,
            },
            ..submission()
        };
        let error = validate_submission(&too_much).unwrap_err();
        assert!(error.contains("exceeds the period"), "{error}");
    }

    #[test]
    fn only_clean_exits_are_not_failures() {
        assert_eq!(
            RankState::Exited(ExitStatus::Exited { code: 0 }).failure(),
            None
        );
        assert!(
            RankState::Exited(ExitStatus::Signalled { signal: 9 })
                .failure()
                .unwrap()
                .contains("signal 9")
        );
        assert!(RankState::Running.failure().is_none());
        assert!(!RankState::Running.is_ended());
    }
}
