//! The dynamic-coscheduling engine behind `dcs`, `sb`, `sy`, `pb`, `pb-sb` and
//! `dcs-sb`.
//!
//! The BE/RT coscheduling paper §2.1 describes these policies as choices on two independent axes:
//! how a task *waits* for a message (spin; spin-block, SB; spin-yield, SY) and
//! what happens when a message *arrives* (nothing; demand-based boost, DCS;
//! periodic checks, PB). ClusterSchedSim §4.1–4.2 names the same three rescheduling
//! techniques: no message within a time period (SB/SY), message arrival (DCS),
//! periodic rescheduling (PB). One engine therefore holds the shared state
//! (observations, holds, fairness budget, emitted levels) and each technique
//! lives in its own module as rules plus behaviour:
//! [`dcs`](super::dcs), [`spin_block`](super::spin_block),
//! [`periodic_boost`](super::periodic_boost).
//!
//! Every task is in exactly one hold (see `hold.rs`): free (its original attributes),
//! blocked/yielded, or boosted. Its level is derived from the hold, so a boost
//! and a block can never fight over a task.

use super::action::{Action, Level, Reason};
use super::dcs::DcsParams;
use super::event::{Event, NodeSnapshot, SwitchOut};
use super::fairness::{FairnessBudget, FairnessParams};
use super::hold::{BoostRule, BoostSource, Hold, Managed};
use super::ids::{JobId, TaskId};
use super::level_book::LevelBook;
use super::observe::{CpuOccupancy, Observed};
use super::periodic_boost::{PeriodicBoostParams, PeriodicRule};
use super::policy::{LocalPolicy, PolicyKind};
use super::spin_block::{SpinBlockParams, SpinWaitRule};
use super::spin_learning::SpinTime;
use std::collections::BTreeMap;

/// What came of a boost the policy wanted to give ([`DynamicCoscheduler::try_boost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoostOutcome {
    Boosted,
    /// Boosted already (nothing changes).
    AlreadyBoosted,
    /// Not a task the policy manages.
    NotManaged,
    /// The fairness budget refused it; why ([`Reason::is_refusal`]).
    Refused(Reason),
}

/// Which techniques the engine runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    /// DCS: boost on a message for a task that is not running.
    pub demand: Option<BoostRule>,
    /// DCS: also boost a receiver preempted while computing (not waiting).
    pub demand_for_computing: bool,
    /// SB / SY: block or yield after spinning too long.
    pub spin_wait: Option<SpinWaitRule>,
    /// PB: periodic decision.
    pub periodic: Option<PeriodicRule>,
}

/// The engine; build it with [`DynamicCoscheduler::dcs`],
/// [`DynamicCoscheduler::spin_block`], [`DynamicCoscheduler::spin_yield`],
/// [`DynamicCoscheduler::periodic_boost`], [`DynamicCoscheduler::pb_sb`] or
/// [`DynamicCoscheduler::dcs_sb`].
#[derive(Debug, Clone)]
pub struct DynamicCoscheduler {
    pub(crate) kind: PolicyKind,
    pub(crate) rules: Rules,
    pub(crate) now: u64,
    pub(crate) tasks: BTreeMap<TaskId, Managed>,
    /// Tasks in the order they were added: PB's round-robin order.
    pub(crate) ring: Vec<TaskId>,
    pub(crate) cpus: CpuOccupancy,
    pub(crate) budget: FairnessBudget,
    pub(crate) levels: LevelBook,
    /// When the next PB decision is due.
    pub(crate) next_period_at: Option<u64>,
    /// PB: the kernel reported an arrival for a task that was not running
    /// since the last tick: the next decision takes a fresh look even if
    /// the last view showed no spinner.
    pub(crate) pb_arrival_reported: bool,
    /// PB: whether a decision could act, as of the last event
    /// ([`Self::pb_has_work`]).
    pub(crate) pb_work: bool,
    /// Jobs of boosted tasks forgotten since the last event: `forget` has no
    /// time, so their boost is charged until the next event (never less than
    /// it really lasted).
    pub(crate) forgotten_boosts: Vec<JobId>,
    /// DCS: how long a task yields when its quantum ends (None: never).
    pub(crate) dcs_yield_ns: Option<u64>,
    /// DCS: tasks yielding after their quantum, and until when.
    pub(crate) yields: BTreeMap<TaskId, u64>,
    /// DCS quantum boosts take turns by CPU time ([`DcsParams::take_turns`]).
    pub(crate) take_turns: bool,
}

impl DynamicCoscheduler {
    pub(crate) fn with_rules(kind: PolicyKind, rules: Rules, fairness: &FairnessParams) -> Self {
        Self {
            kind,
            rules,
            now: 0,
            tasks: BTreeMap::new(),
            ring: Vec::new(),
            cpus: CpuOccupancy::default(),
            budget: FairnessBudget::new(fairness),
            levels: LevelBook::default(),
            next_period_at: None,
            pb_arrival_reported: false,
            pb_work: false,
            forgotten_boosts: Vec::new(),
            dcs_yield_ns: None,
            yields: BTreeMap::new(),
            take_turns: false,
        }
    }

    /// `pb-sb`: periodic boost, receives implemented as spin-block (the BE/RT coscheduling paper
    /// §2.1: "receive is implemented as SB and there is also a background
    /// kernel activity checking message queues (PB)").
    pub fn pb_sb(
        pb: &PeriodicBoostParams,
        sb: &SpinBlockParams,
        fairness: &FairnessParams,
    ) -> Self {
        let rules = Rules {
            spin_wait: Some(SpinWaitRule {
                // The adaptive threshold was measured for plain SB only.
                // MPL-aware blocking (`sb.mpl_aware`) applies as in plain
                // SB: measured better than the fixed threshold on real MPI
                // (docs/benchmarks.md, "PB-SB blocks MPL-aware").
                adapt_max_ns: None,
                ..SpinWaitRule::block(sb)
            }),
            periodic: Some(pb.rule()),
            ..Rules::default()
        };
        Self::with_rules(PolicyKind::PbSb, rules, fairness)
    }

    /// `dcs-sb`: spin-block receives, and every message for a task that is not
    /// running (blocked or merely preempted) boosts it (the Scheduler Testbed report §2.2: DCS
    /// treats every incoming message as a demand, ICS only those for blocked
    /// processes). Wake-ups get the DCS boost rather than SB's own.
    pub fn dcs_sb(dcs: &DcsParams, sb: &SpinBlockParams, fairness: &FairnessParams) -> Self {
        let block = SpinWaitRule::block(sb);
        let rules = Rules {
            demand: Some(dcs.rule(PolicyKind::DcsSb)),
            demand_for_computing: dcs.boost_computing,
            spin_wait: Some(SpinWaitRule {
                wake_boost: None,
                // Woken with the DCS boost: priced as SB's.
                reported: true,
                // The adaptive threshold was measured for plain SB only.
                adapt_max_ns: None,
                // By default blocks at the threshold whoever shares the CPU:
                // MPL-aware blocking was measured better for SB and PB-SB;
                // next to DCS's boosts only as an option so far
                // (`sb.mpl_aware_in_dcs_sb`).
                few_competitors_ns: block.few_competitors_ns.filter(|_| sb.mpl_aware_in_dcs_sb),
                ..block
            }),
            ..Rules::default()
        };
        let mut policy = Self::with_rules(PolicyKind::DcsSb, rules, fairness);
        policy.dcs_yield_ns = Some(super::ids::us_to_ns(dcs.yield_after_quantum_us));
        policy.take_turns = dcs.take_turns && !dcs.ends_on_wait(PolicyKind::DcsSb);
        policy
    }

    /// Can a PB decision act: a periodic boost to renew or end, an arrival
    /// for a task that was not running reported since the last tick, or a
    /// CPU whose task spins with nothing to do while another task could use
    /// it ([`Self::pb_candidates`])? Only then is the period asked for: MPI
    /// ranks always spin, and a decision per period whenever one spins
    /// preempted a rank every millisecond on its single CPU for nothing —
    /// the agent's wake-up made the kernel pick again, mostly the other job
    /// (docs/benchmarks.md, "PB on real MPI").
    fn pb_has_work(&mut self) -> bool {
        let boosted = self.tasks.values().any(|m| {
            matches!(
                m.hold,
                Hold::Boosted {
                    source: BoostSource::Periodic,
                    ..
                }
            )
        });
        boosted
            || self.pb_arrival_reported
            || (!self.pb_spinners().is_empty() && !self.pb_candidates().is_empty())
    }

    fn add(&mut self, task: TaskId, job: JobId, out: &mut Vec<Action>) {
        if let Some(managed) = self.tasks.get(&task) {
            if managed.job == job {
                return;
            }
            // Re-added under another job: hand it back before re-accounting.
            self.end_hold(task, Reason::Released, out);
            if let Some(managed) = self.tasks.get_mut(&task) {
                managed.job = job;
            }
            return;
        }
        let spin_time = self
            .rules
            .spin_wait
            .as_ref()
            .map_or(SpinTime::fixed(u64::MAX), |r| r.spin_time());
        self.tasks.insert(
            task,
            Managed {
                job,
                obs: Observed::default(),
                hold: Hold::Free,
                spin_time,
                oncpu_ns: None,
            },
        );
        self.ring.push(task);
    }

    /// Emits the level that `task`'s hold implies.
    pub(crate) fn apply(&mut self, task: TaskId, reason: Reason, out: &mut Vec<Action>) {
        if let Some(managed) = self.tasks.get(&task) {
            self.levels.set(task, managed.hold.level(), reason, out);
        }
    }

    /// Boosts `task` if its job's fairness budget allows.
    pub(crate) fn try_boost(
        &mut self,
        task: TaskId,
        source: BoostSource,
        rule: BoostRule,
        reason: Reason,
        out: &mut Vec<Action>,
    ) -> BoostOutcome {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return BoostOutcome::NotManaged;
        };
        if matches!(managed.hold, Hold::Boosted { .. }) {
            return BoostOutcome::AlreadyBoosted;
        }
        if source == BoostSource::Arrival
            && let Some(why) = self.take_turn(task, out)
        {
            return BoostOutcome::Refused(why);
        }
        let Some(managed) = self.tasks.get_mut(&task) else {
            return BoostOutcome::NotManaged;
        };
        if let Some(why) = self.budget.refusal(managed.job, now) {
            return BoostOutcome::Refused(why);
        }
        self.budget.start(managed.job, now);
        let until = rule.max_ns.map(|max| now.saturating_add(max));
        managed.hold = Hold::Boosted {
            source,
            prio: rule.prio,
            until,
            ends_on_wait: rule.ends_on_wait,
            wait_grace_ns: rule.wait_grace_ns,
            wait_after_send: rule.wait_after_send,
            sent: false,
        };
        self.apply(task, reason, out);
        BoostOutcome::Boosted
    }

    /// Ends `task`'s boost or block (back to its original attributes).
    pub(crate) fn end_hold(&mut self, task: TaskId, reason: Reason, out: &mut Vec<Action>) {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return;
        };
        if matches!(managed.hold, Hold::Boosted { .. }) {
            self.budget.stop(managed.job, now);
        }
        managed.hold = Hold::Free;
        self.yields.remove(&task);
        self.apply(task, reason, out);
    }

    fn end_boost(&mut self, task: TaskId, reason: Reason, out: &mut Vec<Action>) {
        if self.is_boosted(task) {
            self.end_hold(task, reason, out);
        }
    }

    pub(crate) fn is_boosted(&self, task: TaskId) -> bool {
        self.tasks
            .get(&task)
            .is_some_and(|m| matches!(m.hold, Hold::Boosted { .. }))
    }

    /// Tasks whose hold matches `pred`, in id order.
    pub(crate) fn tasks_where(&self, pred: impl Fn(&Managed) -> bool) -> Vec<TaskId> {
        self.tasks
            .iter()
            .filter(|(_, m)| pred(m))
            .map(|(&t, _)| t)
            .collect()
    }

    fn switched_in(&mut self, task: TaskId, cpu: u32) {
        let now = self.now;
        if !self.tasks.contains_key(&task) {
            return;
        }
        if let Some(displaced) = self.cpus.switched_in(task, cpu)
            && let Some(other) = self.tasks.get_mut(&displaced)
        {
            other.obs.switched_out(now, SwitchOut::Preempted);
        }
        if let Some(managed) = self.tasks.get_mut(&task) {
            managed.obs.switched_in(cpu, now);
        }
    }

    fn switched_out(&mut self, task: TaskId, how: SwitchOut, out: &mut Vec<Action>) {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return;
        };
        managed.obs.switched_out(now, how);
        self.cpus.remove(task);
        if how == SwitchOut::Voluntary {
            self.end_boost(task, Reason::BoostEndBlocked, out);
        }
    }

    fn spin_started(&mut self, task: TaskId, out: &mut Vec<Action>) {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return;
        };
        managed.obs.spin_started(now);
        // With a grace, `advance` ends the boost once the wait has lasted;
        // with `wait_after_send`, only a wait after the task answered does.
        if matches!(
            managed.hold,
            Hold::Boosted {
                ends_on_wait: true,
                wait_grace_ns: 0,
                wait_after_send,
                sent,
                ..
            } if sent || !wait_after_send
        ) {
            self.end_boost(task, Reason::BoostEndWaiting, out);
        }
    }

    /// Boosted tasks whose wait outlasted the boost's grace.
    fn end_long_waits(&mut self, out: &mut Vec<Action>) {
        let now = self.now;
        let waited = self.tasks_where(|m| match m.hold {
            Hold::Boosted {
                ends_on_wait: true,
                wait_grace_ns,
                ..
            } if wait_grace_ns > 0 => {
                m.obs.waiting_idle() && m.obs.spin_cpu_ns(now) >= wait_grace_ns
            }
            _ => false,
        });
        for task in waited {
            self.end_hold(task, Reason::BoostEndWaiting, out);
        }
    }

    fn data_sent(&mut self, task: TaskId) {
        if let Some(Managed {
            hold: Hold::Boosted { sent, .. },
            ..
        }) = self.tasks.get_mut(&task)
        {
            *sent = true;
        }
    }

    fn data_received(&mut self, task: TaskId, out: &mut Vec<Action>) {
        let now = self.now;
        let Some(managed) = self.tasks.get_mut(&task) else {
            return;
        };
        if let Some(wait) = managed.obs.data_received(now) {
            managed.spin_time.observe_wait(wait);
        }
        let on_cpu = managed.obs.on_cpu;
        if matches!(managed.hold, Hold::Blocked { .. }) {
            self.wake(task, on_cpu, Reason::WakeOnArrival, out);
        }
    }

    /// Adopts a snapshot; a message the events missed is handled as an arrival,
    /// a blocked task whose wait ended is woken.
    fn reconcile(&mut self, snapshot: &NodeSnapshot, out: &mut Vec<Action>) {
        let now = self.now;
        self.cpus.replace(&snapshot.cpus);
        let jobs: std::collections::BTreeSet<JobId> = self.tasks.values().map(|m| m.job).collect();
        self.budget.set_jobs_on_node(jobs.len());
        for snap in &snapshot.tasks {
            let Some(managed) = self.tasks.get_mut(&snap.task) else {
                continue;
            };
            let ran = managed
                .oncpu_ns
                .map_or(0, |before| snap.oncpu_ns.saturating_sub(before));
            managed.oncpu_ns = Some(snap.oncpu_ns);
            self.budget.note_cpu(managed.job, ran, now);
            let missed_arrival = managed.obs.reconcile(snap, now);
            // A held task's wait is over when the kernel side saw it stop
            // waiting by itself (received, sent, blocked) after the hold
            // began. An episode that only passed the spin gap is not
            // enough: a stalled vCPU (hypervisor steal) looks the same as a
            // task that computes, and handing a spinner back on it released
            // it with no message (the flaky spin-block root test, session
            // 18). A held task that computes after a message the kernel
            // side did not see is handed back at its next send or block,
            // or at the hold's bound. The kernel counts a SIGSTOP
            // switch-out as a block and ends the spin episode there: a task
            // the policy stopped still waits, and only its message (or the
            // block bound) ends that wait.
            let wait_ended = match managed.hold {
                Hold::Blocked { since, level } => {
                    level != Level::Stop
                        && managed.obs.spin.is_none()
                        && !managed.obs.pending_message
                        && snap.last_wait_end_ns > since
                }
                _ => false,
            };
            if missed_arrival {
                self.on_message(snap.task, snap.on_cpu, out);
            } else if wait_ended {
                self.wake(snap.task, snap.on_cpu, Reason::WakeOnArrival, out);
            }
        }
    }

    fn settle_forgotten_boosts(&mut self) {
        for job in std::mem::take(&mut self.forgotten_boosts) {
            self.budget.stop(job, self.now);
        }
    }

    /// Everything that is due by `now`: budget, boost timers, spin thresholds,
    /// block bounds, and — only at a tick (`at_tick`), once its snapshot is
    /// adopted — the periodic decision: the events derived from the counters
    /// come just before the tick's snapshot, and a decision taken on one of
    /// them would judge who has a message pending from a view up to a period
    /// old.
    fn advance(&mut self, at_tick: bool, out: &mut Vec<Action>) {
        let now = self.now;
        for job in self.budget.exhausted(now) {
            let why = if self.budget.over_cpu_share(job, now) {
                Reason::CpuShareExceeded
            } else {
                Reason::BudgetExhausted
            };
            for task in self.tasks_where(|m| m.job == job && matches!(m.hold, Hold::Boosted { .. }))
            {
                if !(why == Reason::CpuShareExceeded && self.yield_turn(task, out)) {
                    self.end_hold(task, why, out);
                }
            }
        }
        let expired = self.tasks_where(
            |m| matches!(m.hold, Hold::Boosted { until: Some(until), .. } if until <= now),
        );
        for task in expired {
            let arrival = self.tasks.get(&task).is_some_and(|m| {
                matches!(
                    m.hold,
                    Hold::Boosted {
                        source: BoostSource::Arrival,
                        ..
                    }
                )
            });
            if !(arrival && self.yield_after_quantum(task, out)) {
                self.end_hold(task, Reason::BoostExpired, out);
            }
        }
        self.end_long_waits(out);
        self.end_overdue_yields(out);
        if at_tick {
            self.give_turns(out);
        }
        if let Some(rule) = self.rules.periodic
            && at_tick
            && self.next_period_at.is_none_or(|due| now >= due)
        {
            self.periodic_decision(rule, out);
            self.pb_arrival_reported = false;
            self.next_period_at = Some(match self.next_period_at {
                Some(due) if now < due.saturating_add(rule.period_ns) => due + rule.period_ns,
                _ => now.saturating_add(rule.period_ns),
            });
        }
        // Last: a boost that ended above may leave a spinner past its
        // threshold. A spinner is blocked only at a tick, on the view its
        // counters and snapshot have just brought up to date: between ticks
        // the view of who runs comes from the last look, and a look that saw
        // a task running does not see it leave its CPU until the next one.
        // Judged at any event, such a task — preempted long ago, waiting for
        // a message its peer has not sent — counted as spinning on its CPU
        // ever since and was blocked, then handed back at once by the
        // tick's replay of its receive (docs/benchmarks.md, "SB and DCS-SB
        // on real MPI": 40 % of DCS-SB's blocks on the OpenMPI ping-pong).
        // A spinner past its threshold asks for a tick now (`next_wakeup`).
        if let Some(rule) = self.rules.spin_wait.clone() {
            if at_tick {
                self.block_long_spinners(&rule, out);
            }
            self.wake_overdue(&rule, out);
        }
    }
}

impl LocalPolicy for DynamicCoscheduler {
    fn kind(&self) -> PolicyKind {
        self.kind
    }

    fn on_event(&mut self, event: &Event<'_>, out: &mut Vec<Action>) {
        self.now = self.now.max(event.at());
        self.settle_forgotten_boosts();
        match *event {
            Event::TaskAdded { task, info, .. } => self.add(task, info.job, out),
            Event::TaskExited { task, .. } => self.forget(task),
            Event::MessageArrived {
                task,
                on_cpu,
                spinning,
                ..
            } => {
                let now = self.now;
                if let Some(managed) = self.tasks.get_mut(&task) {
                    managed.obs.message_arrived(now, on_cpu, spinning);
                    self.pb_arrival_reported |= self.rules.periodic.is_some() && !on_cpu;
                    self.on_message(task, on_cpu, out);
                }
            }
            Event::SwitchedIn { task, cpu, .. } => self.switched_in(task, cpu),
            Event::SwitchedOut { task, how, .. } => self.switched_out(task, how, out),
            Event::SpinStarted { task, .. } => self.spin_started(task, out),
            Event::DataReceived { task, .. } => self.data_received(task, out),
            Event::DataSent { task, .. } => self.data_sent(task),
            Event::Tick { snapshot, .. } => {
                if let Some(snapshot) = snapshot {
                    self.reconcile(snapshot, out);
                }
            }
            Event::SlotStarted { .. } => {}
        }
        self.settle_forgotten_boosts(); // an exit is timed
        if let Some(rule) = self.rules.periodic
            && self.next_period_at.is_none()
            && self.pb_has_work()
        {
            // PB's first decision falls on its period grid.
            let period = rule.period_ns.max(1);
            self.next_period_at = Some((self.now / period + 1) * period);
        }
        self.advance(matches!(event, Event::Tick { .. }), out);
        self.pb_work = self.rules.periodic.is_some() && self.pb_has_work();
    }

    fn next_wakeup(&self) -> Option<u64> {
        let mut next = self.budget.next_deadline();
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: u64| n.min(t)));
            }
        };
        for &until in self.yields.values() {
            consider(Some(until));
        }
        for (&task, managed) in &self.tasks {
            match managed.hold {
                Hold::Boosted {
                    until,
                    ends_on_wait,
                    wait_grace_ns,
                    ..
                } => {
                    consider(until);
                    if ends_on_wait && wait_grace_ns > 0 {
                        consider(managed.obs.spin_deadline(wait_grace_ns));
                    }
                    // A boosted spinner past its threshold is blocked too.
                    if self.rules.spin_wait.is_some() {
                        consider(
                            managed
                                .obs
                                .spin_deadline_by(|| self.block_after_ns(task, managed)),
                        );
                    }
                }
                Hold::Blocked { since, .. } => consider(
                    self.rules
                        .spin_wait
                        .as_ref()
                        .map(|r| since.saturating_add(r.max_hold_ns)),
                ),
                Hold::Free => {
                    if self.rules.spin_wait.is_some() {
                        consider(
                            managed
                                .obs
                                .spin_deadline_by(|| self.block_after_ns(task, managed)),
                        );
                    }
                }
            }
        }
        if self.pb_work {
            // A PB decision acts only on a spinner next to a task with work
            // (or ends its own boost): with neither, the driver's quiet tick
            // or a reported arrival brings the next one. A decision that came
            // due at a derived event waits for the tick: due now.
            consider(Some(self.next_period_at.unwrap_or(self.now).max(self.now)));
        }
        // A spinner that passed its threshold since the last tick is blocked
        // at the next one (`advance`): due now, never in the past.
        next.map(|t| t.max(self.now))
    }

    fn forget(&mut self, task: TaskId) {
        let Some(managed) = self.tasks.remove(&task) else {
            return;
        };
        if matches!(managed.hold, Hold::Boosted { .. }) {
            self.forgotten_boosts.push(managed.job);
        }
        self.ring.retain(|&t| t != task);
        self.yields.remove(&task);
        self.cpus.remove(task);
        self.levels.forget(task);
    }

    fn release_all(&mut self, out: &mut Vec<Action>) {
        for managed in self.tasks.values_mut() {
            managed.hold = Hold::Free;
        }
        self.budget.clear();
        self.forgotten_boosts.clear();
        self.yields.clear();
        self.levels.release_all(out);
    }

    fn level_of(&self, task: TaskId) -> Level {
        self.levels.get(task)
    }

    fn uses_snapshots(&self) -> bool {
        true
    }

    /// A fixed spin threshold is reported by the kernel side the moment a
    /// spin passes it, when the threshold is priced for how the task is
    /// woken (SB, PB-SB and DCS-SB boost it; SY's threshold is the cost of
    /// its boost-less wake); a learned one differs per task (the fast tick
    /// finds it). PB asks for its period itself, only while a decision can
    /// act (`pb_has_work`), and hears of arrivals for ranks preempted while
    /// waiting from the kernel side. SB without `wake_boost`
    /// keeps a threshold priced for a boosted wake: it is not told of long
    /// spins ([`WakeInterest::of`](super::WakeInterest::of)) and finds its
    /// spinners at the fast tick (measured for SY at 500 µs: held exactly
    /// at the threshold, its spinning job next to a compute job ran 2.8x
    /// slower, docs/benchmarks.md).
    fn needs_spin_ticks(&self) -> bool {
        self.rules
            .spin_wait
            .as_ref()
            .is_some_and(|r| r.learning.is_some() || !r.reported)
    }
}
