//! The coordinator's decisions, free of I/O: jobs, the matrix, nodes and
//! their clocks, the rotation, utilisation and switch skew.
//!
//! The daemon feeds in what happened (an admin request, an agent's message,
//! a slice boundary) with the current time, then drains the [`Effect`]s:
//! messages to send to nodes, and "persist the state now".
//!
//! Conventions shared with the agent (see `cosched_agent::coord`):
//! - after `Register` the agent sends the coordinator jobs it runs as a
//!   [`UtilReport`] whose entries carry the quantum [`INVENTORY_QUANTUM`]
//!   (an empty report is an empty inventory); nothing is launched on a node
//!   before its inventory reconciled the state;
//! - `SetPolicy.policy` is the global policy's name (`fcfs`, `gang`,
//!   `paired-gang`, `fcs`, `one-level-gang`, `2dcs-tdm`, `2dcs-ps`), from
//!   which the agent derives how it enforces slices; under the last three it
//!   is followed by `ClassSettings` (protocol 1.3);
//! - a `SwitchSlice` without rows ends gang mode (nothing is placed);
//! - under `2dcs-tdm` a `SwitchDivision` announces every division;
//! - messages newer than protocol 1.0 (program checks, reap orders) go only
//!   to agents that announced a minor that knows them; the BE/RT policies
//!   refuse agents older than 1.3.

mod attached;
mod checks;
pub mod classes;
mod jobs;
mod leftovers;
mod lifecycle;
mod membership;
mod nodes;
mod rebuild;
mod rotation;
mod skew;
pub(crate) mod slicing;
mod utilization;
mod views;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

use cosched_policy::classes::OneLevelGang;
use cosched_policy::global::{
    Matrix, MatrixConfig, NodeIndex, PairingConfig, ScheduleClockBounds, UtilizationPredictor,
};
use cosched_proto::wire::{DivisionClass, Message};
use serde::{Deserialize, Serialize};

use checks::PendingCheck;
pub use checks::Submitted;
pub use classes::Admission;
use classes::{ClassState, FrameBook};
pub use jobs::{JobRecord, Rank, RankState, validate_submission};
pub use nodes::{Link, NodeRecord, NodeState};
pub use rebuild::rebuild_matrix;
pub use rotation::{NextSlice, Rotation};
pub use skew::{SkewTracker, SwitchObservation};
pub use slicing::Planned;
pub use utilization::{QuantumSamples, UtilAggregator};

use crate::{
    admin::protocol::JobView,
    config::{ClassesConfig, Config},
    policy::GlobalPolicy,
};

/// The quantum number marking a `UtilReport` as the agent's inventory of
/// running coordinator jobs (sent once after every `Register`).
pub const INVENTORY_QUANTUM: u64 = u64::MAX;

/// Version of the state file layout.
pub const STATE_VERSION: u32 = 1;

/// Something the daemon must do after a call into the core.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send `message` to `node`'s agent (dropped if it is not connected).
    Send { node: NodeIndex, message: Message },
    /// The persisted state changed: write it.
    Persist,
    /// The submission that [`Core::submit`] answered with
    /// [`Submitted::Checking`]`(check)` is decided: answer its submitter.
    Submitted {
        check: u64,
        /// Boxed: a job's view is large next to the other effects.
        result: Result<Box<JobView>, String>,
    },
    /// Something to count (metrics); nothing to do.
    Observed(Observed),
}

/// What the BE/RT policies count.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// An RT job got its rows or nodes.
    RtAdmitted,
    /// An RT job was refused at submission, labelled by why
    /// (`window_capacity`, `utilization`, `rows`, `allocation`,
    /// `invalid_spec`, `policy`, ...).
    RtRejected { reason: &'static str },
    /// A waiting RT job was evicted after waiting w.
    RtEvicted,
    /// A 2DCS-TDM division was broadcast.
    DivisionSwitch { class: DivisionClass },
    /// A division switch's lateness on one node, or its skew.
    DivisionSkew(SwitchObservation),
}

/// The part of the configuration the core needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    pub nodes: Vec<String>,
    pub policy: GlobalPolicy,
    pub max_rows: usize,
    pub allocation: cosched_policy::global::ColumnAllocation,
    pub queue: cosched_policy::global::QueuePolicy,
    pub pairing: PairingConfig,
    pub job_port_base: u16,
    pub job_port_count: u16,
    pub finished_retention: usize,
    /// How long a submission waits for an agent's answer to its program
    /// check.
    pub check_timeout_ns: u64,
    /// One slice (a 1GS slot).
    pub slice_ns: u64,
    /// The BE/RT policies' settings.
    pub classes: ClassesConfig,
    /// Gang slices announced ahead to agents of protocol 1.5 (see
    /// `slicing`).
    pub schedule_ahead: bool,
    /// Paired gang's slices announced ahead too (with `schedule_ahead`).
    pub paired_schedule_ahead: bool,
    /// 1GS's slots announced ahead too (with `schedule_ahead`).
    pub one_gs_schedule_ahead: bool,
    /// When a node's clock estimate is good enough for a schedule, and when
    /// its schedule is re-announced.
    pub schedule_clock: ScheduleClockBounds,
}

impl From<&Config> for CoreConfig {
    fn from(config: &Config) -> Self {
        Self {
            nodes: config.nodes.clone(),
            policy: config.policy,
            max_rows: config.max_rows,
            allocation: config.allocation,
            queue: config.queue,
            pairing: config.paired,
            job_port_base: config.job_port_base,
            job_port_count: config.job_port_count,
            finished_retention: config.finished_retention,
            // An agent that is alive answers at once; one silent for this
            // long would be dropped by the heartbeat anyway.
            check_timeout_ns: config.heartbeat_timeout().as_nanos() as u64,
            slice_ns: config.slice().as_nanos() as u64,
            classes: config.classes.clone(),
            schedule_ahead: config.schedule_ahead,
            paired_schedule_ahead: config.paired_schedule_ahead,
            one_gs_schedule_ahead: config.one_gs_schedule_ahead,
            schedule_clock: ScheduleClockBounds {
                max_uncertainty_ns: config.schedule_max_uncertainty_us.saturating_mul(1000),
                ..ScheduleClockBounds::default()
            },
        }
    }
}

impl CoreConfig {
    /// The matrix shape for `policy`: one row for space sharing.
    pub fn matrix_config(&self, policy: GlobalPolicy) -> MatrixConfig {
        MatrixConfig {
            nodes: self.nodes.len(),
            max_rows: if policy.is_space_sharing() {
                1
            } else {
                self.max_rows
            },
            allocation: self.allocation,
            queue: self.queue,
            repack_rows: true,
        }
    }
}

/// Everything that survives a coordinator restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistedState {
    pub version: u32,
    pub policy: GlobalPolicy,
    pub epoch: u64,
    pub next_job_id: u32,
    pub matrix: Matrix,
    pub nodes: Vec<NodeRecord>,
    pub jobs: Vec<JobRecord>,
    pub finished: Vec<JobRecord>,
    pub predictor: UtilizationPredictor,
    /// Under `one-level-gang`: its matrix and queues (checked on load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_gs: Option<OneLevelGang>,
}

/// The slice that runs now, for views.
#[derive(Debug, Clone, PartialEq)]
struct CurrentSlice {
    rows: Vec<usize>,
    alternates: Vec<u32>,
}

#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    policy: GlobalPolicy,
    epoch: u64,
    next_job_id: u32,
    matrix: Matrix,
    nodes: Vec<NodeState>,
    jobs: BTreeMap<u32, JobRecord>,
    finished: VecDeque<JobRecord>,
    predictor: UtilizationPredictor,
    rotation: Rotation,
    /// Slices broadcast in this epoch; the next slice's number.
    slice_counter: u64,
    /// `None` while idle (no job holds cells).
    current: Option<CurrentSlice>,
    /// An idle switch (leave gang mode) has been broadcast since the last
    /// real slice.
    idle_sent: bool,
    util: UtilAggregator,
    skew: SkewTracker,
    /// Submissions waiting for their program checks, by check id.
    checks: BTreeMap<u64, PendingCheck>,
    next_check: u64,
    /// Where the BE/RT policies keep their jobs.
    classes: ClassState,
    division_skew: SkewTracker,
    /// RT jobs' frame counts, as agents reported them.
    frames: FrameBook,
    /// The latest instant the core was told (1GS departures evict with it:
    /// never early, at worst late until the next tick).
    now_ns: u64,
    out: Vec<Effect>,
}

impl Core {
    /// A fresh coordinator: empty matrix, no jobs.
    pub fn new(config: CoreConfig) -> Result<Self, String> {
        let matrix =
            Matrix::new(config.matrix_config(config.policy)).map_err(|error| error.to_string())?;
        let nodes = config
            .nodes
            .iter()
            .map(|name| {
                NodeState::new(NodeRecord {
                    name: name.clone(),
                    address: None,
                    cpus: Vec::new(),
                    unreaped: Default::default(),
                })
            })
            .collect();
        let classes = ClassState::new(
            config.policy,
            &config.classes,
            config.nodes.len(),
            config.slice_ns,
            config.queue,
        )?;
        Ok(Self {
            policy: config.policy,
            rotation: Rotation::new(config.policy, config.pairing),
            classes,
            division_skew: SkewTracker::default(),
            frames: FrameBook::default(),
            now_ns: 0,
            epoch: 1,
            next_job_id: 1,
            matrix,
            nodes,
            jobs: BTreeMap::new(),
            finished: VecDeque::new(),
            predictor: UtilizationPredictor::default(),
            slice_counter: 0,
            current: None,
            idle_sent: false,
            util: UtilAggregator::default(),
            skew: SkewTracker::default(),
            checks: BTreeMap::new(),
            next_check: 1,
            out: Vec::new(),
            config,
        })
    }

    /// The coordinator after a restart: the persisted matrix and jobs under
    /// the (possibly changed) configuration, in a new epoch. Nodes are down
    /// until their agents register again and confirm their jobs. A state of
    /// another policy, or other `[classes]` settings, is taken over as a
    /// policy switch would (refused, naming the jobs, when one could not
    /// keep its nodes).
    pub fn restore(config: CoreConfig, state: PersistedState, now_ns: u64) -> Result<Self, String> {
        if state.version != STATE_VERSION {
            return Err(format!(
                "state file version {} is not {STATE_VERSION}",
                state.version
            ));
        }
        let names: Vec<&String> = state.nodes.iter().map(|node| &node.name).collect();
        if names != config.nodes.iter().collect::<Vec<_>>() {
            return Err(format!(
                "the state file's nodes {names:?} differ from the configured nodes {:?}; \
                 move the state file away to start afresh",
                config.nodes
            ));
        }
        let wanted = (config.policy, config.classes.clone());
        let both_matrix = state.policy.uses_matrix() && config.policy.uses_matrix();
        let mut as_saved = config;
        if !both_matrix {
            // Restore under the saved policy first, then switch.
            as_saved.policy = state.policy;
            if let Some(gang) = &state.one_gs {
                as_saved.classes.one_gs_rows = gang.rows();
                as_saved.classes.ratio = gang.config().ratio;
            }
        }
        let mut core = Self::new(as_saved)?;
        core.now_ns = now_ns;
        core.epoch = state.epoch + 1;
        core.next_job_id = state.next_job_id;
        core.nodes = state.nodes.into_iter().map(NodeState::new).collect();
        core.jobs = state.jobs.into_iter().map(|job| (job.id, job)).collect();
        core.finished = state.finished.into();
        core.predictor = state.predictor;
        // This coordinator numbers its slices from 0 again.
        core.predictor.forget_quantum_numbers();
        let started = if core.policy.uses_matrix() {
            let (matrix, started) =
                rebuild_matrix(&state.matrix, core.config.matrix_config(core.policy))?;
            core.matrix = matrix;
            started
        } else {
            core.restore_classes(state.one_gs)?;
            Vec::new()
        };
        for placed in started {
            core.start_job(&placed);
        }
        core.check_consistency()?;
        let (policy, classes) = wanted;
        let one_gs_changed = policy == GlobalPolicy::OneLevelGang
            && core.classes.one_gs().map(OneLevelGang::config)
                != Some(&classes.one_gs_config(
                    core.nodes.len(),
                    core.config.slice_ns,
                    core.config.queue,
                ));
        if policy != core.policy || one_gs_changed {
            core.change_regime(policy, classes, now_ns).map_err(|why| {
                format!("the state file's jobs cannot continue under the configured policy: {why}")
            })?;
        } else {
            core.config.classes = classes;
        }
        core.out.push(Effect::Persist);
        Ok(core)
    }

    /// The state to persist.
    pub fn snapshot(&self) -> PersistedState {
        PersistedState {
            version: STATE_VERSION,
            policy: self.policy,
            epoch: self.epoch,
            next_job_id: self.next_job_id,
            matrix: self.matrix.clone(),
            nodes: self.nodes.iter().map(|node| node.record.clone()).collect(),
            jobs: self.jobs.values().cloned().collect(),
            finished: self.finished.iter().cloned().collect(),
            predictor: self.predictor.clone(),
            one_gs: self.classes.one_gs().cloned(),
        }
    }

    /// What the daemon must do now.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.out)
    }

    pub fn policy(&self) -> GlobalPolicy {
        self.policy
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn matrix(&self) -> &Matrix {
        &self.matrix
    }

    pub fn node(&self, index: NodeIndex) -> &NodeState {
        &self.nodes[index]
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn job(&self, id: u32) -> Option<&JobRecord> {
        self.jobs.get(&id)
    }

    pub fn predictor(&self) -> &UtilizationPredictor {
        &self.predictor
    }

    fn node_name(&self, node: NodeIndex) -> String {
        self.nodes
            .get(node)
            .map_or_else(|| format!("node {node}"), |state| state.record.name.clone())
    }

    fn send(&mut self, node: NodeIndex, message: impl Into<Message>) {
        if self.nodes[node].is_up() {
            self.out.push(Effect::Send {
                node,
                message: message.into(),
            });
        }
    }

    fn persist(&mut self) {
        if self.out.last() != Some(&Effect::Persist) {
            self.out.push(Effect::Persist);
        }
    }

    fn observe(&mut self, observed: Observed) {
        self.out.push(Effect::Observed(observed));
    }

    /// The core learns the time from every call that carries it.
    fn advance(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
    }

    /// Every active job is in the matrix (or the BE/RT policy's state) as
    /// its state says, and back.
    fn check_consistency(&self) -> Result<(), String> {
        if !self.policy.uses_matrix() {
            return self.check_classes_consistency();
        }
        use crate::admin::protocol::JobStateView;
        for job in self.jobs.values() {
            let id = cosched_policy::global::JobId(u64::from(job.id));
            let in_matrix = match job.state {
                JobStateView::Queued => self.matrix.queue_position(id).is_some(),
                JobStateView::Running => self.matrix.placement(id).is_some_and(|placed| {
                    placed.columns.len() == job.ranks.len()
                        && placed
                            .columns
                            .iter()
                            .zip(&job.ranks)
                            .all(|(&column, rank)| column == rank.node)
                }),
                _ => false,
            };
            if !in_matrix {
                return Err(format!(
                    "state file: job {} ({}) does not match the matrix",
                    job.id,
                    job.state.as_str()
                ));
            }
        }
        let held = self.matrix.placed_jobs().count() + self.matrix.queued_jobs().count();
        if held != self.jobs.len() {
            return Err(format!(
                "state file: the matrix holds {held} jobs but {} are recorded",
                self.jobs.len()
            ));
        }
        Ok(())
    }
}
