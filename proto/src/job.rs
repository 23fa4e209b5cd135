//! The job spec: what an agent needs to launch one rank of a parallel job on
//! its node. The same struct is used by the control socket, the coordinator
//! and the benchmarks, so a job means the same thing everywhere.
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{strict, wire::JobClass};

/// Identifier of a job, unique within a cluster (assigned by the coordinator,
/// or by whoever talks to an agent directly). 0 is reserved for "no job".
pub type JobId = u32;

/// Environment variables an agent sets for every process it launches, so a job
/// program can find its place in the job without command-line plumbing.
pub mod env {
    pub const JOB: &str = "COSCHED_JOB";
    pub const JOB_ID: &str = "COSCHED_JOB_ID";
    pub const RANK: &str = "COSCHED_RANK";
    pub const SIZE: &str = "COSCHED_SIZE";
    pub const PEERS: &str = "COSCHED_PEERS";
    pub const NODE: &str = "COSCHED_NODE";
    /// Which agent launched the process (the canonical directory of its rank
    /// logs, under its `state_dir`): unique per agent on a machine and the
    /// same after a restart, so a restarted agent recognises the ranks its
    /// node left behind and no other agent on the machine (another test or
    /// development cluster with the same node names) takes them.
    pub const LAUNCHER: &str = "COSCHED_LAUNCHER";
}

/// One rank of a job, to be launched on one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub job_id: JobId,
    /// Human-readable name, also the `job` label of per-job metrics.
    pub name: String,
    /// Rank of this process group within the job (0-based).
    #[serde(default)]
    pub rank: u32,
    /// Number of ranks in the job.
    #[serde(default = "one")]
    pub size: u32,
    /// Program to run (absolute path, or a name looked up in PATH).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Address (`host:port`) of every rank, indexed by rank.
    #[serde(default)]
    pub peers: Vec<String>,
    /// CPUs to pin the processes to; empty = the node's CPUs.
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Scheduling attributes to start the job with (applied by the agent
    /// through its restore-tracked action path, undone when the agent exits).
    #[serde(default)]
    pub sched: Option<SchedRequest>,
    /// Best effort (`"be"`, the default) or real time
    /// (`"rt:<period_ns>:<frames>:<work_ns>"`, the syntax of
    /// [`crate::class::parse_class`]): the agent counts an RT job's frames
    /// and, in a class mode, schedules it by EDF.
    #[serde(default = "crate::class::best_effort", with = "crate::class::text")]
    pub class: JobClass,
}

fn one() -> u32 {
    1
}

/// A static scheduling request for a job's tasks. Unknown fields are refused,
/// also on `idle` (see [`crate::strict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    remote = "Self",
    deny_unknown_fields,
    tag = "class",
    rename_all = "kebab-case"
)]
pub enum SchedRequest {
    /// SCHED_OTHER with this nice value (-20..=19).
    Nice { nice: i32 },
    /// SCHED_BATCH with this nice value.
    Batch { nice: i32 },
    /// SCHED_IDLE.
    Idle,
    /// SCHED_FIFO with this priority (1..=99).
    Fifo { priority: u32 },
    /// SCHED_RR with this priority (1..=99).
    Rr { priority: u32 },
}

impl Serialize for SchedRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        SchedRequest::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for SchedRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        strict::deserialize(
            deserializer,
            |value| SchedRequest::deserialize(value),
            |request| SchedRequest::serialize(request, serde_json::value::Serializer),
        )
    }
}

impl SchedRequest {
    /// Checks the ranges the kernel accepts, so a bad request is refused with a
    /// clear message before any task is touched.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Self::Nice { nice } | Self::Batch { nice } if !(-20..=19).contains(&nice) => {
                Err(format!("nice {nice} out of range -20..=19"))
            }
            Self::Fifo { priority } | Self::Rr { priority } if !(1..=99).contains(&priority) => {
                Err(format!("real-time priority {priority} out of range 1..=99"))
            }
            _ => Ok(()),
        }
    }
}

impl JobSpec {
    /// Checks the spec is self-consistent; the error names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.job_id == 0 {
            return Err("job_id 0 is reserved".into());
        }
        if self.name.is_empty() || self.name.len() > 64 {
            return Err("name must be 1..=64 characters".into());
        }
        if self.command.is_empty() {
            return Err("command is empty".into());
        }
        if self.size == 0 || self.rank >= self.size {
            return Err(format!("rank {} not below size {}", self.rank, self.size));
        }
        if !self.peers.is_empty() && self.peers.len() != self.size as usize {
            return Err(format!(
                "{} peer addresses for a job of size {}",
                self.peers.len(),
                self.size
            ));
        }
        if let Some(s) = &self.sched {
            s.validate()?;
        }
        Ok(())
    }

    /// The environment the launched processes get on top of `self.env`.
    pub fn cosched_env(&self, node: &str) -> Vec<(String, String)> {
        vec![
            (env::JOB.into(), self.name.clone()),
            (env::JOB_ID.into(), self.job_id.to_string()),
            (env::RANK.into(), self.rank.to_string()),
            (env::SIZE.into(), self.size.to_string()),
            (env::PEERS.into(), self.peers.join(",")),
            (env::NODE.into(), node.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            job_id: 7,
            name: "ring".into(),
            rank: 1,
            size: 2,
            command: "/bin/true".into(),
            args: vec![],
            env: BTreeMap::new(),
            peers: vec!["10.0.0.1:5000".into(), "10.0.0.2:5000".into()],
            cpus: vec![1],
            sched: Some(SchedRequest::Nice { nice: 5 }),
            class: JobClass::RealTime {
                period_ns: 10_000_000,
                frames: 2,
                work_ns: 1_000_000,
            },
        }
    }

    #[test]
    fn valid_spec_passes_and_round_trips_through_json() {
        let s = spec();
        s.validate().unwrap();
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<JobSpec>(&j).unwrap(), s);
    }

    #[test]
    fn the_class_is_its_text_and_best_effort_by_default() {
        let j = serde_json::to_value(spec()).unwrap();
        assert_eq!(j["class"], "rt:10000000:2:1000000");
        let plain: JobSpec =
            serde_json::from_str(r#"{"job_id":1,"name":"a","command":"x"}"#).unwrap();
        assert_eq!(plain.class, JobClass::BestEffort);
        let bad = r#"{"job_id":1,"name":"a","command":"x","class":"rt:1:2"}"#;
        let e = serde_json::from_str::<JobSpec>(bad).unwrap_err();
        assert!(e.to_string().contains("rt:<period_ns>"), "{e}");
    }

    #[test]
    fn rank_outside_size_is_rejected() {
        let s = JobSpec { rank: 2, ..spec() };
        assert!(s.validate().unwrap_err().contains("rank 2"));
    }

    #[test]
    fn peer_count_must_match_size() {
        let s = JobSpec {
            peers: vec!["a:1".into()],
            ..spec()
        };
        assert!(s.validate().unwrap_err().contains("peer"));
    }

    #[test]
    fn out_of_range_nice_is_rejected() {
        let s = JobSpec {
            sched: Some(SchedRequest::Nice { nice: 20 }),
            ..spec()
        };
        assert!(s.validate().unwrap_err().contains("nice 20"));
        let s = JobSpec {
            sched: Some(SchedRequest::Fifo { priority: 0 }),
            ..spec()
        };
        assert!(s.validate().is_err());
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let j = r#"{"job_id":1,"name":"a","command":"x","bogus":1}"#;
        assert!(serde_json::from_str::<JobSpec>(j).is_err());
    }

    #[test]
    fn every_sched_class_refuses_unknown_fields_and_round_trips() {
        let every = [
            SchedRequest::Nice { nice: 1 },
            SchedRequest::Batch { nice: 2 },
            SchedRequest::Idle,
            SchedRequest::Fifo { priority: 3 },
            SchedRequest::Rr { priority: 4 },
        ];
        for sched in every {
            let mut value = serde_json::to_value(sched).unwrap();
            assert_eq!(
                serde_json::from_value::<SchedRequest>(value.clone()).unwrap(),
                sched
            );
            value["priority_boost"] = 1.into();
            let error = serde_json::from_value::<SchedRequest>(value).unwrap_err();
            assert!(
                error.to_string().contains("priority_boost"),
                "{sched:?}: {error}"
            );
        }
        let nested = r#"{"job_id":1,"name":"a","command":"x","sched":{"class":"idle","nice":3}}"#;
        let error = serde_json::from_str::<JobSpec>(nested).unwrap_err();
        assert!(error.to_string().contains("nice"), "{error}");
    }

    #[test]
    fn environment_names_the_rank_and_peers() {
        let e = spec().cosched_env("n1");
        assert!(e.contains(&(env::RANK.into(), "1".into())));
        assert!(e.contains(&(env::PEERS.into(), "10.0.0.1:5000,10.0.0.2:5000".into())));
        assert!(e.contains(&(env::NODE.into(), "n1".into())));
    }
}
