//! What the agent observes, as typed events for the local policies.
//!
//! The agent turns its eBPF ring-buffer records (sched_switch, socket receive
//! and data-ready hooks) into these events. Events may be lost or arrive late,
//! so every policy also accepts a periodic [`NodeSnapshot`] on ticks and treats
//! it as the truth.

use super::ids::{JobId, TaskId, TaskInfo};

/// How a task left the CPU (from `prev_state` of `sched_switch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchOut {
    /// Still runnable: preempted by another task or by a tick.
    Preempted,
    /// Blocked, slept or was stopped: it will not run until woken.
    Voluntary,
}

/// One observation about the node, at CLOCK_MONOTONIC nanoseconds `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// The agent starts managing `task`.
    TaskAdded {
        task: TaskId,
        info: TaskInfo,
        at: u64,
    },
    /// `task` exited; the policy forgets it and never names it again.
    TaskExited { task: TaskId, at: u64 },
    /// A message for `task` reached its socket. `on_cpu`: the task was running
    /// at that instant; `spinning`: it was in a spin (empty-receive) episode.
    MessageArrived {
        task: TaskId,
        at: u64,
        on_cpu: bool,
        spinning: bool,
    },
    /// `task` started running on `cpu`.
    SwitchedIn { task: TaskId, cpu: u32, at: u64 },
    /// `task` stopped running.
    SwitchedOut {
        task: TaskId,
        at: u64,
        how: SwitchOut,
    },
    /// `task` began a spin episode: its first empty non-blocking receive since
    /// it last received data.
    SpinStarted { task: TaskId, at: u64 },
    /// `task` received data: its spin episode (if any) ended.
    DataReceived { task: TaskId, at: u64 },
    /// `task` sent data since it was last observed (its spin episode, if
    /// any, ended there). Derived from the send counter, so `at` is when the
    /// agent saw it, not the send itself.
    DataSent { task: TaskId, at: u64 },
    /// A timer tick the policy asked for with `next_wakeup`, optionally with a
    /// fresh snapshot of the node read from the eBPF maps.
    Tick {
        at: u64,
        snapshot: Option<&'a NodeSnapshot>,
    },
    /// A gang time slot started (coordinator broadcast): `owner` is the job
    /// this node's row gives the slot to (`None`: no job owns it here); the
    /// slot ends at `until` unless another slot starts first. Used by FCS.
    SlotStarted {
        at: u64,
        owner: Option<JobId>,
        until: u64,
    },
}

impl Event<'_> {
    /// When the event happened.
    pub fn at(&self) -> u64 {
        match *self {
            Event::TaskAdded { at, .. }
            | Event::TaskExited { at, .. }
            | Event::MessageArrived { at, .. }
            | Event::SwitchedIn { at, .. }
            | Event::SwitchedOut { at, .. }
            | Event::SpinStarted { at, .. }
            | Event::DataReceived { at, .. }
            | Event::DataSent { at, .. }
            | Event::Tick { at, .. }
            | Event::SlotStarted { at, .. } => at,
        }
    }

    /// The task the event is about, if it is about one.
    pub fn task(&self) -> Option<TaskId> {
        match *self {
            Event::TaskAdded { task, .. }
            | Event::TaskExited { task, .. }
            | Event::MessageArrived { task, .. }
            | Event::SwitchedIn { task, .. }
            | Event::SwitchedOut { task, .. }
            | Event::SpinStarted { task, .. }
            | Event::DataReceived { task, .. }
            | Event::DataSent { task, .. } => Some(task),
            Event::Tick { .. } | Event::SlotStarted { .. } => None,
        }
    }
}

/// The state of one managed task as read from the eBPF maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSnapshot {
    pub task: TaskId,
    /// Running on a CPU now.
    pub on_cpu: bool,
    /// Start of the current spin episode, if the task is spinning.
    pub spinning_since: Option<u64>,
    /// A message arrived after the task's last successful receive.
    pub pending_message: bool,
    /// Off CPU but still runnable: its last switch-out was a preemption (not
    /// a block). A task woken from a blocking receive is not "preempted": the
    /// kernel's own wakeup decides when it runs.
    pub preempted: bool,
    /// Kernel time of the last message arrival (0: none yet).
    pub last_arrival_ns: u64,
    /// Kernel time the task last stopped waiting by itself: it received
    /// data, sent, blocked or exited (0: never). A spin episode that only
    /// passed the spin gap (`spinning_since` gone without such an end) may
    /// be a stalled vCPU, not a task that stopped waiting.
    pub last_wait_end_ns: u64,
    /// Total time on CPU (informational).
    pub oncpu_ns: u64,
    /// Message arrivals counted so far (informational).
    pub arrivals: u64,
}

/// Which task a CPU of the node runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSnapshot {
    pub cpu: u32,
    /// The managed task on the CPU; `None` when idle or running an unmanaged task.
    pub running: Option<TaskId>,
}

/// The whole node at one instant: per-task state and per-CPU occupancy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSnapshot {
    pub tasks: Vec<TaskSnapshot>,
    pub cpus: Vec<CpuSnapshot>,
}
