//! SB (spin-block, implicit coscheduling) and SY (spin-yield).
//!
//! The Scheduler Testbed report §2.2 (ICS): "processes waiting for a communication action to
//! complete use a spin-block mechanism ... first the process spins (actively
//! waits) some time for the communication to complete, and then blocks";
//! when the communication completes "it receives a priority boost, much in the
//! same way it would in DCS". ClusterSchedSim §4.2.2 (first technique): a task whose
//! message has not arrived within the threshold is removed from the run queue;
//! on arrival the interrupt handler wakes it and boosts it to the highest
//! level. The BE/RT coscheduling paper §2.1: SY instead yields the CPU by lowering its priority
//! after spinning for a while.
//!
//! Here the agent cannot make the application block, so the policy blocks it
//! from outside: a task that has spun (on CPU) longer than its spin threshold
//! without a message is set to `Demote` (SCHED_IDLE) or `Stop` (SIGSTOP), as
//! configured; SY always demotes. A message (or the data, or a snapshot showing
//! it) wakes it: back to `Normal`, or, for SB with `wake_boost`, boosted like a
//! DCS arrival within the fairness budget. A block never outlasts
//! `max_block_us` (a lost arrival event must not hang a task): then the task
//! is woken and gets a full spin threshold again. The threshold is fixed or
//! learned per task ([`spin_learning`](super::spin_learning)).

use super::action::{Action, Level, Reason};
use super::combined::{BoostOutcome, DynamicCoscheduler, Rules};
use super::config::ConfigError;
use super::fairness::FairnessParams;
use super::hold::{BoostRule, BoostSource, Hold, Managed};
use super::ids::{TaskId, us_to_ns};
use super::policy::PolicyKind;
use super::spin_learning::{SpinLearningParams, SpinTime};
use serde::{Deserialize, Serialize};

/// With MPL-aware blocking, the fewest other tasks competing for a
/// spinner's CPU for which SB blocks it at its spin threshold. With one,
/// the hand-over at the report of the long spin (the kernel's re-pick at
/// the agent's wake-up) gives that task the CPU already, and the spinner's
/// next turn comes after that task's; with two or more the hand-over gives
/// the CPU to one of them, and a block keeps the spinner out of their turns
/// until its message, which brings it back boosted past them.
pub(crate) const BLOCK_COMPETITORS: usize = 2;

/// How SB blocks a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockMethod {
    /// SCHED_IDLE: the task gives its CPU to anything else that wants it but
    /// can still run (and see its message) when the CPU is otherwise idle. No
    /// signals, nothing to undo if the agent dies. The default.
    #[default]
    Demote,
    /// SIGSTOP/SIGCONT: a true block, as in the seeds.
    Stop,
}

/// SB parameters (`[policy.sb]`; also used by `pb-sb` and `dcs-sb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpinBlockParams {
    /// On-CPU spin time after which a waiting task is blocked, µs. Default
    /// 500: about the cost of a block and wake-up with the BE/RT coscheduling paper's overheads
    /// (2 × 200 µs switch + 50 µs interrupt), the classic 2-competitive choice.
    /// With learning on, used until a task has enough observed waits.
    pub spin_threshold_us: u64,
    /// `demote` (default) or `stop`.
    pub block_by: BlockMethod,
    /// Boost a task woken by its message (the Scheduler Testbed report §2.2, the BE/RT coscheduling paper §2.1: "soon
    /// scheduled due to a priority boost"). Default true. Ignored by `dcs-sb`,
    /// which boosts with the DCS parameters.
    pub wake_boost: bool,
    /// SCHED_FIFO/RR priority of the wake-up boost, 1..=99. Default 10.
    pub wake_boost_prio: u8,
    /// Longest a wake-up boost lasts, µs. Default 5000.
    pub wake_boost_us: u64,
    /// The wake-up boost ends at the task's first empty wait after it has
    /// sent (answered its message), not at its first empty wait. Default
    /// false; see `dcs.end_on_wait_after_send`.
    pub wake_boost_after_send: bool,
    /// Longest a task stays blocked without its message, µs. Default 100000.
    pub max_block_us: u64,
    /// Adapt each task's spin threshold to how its blocks turned out
    /// (plain `sb` only): doubled, up to `max_spin_threshold_us`, after a
    /// block whose message came sooner than `spin_threshold_us` (the price
    /// of a block) after it; halved back, never below
    /// `spin_threshold_us`, after one whose wait went on at least as long
    /// as the threshold. Ignored with `learn_spin_time`. Default false:
    /// measured better than the fixed threshold at two jobs per CPU and
    /// worse at three (docs/benchmarks.md, "SB at MPL 2").
    pub adapt_threshold: bool,
    /// Upper bound of an adapted spin threshold, and the spin after which
    /// an MPL-aware SB blocks a task few others compete with (`mpl_aware`),
    /// µs. Default 4000 (one scheduler tick at HZ=250: the kernel preempts
    /// a spinner that long anyway).
    pub max_spin_threshold_us: u64,
    /// Block at `spin_threshold_us` only a spinner with at least two other
    /// tasks competing for its CPU (`sb` and `pb-sb`; `dcs-sb` only with
    /// `mpl_aware_in_dcs_sb`); one with fewer is
    /// blocked only once its spin reaches `max_spin_threshold_us`. With one
    /// other task the report of its long spin already hands its CPU over
    /// (the agent's wake-up there makes the kernel pick again, and there is
    /// one task to pick), and a block only adds its costs: the demotion,
    /// the boosted wake that preempts the other job, agent wake-ups
    /// (docs/benchmarks.md, "SB at MPL 2" and "(session 16)"). Default
    /// true: measured better than the fixed threshold at two jobs per CPU
    /// and the same at three, for `sb` and for `pb-sb` (docs/benchmarks.md,
    /// "PB-SB blocks MPL-aware").
    pub mpl_aware: bool,
    /// Apply `mpl_aware` to `dcs-sb` as well. Default false: next to DCS's
    /// boosts the rule measured 15–27 % worse than the fixed threshold on
    /// every real-MPI cell at two jobs per CPU, mixed at three
    /// (docs/benchmarks.md, "The SB family on real MPI after the hold fix").
    /// No effect without `mpl_aware`.
    pub mpl_aware_in_dcs_sb: bool,
    /// Learn the spin threshold per task from its message waits. Default false.
    pub learn_spin_time: bool,
    pub learning: SpinLearningParams,
}

impl Default for SpinBlockParams {
    fn default() -> Self {
        Self {
            spin_threshold_us: 500,
            block_by: BlockMethod::Demote,
            wake_boost: true,
            wake_boost_prio: 10,
            wake_boost_us: 5_000,
            wake_boost_after_send: false,
            max_block_us: 100_000,
            adapt_threshold: false,
            max_spin_threshold_us: 4_000,
            mpl_aware: true,
            mpl_aware_in_dcs_sb: false,
            learn_spin_time: false,
            learning: SpinLearningParams::default(),
        }
    }
}

impl SpinBlockParams {
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::require_positive("sb.spin_threshold_us", self.spin_threshold_us)?;
        // Not for `mpl_aware`: a threshold above the bound just makes the
        // bound moot (a spinner is blocked at its threshold either way).
        if self.adapt_threshold {
            ConfigError::require_ordered(
                "sb.spin_threshold_us",
                self.spin_threshold_us,
                "sb.max_spin_threshold_us",
                self.max_spin_threshold_us,
            )?;
        }
        ConfigError::require_rt_prio("sb.wake_boost_prio", self.wake_boost_prio)?;
        ConfigError::require_positive("sb.wake_boost_us", self.wake_boost_us)?;
        ConfigError::require_positive("sb.max_block_us", self.max_block_us)?;
        self.learning.validate("sb")
    }
}

/// How SY yields a task's CPU (`sy.yield_to`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum YieldLevel {
    /// SCHED_IDLE (weight 3). The default. Its hand-back to SCHED_OTHER
    /// keeps the task's priority value, so the kernel checks no preemption
    /// there: the task waits for the next pick on its CPU.
    #[default]
    Idle,
    /// SCHED_OTHER at nice 19 (weight 15, [`Level::Background`]). Still no
    /// boost above anyone, but the hand-back to nice 0 changes the task's
    /// priority value, which makes the kernel check at once whether it
    /// should preempt the running task (the fair class's `prio_changed`).
    Nice19,
}

impl YieldLevel {
    fn level(self) -> Level {
        match self {
            YieldLevel::Idle => Level::Demote,
            YieldLevel::Nice19 => Level::Background,
        }
    }
}

/// SY parameters (`[policy.sy]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpinYieldParams {
    /// On-CPU spin time after which a waiting task yields (is demoted), µs.
    /// Default 2000: the cost of a yield. SY hands the task back at its
    /// message without a boost, and restoring SCHED_IDLE to the task's
    /// normal attributes makes the kernel check no preemption: the task
    /// runs again only when the task that took its CPU is next preempted
    /// (its slice ends, at a scheduler tick: 4 ms at HZ=250). Measured on
    /// real MPI (2026-11-27, docs/benchmarks.md): yielded tasks got their
    /// message 0.2–0.3 ms after the yield (median) and the CPU 1.4–2.0 ms
    /// after it. Spinning as long as a yield costs is the competitive rule
    /// SB's 500 µs follows for a block and a boosted wake.
    pub spin_threshold_us: u64,
    /// Longest a task stays yielded without its message, µs. Default 100000.
    pub max_yield_us: u64,
    /// The level a yielded task waits at: `idle` (SCHED_IDLE, the default)
    /// or `nice19` (SCHED_OTHER at nice 19, so that its hand-back makes the
    /// kernel re-pick; docs/policies/sy.md).
    pub yield_to: YieldLevel,
    /// Learn the spin threshold per task from its message waits. Default false.
    pub learn_spin_time: bool,
    pub learning: SpinLearningParams,
}

impl Default for SpinYieldParams {
    fn default() -> Self {
        Self {
            spin_threshold_us: 2_000,
            max_yield_us: 100_000,
            yield_to: YieldLevel::Idle,
            learn_spin_time: false,
            learning: SpinLearningParams::default(),
        }
    }
}

impl SpinYieldParams {
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::require_positive("sy.spin_threshold_us", self.spin_threshold_us)?;
        ConfigError::require_positive("sy.max_yield_us", self.max_yield_us)?;
        self.learning.validate("sy")
    }
}

/// The resolved spin-wait technique the engine runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpinWaitRule {
    /// `Demote` or `Stop`.
    pub hold_level: Level,
    pub block_reason: Reason,
    pub threshold_ns: u64,
    pub learning: Option<SpinLearningParams>,
    /// Adapt the threshold to how blocks turn out, up to this, ns
    /// ([`SpinTime::adaptive`]; the threshold is the block's price).
    pub adapt_max_ns: Option<u64>,
    /// MPL-aware blocking (`sb.mpl_aware`; SB and PB-SB): a spinner with fewer
    /// than [`BLOCK_COMPETITORS`] other tasks competing for its CPU is not
    /// blocked before this much on-CPU spin, ns
    /// ([`DynamicCoscheduler::block_after_ns`]).
    pub few_competitors_ns: Option<u64>,
    pub max_hold_ns: u64,
    /// Boost given on wake-up (SB), if any.
    pub wake_boost: Option<BoostRule>,
    /// The threshold is priced for how the task is woken, so the kernel
    /// side's report of a spin passing it may trigger the hold at once
    /// ([`WakeInterest::long_spin_ns`](super::WakeInterest)). False for SB
    /// without its wake boost: its 500 µs is priced for a boosted wake,
    /// and a hold at exactly that point makes the task wait out a
    /// competitor's slice for every message; it finds spinners at the tick.
    pub reported: bool,
}

impl SpinWaitRule {
    pub fn block(params: &SpinBlockParams) -> Self {
        Self {
            hold_level: match params.block_by {
                BlockMethod::Demote => Level::Demote,
                BlockMethod::Stop => Level::Stop,
            },
            block_reason: Reason::SpinThresholdBlock,
            threshold_ns: us_to_ns(params.spin_threshold_us),
            learning: params.learn_spin_time.then(|| params.learning.clone()),
            adapt_max_ns: params
                .adapt_threshold
                .then(|| us_to_ns(params.max_spin_threshold_us)),
            // DCS-SB only with `mpl_aware_in_dcs_sb` (`DynamicCoscheduler::dcs_sb`).
            few_competitors_ns: params
                .mpl_aware
                .then(|| us_to_ns(params.max_spin_threshold_us)),
            max_hold_ns: us_to_ns(params.max_block_us),
            wake_boost: params.wake_boost.then(|| BoostRule {
                prio: params.wake_boost_prio,
                max_ns: Some(us_to_ns(params.wake_boost_us)),
                // A woken task keeps its boost only until it waits again.
                ends_on_wait: true,
                wait_grace_ns: 0,
                wait_after_send: params.wake_boost_after_send,
            }),
            reported: params.wake_boost,
        }
    }

    pub fn yield_cpu(params: &SpinYieldParams) -> Self {
        Self {
            hold_level: params.yield_to.level(),
            block_reason: Reason::SpinThresholdYield,
            threshold_ns: us_to_ns(params.spin_threshold_us),
            learning: params.learn_spin_time.then(|| params.learning.clone()),
            adapt_max_ns: None,
            few_competitors_ns: None,
            max_hold_ns: us_to_ns(params.max_yield_us),
            wake_boost: None,
            reported: true,
        }
    }

    /// A new task's spin time.
    pub fn spin_time(&self) -> SpinTime {
        match (&self.learning, self.adapt_max_ns) {
            (Some(learning), _) => SpinTime::learned(self.threshold_ns, learning),
            (None, Some(max_ns)) => {
                SpinTime::adaptive(self.threshold_ns, max_ns, self.threshold_ns)
            }
            (None, None) => SpinTime::fixed(self.threshold_ns),
        }
    }
}

impl DynamicCoscheduler {
    /// `sb`: spin-block receives; woken (and boosted) on message arrival.
    pub fn spin_block(params: &SpinBlockParams, fairness: &FairnessParams) -> Self {
        let rules = Rules {
            spin_wait: Some(SpinWaitRule::block(params)),
            ..Rules::default()
        };
        Self::with_rules(PolicyKind::Sb, rules, fairness)
    }

    /// `sy`: spin-yield receives; back to normal on message arrival.
    pub fn spin_yield(params: &SpinYieldParams, fairness: &FairnessParams) -> Self {
        let rules = Rules {
            spin_wait: Some(SpinWaitRule::yield_cpu(params)),
            ..Rules::default()
        };
        Self::with_rules(PolicyKind::Sy, rules, fairness)
    }

    /// Other managed tasks that compete for the CPU `task` last ran on:
    /// they last ran there too and are runnable (on it, preempted, or with
    /// a message to read), or are held blocked until their message (they
    /// take the CPU back when it comes). A task asleep in its own wait does
    /// not compete; one never seen on a CPU is not counted.
    pub(crate) fn cpu_competitors(&self, task: TaskId, cpu: Option<u32>) -> usize {
        let Some(cpu) = cpu else {
            return 0;
        };
        self.tasks
            .iter()
            .filter(|&(&other, m)| {
                other != task
                    && m.obs.cpu == Some(cpu)
                    && (m.obs.runnable() || matches!(m.hold, Hold::Blocked { .. }))
            })
            .count()
    }

    /// The on-CPU spin after which `task` is blocked, as things stand now:
    /// its spin time, or with MPL-aware blocking
    /// ([`SpinWaitRule::few_competitors_ns`]) and fewer than
    /// [`BLOCK_COMPETITORS`] other tasks competing for its CPU, not less
    /// than that bound.
    pub(crate) fn block_after_ns(&self, task: TaskId, managed: &Managed) -> u64 {
        let own = managed.spin_time.current_ns();
        match self
            .rules
            .spin_wait
            .as_ref()
            .and_then(|r| r.few_competitors_ns)
        {
            Some(bound) if self.cpu_competitors(task, managed.obs.cpu) < BLOCK_COMPETITORS => {
                own.max(bound)
            }
            _ => own,
        }
    }

    /// Blocks every free, on-CPU task that has spun past its spin time
    /// without a message ([`Self::block_after_ns`]).
    pub(crate) fn block_long_spinners(&mut self, rule: &SpinWaitRule, out: &mut Vec<Action>) {
        let now = self.now;
        // A boosted spinner too: a boost that outlives the task's first wait
        // (DCS quantum boosts, `end_on_wait = false`) keeps the job's ranks
        // running together while they answer each other; a wait past the
        // spin threshold means its peers are not answering (not running), so
        // the boost has nothing left to buy and the task blocks like any
        // spinner, handing the CPU to the other job at once.
        let due: Vec<TaskId> = self
            .tasks
            .iter()
            .filter(|&(&task, m)| {
                matches!(m.hold, Hold::Free | Hold::Boosted { .. })
                    && m.obs.on_cpu
                    && m.obs.waiting_idle()
                    && m.obs.spin_cpu_ns(now) >= self.block_after_ns(task, m)
            })
            .map(|(&task, _)| task)
            .collect();
        for task in due {
            if let Some(managed) = self.tasks.get_mut(&task) {
                if matches!(managed.hold, Hold::Boosted { .. }) {
                    self.budget.stop(managed.job, now);
                }
                managed.hold = Hold::Blocked {
                    since: now,
                    level: rule.hold_level,
                };
            }
            self.apply(task, rule.block_reason, out);
        }
    }

    /// Wakes tasks blocked for the longest allowed time; they get a full spin
    /// threshold before they can be blocked again.
    pub(crate) fn wake_overdue(&mut self, rule: &SpinWaitRule, out: &mut Vec<Action>) {
        let now = self.now;
        let due = self.tasks_where(|m| {
            matches!(m.hold, Hold::Blocked { since, .. } if since.saturating_add(rule.max_hold_ns) <= now)
        });
        for task in due {
            if let Some(managed) = self.tasks.get_mut(&task) {
                managed.hold = Hold::Free;
                managed.obs.reset_spin_clock(now);
            }
            self.apply(task, Reason::BlockTimeout, out);
        }
    }

    /// Wakes a blocked task whose message came. Unless it is on a CPU already,
    /// it is boosted (DCS boost in `dcs-sb`, wake boost in SB) when its job's
    /// budget allows; otherwise it goes back to its original attributes,
    /// and when the policy has a wake boost the hand-back's reason says why
    /// it got none ([`Reason::is_refusal`]).
    pub(crate) fn wake(
        &mut self,
        task: TaskId,
        on_cpu: bool,
        reason: Reason,
        out: &mut Vec<Action>,
    ) {
        let Some(managed) = self.tasks.get_mut(&task) else {
            return;
        };
        let Hold::Blocked { since, .. } = managed.hold else {
            return;
        };
        // How long the wait went on after the block: what an adaptive spin
        // threshold learns from.
        managed
            .spin_time
            .observe_block(self.now.saturating_sub(since));
        managed.hold = Hold::Free;
        self.yields.remove(&task);
        let boost = if let Some(rule) = self.rules.demand {
            Some((rule, BoostSource::Arrival, Reason::ArrivalBoost))
        } else {
            self.rules
                .spin_wait
                .as_ref()
                .and_then(|r| r.wake_boost)
                .map(|rule| (rule, BoostSource::Wake, Reason::WakeOnArrival))
        };
        let handed_back = match boost {
            None => reason,
            Some(_) if on_cpu => Reason::NoBoostOnCpu,
            Some((rule, source, why)) => match self.try_boost(task, source, rule, why, out) {
                BoostOutcome::Boosted | BoostOutcome::AlreadyBoosted => return,
                BoostOutcome::NotManaged => reason,
                BoostOutcome::Refused(refusal) => refusal,
            },
        };
        self.apply(task, handed_back, out);
    }
}
