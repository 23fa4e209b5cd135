//! The cluster model (ClusterSchedSim's ClusterSim on seed 003's executive):
//! nodes with CPUs and a local scheduler, tasks running their programs, the
//! network, the front end with the coordinator's matrix, and one `policy`
//! crate local policy per node, fed by the agent's own driver
//! (`cosched_policy::driver`) from the counters and reports the eBPF side
//! would give it.
//!
//! B events are the timed ones ([`SimEvent`]); the C activities, scanned in
//! this order until none fires, are:
//! 1. front end: remove a finished job from the matrix (starting queued
//!    jobs), or submit an arrived one;
//! 2. dispatch: a node whose state changed picks what its CPUs run.

mod bridge;
mod cpu;
mod dispatch;
mod frontend;
mod noise;
mod program;
pub mod task;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use cosched_agent_common::Settings;
use cosched_policy::driver::{PolicyDriver, wakeup};
use cosched_policy::global::{
    GangScheduler, Matrix, MatrixConfig, PairedGangScheduler, Slice, UtilizationPredictor,
};
use cosched_policy::local::{PolicyKind, WakeInterest, build_policy};

use crate::config::{ClusterParams, GlobalMode, SimConfig, TickPhase};
use crate::executive::{Calendar, Model, Ns};
use crate::rng::Rng;
use crate::workload::JobSpec;
pub use cpu::Cpu;
use task::{Task, TaskIdx};

/// A bound (timed) event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SimEvent {
    /// Job `0` (index) is submitted.
    Arrival(u32),
    /// A CPU's running task finishes its CPU burst or its time slice.
    CpuDue {
        node: u32,
        cpu: u32,
        token: u64,
    },
    /// A context switch is over: the incoming task runs.
    SwitchDone {
        node: u32,
        cpu: u32,
        token: u64,
    },
    IoDone(TaskIdx),
    /// A message of `iteration` reaches its receiver's endpoint.
    Delivered {
        task: TaskIdx,
        iteration: u32,
    },
    /// A blocked receiver becomes runnable.
    Wakeup(TaskIdx),
    /// The agent's tick (its periodic counter read, or a timer of the
    /// policy).
    Tick {
        node: u32,
        token: u64,
    },
    /// The agent applies a level the policy chose.
    ApplyLevel {
        task: TaskIdx,
        level: cosched_policy::local::Level,
        reason: cosched_policy::local::Reason,
    },
    /// A spinner on its CPU may pass the spin the policy wants reported
    /// (`Settings::spin_report_ns`).
    SpinCheck(TaskIdx),
    /// The coordinator switches gang slices.
    SliceSwitch {
        token: u64,
    },
    /// Other work interrupts a CPU (see [`ClusterParams::noise_per_s`]).
    Noise {
        node: u32,
        cpu: u32,
    },
    /// The interruption is over.
    NoiseEnd {
        node: u32,
        cpu: u32,
    },
    /// The agent's CPU burst of a look whose level changes end with it.
    AgentLook {
        node: u32,
    },
}

/// A job while it is in the system.
#[derive(Debug, Clone)]
pub struct JobRun {
    pub spec: JobSpec,
    pub tasks: Vec<TaskIdx>,
    /// Destinations of each rank.
    pub dests: Vec<Vec<u32>>,
    pub start: Option<Ns>,
    pub end: Option<Ns>,
    pub done_tasks: u32,
}

/// One node.
pub struct Node {
    pub cpus: Vec<Cpu>,
    /// Tasks resident here (not finished).
    pub tasks: Vec<TaskIdx>,
    /// The agent's policy driver (the agent's own code).
    pub driver: PolicyDriver,
    /// What the policy wants to hear at once, and the eBPF settings from it.
    pub interest: WakeInterest,
    pub settings: Settings,
    pub tick_at: Option<Ns>,
    pub tick_token: u64,
    pub last_tick: Option<Ns>,
    pub min_vruntime: u64,
    pub dirty: bool,
    /// A task became runnable since the last dispatch (wakeup preemption).
    pub woken: bool,
    /// The receive DMA engine is busy until then.
    pub nic_free_at: Ns,
    /// The node's scheduler ticks at `tick_phase + k × tick_ns`.
    pub tick_phase: Ns,
    /// When the agent applies (applied) its latest decision: later
    /// decisions take effect no earlier.
    pub agent_applied_at: Ns,
}

/// The global scheduler's rotation.
pub enum Rotation {
    None,
    Gang(GangScheduler),
    Paired(PairedGangScheduler, UtilizationPredictor),
}

/// Cluster-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub context_switches: u64,
    pub switch_ns: Ns,
    pub messages: u64,
    /// Times the agent woke: ring-buffer reports (arrivals, spin starts,
    /// long spins) plus ticks.
    pub policy_events: u64,
    /// Of which ring-buffer reports.
    pub ring_reports: u64,
    pub level_changes: u64,
    pub slices: u64,
    /// Of which slices running two rows (paired gang's pairs).
    pub paired_slices: u64,
    /// Interruptions by other work, and their CPU time.
    pub noise: u64,
    pub noise_ns: Ns,
    /// Interruptions that did not happen because a real-time task held
    /// the CPU.
    pub noise_held_off: u64,
    /// CPU time of the agents' work at slice switches.
    pub agent_switch_ns: Ns,
}

pub struct Cluster {
    pub config: SimConfig,
    pub jobs: Vec<JobRun>,
    pub tasks: Vec<Task>,
    pub nodes: Vec<Node>,
    pub matrix: Matrix,
    pub rotation: Rotation,
    pub slice: Option<Slice>,
    pub slice_started: Ns,
    pub slice_token: u64,
    pub slicing: bool,
    /// FCS: the slices are the policy's slots (no gang overlay).
    pub fcs_slots: bool,
    pub arrived: VecDeque<u32>,
    pub finished: VecDeque<u32>,
    pub dirty_nodes: BinaryHeap<Reverse<u32>>,
    pub jobs_done: usize,
    pub counters: Counters,
    rt_seq: u64,
    now: Ns,
    /// Draws the noise (in event order, so a run stays deterministic).
    rng: Rng,
}

/// A configuration the simulator cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("local policy: {0}")]
    Policy(#[from] cosched_policy::local::ConfigError),
    #[error("policy driver: {0}")]
    Driver(String),
    #[error("matrix: {0}")]
    Matrix(#[from] cosched_policy::global::MatrixError),
    #[error("job {id} needs {nodes} nodes, the cluster has {cluster}")]
    TooWide { id: u64, nodes: u32, cluster: u32 },
    #[error("the cluster needs at least one node and one CPU per node")]
    Empty,
}

impl Cluster {
    /// A cluster with the job stream scheduled on `calendar`.
    pub fn new(
        config: SimConfig,
        specs: Vec<JobSpec>,
        calendar: &mut Calendar<SimEvent>,
    ) -> Result<Self, SetupError> {
        let c = &config.cluster;
        if c.nodes == 0 || c.cpus_per_node == 0 {
            return Err(SetupError::Empty);
        }
        let mut rng = Rng::new(c.seed);
        build_policy(&config.sched.local)?;
        let interest = WakeInterest::of(&config.sched.local);
        let mut nodes = Vec::with_capacity(c.nodes as usize);
        for _ in 0..c.nodes {
            let tick_phase = match c.tick_phase {
                TickPhase::Random if c.tick_ns > 0 => rng.next_u64() % c.tick_ns,
                _ => 0,
            };
            let mut driver = PolicyDriver::new(&config.sched.local, c.agent_tick_ns.div_ceil(1000))
                .map_err(SetupError::Driver)?;
            driver.set_spin_gap(c.spin_gap_ns);
            nodes.push(Node {
                cpus: (0..c.cpus_per_node).map(|_| Cpu::default()).collect(),
                tasks: Vec::new(),
                driver,
                interest,
                settings: wakeup::settings(&interest, 0, c.spin_gap_ns),
                tick_at: None,
                tick_token: 0,
                last_tick: None,
                min_vruntime: 0,
                dirty: false,
                woken: false,
                nic_free_at: 0,
                tick_phase,
                agent_applied_at: 0,
            });
        }
        if c.noise_per_s > 0.0 {
            for node in 0..c.nodes {
                for cpu in 0..c.cpus_per_node {
                    let at = noise_gap(c, &mut rng);
                    cal_noise(calendar, at, node, cpu);
                }
            }
        }
        let s = &config.sched;
        let mut matrix_config = MatrixConfig::gang(c.nodes as usize);
        matrix_config.max_rows = match s.global {
            GlobalMode::Fcfs => 1,
            _ => s.mpl.max(1),
        };
        matrix_config.queue = s.queue;
        let matrix = Matrix::new(matrix_config)?;
        let rotation = match s.global {
            GlobalMode::Gang => Rotation::Gang(GangScheduler::new()),
            GlobalMode::PairedGang => Rotation::Paired(
                PairedGangScheduler::new(s.pairing),
                UtilizationPredictor::new(s.predictor),
            ),
            GlobalMode::Local | GlobalMode::Fcfs => Rotation::None,
        };
        let fcs_slots = s.global == GlobalMode::Gang && s.local.kind == PolicyKind::Fcs;
        let mut jobs = Vec::with_capacity(specs.len());
        for (index, spec) in specs.into_iter().enumerate() {
            if spec.nodes > c.nodes || spec.nodes == 0 {
                return Err(SetupError::TooWide {
                    id: spec.id,
                    nodes: spec.nodes,
                    cluster: c.nodes,
                });
            }
            calendar.at(spec.arrival, SimEvent::Arrival(index as u32));
            jobs.push(JobRun {
                spec,
                tasks: Vec::new(),
                dests: Vec::new(),
                start: None,
                end: None,
                done_tasks: 0,
            });
        }
        Ok(Self {
            config,
            jobs,
            tasks: Vec::new(),
            nodes,
            matrix,
            rotation,
            slice: None,
            slice_started: 0,
            slice_token: 0,
            slicing: false,
            fcs_slots,
            arrived: VecDeque::new(),
            finished: VecDeque::new(),
            dirty_nodes: BinaryHeap::new(),
            jobs_done: 0,
            counters: Counters::default(),
            rt_seq: 0,
            now: 0,
            rng,
        })
    }

    /// Every job has finished.
    pub fn all_done(&self) -> bool {
        self.jobs_done == self.jobs.len()
    }

    pub fn now(&self) -> Ns {
        self.now
    }

    fn mark_dirty(&mut self, node: u32) {
        let n = &mut self.nodes[node as usize];
        if !n.dirty {
            n.dirty = true;
            self.dirty_nodes.push(Reverse(node));
        }
    }
}

/// Time to the next interruption of a CPU (exponential: Poisson arrivals).
fn noise_gap(c: &ClusterParams, rng: &mut Rng) -> Ns {
    (rng.exponential(1e9 / c.noise_per_s).round() as Ns).max(1)
}

fn cal_noise(cal: &mut Calendar<SimEvent>, at: Ns, node: u32, cpu: u32) {
    cal.at(at, SimEvent::Noise { node, cpu });
}

impl Model for Cluster {
    type Event = SimEvent;

    fn bound(&mut self, event: SimEvent, cal: &mut Calendar<SimEvent>) {
        self.now = cal.now();

        match event {
            SimEvent::Arrival(job) => self.arrived.push_back(job),
            SimEvent::CpuDue { node, cpu, token } => self.cpu_due(node, cpu, token, cal),
            SimEvent::SwitchDone { node, cpu, token } => self.switch_done(node, cpu, token, cal),
            SimEvent::IoDone(task) => self.io_done(task, cal),
            SimEvent::Delivered { task, iteration } => self.delivered(task, iteration, cal),
            SimEvent::Wakeup(task) => self.wakeup(task, cal),
            SimEvent::Tick { node, token } => self.tick(node, token, cal),
            SimEvent::ApplyLevel {
                task,
                level,
                reason,
            } => self.apply_level(task, level, reason),
            SimEvent::SpinCheck(task) => self.spin_check(task, cal),
            SimEvent::Noise { node, cpu } => self.noise(node, cpu, cal),
            SimEvent::NoiseEnd { node, cpu } => self.noise_end(node, cpu),
            SimEvent::AgentLook { node } => self.agent_look_burst(node, cal),
            SimEvent::SliceSwitch { token } => {
                if token == self.slice_token {
                    self.slice_switch(cal);
                }
            }
        }
    }

    fn conditional(&mut self, cal: &mut Calendar<SimEvent>) -> bool {
        self.now = cal.now();
        if self.frontend(cal) {
            return true;
        }
        // Lowest node first: the order of the scan is part of the model.
        let Some(Reverse(node)) = self.dirty_nodes.pop() else {
            return false;
        };
        self.nodes[node as usize].dirty = false;
        self.dispatch(node, cal);
        true
    }
}
