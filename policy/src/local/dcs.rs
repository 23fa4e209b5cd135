//! DCS: demand-based (dynamic) coscheduling.
//!
//! The Scheduler Testbed report §2.2: "when a process receives an incoming message it immediately
//! receives a priority boost", because "if a process receives an incoming
//! message, its peer(s) must be currently running on other nodes"; the boost
//! takes effect "at the soonest time it would be fair to do so" (§4.4), and
//! waiting processes always spin, never block. ClusterSchedSim §4.2.2 (second
//! technique): a message for a task that is ready but not running boosts it to
//! the highest level and moves it to the head of the queue.
//!
//! Here: a message for a managed task that is not on a CPU boosts it to a
//! real-time band for at most `max_boost_us` — a scheduling quantum, as the
//! boost of the original DCS gave the receiver the CPU for its time slice —
//! charged to its job's fairness budget (a job over budget is not boosted).
//!
//! While its peers run too, a boosted task keeps the CPU across its short
//! waits: the next message comes within microseconds, so the job runs in
//! lockstep across nodes for the whole quantum. Boosts share one real-time
//! priority, so a task boosted while another boosted task computes on its CPU
//! queues behind it (SCHED_FIFO order) and takes the CPU the moment that
//! quantum ends: the CPU passes between jobs at once instead of at the next
//! scheduler tick. A boost ends when it runs out, when the task blocks, when
//! its job's budget runs out, or — the coscheduling hand-over — when a message
//! arrives for another job's task while the boosted task spins with nothing to
//! do (its own peers are no longer running, the other job's are): the other
//! task takes the CPU now. When a quantum ends the task yields (SCHED_IDLE, up
//! to `yield_after_quantum_us` or until its next message), so the other job's
//! task runs at once and its first message boosts the other job everywhere.
//! `end_on_wait = true` gives the per-message variant (the boost ends as soon
//! as the task has consumed its message and waits).

use super::action::{Action, Reason};
use super::combined::{BoostOutcome, DynamicCoscheduler, Rules};
use super::config::ConfigError;
use super::fairness::FairnessParams;
use super::hold::{BoostRule, BoostSource, Hold};
use super::ids::{TaskId, us_to_ns};
use super::policy::PolicyKind;
use serde::{Deserialize, Serialize};

/// DCS parameters (`[policy.dcs]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcsParams {
    /// Longest a demand boost lasts, µs. Default 5000: longer than one 4 ms
    /// scheduler tick (HZ=250), so the receiver surely gets to process its
    /// message, yet short enough to return to fair sharing quickly.
    pub max_boost_us: u64,
    /// SCHED_FIFO/RR priority of the boost, 1..=99. Default 10.
    pub boost_prio: u8,
    /// End a boost as soon as the task waits again (per-message boosts, the
    /// literal reading of the seed) instead of at the end of its quantum.
    /// Unset: the policy's own default ([`Self::ends_on_wait`]). `dcs`:
    /// per-message (true): measured here, its quantum boosts let one job
    /// hold a CPU for long stretches and were erratic from run to run.
    /// `dcs-sb`: quantum boosts (false): SB's spin threshold ends a boost
    /// whose peers stopped answering and the jobs take turns by CPU time
    /// (`take_turns`); measured better than or equal to per-message boosts
    /// on real MPI (docs/benchmarks.md, "Quantum boosts as DCS-SB's
    /// default").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_on_wait: Option<bool>,
    /// With `end_on_wait`: the boost ends only once the task has waited
    /// (spun idle, on CPU) this long in one episode, µs. 0 (default) ends it
    /// at the first empty wait. A task whose peers run with it gets their
    /// answers within a few message round trips, so a grace longer than that
    /// keeps a job that is co-running across nodes boosted through its
    /// exchanges (no reaction per message), and still hands the CPU over as
    /// soon as its peers stop answering: two-phase waiting applied to the
    /// boost's end.
    pub wait_grace_us: u64,
    /// With `end_on_wait`: the boost ends at the first empty wait after the
    /// task has sent since it was boosted (it answered), not at its first
    /// empty wait. Default false. OpenMPI 4.1 (TCP BTL) polls once more right
    /// after reading a message, before the application computes: traced,
    /// every per-message boost of a ping-pong rank ended there, 17 µs after
    /// the receive and before the answer (docs/benchmarks.md, "Why the
    /// local policies lose on OpenMPI").
    pub end_on_wait_after_send: bool,
    /// When a quantum ends, the task yields (SCHED_IDLE) for up to this long,
    /// or until a message for it arrives, so another job takes the CPU at
    /// once instead of at the next scheduler tick. 0 = no yield (default;
    /// only meaningful with quantum boosts).
    pub yield_after_quantum_us: u64,
    /// Boost a receiver that was preempted while computing, not only one
    /// preempted while it waited (spun) for a message. Default false: a task
    /// preempted mid-computation does not wait for this message, CFS runs it
    /// soon anyway, and boosting it only takes the CPU from the other job
    /// and wakes the agent (measured with blocking receives: slower than plain
    /// Linux and more agent CPU, see docs/policies/dcs.md).
    pub boost_computing: bool,
    /// With quantum boosts (`end_on_wait = false`): jobs take turns by the
    /// window's CPU time. An arrival for a rank whose job is behind another
    /// job by more than the equal-share slack ends a boost of that other
    /// job on its CPU even while it computes (`displaced`); an arrival for
    /// a rank whose job is that far ahead of the running task's job is not
    /// boosted (`no-boost-cpu-share`) unless the running task spins idle;
    /// and a quantum ended by the equal-share rule yields its CPU
    /// (SCHED_IDLE) for up to one quantum or until its next message.
    /// Default true. Without it one of two identical jobs held its quantum
    /// boosts in lockstep and took 61 % of the CPU against 37 %
    /// (docs/benchmarks.md, "Quantum boosts under DCS-SB"). Needs
    /// `fairness.equal_cpu_share`.
    pub take_turns: bool,
}

impl Default for DcsParams {
    fn default() -> Self {
        Self {
            max_boost_us: 5_000,
            boost_prio: 10,
            end_on_wait: None,
            wait_grace_us: 0,
            end_on_wait_after_send: false,
            yield_after_quantum_us: 0,
            boost_computing: false,
            take_turns: true,
        }
    }
}

impl DcsParams {
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::require_positive("dcs.max_boost_us", self.max_boost_us)?;
        ConfigError::require_rt_prio("dcs.boost_prio", self.boost_prio)
    }

    /// Whether `kind`'s boosts end at the task's first wait: `end_on_wait`
    /// if set, else per-message for `dcs` and quantum boosts for `dcs-sb`.
    pub fn ends_on_wait(&self, kind: PolicyKind) -> bool {
        self.end_on_wait.unwrap_or(kind != PolicyKind::DcsSb)
    }

    pub(crate) fn rule(&self, kind: PolicyKind) -> BoostRule {
        BoostRule {
            prio: self.boost_prio,
            max_ns: Some(us_to_ns(self.max_boost_us)),
            ends_on_wait: self.ends_on_wait(kind),
            wait_grace_ns: us_to_ns(self.wait_grace_us),
            wait_after_send: self.end_on_wait_after_send,
        }
    }
}

impl DynamicCoscheduler {
    /// The managed task running on the CPU `task` last ran on (or the only
    /// CPU with a managed task, when `task`'s CPU is unknown), and whether it
    /// is spinning with nothing to do.
    pub(crate) fn holder_of_cpu_for(&self, task: TaskId) -> Option<(TaskId, bool)> {
        let cpu = self.tasks.get(&task)?.obs.cpu;
        let holder = self
            .cpus
            .iter()
            .find(|&(c, t)| t != task && cpu.is_none_or(|cpu| cpu == c))
            .map(|(_, t)| t)?;
        let idle = self.tasks.get(&holder)?.obs.waiting_idle();
        Some((holder, idle))
    }

    /// Quantum boosts taking turns ([`DcsParams::take_turns`]): before an
    /// arrival boost of `task`, the job that is ahead in the window's CPU
    /// time gives way. A boosted holder of `task`'s CPU whose job is ahead of
    /// `task`'s by more than the slack loses its boost (`task`'s boost then
    /// takes the CPU at once instead of queueing behind the holder's
    /// quantum); if `task`'s job is that far ahead of a holder that is doing
    /// work, `task` is not boosted. Returns the refusal, if any.
    pub(crate) fn take_turn(&mut self, task: TaskId, out: &mut Vec<Action>) -> Option<Reason> {
        if !self.take_turns {
            return None;
        }
        let now = self.now;
        let job = self.tasks.get(&task)?.job;
        let (holder, idle) = self.holder_of_cpu_for(task)?;
        let holder_job = self.tasks.get(&holder)?.job;
        if holder_job == job {
            return None;
        }
        if !idle && self.budget.ahead_of(job, holder_job, now) {
            return Some(Reason::NoBoostCpuShare);
        }
        if self.is_boosted(holder) && self.budget.ahead_of(holder_job, job, now) {
            self.end_hold(holder, Reason::Displaced, out);
        }
        None
    }

    /// Quantum boosts taking turns, at a tick: every rank that is preempted
    /// off its CPU (runnable, not held) and whose job is behind the job of
    /// the CPU's holder by more than the slack is boosted (`turn-boost`).
    /// [`Self::take_turn`] acts only on an arrival: a job whose ranks get no
    /// messages gets no turn. Traced (docs/benchmarks.md, "Quantum boosts as
    /// DCS-SB's default? (session 16)"): one fine-spin job's rank was not
    /// picked by CFS for 214 ms although it was preempted at its normal
    /// attributes, while the other job ran unboosted; its peer on the other
    /// node was held by SB's block for the whole 100 ms bound, waiting for
    /// the message that rank would send; no arrival came, so nothing gave
    /// the job behind its turn.
    pub(crate) fn give_turns(&mut self, out: &mut Vec<Action>) {
        let Some(rule) = self.rules.demand.filter(|_| self.take_turns) else {
            return;
        };
        let now = self.now;
        let preempted =
            self.tasks_where(|m| matches!(m.hold, Hold::Free) && !m.obs.on_cpu && m.obs.preempted);
        for task in preempted {
            let Some(job) = self.tasks.get(&task).map(|m| m.job) else {
                continue;
            };
            let Some(holder_job) = self
                .holder_of_cpu_for(task)
                .and_then(|(holder, _)| self.tasks.get(&holder))
                .map(|m| m.job)
            else {
                continue;
            };
            if holder_job != job && self.budget.ahead_of(holder_job, job, now) {
                // A refusal (the job's budget) is not reported: no boost was asked for.
                let _ = self.try_boost(task, BoostSource::Arrival, rule, Reason::TurnBoost, out);
            }
        }
    }

    /// A quantum boost of `task` ended by the equal-share rule while jobs
    /// take turns: the task yields (SCHED_IDLE) for up to one quantum or
    /// until its next message. Its CFS credit is intact (real-time time is
    /// invisible to CFS), so handed back to its ordinary attributes it would
    /// win the CPU from the job that is behind as soon as both wait.
    /// Returns false when turns are off.
    pub(crate) fn yield_turn(&mut self, task: TaskId, out: &mut Vec<Action>) -> bool {
        let Some(quantum) = self.rules.demand.and_then(|r| r.max_ns) else {
            return false;
        };
        if !self.take_turns {
            return false;
        }
        self.yield_for(task, quantum, Reason::CpuShareExceeded, out)
    }

    /// A DCS quantum of `task` ended: its boost ends and it yields the CPU
    /// for a bounded time (one level change). Returns false when yields are
    /// off, leaving the boost to end normally.
    pub(crate) fn yield_after_quantum(&mut self, task: TaskId, out: &mut Vec<Action>) -> bool {
        let Some(yield_ns) = self.dcs_yield_ns.filter(|&ns| ns > 0) else {
            return false;
        };
        self.yield_for(task, yield_ns, Reason::QuantumYield, out)
    }

    /// Ends `task`'s boost (if any) and demotes it for `ns` (one level
    /// change, `reason`); [`Self::end_overdue_yields`] hands it back.
    /// Returns false for an unknown task.
    fn yield_for(&mut self, task: TaskId, ns: u64, reason: Reason, out: &mut Vec<Action>) -> bool {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return false;
        };
        if matches!(managed.hold, Hold::Boosted { .. }) {
            self.budget.stop(managed.job, now);
        }
        managed.hold = Hold::Blocked {
            since: now,
            level: super::action::Level::Demote,
        };
        self.yields.insert(task, now.saturating_add(ns));
        self.apply(task, reason, out);
        true
    }

    /// Yields past their bound go back to the task's original attributes.
    pub(crate) fn end_overdue_yields(&mut self, out: &mut Vec<Action>) {
        let now = self.now;
        let due: Vec<TaskId> = self
            .yields
            .iter()
            .filter(|&(_, &until)| until <= now)
            .map(|(&t, _)| t)
            .collect();
        for task in due {
            self.yields.remove(&task);
            if let Some(managed) = self.tasks.get_mut(&task)
                && matches!(managed.hold, Hold::Blocked { .. })
            {
                managed.hold = Hold::Free;
                self.apply(task, Reason::BlockTimeout, out);
            }
        }
    }

    /// `dcs`: boost on message arrival, waiting tasks spin.
    pub fn dcs(params: &DcsParams, fairness: &FairnessParams) -> Self {
        let rules = Rules {
            demand: Some(params.rule(PolicyKind::Dcs)),
            demand_for_computing: params.boost_computing,
            ..Rules::default()
        };
        let mut policy = Self::with_rules(PolicyKind::Dcs, rules, fairness);
        policy.dcs_yield_ns = Some(us_to_ns(params.yield_after_quantum_us));
        policy.take_turns = params.take_turns && !params.ends_on_wait(PolicyKind::Dcs);
        policy
    }

    /// A message reached `task` (`on_cpu`: it was running at that instant).
    /// A blocked task is woken (see [`spin_block`](super::spin_block)); a free
    /// task that is not running gets the demand boost when DCS is on.
    pub(crate) fn on_message(&mut self, task: TaskId, on_cpu: bool, out: &mut Vec<Action>) {
        let Some(hold) = self.tasks.get(&task).map(|m| m.hold) else {
            return;
        };
        match hold {
            Hold::Blocked { .. } => self.wake(task, on_cpu, Reason::WakeOnArrival, out),
            Hold::Free => {
                // Only a task that waits for the message while not running
                // (preempted while spinning; with `boost_computing` also one
                // preempted mid-computation) needs the boost (ClusterSchedSim
                // §4.2.2): a task blocked in a receive is woken by the kernel
                // itself, with its own wakeup preemption, and a boost would
                // only add a context switch to the agent and back.
                let computing_ok = self.rules.demand_for_computing;
                let ready = self
                    .tasks
                    .get(&task)
                    .is_some_and(|m| m.obs.spin.is_some() || (computing_ok && m.obs.preempted));
                if let Some(rule) = self.rules.demand
                    && !on_cpu
                    && ready
                {
                    // The holder of the CPU spins for peers that no longer
                    // run: this task's peer is running, so it takes over.
                    if let Some((holder, true)) = self.holder_of_cpu_for(task)
                        && self.is_boosted(holder)
                    {
                        self.end_hold(holder, Reason::Displaced, out);
                    }
                    if let BoostOutcome::Refused(why) =
                        self.try_boost(task, BoostSource::Arrival, rule, Reason::ArrivalBoost, out)
                    {
                        out.push(Action::Refused { task, reason: why });
                    }
                }
            }
            Hold::Boosted { .. } => {}
        }
    }
}
