//! The agent's local control socket: newline-delimited JSON over a Unix
//! socket, one request and one reply per line. Only root (the socket is created
//! mode 0600) can talk to it; it is how the coordinator-less tools (the xtask
//! cluster, benchmarks, tests) launch and inspect jobs on a node.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{
    job::{JobId, JobSpec, SchedRequest},
    strict,
    wire::JobClass,
};

/// Largest request or reply line accepted, so a bad client cannot make the
/// agent buffer without bound.
pub const MAX_LINE: usize = 1 << 20;

/// A request. Unknown ops and fields are refused, also on the ops without
/// fields (see [`crate::strict`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    remote = "Self",
    tag = "op",
    rename_all = "kebab-case",
    deny_unknown_fields
)]
pub enum Request {
    /// Launch one rank of a job on this node.
    Launch { spec: JobSpec },
    /// Manage already-running processes (and their threads and future children).
    Adopt {
        job_id: JobId,
        name: String,
        pids: Vec<u32>,
        #[serde(default)]
        sched: Option<SchedRequest>,
        /// Narrow processes allowed outside the node's CPUs to them (put
        /// back when the job is handed back) instead of refusing them.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        move_to_node: bool,
        /// `be` (the default) or `rt:<period_ns>:<frames>:<work_ns>`, as in
        /// a job spec.
        #[serde(default = "crate::class::best_effort", with = "crate::class::text")]
        class: JobClass,
    },
    /// Manage a job that something else launched: every task of a
    /// cgroup-v2 directory (now and later; tasks that leave are released),
    /// or a process and all its descendants (and later forks). Without
    /// `job_id` the agent picks a free one at or above [`LOCAL_JOB_IDS`].
    Attach {
        #[serde(default)]
        job_id: Option<JobId>,
        name: String,
        target: AttachTarget,
        #[serde(default)]
        sched: Option<SchedRequest>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        move_to_node: bool,
        #[serde(default = "crate::class::best_effort", with = "crate::class::text")]
        class: JobClass,
    },
    /// Add process `pid` and its descendants (and later forks) to a running
    /// job that takes joins: one the coordinator told this agent to expect
    /// (an attached job), or one adopted by `attach`. `cosched join` sends
    /// its own pid, then execs the command.
    Join {
        job_id: JobId,
        pid: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        move_to_node: bool,
        /// `pid` is the launcher's per-node daemon (orted,
        /// hydra_pmi_proxy): followed (the ranks it starts join the job)
        /// but never stopped, demoted or boosted itself.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        daemon: bool,
    },
    /// Hand process `pid` (its threads, and its descendants in the same
    /// job) back from the attached or joined job that holds it; the job
    /// keeps its other processes. The opposite of `join`.
    Leave { pid: u32 },
    /// All jobs the agent knows (running and recently finished).
    Jobs,
    /// Wait until every process of the job has exited (or the timeout passes).
    Wait { job_id: JobId, timeout_ms: u64 },
    /// Kill the job's processes (SIGKILL to its cgroup or its processes).
    Cancel { job_id: JobId },
    /// Drop a finished job's record and its metric series.
    Forget { job_id: JobId },
    /// Hand a running job back: every task gets back what the agent changed
    /// and is no longer managed; its processes keep running.
    Release { job_id: JobId },
    /// Agent status.
    Status,
    /// Reload the config file (same path as SIGHUP and file change).
    Reload,
    /// Record a timeline of the managed tasks on this node for
    /// `duration_ms` (at most [`crate::timeline::MAX_DURATION_MS`]), then
    /// reply with it. Off otherwise; one recording at a time (a second
    /// request meanwhile is refused); ends early at `max_events` records
    /// (default [`crate::timeline::DEFAULT_MAX_EVENTS`], at most
    /// [`crate::timeline::MAX_EVENTS`]).
    Timeline {
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_events: Option<u32>,
    },
}

/// First job id the agent hands out itself (`attach` without `job_id`):
/// far above the coordinator's ids, so a local job and a cluster job do not
/// share an id on a node that also talks to a coordinator.
pub const LOCAL_JOB_IDS: JobId = 1 << 30;

impl Request {
    /// The op's name on the wire.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Launch { .. } => "launch",
            Request::Adopt { .. } => "adopt",
            Request::Attach { .. } => "attach",
            Request::Join { .. } => "join",
            Request::Leave { .. } => "leave",
            Request::Jobs => "jobs",
            Request::Wait { .. } => "wait",
            Request::Cancel { .. } => "cancel",
            Request::Forget { .. } => "forget",
            Request::Release { .. } => "release",
            Request::Status => "status",
            Request::Reload => "reload",
            Request::Timeline { .. } => "timeline",
        }
    }

    /// Whether the user socket takes this op from an unprivileged caller:
    /// `join` and `leave` of the caller's own processes, and the read-only
    /// `jobs` and `status`. Everything else (launch, adopt, attach of
    /// arbitrary processes or cgroups, cancel, release, forget, wait,
    /// reload, timeline) stays on the root-only control socket.
    pub fn allowed_for_users(&self) -> bool {
        matches!(
            self,
            Request::Join { .. } | Request::Leave { .. } | Request::Jobs | Request::Status
        )
    }
}

/// What an `attach` takes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum AttachTarget {
    /// A cgroup-v2 directory: an absolute path under the cgroup2 mount, or
    /// a path as `/proc/PID/cgroup` shows it (`/slurm/uid_0/job_5/step_0`),
    /// taken relative to the cgroup2 mount.
    Cgroup(String),
    /// A process and all its descendants.
    PidTree(u32),
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Request::serialize(self, serializer)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        strict::deserialize(
            deserializer,
            |value| Request::deserialize(value),
            |request| Request::serialize(request, serde_json::value::Serializer),
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    Launched {
        job_id: JobId,
        pid: u32,
    },
    Adopted {
        job_id: JobId,
        tasks: u32,
    },
    Attached {
        job_id: JobId,
        tasks: u32,
    },
    Joined {
        job_id: JobId,
        tasks: u32,
    },
    Released {
        job_id: JobId,
        tasks: u32,
    },
    Left {
        job_id: JobId,
        tasks: u32,
    },
    Jobs {
        jobs: Vec<JobInfo>,
    },
    Job {
        job: JobInfo,
    },
    Done,
    Status {
        status: AgentStatus,
    },
    Reloaded {
        outcome: ReloadOutcome,
    },
    Timeline {
        timeline: crate::timeline::NodeTimeline,
    },
}

/// What the agent replies: a result or a human-readable error.
pub type Response = crate::jsonl::Verdict<Reply>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum JobState {
    Running,
    /// All processes exited; `code` is the launched process's exit code (None
    /// if killed by a signal or adopted).
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub job_id: JobId,
    pub name: String,
    pub rank: u32,
    pub state: JobState,
    /// Main process(es) of the job on this node.
    pub pids: Vec<u32>,
    /// Threads currently tracked.
    pub live_tasks: u32,
    pub stats: JobStats,
    /// Where the launched process's stdout / stderr go, if launched.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// `be` or `rt:<period_ns>:<frames>:<work_ns>`.
    #[serde(default = "default_class")]
    pub class: String,
    /// Frame accounting of a real-time job (None for best effort).
    #[serde(default)]
    pub rt: Option<RtJobInfo>,
}

fn default_class() -> String {
    "be".into()
}

/// What the agent counted for a real-time job on this node. Windows are
/// the job's b·d windows, aligned to its start on this node; only closed
/// windows are judged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RtJobInfo {
    /// Frames its processes reported (also in windows not closed yet).
    pub frames: u64,
    /// Closed windows, summed over its processes.
    pub windows: u64,
    /// b per closed window.
    pub expected: u64,
    /// min(n, b) per closed window.
    pub met: u64,
    /// b − n per closed window with n < b.
    pub missed: u64,
    /// missed / expected over every closed window (0 before the first).
    pub miss_rate: f64,
    /// Windows in which a process used more CPU than its budget.
    pub overruns: u64,
    /// 95th percentile of the CPU time per frame the processes measured
    /// (recent frames), ns; None before any was measured.
    pub frame_work_p95_ns: Option<u64>,
    pub processes: Vec<RtProcessInfo>,
}

/// One process of a real-time job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RtProcessInfo {
    pub pid: u32,
    /// In its open window: `due` (frames still due), `satisfied` (its b
    /// frames are done), `throttled` (it used more than its budget).
    pub state: String,
    /// Frames in its open window (n).
    pub frames_in_window: u64,
    /// How the agent runs it while its class runs and frames are due:
    /// `fifo` (an EDF-ordered SCHED_FIFO priority), `deadline`
    /// (SCHED_DEADLINE), or `none` (no class mode: the local policy).
    pub sched: String,
    /// Why its frame counter is not read (None: read, or not created yet).
    pub counter_error: Option<String>,
}

/// Per-job totals over all of its tasks, live and exited, as observed by eBPF.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobStats {
    pub cpu_seconds: f64,
    pub spin_seconds: f64,
    /// Message arrivals (socket data-ready) for the job's sockets.
    pub messages_observed: u64,
    pub receives: u64,
    /// Empty waits by kind: receives that found nothing (EAGAIN), ...
    pub empty_receives: u64,
    /// ... poll-family calls (poll, ppoll, select, pselect6, epoll_wait,
    /// epoll_pwait, epoll_pwait2) that returned nothing without blocking ...
    #[serde(default)]
    pub empty_polls: u64,
    /// ... and `sched_yield` calls.
    #[serde(default)]
    pub yields: u64,
    /// Spin episodes started (a wait that lasted, from its first empty wait
    /// to the data, a send, a block or computation past the spin gap).
    #[serde(default)]
    pub spin_episodes: u64,
    pub sends: u64,
    pub switches_in: u64,
    pub switches_voluntary: u64,
    pub switches_preempted: u64,
    /// Times a policy boosted one of the job's tasks.
    #[serde(default)]
    pub boosts: u64,
    /// Policy actions applied to the job's tasks (any level change).
    #[serde(default)]
    pub actions: u64,
    /// Reaction latency (message arrival in the kernel -> action applied) of
    /// actions triggered by the job's message arrivals, microseconds; 0 when none.
    #[serde(default)]
    pub reaction_latency_p50_us: f64,
    #[serde(default)]
    pub reaction_latency_p99_us: f64,
    /// Number of latency samples behind the percentiles.
    #[serde(default)]
    pub reactions: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentStatus {
    pub node: String,
    pub policy: String,
    pub cpus: Vec<u32>,
    pub jobs: u32,
    pub managed_tasks: u32,
    pub config_path: String,
    pub last_reload: Option<ReloadOutcome>,
    /// The waiting detectors running on this kernel: `recv` (empty
    /// receives) and the system calls whose empty returns count as waits.
    #[serde(default)]
    pub wait_detectors: Vec<String>,
    /// Detectors this kernel cannot run, each with the reason.
    #[serde(default)]
    pub wait_detectors_inactive: Vec<String>,
    /// How the BE and RT classes share the node: `off`, `tdm x:y (rt
    /// division)`, `ps x:y`; and which EDF realisation RT tasks get.
    #[serde(default)]
    pub classes: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadOutcome {
    pub accepted: bool,
    pub message: String,
}

/// The control socket's protocol, for [`Client`].
pub struct Control;

impl crate::jsonl::Protocol for Control {
    type Request = Request;
    type Reply = Reply;
    const SOCKET: &'static str = "agent control socket";
    const DAEMON: &'static str = "agent";
    const UNREACHABLE_HINT: &'static str =
        " (is cosched-agent running, and is this its control_socket?)";
}

/// A blocking client, for tools and tests.
pub type Client = crate::jsonl::Client<Control>;
pub use crate::jsonl::ClientError;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_op_tag() {
        let r = Request::Wait {
            job_id: 3,
            timeout_ms: 10,
        };
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.contains(r#""op":"wait""#), "{j}");
        assert_eq!(serde_json::from_str::<Request>(&j).unwrap(), r);
    }

    /// One request of every op. Adding an op fails to compile in `covered`
    /// until it is listed here too.
    fn every_request() -> Vec<Request> {
        fn covered(request: &Request) {
            match request {
                Request::Launch { .. }
                | Request::Adopt { .. }
                | Request::Attach { .. }
                | Request::Join { .. }
                | Request::Leave { .. }
                | Request::Jobs
                | Request::Wait { .. }
                | Request::Cancel { .. }
                | Request::Forget { .. }
                | Request::Release { .. }
                | Request::Status
                | Request::Reload
                | Request::Timeline { .. } => {}
            }
        }
        let spec: JobSpec =
            serde_json::from_str(r#"{"job_id":1,"name":"a","command":"/bin/true"}"#).unwrap();
        let every = vec![
            Request::Launch { spec },
            Request::Adopt {
                job_id: 1,
                name: "a".into(),
                pids: vec![2],
                sched: Some(SchedRequest::Idle),
                move_to_node: false,
                class: JobClass::RealTime {
                    period_ns: 1_000_000,
                    frames: 2,
                    work_ns: 100_000,
                },
            },
            Request::Attach {
                job_id: None,
                name: "a".into(),
                target: AttachTarget::Cgroup("/x".into()),
                sched: None,
                move_to_node: true,
                class: JobClass::BestEffort,
            },
            Request::Attach {
                job_id: Some(4),
                name: "a".into(),
                target: AttachTarget::PidTree(9),
                sched: None,
                move_to_node: false,
                class: JobClass::BestEffort,
            },
            Request::Join {
                job_id: 4,
                pid: 9,
                move_to_node: false,
                daemon: true,
            },
            Request::Leave { pid: 9 },
            Request::Jobs,
            Request::Wait {
                job_id: 1,
                timeout_ms: 5,
            },
            Request::Cancel { job_id: 1 },
            Request::Forget { job_id: 1 },
            Request::Release { job_id: 1 },
            Request::Status,
            Request::Reload,
            Request::Timeline {
                duration_ms: 100,
                max_events: None,
            },
            Request::Timeline {
                duration_ms: 100,
                max_events: Some(10),
            },
        ];
        every.iter().for_each(covered);
        every
    }

    #[test]
    fn every_op_round_trips_and_refuses_unknown_fields() {
        crate::strict::assert_round_trip_refusing_unknown_fields(every_request());
    }

    #[test]
    fn every_op_names_itself_as_on_the_wire() {
        for request in every_request() {
            let json = serde_json::to_value(&request).unwrap();
            assert_eq!(json["op"], request.op(), "{json}");
        }
    }

    #[test]
    fn users_may_only_join_leave_and_look() {
        let allowed: Vec<&str> = every_request()
            .iter()
            .filter(|r| r.allowed_for_users())
            .map(Request::op)
            .collect();
        assert_eq!(allowed, ["join", "leave", "jobs", "status"]);
    }

    #[test]
    fn unknown_fields_nested_in_a_request_are_refused() {
        let line =
            r#"{"op":"adopt","job_id":1,"name":"a","pids":[2],"sched":{"class":"idle","x":1}}"#;
        let error = serde_json::from_str::<Request>(line).unwrap_err();
        assert!(error.to_string().contains('x'), "{error}");
    }

    #[test]
    fn an_attach_target_is_one_of_cgroup_or_pid_tree() {
        let line = r#"{"op":"attach","name":"a","target":{"cgroup":"/slurm/job_1"}}"#;
        let Request::Attach { job_id, target, .. } = serde_json::from_str(line).unwrap() else {
            panic!("not an attach");
        };
        assert_eq!(job_id, None);
        assert_eq!(target, AttachTarget::Cgroup("/slurm/job_1".into()));
        for bad in [
            r#"{"op":"attach","name":"a","target":{"pid-tree":1,"cgroup":"/x"}}"#,
            r#"{"op":"attach","name":"a","target":{"pid":1}}"#,
            r#"{"op":"attach","name":"a"}"#,
        ] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_op_is_an_error() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"format-disk"}"#).is_err());
    }

    #[test]
    fn error_response_round_trips() {
        let r = Response::Error("unknown job 9".into());
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Response>(&j).unwrap(), r);
    }
}
