//! Which class runs on a node in 2DCS-TDM (the BE/RT coscheduling paper §4.2,
//! "Execution" and "Optimization", Figure 3).
//!
//! In its own division a class runs; it lends the node to the other class
//! only when it has nothing useful to run:
//! - RT division: the RT tasks with frames due run by EDF (spin-block is the
//!   agent's waiting method). If none is ready — all blocked, none placed, or
//!   every ready one has done its b frames (§4.2: "it may not help
//!   scheduling them any further in its current period") — BE runs.
//! - BE division: BE runs (its own local policy, PB-SB, picks the task). If
//!   no BE task is ready, RT runs.
//!
//! The decision is recomputed on every change, so a task of the division's
//! own class that becomes ready takes the node back from a lent class at
//! once (§4.2: "a BE job that is being scheduled in the RT time division is
//! preempted if an RT job becomes ready, and vice-versa").
//!
//! When neither class has anything better, a satisfied RT task may still run
//! ahead rather than leave the CPU idle; a throttled one never runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::edf::{EdfOrder, RtTask};
use super::super::ratio::Class;
use crate::local::TaskId;

/// What the agent realises on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassDecision {
    /// RT runs: `order[0]` first, then the next when it blocks (EDF).
    /// `lent` when this is the BE division.
    RealTime { order: Vec<TaskId>, lent: bool },
    /// BE runs under its own local policy. `lent` when this is the RT
    /// division.
    BestEffort { lent: bool },
    /// Nothing to run.
    Idle,
}

impl ClassDecision {
    /// The class that runs, if any.
    pub fn class(&self) -> Option<Class> {
        match self {
            Self::RealTime { .. } => Some(Class::RealTime),
            Self::BestEffort { .. } => Some(Class::BestEffort),
            Self::Idle => None,
        }
    }

    /// The RT task that runs first, if RT runs.
    pub fn rt_first(&self) -> Option<TaskId> {
        match self {
            Self::RealTime { order, .. } => order.first().copied(),
            _ => None,
        }
    }

    pub fn is_lent(&self) -> bool {
        matches!(
            self,
            Self::RealTime { lent: true, .. } | Self::BestEffort { lent: true }
        )
    }
}

/// The class to run in `division`, given the node's RT tasks and whether any
/// BE task is ready.
pub fn decide(division: Class, rt: &[RtTask], be_ready: bool) -> ClassDecision {
    let order = EdfOrder::of(rt);
    match division {
        Class::RealTime => {
            if !order.due.is_empty() {
                ClassDecision::RealTime {
                    order: order.all(),
                    lent: false,
                }
            } else if be_ready {
                ClassDecision::BestEffort { lent: true }
            } else if !order.ahead.is_empty() {
                ClassDecision::RealTime {
                    order: order.ahead,
                    lent: false,
                }
            } else {
                ClassDecision::Idle
            }
        }
        Class::BestEffort => {
            if be_ready {
                ClassDecision::BestEffort { lent: false }
            } else if !order.is_empty() {
                ClassDecision::RealTime {
                    order: order.all(),
                    lent: true,
                }
            } else {
                ClassDecision::Idle
            }
        }
    }
}

/// Whether RT task `task` must run inside a BE division that ends at
/// `be_division_end_ns`: it has frames due and its next frame's deadline
/// comes before the RT division that follows, so waiting for that division
/// would miss the frame for certain.
///
/// Frames of a periodic RT program are released every d; a window of
/// Γ = b·d judged at its end counts the frames done by then. A BE division
/// that covers a window's end would hold the frames released in it past
/// that end (measured: the misses of admitted RT jobs under 2DCS-TDM at
/// light load, `docs/bench-rt.md`). Running only frames whose deadline
/// falls inside the BE division keeps the division for BE otherwise: a task
/// ahead of its frames (deadline after the division) or satisfied or
/// throttled waits; the time it takes is bounded by its budget.
pub fn due_before_be_division_ends(task: &RtTask, be_division_end_ns: u64) -> bool {
    task.is_due() && task.state.deadline_ns() <= be_division_end_ns
}

/// A change on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TdmEvent {
    /// The coordinator's division switch reached this node.
    DivisionStarted(Class),
    /// An RT task was placed, or its readiness or frame state changed.
    RtUpdated(RtTask),
    /// An RT task left the node.
    RtRemoved(TaskId),
    /// Whether any BE task on the node is ready.
    BeReady(bool),
}

/// The node's view for 2DCS-TDM: it remembers the inputs and reports the
/// decision whenever it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TdmNode {
    division: Class,
    rt: BTreeMap<TaskId, RtTask>,
    be_ready: bool,
    decision: ClassDecision,
}

impl TdmNode {
    /// A node in `division` with nothing placed.
    pub fn new(division: Class) -> Self {
        Self {
            division,
            rt: BTreeMap::new(),
            be_ready: false,
            decision: ClassDecision::Idle,
        }
    }

    pub fn division(&self) -> Class {
        self.division
    }

    pub fn decision(&self) -> &ClassDecision {
        &self.decision
    }

    pub fn rt_task(&self, task: TaskId) -> Option<&RtTask> {
        self.rt.get(&task)
    }

    /// Applies `event`; returns the new decision if it changed.
    pub fn on_event(&mut self, event: TdmEvent) -> Option<ClassDecision> {
        match event {
            TdmEvent::DivisionStarted(class) => self.division = class,
            TdmEvent::RtUpdated(task) => {
                self.rt.insert(task.id, task);
            }
            TdmEvent::RtRemoved(task) => {
                self.rt.remove(&task);
            }
            TdmEvent::BeReady(ready) => self.be_ready = ready,
        }
        let tasks: Vec<RtTask> = self.rt.values().copied().collect();
        let decision = decide(self.division, &tasks, self.be_ready);
        if decision == self.decision {
            return None;
        }
        self.decision = decision.clone();
        Some(decision)
    }
}
