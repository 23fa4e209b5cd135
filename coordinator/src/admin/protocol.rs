//! The admin protocol between `cosched` (the CLI) and the coordinator:
//! newline-delimited JSON over a Unix socket (mode 0600), one request and one
//! response per line. Requests are tagged by `op`; unknown ops and fields are
//! errors (also on the ops without fields, see `cosched_proto::strict`).

use std::collections::BTreeMap;

use cosched_proto::{strict, wire::JobClass};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::policy::GlobalPolicy;

/// What the CLI asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    remote = "Self",
    tag = "op",
    rename_all = "kebab-case",
    deny_unknown_fields
)]
pub enum Request {
    /// Submit a job: allocated in the matrix, or queued.
    Submit { job: Submission },
    /// Register a job that something else launches (mpirun, mpiexec,
    /// srun) on the given nodes: placed in a row where they are all free
    /// and scheduled like a submitted job; each node's agent expects its
    /// processes to join (`cosched join`).
    Attach { job: Attachment },
    /// The launcher of attached job `id` exited with `code`: the job ends
    /// (whatever is left of it on its nodes is killed).
    Detach { id: u32, code: i32 },
    /// Active (queued and running) jobs; with `all`, recently finished too.
    Jobs {
        #[serde(default)]
        all: bool,
    },
    /// One job, active or recently finished.
    Job { id: u32 },
    /// Cancel a queued or running job.
    Cancel { id: u32 },
    /// The Ousterhout matrix.
    Matrix,
    /// The cluster's nodes.
    Nodes,
    /// Switch the global policy at run time.
    SetPolicy { policy: GlobalPolicy },
    /// Policy, slicing and switch-skew summary.
    Status,
}

impl Request {
    /// The op's name on the wire (and in the admin metrics).
    pub fn op(&self) -> &'static str {
        match self {
            Request::Submit { .. } => "submit",
            Request::Attach { .. } => "attach",
            Request::Detach { .. } => "detach",
            Request::Jobs { .. } => "jobs",
            Request::Job { .. } => "job",
            Request::Cancel { .. } => "cancel",
            Request::Matrix => "matrix",
            Request::Nodes => "nodes",
            Request::SetPolicy { .. } => "set-policy",
            Request::Status => "status",
        }
    }

    /// Whether the user socket takes this op from an unprivileged caller
    /// at all (detach and cancel then only of the caller's own jobs, see
    /// `admin::users`). Submit (it starts programs as root on the nodes)
    /// and set-policy stay on the root-only admin socket.
    pub fn allowed_for_users(&self) -> bool {
        !matches!(self, Request::Submit { .. } | Request::SetPolicy { .. })
    }
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

/// A job as submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    /// 1..=64 characters.
    pub name: String,
    /// Nodes (ranks) the job needs.
    pub nodes: usize,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default = "best_effort")]
    pub class: JobClass,
    /// Never paired with another job (paired gang).
    #[serde(default)]
    pub exclusive: bool,
}

/// A job launched by something else, as attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attachment {
    /// 1..=64 characters.
    pub name: String,
    /// The nodes the launcher runs it on (node names, each once).
    pub nodes: Vec<String>,
    /// The launcher's command line, for the views only.
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default = "best_effort")]
    pub class: JobClass,
    #[serde(default)]
    pub exclusive: bool,
}

fn best_effort() -> JobClass {
    JobClass::BestEffort
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    Submitted { job: JobView },
    Attached { job: JobView },
    Detached { job: JobView },
    Jobs { jobs: Vec<JobView> },
    Job { job: JobView },
    Cancelled { job: JobView },
    Matrix { matrix: MatrixView },
    Nodes { nodes: Vec<NodeView> },
    Policy { policy: GlobalPolicy },
    Status { status: StatusView },
}

/// A reply or a human-readable error.
pub type Response = cosched_proto::jsonl::Verdict<Reply>;

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStateView {
    /// Waiting in the FCFS queue for room in the matrix.
    Queued,
    /// Holds cells; its ranks are being launched or run.
    Running,
    /// Every rank exited with code 0.
    Completed,
    /// A rank failed (non-zero exit, signal, launch failure, lost node).
    Failed,
    Cancelled,
}

impl JobStateView {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn is_active(self) -> bool {
        matches!(self, Self::Queued | Self::Running)
    }
}

/// One rank of a job, as the coordinator knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankView {
    pub rank: u32,
    pub node: String,
    /// `pending` (not yet sent), `launched`, `running` (confirmed by the
    /// agent), `exited (code 0)`, `lost`, ...
    pub state: String,
}

/// A job, for `cosched jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: u32,
    pub name: String,
    pub state: JobStateView,
    pub nodes_wanted: usize,
    /// Node names holding the job's ranks (empty while queued).
    pub nodes: Vec<String>,
    pub row: Option<usize>,
    pub queue_position: Option<usize>,
    pub class: String,
    pub exclusive: bool,
    /// Mean CPU utilisation of the ranks in the job's last measured quantum,
    /// percent.
    pub cpu_percent: Option<f64>,
    /// Predicted utilisation for the next quantum (equation 1), percent.
    pub predicted_percent: Option<f64>,
    /// Why the prediction has its value (new job, sharp change, history).
    pub prediction: Option<String>,
    /// Paired gang: why the job's row runs alone or with which row.
    pub pair: Option<String>,
    pub port: Option<u16>,
    pub ranks: Vec<RankView>,
    /// Why the job ended, when it ended badly.
    pub reason: Option<String>,
    pub submitted_unix_ms: u64,
    /// Launched by something else and attached (`cosched attach`).
    #[serde(default)]
    pub attached: bool,
    /// The user (uid) who attached it on the user socket; None: root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    /// RT jobs under the BE/RT policies: admitted, waiting (1GS) or
    /// rejected, and why.
    #[serde(default)]
    pub admission: Option<AdmissionView>,
    /// 1GS: the rows the job holds as its own (an RT job under admission
    /// control holds r of them), ascending.
    #[serde(default)]
    pub rows_held: Vec<usize>,
    /// 1GS: rows it runs in as a replica until the next arrival or departure.
    #[serde(default)]
    pub replica_rows: Vec<usize>,
    /// 1GS, RT jobs: the CPU its rows give per cycle against what its frames
    /// need.
    #[serde(default)]
    pub guarantee: Option<String>,
    /// RT jobs: the frame counts their agents reported.
    #[serde(default)]
    pub frames: Option<FramesView>,
}

/// An RT job's standing with admission control.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionView {
    /// `admitted`, `waiting` or `rejected`.
    pub state: String,
    pub reason: Option<String>,
}

/// An RT job's frames, summed over the nodes whose agents reported.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FramesView {
    pub nodes_reporting: usize,
    /// Frames completed.
    pub frames: u64,
    /// Frames due in the closed windows, met in time, missed.
    pub expected: u64,
    pub met: u64,
    pub missed: u64,
    /// missed / expected, percent (none before a window closed).
    pub miss_rate_percent: Option<f64>,
    /// The largest of the nodes' measured p95 CPU time per frame.
    pub work_p95_ns: Option<u64>,
}

/// The Ousterhout matrix, rows × nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixView {
    pub nodes: Vec<String>,
    /// `cells[row][node]`: the job holding the cell.
    pub cells: Vec<Vec<Option<u32>>>,
    /// Rows of the slice running now.
    pub active_rows: Vec<usize>,
    /// Jobs running as alternates in the current slice.
    pub alternates: Vec<u32>,
    /// Queued jobs, head first (1GS: the RT queue, then the BE queue).
    pub queue: Vec<u32>,
    /// 1GS: each row's class (`rt`, `be`); empty under other policies.
    #[serde(default)]
    pub row_classes: Vec<String>,
    /// 1GS: `replicas[row][node]` is a copy the replication made.
    #[serde(default)]
    pub replicas: Vec<Vec<bool>>,
}

/// One node, for `cosched nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub index: usize,
    pub name: String,
    pub connected: bool,
    /// Where the node's job ranks are reached (its registered address).
    pub address: Option<String>,
    pub cpus: Vec<u32>,
    /// Agent clock minus coordinator clock, estimated from heartbeats, ns.
    pub clock_offset_ns: Option<i64>,
    pub clock_uncertainty_ns: Option<u64>,
    /// Jobs holding a cell of the node.
    pub jobs: Vec<u32>,
    /// The wire protocol its agent speaks ("1.1"), while connected.
    pub protocol: Option<String>,
    /// Ranks given up while they may still run here, waiting for the agent
    /// to confirm they were killed ("job 5 rank 1").
    pub unreaped: Vec<String>,
}

/// Summary for `cosched status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusView {
    pub policy: GlobalPolicy,
    pub slice_ms: u64,
    pub switch_lead_us: u64,
    pub epoch: u64,
    /// Slices broadcast in this epoch.
    pub slices: u64,
    pub nodes_connected: usize,
    pub nodes: usize,
    pub jobs_running: usize,
    pub jobs_queued: usize,
    /// Cross-node switch skew over recent slices (seconds).
    pub skew: SkewSummary,
    /// The same for 2DCS-TDM's division switches.
    #[serde(default)]
    pub division_skew: SkewSummary,
    /// Under a BE/RT policy: its settings and state.
    #[serde(default)]
    pub classes: Option<ClassesStatusView>,
}

/// The BE/RT policy's settings and state, for `cosched status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassesStatusView {
    /// x:y.
    pub ratio: String,
    /// `none`, `deterministic`, `statistical`.
    pub admission: String,
    pub tdm_period_ms: u64,
    pub rt_max_wait_ms: u64,
    /// 1GS: rows of each class.
    pub one_gs_rows_rt: Option<usize>,
    pub one_gs_rows_be: Option<usize>,
    pub rt_jobs_admitted: usize,
    pub rt_jobs_waiting: usize,
    /// 2DCS-TDM: the division broadcast last.
    pub division: Option<DivisionView>,
}

/// One 2DCS-TDM division (coordinator clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DivisionView {
    pub number: u64,
    /// `rt` or `be`.
    pub class: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Percentiles of the cross-node slice-switch skew of recent slices.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SkewSummary {
    pub samples: usize,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_with_an_op_tag() {
        let request = Request::Submit {
            job: Submission {
                name: "ring".into(),
                nodes: 2,
                command: "/bin/true".into(),
                args: vec![],
                env: BTreeMap::new(),
                class: JobClass::BestEffort,
                exclusive: true,
            },
        };
        let json = serde_json::to_string(&request).unwrap();
        assert!(json.contains(r#""op":"submit""#), "{json}");
        assert_eq!(serde_json::from_str::<Request>(&json).unwrap(), request);
        let json = r#"{"op":"set-policy","policy":"paired-gang"}"#;
        assert_eq!(
            serde_json::from_str::<Request>(json).unwrap(),
            Request::SetPolicy {
                policy: GlobalPolicy::PairedGang
            }
        );
    }

    #[test]
    fn a_minimal_submission_defaults_to_best_effort() {
        let json = r#"{"op":"submit","job":{"name":"a","nodes":1,"command":"x"}}"#;
        let Request::Submit { job } = serde_json::from_str(json).unwrap() else {
            panic!("not a submit");
        };
        assert_eq!(job.class, JobClass::BestEffort);
        assert!(!job.exclusive);
    }

    #[test]
    fn unknown_ops_and_fields_are_errors() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"reboot"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"op":"cancel","id":1,"force":true}"#).is_err());
    }

    /// One request of every op. Adding an op fails to compile in `covered`
    /// until it is listed here too.
    fn every_request() -> Vec<Request> {
        fn covered(request: &Request) {
            match request {
                Request::Submit { .. }
                | Request::Attach { .. }
                | Request::Detach { .. }
                | Request::Jobs { .. }
                | Request::Job { .. }
                | Request::Cancel { .. }
                | Request::Matrix
                | Request::Nodes
                | Request::SetPolicy { .. }
                | Request::Status => {}
            }
        }
        let job: Submission =
            serde_json::from_str(r#"{"name":"a","nodes":1,"command":"x"}"#).unwrap();
        let every = vec![
            Request::Submit { job },
            Request::Attach {
                job: Attachment {
                    name: "mpi".into(),
                    nodes: vec!["n0".into(), "n1".into()],
                    command: vec!["mpirun".into()],
                    class: JobClass::BestEffort,
                    exclusive: false,
                },
            },
            Request::Detach { id: 1, code: 0 },
            Request::Jobs { all: true },
            Request::Job { id: 1 },
            Request::Cancel { id: 1 },
            Request::Matrix,
            Request::Nodes,
            Request::SetPolicy {
                policy: GlobalPolicy::Fcs,
            },
            Request::Status,
        ];
        every.iter().for_each(covered);
        every
    }

    #[test]
    fn every_op_round_trips_and_refuses_unknown_fields() {
        cosched_proto::strict::assert_round_trip_refusing_unknown_fields(every_request());
        let nested = r#"{"op":"submit","job":{"name":"a","nodes":1,"command":"x","class":{"real_time":{"period_ns":1,"frames":1,"work_ns":1,"x":1}}}}"#;
        assert!(serde_json::from_str::<Request>(nested).is_err());
    }
}
