//! PB: periodic boost.
//!
//! The BE/RT coscheduling paper §2.1: "a background kernel activity checking message queues in
//! round-robin order (starting with the current process), and picking one with
//! useful work to do (either (a) it is performing CPU computation, or (b) the
//! message that it is waiting for has arrived ...). If there is such a process,
//! then the current one is pre-empted". ClusterSchedSim §4.2.2 (third technique): a
//! daemon wakes every period and, if the running task is not doing anything
//! useful, picks a ready task that has useful work. The BE/RT coscheduling paper §5 uses a 1 ms
//! period ("close to the best performance").
//!
//! Here, every `period_us`, for each CPU whose running managed task spins with
//! no message pending, the policy boosts one runnable, not-running task,
//! scanning the tasks round-robin starting after the spinner: the first one
//! with a pending message, else the first one that is computing. The boost
//! lasts until the next decision (it is renewed only if the task is picked
//! again, still not running), ends early if the task waits or blocks, and is
//! charged to its job's fairness budget.

use super::action::{Action, Reason};
use super::combined::{DynamicCoscheduler, Rules};
use super::config::ConfigError;
use super::fairness::FairnessParams;
use super::hold::{BoostRule, BoostSource, Hold};
use super::ids::{TaskId, us_to_ns};
use super::policy::PolicyKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// PB parameters (`[policy.pb]`; also used by `pb-sb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeriodicBoostParams {
    /// Interval between decisions, µs. Default 1000 (the BE/RT coscheduling paper §5).
    pub period_us: u64,
    /// SCHED_FIFO/RR priority of the boost, 1..=99. Default 10.
    pub boost_prio: u8,
}

impl Default for PeriodicBoostParams {
    fn default() -> Self {
        Self {
            period_us: 1_000,
            boost_prio: 10,
        }
    }
}

impl PeriodicBoostParams {
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::require_positive("pb.period_us", self.period_us)?;
        ConfigError::require_rt_prio("pb.boost_prio", self.boost_prio)
    }

    pub(crate) fn rule(&self) -> PeriodicRule {
        PeriodicRule {
            period_ns: us_to_ns(self.period_us),
            prio: self.boost_prio,
        }
    }
}

/// PB's period and boost priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeriodicRule {
    pub period_ns: u64,
    pub prio: u8,
}

/// Why a task is worth the CPU more than a spinner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usefulness {
    /// Its message has arrived: it can proceed past its receive.
    PendingMessage,
    /// It is computing.
    Computing,
}

/// The round-robin pick: scanning `ring` from just after `current` (wrapping,
/// skipping `current`), the first task with a pending message, else the first
/// computing one; `usefulness` says what a task could do (`None`: nothing or
/// not eligible).
pub fn pick_round_robin(
    ring: &[TaskId],
    current: TaskId,
    usefulness: impl Fn(TaskId) -> Option<Usefulness>,
) -> Option<TaskId> {
    let start = ring.iter().position(|&t| t == current).map_or(0, |i| i + 1);
    let (before, after) = ring.split_at(start);
    let mut first_computing = None;
    for &task in after.iter().chain(before).filter(|&&t| t != current) {
        match usefulness(task) {
            Some(Usefulness::PendingMessage) => return Some(task),
            Some(Usefulness::Computing) => {
                first_computing.get_or_insert(task);
            }
            None => {}
        }
    }
    first_computing
}

impl DynamicCoscheduler {
    /// `pb`: periodic boost, waiting tasks spin.
    pub fn periodic_boost(params: &PeriodicBoostParams, fairness: &FairnessParams) -> Self {
        let rules = Rules {
            periodic: Some(params.rule()),
            ..Rules::default()
        };
        Self::with_rules(PolicyKind::Pb, rules, fairness)
    }

    /// Who could use a CPU now: free (or boosted by the last decision), not
    /// running, with work to do, and with budget left.
    pub(crate) fn pb_candidates(&mut self) -> BTreeMap<TaskId, Usefulness> {
        let now = self.now;
        let mut candidates = BTreeMap::new();
        for (&task, managed) in &self.tasks {
            let eligible_hold = match managed.hold {
                Hold::Free => self.budget.can_start(managed.job, now),
                Hold::Boosted {
                    source: BoostSource::Periodic,
                    ..
                } => true,
                _ => false,
            };
            if !eligible_hold || managed.obs.on_cpu {
                continue;
            }
            if managed.obs.pending_message {
                candidates.insert(task, Usefulness::PendingMessage);
            } else if managed.obs.computing() && self.budget.under_equal_share(managed.job, now) {
                // No slack past an equal share for a boost that only lets a
                // task compute (see `FairnessBudget::under_equal_share`).
                candidates.insert(task, Usefulness::Computing);
            }
        }
        candidates
    }

    /// The tasks running on a CPU while they spin with nothing to do.
    pub(crate) fn pb_spinners(&self) -> Vec<TaskId> {
        self.cpus
            .iter()
            .map(|(_, task)| task)
            .filter(|t| {
                self.tasks
                    .get(t)
                    .is_some_and(|m| m.obs.on_cpu && m.obs.waiting_idle())
            })
            .collect()
    }

    /// One PB decision at `self.now`.
    pub(crate) fn periodic_decision(&mut self, rule: PeriodicRule, out: &mut Vec<Action>) {
        let candidates = self.pb_candidates();
        let spinners = self.pb_spinners();
        let mut chosen: Vec<TaskId> = Vec::new();
        for spinner in spinners {
            let pick = pick_round_robin(&self.ring, spinner, |t| {
                if chosen.contains(&t) {
                    None
                } else {
                    candidates.get(&t).copied()
                }
            });
            chosen.extend(pick);
        }
        let previous = self.tasks_where(|m| {
            matches!(
                m.hold,
                Hold::Boosted {
                    source: BoostSource::Periodic,
                    ..
                }
            )
        });
        for task in previous.into_iter().filter(|t| !chosen.contains(t)) {
            self.end_hold(task, Reason::PeriodicBoostEnd, out);
        }
        let boost = BoostRule {
            prio: rule.prio,
            max_ns: None,
            // Lasts until the next periodic decision, or until the task has
            // done its work and waits again.
            ends_on_wait: true,
            wait_grace_ns: 0,
            wait_after_send: false,
        };
        for task in chosen {
            if !self.is_boosted(task) {
                self.try_boost(
                    task,
                    BoostSource::Periodic,
                    boost,
                    Reason::PeriodicBoost,
                    out,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_pending_message_over_computing_in_ring_order() {
        let ring = [TaskId(1), TaskId(2), TaskId(3), TaskId(4)];
        let useful = |t: TaskId| match t.0 {
            4 => Some(Usefulness::Computing),
            2 => Some(Usefulness::PendingMessage),
            _ => None,
        };
        assert_eq!(pick_round_robin(&ring, TaskId(3), useful), Some(TaskId(2)));
        let computing_only = |t: TaskId| (t.0 != 3).then_some(Usefulness::Computing);
        assert_eq!(
            pick_round_robin(&ring, TaskId(3), computing_only),
            Some(TaskId(4))
        );
        assert_eq!(
            pick_round_robin(&ring, TaskId(4), computing_only),
            Some(TaskId(1))
        );
        assert_eq!(pick_round_robin(&ring, TaskId(1), |_| None), None);
    }
}
