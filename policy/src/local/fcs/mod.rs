//! FCS: flexible coscheduling (the Scheduler Testbed report §2.4, §4.6).
//!
//! FCS "augments gang-scheduling with dynamic process classification and local
//! scheduling": the coordinator still broadcasts gang slots
//! ([`Event::SlotStarted`]), and on each node every process is classified from
//! its own communication behaviour ([`classify`]) and given a level from its
//! class and whether its job owns the slot ([`priority`]).
//!
//! State machine per process: measuring as CS → measuring as DC → classified
//! (re-classified at each of its own slots). An F slot owner yields after its
//! spin time ([`spin_learning`](crate::local::spin_learning), per process) and
//! resumes on its message; yielding resets at each slot start. A slot that
//! passes its `until` loses its owner (everybody at its group level); if no
//! new slot starts within `slot_grace_us`, FCS gives up on gang slots and
//! every process is `Normal` (no gang, no coscheduling claims). FCS does not use the
//! per-job fairness budget (the gang matrix already shares time between jobs,
//! and the top-priority boost lasts exactly the owner's slot), but its owners'
//! boosts share the node's real-time cap ([`rt_cap`]).

pub mod classify;
pub mod params;
pub mod priority;
pub mod rt_cap;

use self::classify::{FcsClass, FcsProfile, Phase};
pub use self::params::FcsParams;
use self::priority::fcs_level;
use self::rt_cap::RtCap;
use super::action::{Action, Level, Reason};
use super::event::{Event, NodeSnapshot};
use super::fairness::FairnessParams;
use super::ids::{JobId, TaskId, us_to_ns};
use super::level_book::LevelBook;
use super::observe::Observed;
use super::policy::{LocalPolicy, PolicyKind};
use super::spin_learning::SpinTime;
use std::collections::BTreeMap;

/// The current gang slot on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    owner: Option<JobId>,
    until: u64,
}

/// One managed process under FCS.
#[derive(Debug, Clone)]
struct FcsTask {
    job: JobId,
    obs: Observed,
    profile: FcsProfile,
    spin_time: SpinTime,
    /// An F slot owner that spun past its spin time in this slot.
    yielded: bool,
    /// Message arrivals counted so far (events and the kernel's counter).
    arrivals_counted: u64,
}

/// The FCS policy.
#[derive(Debug, Clone)]
pub struct FcsPolicy {
    params: FcsParams,
    now: u64,
    slot: Option<Slot>,
    tasks: BTreeMap<TaskId, FcsTask>,
    levels: LevelBook,
    /// All slot owners' boosts together stay below the node's cap.
    rt: RtCap,
}

impl FcsPolicy {
    /// FCS with `params`; its owners' boosts share the node-wide cap
    /// `fairness.max_node_boosted_percent` of each `fairness.window_us`.
    pub fn new(params: &FcsParams, fairness: &FairnessParams) -> Self {
        Self {
            params: params.clone(),
            now: 0,
            slot: None,
            tasks: BTreeMap::new(),
            levels: LevelBook::default(),
            rt: RtCap::new(fairness.window_ns(), fairness.node_budget_ns()),
        }
    }

    /// The class `task` is scheduled as now.
    pub fn class_of(&self, task: TaskId) -> Option<FcsClass> {
        self.tasks.get(&task).map(|t| t.profile.class())
    }

    /// The measuring/classification state and counters of `task`.
    pub fn profile_of(&self, task: TaskId) -> Option<&FcsProfile> {
        self.tasks.get(&task).map(|t| &t.profile)
    }

    fn owns_slot(&self, job: JobId) -> bool {
        self.slot.is_some_and(|s| s.owner == Some(job))
    }

    /// Does the slot owner measure itself as DC (its initial DC period)?
    fn owner_measures_dc(&self) -> bool {
        let Some(owner) = self.slot.and_then(|s| s.owner) else {
            return false;
        };
        self.tasks
            .values()
            .any(|t| t.job == owner && matches!(t.profile.phase, Phase::MeasuringDc { .. }))
    }

    fn add(&mut self, task: TaskId, job: JobId) {
        let spin_time = if self.params.learn_spin_time {
            SpinTime::learned(us_to_ns(self.params.f_spin_us), &self.params.learning)
        } else {
            SpinTime::fixed(us_to_ns(self.params.f_spin_us))
        };
        let entry = FcsTask {
            job,
            obs: Observed::default(),
            profile: FcsProfile::default(),
            spin_time,
            yielded: false,
            arrivals_counted: 0,
        };
        if self.tasks.get(&task).is_none_or(|t| t.job != job) {
            self.tasks.insert(task, entry);
        }
    }

    /// A message reached `task`: a communication attempt, the end of its wait,
    /// and top priority back if it had yielded.
    fn message_for(&mut self, task: TaskId) {
        let now = self.now;
        if let Some(t) = self.tasks.get_mut(&task) {
            t.profile.communicated(1);
            t.arrivals_counted += 1;
            t.profile.wait_ended(now);
            t.yielded = false;
        }
    }

    fn slot_started(&mut self, owner: Option<JobId>, until: u64) {
        let slot = Slot { owner, until };
        if self.slot == Some(slot) {
            return; // a repeated broadcast of the same slot
        }
        self.slot = Some(slot);
        for t in self.tasks.values_mut() {
            t.yielded = false;
            if owner == Some(t.job) {
                t.profile.own_slot_started(&self.params);
            }
        }
    }

    fn reconcile(&mut self, snapshot: &NodeSnapshot) {
        let now = self.now;
        for snap in &snapshot.tasks {
            let missed_arrival = match self.tasks.get_mut(&snap.task) {
                Some(t) => t.obs.reconcile(snap, now),
                None => continue,
            };
            if missed_arrival {
                self.message_for(snap.task);
            }
            // Arrivals no event reported (between two looks, the agent is not
            // woken for each): the kernel's counter has them all.
            if let Some(t) = self.tasks.get_mut(&snap.task)
                && snap.arrivals > t.arrivals_counted
            {
                t.profile.communicated(snap.arrivals - t.arrivals_counted);
                t.arrivals_counted = snap.arrivals;
            }
        }
    }

    /// Slot expiry, F yields, counter modes and levels as of `now`.
    fn advance(&mut self, out: &mut Vec<Action>) {
        let now = self.now;
        let grace = us_to_ns(self.params.slot_grace_us);
        if let Some(slot) = self.slot.as_mut()
            && slot.until <= now
        {
            slot.owner = None;
            if slot.until.saturating_add(grace) <= now {
                self.slot = None;
            }
        }
        let slot = self.slot;
        for t in self.tasks.values_mut() {
            let owns = slot.is_some_and(|s| s.owner == Some(t.job));
            let class = t.profile.class();
            if owns
                && class == FcsClass::F
                && !t.yielded
                && t.obs.on_cpu
                && t.obs.waiting_idle()
                && t.obs.spin_cpu_ns(now) >= t.spin_time.current_ns()
            {
                t.yielded = true;
            }
            t.profile
                .set_counting(owns.then_some(class != FcsClass::Dc), now);
        }
        let owner_measures_dc = self.owner_measures_dc();
        let mut decisions: Vec<(TaskId, Level, Reason)> = self
            .tasks
            .iter()
            .map(|(&task, t)| {
                let (level, reason) = self.decide(task, t, owner_measures_dc);
                (task, level, reason)
            })
            .collect();
        for (task, level, _) in &decisions {
            if !level.is_boost() {
                self.rt.stop(*task, now);
            }
        }
        let allowed = self.rt.allows(now);
        for (task, level, reason) in &mut decisions {
            if level.is_boost() {
                if allowed {
                    self.rt.start(*task, now);
                } else {
                    self.rt.stop(*task, now);
                    *level = Level::Normal;
                    *reason = Reason::BudgetExhausted;
                }
            }
        }
        for (task, level, reason) in decisions {
            self.levels.set(task, level, reason, out);
        }
    }

    /// `task`'s level and why; `owner_measures_dc`: the slot owner is in its
    /// initial DC period ([`Self::owner_measures_dc`], the same for every
    /// task of one decision round).
    fn decide(&self, task: TaskId, t: &FcsTask, owner_measures_dc: bool) -> (Level, Reason) {
        if self.slot.is_none() {
            return (Level::Normal, Reason::FcsNoSlot);
        }
        if owner_measures_dc {
            // Algorithm 1 has a DC slot's owner compete only with the other
            // DC processes: with every other job measuring or classified CS
            // (demoted), it would still run alone, and its peers alone on
            // their nodes — coscheduled in all but name, so C_DC would
            // measure the same as C_CS and no fine-grain job could show
            // that it needs coscheduling. While the owner measures as DC,
            // its slot is left to the local scheduler among all processes,
            // which is what "not coscheduled" means.
            return (Level::Normal, Reason::FcsMeasuringDc);
        }
        let owns = self.owns_slot(t.job);
        let class = t.profile.class();
        let level = fcs_level(class, owns, t.yielded, self.params.top_prio);
        let reason = match (owns, class, level) {
            (true, FcsClass::F, Level::Background) => Reason::FcsFrustratedYield,
            (true, FcsClass::F, Level::Boost { .. })
                if self.levels.get(task) == Level::Background =>
            {
                Reason::FcsFrustratedResume
            }
            (true, _, Level::Boost { .. }) => Reason::FcsSlotOwner,
            _ => Reason::FcsGroup,
        };
        (level, reason)
    }
}

impl LocalPolicy for FcsPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Fcs
    }

    fn on_event(&mut self, event: &Event<'_>, out: &mut Vec<Action>) {
        self.now = self.now.max(event.at());
        let now = self.now;
        match *event {
            Event::TaskAdded { task, info, .. } => self.add(task, info.job),
            Event::TaskExited { task, .. } => self.forget(task),
            Event::MessageArrived {
                task,
                on_cpu,
                spinning,
                ..
            } => {
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.obs.message_arrived(now, on_cpu, spinning);
                    self.message_for(task);
                }
            }
            Event::SwitchedIn { task, cpu, .. } => {
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.obs.switched_in(cpu, now);
                    t.profile.switched_in(now);
                }
            }
            Event::SwitchedOut { task, how, .. } => {
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.obs.switched_out(now, how);
                    t.profile.switched_out(now);
                }
            }
            Event::SpinStarted { task, .. } => {
                if let Some(t) = self.tasks.get_mut(&task) {
                    t.obs.spin_started(now);
                    t.profile.wait_started(now);
                }
            }
            Event::DataReceived { task, .. } => {
                if let Some(t) = self.tasks.get_mut(&task) {
                    if let Some(wait) = t.obs.data_received(now) {
                        t.spin_time.observe_wait(wait);
                    }
                    t.profile.wait_ended(now);
                    t.yielded = false;
                }
            }
            Event::DataSent { .. } => {}
            Event::Tick { snapshot, .. } => {
                if let Some(snapshot) = snapshot {
                    self.reconcile(snapshot);
                }
            }
            Event::SlotStarted { owner, until, .. } => {
                // Count what happened so far in the old slot's modes first.
                for t in self.tasks.values_mut() {
                    t.profile.set_counting(None, now);
                }
                self.slot_started(owner, until);
            }
        }
        self.advance(out);
    }

    fn next_wakeup(&self) -> Option<u64> {
        let slot = self.slot?;
        let spin_deadlines = self.tasks.values().filter_map(|t| {
            let candidate = self.owns_slot(t.job) && t.profile.class() == FcsClass::F && !t.yielded;
            if candidate {
                t.obs.spin_deadline(t.spin_time.current_ns())
            } else {
                None
            }
        });
        let slot_change = match slot.owner {
            Some(_) => slot.until,
            None => slot
                .until
                .saturating_add(us_to_ns(self.params.slot_grace_us)),
        };
        spin_deadlines
            .chain([slot_change])
            .chain(self.rt.next_deadline(self.now))
            .min()
    }

    fn forget(&mut self, task: TaskId) {
        self.tasks.remove(&task);
        self.levels.forget(task);
        self.rt.stop(task, self.now);
    }

    fn release_all(&mut self, out: &mut Vec<Action>) {
        self.slot = None;
        self.rt.clear();
        self.levels.release_all(out);
    }

    fn level_of(&self, task: TaskId) -> Level {
        self.levels.get(task)
    }

    fn task_class(&self, task: TaskId) -> Option<&'static str> {
        self.class_of(task).map(FcsClass::as_str)
    }

    fn uses_snapshots(&self) -> bool {
        true
    }

    /// Only while a gang slot is known: its counters come from the ticks'
    /// observations, and only in the processes' own slots. Without slots
    /// (no coordinator, or it went quiet) FCS leaves every process alone, and
    /// a 1 ms tick only took the CPU from the jobs (slot-less FCS was 18 %
    /// slower than plain Linux on fine-grain jobs).
    fn counts_every_tick(&self) -> bool {
        self.slot.is_some()
    }

    /// Without slots FCS acts on nothing, spins included (real MPI ranks
    /// always spin, and a 1 ms tick while they did made slot-less FCS 6–9 %
    /// slower than plain Linux on MPICH).
    fn needs_spin_ticks(&self) -> bool {
        self.slot.is_some()
    }

    /// Without a gang slot every process is at its own attributes, and
    /// only a slot broadcast changes that: no tick at all. Even the quiet
    /// 10 ms tick, run by an agent at real-time priority, preempted a rank
    /// 100 times a second per node for nothing (MPICH ranks: ~15 % more
    /// context switches than under plain Linux, docs/benchmarks.md, "FCS on
    /// real MPI"). During a slot's grace period FCS still holds its groups
    /// and is not dormant.
    fn dormant(&self) -> bool {
        self.slot.is_none()
    }
}
