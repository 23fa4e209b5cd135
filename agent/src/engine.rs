//! The agent's core: a synchronous state machine over the [`Kernel`] seam.
//!
//! Data flows one way: kernel events and counter snapshots come in, the
//! registry and (later) the policy decide, actions go out through the
//! enforcer and the restore ledger. The async daemon around it only moves
//! bytes (sockets, timers, child processes); everything that decides lives here
//! and is tested with the fake kernel.
use std::collections::HashMap;

use cosched_agent_common::{Event, event_flags, event_kind, watch_flags};
use cosched_policy::local::{Action, Level, Reason, fcs::classify::FcsClass};
use cosched_proto::{
    control::{AgentStatus, JobState, ReloadOutcome},
    job::{JobId, SchedRequest},
};

use crate::{
    config::{Config, ConfigError},
    cpu_group::{CpuGroup, CpuGroups},
    enforce::{self, Applied},
    kernel::{Kernel, SchedAttr, SchedPolicy, is_gone, sched_attr::FLAG_RESET_ON_FORK},
    metrics::Metrics,
    policy_driver::PolicyDriver,
    registry::{Registry, RegistryError},
    restore::{RestoreLedger, RestoreReport},
};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("invalid scheduling request: {0}")]
    BadSched(String),
    #[error("no such process: {0}")]
    NoSuchProcess(u32),
    #[error("kernel: {0}")]
    Io(#[from] std::io::Error),
}

pub struct Engine<K: Kernel> {
    pub k: K,
    pub cfg: Config,
    pub reg: Registry,
    pub ledger: RestoreLedger,
    pub metrics: Metrics,
    config_path: String,
    online_cpus: u32,
    /// Exit states of launched main processes reaped by the daemon.
    reaped: HashMap<u32, JobState>,
    /// Main processes the agent launched (their end is known only once reaped).
    launched: std::collections::HashSet<u32>,
    last_reload: Option<ReloadOutcome>,
    events: Vec<Event>,
    driver: PolicyDriver,
    /// Level the local policy wants per task (absent = Normal), and why: a
    /// hold that waits for the task's next message
    /// ([`Reason::awaits_message`]) needs every arrival reported.
    policy_levels: HashMap<u32, (Level, Reason)>,
    /// Level applied per task (absent = Normal): the policy's, unless the
    /// gang overlay holds the task's job out of the current slice.
    levels: HashMap<u32, Level>,
    /// Watch flags set in the eBPF `WATCH` map, per task.
    watches: HashMap<u32, u32>,
    /// The coordinator's current slice, if the node is in gang mode.
    gang: Option<Gang>,
    /// What the eBPF side reports for boosted tasks (`watch_flags`).
    boost_watch: u32,
    /// `demote_cpu_cgroup`: during demoting gang slices managed tasks live
    /// in `active`, low levels in `idle` (None: demotion by SCHED_IDLE and
    /// autogroup nice only).
    cpu_groups: Option<CpuGroups>,
    /// Which demotion cgroup each task is in (absent: its own cgroup).
    placed: HashMap<u32, CpuGroup>,
}

/// Levels that only get idle time: with demotion cgroups, realised in `idle`.
fn is_low(level: Level) -> bool {
    matches!(level, Level::Demote | Level::Background)
}

/// How far behind schedule a policy tick must be to count as late.
const LATE_TICK_NS: u64 = 20_000_000;

/// Boosted tasks are marked so arrivals for them wake nobody; their spin
/// starts are reported only to policies whose boosts end when the task waits
/// again (per-message DCS, SB wake-ups, periodic boosts).
fn boost_watch_for(cfg: &Config) -> u32 {
    use cosched_policy::local::PolicyKind as P;
    let quantum_boosts = matches!(cfg.policy, P::Dcs | P::DcsSb) && !cfg.dcs.end_on_wait;
    watch_flags::BOOSTED
        | if quantum_boosts {
            0
        } else {
            watch_flags::SPIN_START
        }
}

/// Which jobs the coordinator's current time slice runs on this node. Tasks of
/// other jobs only use idle time (demoted), or are stopped in strict mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gang {
    pub active: std::collections::HashSet<JobId>,
    pub strict: bool,
}

/// The attributes that realise a policy level. `base` is what the task runs
/// with when the policy leaves it alone (its original attributes, or its job's
/// static request).
pub fn level_attr(level: Level, base: &SchedAttr, agent_priority: u32) -> SchedAttr {
    match level {
        Level::Normal | Level::Stop => *base,
        Level::Boost { prio } => {
            // Boosts stay below the agent so it can always end them.
            let cap = if agent_priority > 1 {
                agent_priority - 1
            } else {
                99
            };
            let mut a = SchedAttr::with_policy(SchedPolicy::Fifo, 0, u32::from(prio).clamp(1, cap));
            // A boost is never inherited by children the task forks.
            a.flags = FLAG_RESET_ON_FORK;
            a
        }
        Level::Background => SchedAttr::other(19),
        Level::Demote => SchedAttr::with_policy(SchedPolicy::Idle, 0, 0),
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Normal => "normal",
        Level::Boost { .. } => "boost",
        Level::Background => "background",
        Level::Demote => "demote",
        Level::Stop => "stop",
    }
}

fn driver_for(cfg: &Config) -> PolicyDriver {
    PolicyDriver::new(&cfg.local_policy(), cfg.policy_tick_us).unwrap_or_else(|e| {
        // Unreachable for a validated config; never run without a policy.
        tracing::error!(
            "policy {}: {e}; running local (no intervention)",
            cfg.policy
        );
        PolicyDriver::new(&Default::default(), cfg.policy_tick_us)
            .expect("local policy always builds")
    })
}

impl<K: Kernel> Engine<K> {
    pub fn new(
        k: K,
        cfg: Config,
        mut ledger: RestoreLedger,
        config_path: &str,
        online_cpus: u32,
    ) -> Self {
        let metrics = Metrics::new();
        metrics.config_ok.set(1);
        let driver = driver_for(&cfg);
        let cpu_groups = cfg.demote_cpu_cgroup.as_deref().map(CpuGroups::under);
        ledger.set_cpu_groups(cpu_groups.clone());
        Self {
            cpu_groups,
            placed: HashMap::new(),
            driver,
            policy_levels: HashMap::new(),
            levels: HashMap::new(),
            watches: HashMap::new(),
            gang: None,
            boost_watch: boost_watch_for(&cfg),
            k,
            cfg,
            reg: Registry::default(),
            ledger,
            metrics,
            config_path: config_path.to_string(),
            online_cpus,
            reaped: HashMap::new(),
            launched: std::collections::HashSet::new(),
            last_reload: None,
            events: Vec::new(),
        }
    }

    pub fn node_cpus(&self) -> Vec<u32> {
        self.cfg.node_cpus(self.online_cpus)
    }

    /// Reserves a job id for a launch (before the process exists).
    pub fn reserve_job(
        &mut self,
        id: JobId,
        name: &str,
        rank: u32,
        sched: Option<SchedRequest>,
    ) -> Result<(), EngineError> {
        if let Some(s) = &sched {
            s.validate().map_err(EngineError::BadSched)?;
        }
        self.reg.add_job(id, name, rank, sched, self.cfg.max_jobs)?;
        Ok(())
    }

    /// Drops a reservation whose launch failed.
    pub fn unreserve_job(&mut self, id: JobId) {
        let _ = self.reg.finish(
            id,
            JobState::Exited {
                code: None,
                signal: None,
            },
            self.cfg.finished_retention,
        );
        let _ = self.reg.forget(id);
    }

    /// Starts managing the process `pid` (every thread) as part of `job`.
    /// Returns the number of tasks now tracked for it.
    pub fn manage_process(&mut self, job: JobId, pid: u32) -> Result<u32, EngineError> {
        let tids = self.k.threads(pid).map_err(|e| {
            if is_gone(&e) {
                EngineError::NoSuchProcess(pid)
            } else {
                e.into()
            }
        })?;
        let sched = self.reg.job(job).and_then(|j| j.sched);
        let now = self.k.now_ns();
        for &tid in &tids {
            // Write-ahead, here rather than at the policy's first change:
            // the journal write may block (see restore.rs).
            if let Err(e) = self.ledger.record(&self.k, tid) {
                if is_gone(&e) {
                    continue;
                }
                return Err(e.into());
            }
            self.k.track(tid, pid, job)?;
            self.reg.add_task(job, tid, pid);
            if let Some(req) = &sched {
                self.apply(tid, &enforce::attr_for(req), "job-sched");
            }
            self.driver.task_added(tid, job, now);
        }
        self.apply_policy_actions(None);
        for &tid in &tids {
            self.realize(tid, None);
        }
        if let Some(j) = self.reg.job_mut(job) {
            j.pids.push(pid);
        }
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
        Ok(tids.len() as u32)
    }

    /// Adopts running processes as a new job.
    pub fn adopt(
        &mut self,
        job: JobId,
        name: &str,
        pids: &[u32],
        sched: Option<SchedRequest>,
    ) -> Result<u32, EngineError> {
        if pids.is_empty() {
            return Err(EngineError::NoSuchProcess(0));
        }
        // Check every pid before touching anything, so a typo leaves no half-adopted job.
        for &p in pids {
            if let Err(e) = self.k.start_time(p) {
                return Err(if is_gone(&e) {
                    EngineError::NoSuchProcess(p)
                } else {
                    e.into()
                });
            }
        }
        self.reserve_job(job, name, 0, sched)?;
        let mut n = 0;
        for &p in pids {
            match self.manage_process(job, p) {
                Ok(t) => n += t,
                Err(e) => {
                    self.release_job(job);
                    self.unreserve_job(job);
                    return Err(e);
                }
            }
        }
        Ok(n)
    }

    fn apply(&mut self, tid: u32, attr: &crate::kernel::SchedAttr, action: &str) {
        match enforce::set_attr(&mut self.k, &mut self.ledger, tid, attr) {
            Ok(Applied::Changed) => self.metrics.actions.with_label_values(&[action]).inc(),
            Ok(_) => {}
            Err(e) => {
                self.metrics
                    .action_errors
                    .with_label_values(&[action])
                    .inc();
                tracing::warn!(tid, action, "cannot apply scheduling attributes: {e}");
            }
        }
    }

    /// Restores every task of a job the agent changed (used when a launch or
    /// adoption is rolled back).
    fn release_job(&mut self, job: JobId) {
        let tids: Vec<u32> = self
            .reg
            .tasks()
            .filter(|(_, e)| e.job == job)
            .map(|(t, _)| t)
            .collect();
        for tid in tids {
            if let Err(e) = self.ledger.restore_one(&mut self.k, tid) {
                tracing::warn!(tid, "restore failed: {e}");
            }
            let _ = self.k.untrack(tid);
            self.placed.remove(&tid);
            self.reg.task_exited(tid, None, 0);
        }
    }

    /// Drains the eBPF ring buffer and handles every event. `now_ns` is
    /// CLOCK_MONOTONIC (the eBPF clock).
    pub fn handle_events(&mut self, now_ns: u64) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        if let Err(e) = self.k.drain_events(&mut events) {
            tracing::warn!("draining eBPF events: {e}");
        }
        for ev in &events {
            self.metrics.count_event(ev.kind);
            match ev.kind {
                event_kind::FORK => self.on_fork(ev.tid, ev.arg as u32, ev.job_id),
                event_kind::EXIT => self.on_exit(ev.tid, now_ns),
                event_kind::ARRIVAL if self.driver.active() => {
                    let on_cpu = ev.flags & event_flags::TASK_ON_CPU != 0;
                    let spinning = ev.flags & event_flags::TASK_SPINNING != 0;
                    if !on_cpu && self.driver.kind().boosts_on_arrival() {
                        self.observe_cpu_holders();
                    }
                    self.driver.arrival(ev.tid, ev.ts_ns, on_cpu, spinning);
                    self.apply_policy_actions(Some(ev.ts_ns));
                }
                event_kind::SPIN_START if self.driver.active() => {
                    self.driver.spin_started(ev.tid, ev.ts_ns);
                    self.apply_policy_actions(None);
                }
                _ => {}
            }
        }
        self.events = events;
    }

    fn on_fork(&mut self, parent: u32, child: u32, job: JobId) {
        // The fork tracepoint already added the child to the eBPF map.
        let tgid = self.k.tgid(child).unwrap_or(0);
        if !self.reg.add_task(job, child, tgid) {
            // Job unknown (forgotten meanwhile): stop tracking the child.
            let _ = self.k.untrack(child);
            return;
        }
        match self.ledger.inherit(&self.k, child, parent) {
            Ok(_) => {}
            Err(e) if is_gone(&e) => {}
            Err(e) => tracing::warn!(child, parent, "recording inherited attributes: {e}"),
        }
        // The child starts in its parent's cgroup; in `idle` it also has a
        // low level's attributes. realize() then keeps or undoes both.
        if let Some(g) = &self.cpu_groups {
            match self.k.cpu_cgroup(child).ok().flatten() {
                Some(dir) if dir == g.idle => {
                    self.placed.insert(child, CpuGroup::Idle);
                    self.levels.insert(child, Level::Demote);
                }
                Some(dir) if dir == g.active => {
                    self.placed.insert(child, CpuGroup::Active);
                }
                _ => {}
            }
        }
        let now = self.k.now_ns();
        self.driver.task_added(child, job, now);
        self.apply_policy_actions(None);
        self.realize(child, None);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
    }

    fn on_exit(&mut self, tid: u32, now_ns: u64) {
        self.driver.task_exited(tid, now_ns);
        self.levels.remove(&tid);
        self.placed.remove(&tid);
        self.policy_levels.remove(&tid);
        self.watches.remove(&tid);
        let last = self.k.task_stat(tid).ok().flatten();
        self.reg.task_exited(tid, last.as_ref(), now_ns);
        let _ = self.k.untrack(tid);
        self.ledger.forget(tid);
        let _ = self.k.forget_sockets_of(&[tid]);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
    }

    /// Refreshes the policy's view of the managed tasks running on the node's
    /// CPUs (spinning or computing right now), so that an arrival for another
    /// task is judged against what the CPU holder is doing at this instant.
    fn observe_cpu_holders(&mut self) {
        for (_, tid) in self.cpu_holders() {
            if let Ok(Some(mut s)) = self.k.task_stat(tid) {
                s.on_cpu = 1;
                self.driver.observe(tid, &s);
            }
        }
    }

    /// The managed task each node CPU runs, looking through the agent itself:
    /// when the agent holds a CPU (it is the one looking), the task it
    /// preempted is the one that holds it for scheduling purposes.
    fn cpu_holders(&self) -> Vec<(u32, u32)> {
        let me = self.k.own_tid();
        let slots = self.k.cpu_slots(&self.node_cpus()).unwrap_or_default();
        slots
            .into_iter()
            .filter_map(|(cpu, slot)| {
                let tid = if slot.tid == me {
                    slot.prev_tid
                } else {
                    slot.tid
                };
                self.reg.task(tid).map(|_| (cpu, tid))
            })
            .collect()
    }

    /// When the policy next needs [`Self::policy_tick`] (CLOCK_MONOTONIC ns).
    pub fn next_policy_tick(&self) -> Option<u64> {
        self.driver.next_wakeup()
    }

    /// The policy's observation tick: counters of the managed tasks and who
    /// runs on the node's CPUs, then the policy's timers.
    pub fn policy_tick(&mut self) {
        if !self.driver.active() {
            return;
        }
        // Records the programs queued without waking the agent are taken
        // first, so the tick decides on everything that happened.
        self.handle_events(self.k.now_ns());
        let now = self.k.now_ns();
        self.note_late_tick(now);
        // One lookup per managed task (walking the map would cost two
        // syscalls per entry plus one): this runs every tick.
        let mut live = Vec::with_capacity(self.reg.task_count());
        for (tid, _) in self.reg.tasks() {
            match self.k.task_stat(tid) {
                Ok(Some(s)) if s.exited_ns == 0 => live.push((tid, s)),
                Ok(_) => {}
                Err(e) => tracing::warn!(tid, "reading task counters: {e}"),
            }
        }
        let holders = self.cpu_holders();
        // A task the agent preempted to look is still the CPU's holder.
        for (tid, s) in &mut live {
            if holders.iter().any(|(_, h)| h == tid) {
                s.on_cpu = 1;
            }
        }
        self.driver.tick(now, &live, &holders);
        self.apply_policy_actions(None);
    }

    /// A tick far behind its schedule means the agent itself did not get
    /// its CPU (real-time throttling, a higher-priority task, a blocking
    /// call) or its loop did not run the tick: every decision waited that
    /// long. Counted and logged.
    fn note_late_tick(&mut self, now: u64) {
        let last = self.driver.last_tick();
        let due = last.saturating_add(self.driver.tick_ns());
        let late_ns = now.saturating_sub(due);
        if last != 0 && late_ns > LATE_TICK_NS {
            self.metrics.late_ticks.inc();
            tracing::warn!(
                late_ms = late_ns as f64 / 1e6,
                "policy tick ran late: the agent did not get its CPU"
            );
        }
    }

    /// Applies what the policy decided. `trigger` is the eBPF timestamp of
    /// the arrival that caused the decisions, for the reaction latency.
    fn apply_policy_actions(&mut self, trigger: Option<u64>) {
        for Action::SetLevel {
            task,
            level,
            reason,
        } in self.driver.take_actions()
        {
            self.metrics
                .decisions
                .with_label_values(&[reason.as_str()])
                .inc();
            if level == Level::Normal {
                self.policy_levels.remove(&task.0);
            } else {
                self.policy_levels.insert(task.0, (level, reason));
            }
            self.realize(task.0, trigger);
        }
    }

    /// The level a task must have now: the gang overlay first, then the policy.
    fn effective_level(&self, tid: u32) -> Level {
        let policy = self
            .policy_levels
            .get(&tid)
            .map_or(Level::Normal, |&(level, _)| level);
        match (&self.gang, self.reg.task(tid)) {
            (Some(g), Some(e)) if !g.active.contains(&e.job) => {
                if g.strict {
                    Level::Stop
                } else {
                    Level::Demote
                }
            }
            _ => policy,
        }
    }

    fn realize(&mut self, tid: u32, trigger: Option<u64>) {
        let level = self.effective_level(tid);
        self.apply_level(tid, level, trigger);
    }

    /// Enters, changes or leaves gang mode (None: every job may run, the
    /// local policy alone decides). Applies the change to every task.
    pub fn set_gang(&mut self, gang: Option<Gang>) {
        if self.gang == gang {
            return;
        }
        self.gang = gang;
        let tids: Vec<u32> = self.reg.tasks().map(|(t, _)| t).collect();
        for tid in tids {
            self.realize(tid, None);
        }
    }

    /// A strict gang switch was announced: notes in the restore journal,
    /// now and once for all, that every managed task may be stopped, so the
    /// switch itself writes nothing (see restore.rs).
    pub fn prepare_to_stop(&mut self) {
        if let Err(e) = self.ledger.may_stop(self.reg.tasks().map(|(t, _)| t)) {
            // The switch's own write-ahead (`will_stop`) tries again.
            tracing::warn!("restore journal: {e}");
        }
    }

    pub fn gang(&self) -> Option<&Gang> {
        self.gang.as_ref()
    }

    /// A gang slot started (for FCS): `owner` runs until `until_ns`.
    pub fn slot_started(&mut self, owner: Option<JobId>, until_ns: u64) {
        let now = self.k.now_ns();
        self.driver.slot_started(now, owner, until_ns);
        self.apply_policy_actions(None);
    }

    /// The attributes a task runs with when the policy leaves it alone.
    fn base_attr(&mut self, tid: u32) -> std::io::Result<SchedAttr> {
        let job_sched = self
            .reg
            .task(tid)
            .and_then(|e| self.reg.job(e.job))
            .and_then(|j| j.sched);
        match job_sched {
            Some(req) => Ok(enforce::attr_for(&req)),
            None => self.ledger.original(&self.k, tid),
        }
    }

    /// What the eBPF side must report for a task at `level`: boosted tasks
    /// per the policy (`boost_watch`); tasks the local policy holds back
    /// until their next message (spin-block, a yield, a frustrated FCS
    /// owner) every arrival, which ends their wait.
    fn watch_for(&self, tid: u32, level: Level) -> u32 {
        let held_by_policy = matches!(level, Level::Demote | Level::Stop | Level::Background)
            && self
                .policy_levels
                .get(&tid)
                .is_some_and(|&(l, why)| l == level && why.awaits_message());
        if level.is_boost() {
            self.boost_watch
        } else if held_by_policy {
            watch_flags::HELD
        } else {
            0
        }
    }

    /// Where a task at `level` belongs: with demotion cgroups and while
    /// the gang overlay demotes (not stops) other jobs, `idle` for the low
    /// levels and `active` for the others; otherwise (None) its original
    /// cgroup. Outside demoting slices tasks keep their own cgroups (and
    /// autogroups): measured, plain Linux with two fine-grain spinning jobs
    /// sharing one cgroup without autogroups was 7x slower than with them.
    fn wanted_group(&self, level: Level) -> Option<CpuGroup> {
        self.cpu_groups.as_ref()?;
        let demoting = self.gang.as_ref().is_some_and(|g| !g.strict);
        demoting.then_some(if is_low(level) {
            CpuGroup::Idle
        } else {
            CpuGroup::Active
        })
    }

    /// Moves a task into one of the demotion cgroups, or (None) back to
    /// the cgroup it had when the agent adopted it.
    fn move_cgroup(&mut self, tid: u32, to: Option<CpuGroup>) -> std::io::Result<()> {
        let Some(groups) = &self.cpu_groups else {
            return Ok(());
        };
        let dir = match to {
            Some(g) => Some(groups.path(g).to_path_buf()),
            None => match self.ledger.get(tid).and_then(|e| e.cpu_cgroup.clone()) {
                Some(original) => Some(original),
                None => self.k.cpu_cgroup_root()?,
            },
        };
        if let Some(dir) = dir {
            self.k.set_cpu_cgroup(tid, &dir)?;
        }
        match to {
            Some(g) => self.placed.insert(tid, g),
            None => self.placed.remove(&tid),
        };
        Ok(())
    }

    fn apply_level(&mut self, tid: u32, level: Level, trigger: Option<u64>) {
        let prev = self.levels.get(&tid).copied().unwrap_or(Level::Normal);
        let (have, want) = (self.placed.get(&tid).copied(), self.wanted_group(level));
        if (prev == level && have == want) || self.reg.task(tid).is_none() {
            return;
        }
        let level_changed = prev != level;
        let res = (|| -> std::io::Result<()> {
            // Into `active` (or back to its own cgroup) before the new
            // attributes: a real-time one needs RT runtime, which `idle`
            // has not; into `idle` after them.
            if have != want && want != Some(CpuGroup::Idle) {
                self.move_cgroup(tid, want)?;
            }
            if level_changed {
                let base = self.base_attr(tid)?;
                if level == Level::Stop {
                    self.ledger.will_stop(&self.k, tid)?;
                    self.k.stop(tid)?;
                } else {
                    self.k
                        .set_attr(tid, &level_attr(level, &base, self.cfg.agent_priority))?;
                    if prev == Level::Stop {
                        self.k.cont(tid)?;
                    }
                }
            }
            if have != want && want == Some(CpuGroup::Idle) {
                self.move_cgroup(tid, want)?;
            }
            // With autogroup scheduling a job's session is its own CFS group:
            // a demoted task's group weight goes down with it. Not in the
            // demotion cgroups, where no autogroup applies.
            let (was_low, now_low) = (
                is_low(prev) && have.is_none(),
                is_low(level) && want.is_none(),
            );
            if was_low != now_low && self.k.group_nice(tid)?.is_some() {
                let nice = if now_low {
                    self.ledger.will_set_group_nice(&self.k, tid)?;
                    19
                } else {
                    self.ledger.get(tid).and_then(|e| e.group_nice).unwrap_or(0)
                };
                self.k.set_group_nice(tid, nice)?;
            }
            let flags = self.watch_for(tid, level);
            if self.watches.get(&tid).copied().unwrap_or(0) != flags {
                self.k.watch(tid, flags)?;
                if flags == 0 {
                    self.watches.remove(&tid);
                } else {
                    self.watches.insert(tid, flags);
                }
            }
            Ok(())
        })();
        let name = level_name(level);
        match res {
            Ok(()) if !level_changed => {}
            Ok(()) => {
                if level == Level::Normal {
                    self.levels.remove(&tid);
                } else {
                    self.levels.insert(tid, level);
                }
                self.metrics.actions.with_label_values(&[name]).inc();
                let latency_us = trigger.map(|ts| self.k.now_ns().saturating_sub(ts) as f64 / 1e3);
                if let Some(us) = latency_us {
                    self.metrics.reaction_latency.observe(us / 1e6);
                }
                if let Some(j) = self
                    .reg
                    .task(tid)
                    .map(|e| e.job)
                    .and_then(|j| self.reg.job_mut(j))
                {
                    j.actions += 1;
                    if level.is_boost() {
                        j.boosts += 1;
                    }
                    if let Some(us) = latency_us {
                        j.latencies.push(us);
                    }
                }
            }
            Err(e) if is_gone(&e) => {}
            Err(e) => {
                self.metrics.action_errors.with_label_values(&[name]).inc();
                tracing::warn!(tid, level = name, "cannot apply policy level: {e}");
            }
        }
    }

    /// Hands every task the policy changed back (policy switch, shutdown).
    fn release_policy(&mut self) {
        self.driver.release_all();
        self.apply_policy_actions(None);
        self.policy_levels.clear();
        // Anything the policy forgot to hand back is put back here.
        let left: Vec<u32> = self.levels.keys().copied().collect();
        for tid in left {
            self.apply_level(tid, Level::Normal, None);
        }
    }

    pub fn policy_active(&self) -> bool {
        self.driver.active()
    }

    /// Marks `pid` as launched by this agent: its job ends only when the daemon
    /// reports it reaped, with its exit status (not merely when it vanishes).
    pub fn mark_launched(&mut self, pid: u32) {
        self.launched.insert(pid);
    }

    /// A launched main process was reaped by the daemon.
    pub fn process_reaped(&mut self, pid: u32, code: Option<i32>, signal: Option<i32>) {
        self.reaped.insert(pid, JobState::Exited { code, signal });
    }

    /// Periodic work: counter snapshot, exits the event stream missed, job
    /// completion, metrics. Returns jobs that finished in this poll.
    pub fn poll(&mut self, now_ns: u64, agent_cpu_seconds: f64) -> Vec<JobId> {
        self.handle_events(now_ns);
        if let Err(e) = self.ledger.flush() {
            tracing::warn!("updating the restore journal: {e}");
        }
        let stats = match self.k.task_stats() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("reading task counters: {e}");
                Vec::new()
            }
        };
        // Exits whose event was lost (ring buffer full) still show in the map.
        let exited: Vec<u32> = stats
            .iter()
            .filter(|(_, s)| s.exited_ns != 0)
            .map(|(t, _)| *t)
            .collect();
        for tid in exited {
            self.on_exit(tid, now_ns);
        }
        // Tasks that vanished without trace (never switched, or untracked).
        let tracked: std::collections::HashSet<u32> = stats.iter().map(|(t, _)| *t).collect();
        let missing: Vec<u32> = self
            .reg
            .tasks()
            .map(|(t, _)| t)
            .filter(|t| !tracked.contains(t) && self.k.start_time(*t).is_err())
            .collect();
        for tid in missing {
            self.on_exit(tid, now_ns);
        }
        let live: Vec<_> = stats
            .into_iter()
            .filter(|(_, s)| s.exited_ns == 0)
            .collect();
        self.reg.apply_snapshot(&live, now_ns);

        let finished = self.finished_jobs();
        for &id in &finished {
            let state = self
                .reg
                .job(id)
                .and_then(|j| {
                    j.pids.iter().find_map(|p| {
                        self.launched.remove(p);
                        self.reaped.remove(p)
                    })
                })
                .unwrap_or(JobState::Exited {
                    code: None,
                    signal: None,
                });
            for dropped in self.reg.finish(id, state, self.cfg.finished_retention) {
                self.metrics.remove_job(dropped, "");
            }
        }
        self.export_metrics(agent_cpu_seconds);
        finished
    }

    fn finished_jobs(&self) -> Vec<JobId> {
        self.reg
            .jobs()
            .filter(|j| j.state == JobState::Running && j.live.is_empty() && !j.pids.is_empty())
            .filter(|j| {
                j.pids.iter().all(|p| {
                    self.reaped.contains_key(p)
                        || (!self.launched.contains(p) && self.k.start_time(*p).is_err())
                })
            })
            .map(|j| j.id)
            .collect()
    }

    fn export_metrics(&mut self, agent_cpu_seconds: f64) {
        let jobs: Vec<_> = self
            .reg
            .jobs()
            .map(|j| (j.id, j.name.clone(), j.totals))
            .collect();
        for (id, name, t) in jobs {
            self.metrics.update_job(id, &name, &t);
        }
        self.metrics
            .running_jobs
            .set(self.reg.running_jobs() as i64);
        self.metrics.managed_tasks.set(self.reg.task_count() as i64);
        let mut classes = FcsClass::ALL.map(|c| (c.as_str(), 0));
        for (tid, _) in self.reg.tasks() {
            if let Some(class) = self.driver.task_class(tid)
                && let Some(slot) = classes.iter_mut().find(|(c, _)| *c == class)
            {
                slot.1 += 1;
            }
        }
        for (class, n) in classes {
            self.metrics.fcs_classes.with_label_values(&[class]).set(n);
        }
        if let Ok(d) = self.k.drops() {
            self.metrics.update_drops(&d);
        }
        if let Ok(c) = self.k.program_costs() {
            self.metrics.update_programs(&c);
        }
        self.metrics.update_agent_cpu(agent_cpu_seconds);
    }

    /// Drops a finished job's record and metric series.
    pub fn forget_job(&mut self, id: JobId) -> Result<(), EngineError> {
        let name = self.reg.job(id).map(|j| j.name.clone()).unwrap_or_default();
        self.reg.forget(id)?;
        self.metrics.remove_job(id, &name);
        Ok(())
    }

    /// Validates and applies a new config (`Err` = it could not be read or
    /// parsed). The old config stays unless the new one is fully valid.
    pub fn reload(&mut self, new: Result<Config, ConfigError>) -> ReloadOutcome {
        let outcome = match new.and_then(|c| self.cfg.check_reload(&c).map(|()| c)) {
            Ok(c) => {
                let changed = c != self.cfg;
                let policy_changed = c.local_policy() != self.cfg.local_policy()
                    || c.policy_tick_us != self.cfg.policy_tick_us
                    || c.agent_priority != self.cfg.agent_priority;
                if policy_changed {
                    self.switch_policy(&c);
                }
                self.cfg = c;
                ReloadOutcome {
                    accepted: true,
                    message: if changed {
                        "config applied".into()
                    } else {
                        "config unchanged".into()
                    },
                }
            }
            Err(e) => ReloadOutcome {
                accepted: false,
                message: format!("{e}; keeping the running config"),
            },
        };
        let label = if outcome.accepted {
            "accepted"
        } else {
            "rejected"
        };
        self.metrics.reloads.with_label_values(&[label]).inc();
        self.metrics.config_ok.set(outcome.accepted as i64);
        if outcome.accepted {
            tracing::info!("config reload: {}", outcome.message);
        } else {
            tracing::error!("config reload rejected: {}", outcome.message);
        }
        self.last_reload = Some(outcome.clone());
        outcome
    }

    /// Replaces the running policy without losing any task: the old one hands
    /// every task back, the new one is told about every task.
    fn switch_policy(&mut self, new: &Config) {
        self.release_policy();
        self.driver = driver_for(new);
        self.boost_watch = boost_watch_for(new);
        let now = self.k.now_ns();
        let tasks: Vec<(u32, JobId)> = self.reg.tasks().map(|(t, e)| (t, e.job)).collect();
        for (tid, job) in tasks {
            self.driver.task_added(tid, job, now);
        }
        self.apply_policy_actions(None);
        let tids: Vec<u32> = self.reg.tasks().map(|(t, _)| t).collect();
        for tid in tids {
            self.realize(tid, None);
        }
        tracing::info!(policy = %new.policy, "local policy switched");
    }

    /// Belt and braces after the restore: every thread still in the
    /// demotion cgroups (one the ledger did not know, like a thread whose
    /// fork event was lost) goes back to its process's original cgroup, or
    /// to the root of the cpu hierarchy.
    fn sweep_cpu_groups(
        &mut self,
        process_cgroups: &HashMap<u32, std::path::PathBuf>,
        report: &mut RestoreReport,
    ) {
        let Some(g) = self.cpu_groups.clone() else {
            return;
        };
        let root = self.k.cpu_cgroup_root().ok().flatten();
        for dir in [&g.idle, &g.active] {
            let tids = match self.k.cpu_cgroup_tasks(dir) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    report
                        .failed
                        .push((0, format!("listing {}: {e}", dir.display())));
                    continue;
                }
            };
            for tid in tids {
                let target = self
                    .k
                    .tgid(tid)
                    .ok()
                    .and_then(|p| process_cgroups.get(&p).cloned())
                    .or_else(|| root.clone());
                let Some(target) = target else {
                    continue;
                };
                match self.k.set_cpu_cgroup(tid, &target) {
                    Ok(()) => report.restored += 1,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                    Err(e) => report.failed.push((
                        tid,
                        format!(
                            "moving out of {} to {}: {e}",
                            dir.display(),
                            target.display()
                        ),
                    )),
                }
            }
        }
    }

    pub fn status(&self) -> AgentStatus {
        AgentStatus {
            node: self.cfg.node.clone(),
            policy: self.cfg.policy.to_string(),
            cpus: self.node_cpus(),
            jobs: self.reg.jobs().count() as u32,
            managed_tasks: self.reg.task_count() as u32,
            config_path: self.config_path.clone(),
            last_reload: self.last_reload.clone(),
        }
    }

    /// Puts every task the agent changed back to its original attributes and
    /// stops tracking everything.
    pub fn shutdown(&mut self) -> RestoreReport {
        self.gang = None;
        self.release_policy();
        // Where each process's main thread came from, for the sweep below.
        let process_cgroups: HashMap<u32, std::path::PathBuf> = self
            .reg
            .tasks()
            .filter_map(|(tid, e)| {
                let original = self.ledger.get(tid)?.cpu_cgroup.clone()?;
                (tid == e.tgid).then_some((tid, original))
            })
            .collect();
        let mut report = self.ledger.restore_all(&mut self.k);
        self.sweep_cpu_groups(&process_cgroups, &mut report);
        let tids: Vec<u32> = self.reg.tasks().map(|(t, _)| t).collect();
        for tid in tids {
            let _ = self.k.untrack(tid);
        }
        self.metrics
            .restored
            .with_label_values(&["restored"])
            .inc_by(report.restored as u64);
        self.metrics
            .restored
            .with_label_values(&["gone"])
            .inc_by(report.gone as u64);
        self.metrics
            .restored
            .with_label_values(&["failed"])
            .inc_by(report.failed.len() as u64);
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{SchedAttr, fake::FakeKernel};
    use cosched_agent_common::TaskStats;

    fn engine() -> Engine<FakeKernel> {
        engine_with("local")
    }

    /// Jobs 1 (task 100) and 2 (task 200) adopted, and a demoting gang slice
    /// of job 1 applied.
    fn job_a_slice_demoting_job_b(e: &mut Engine<FakeKernel>) {
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn(200, SchedAttr::other(0));
        e.adopt(1, "a", &[100], None).unwrap();
        e.adopt(2, "b", &[200], None).unwrap();
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: false,
        }));
    }

    /// An engine on CPU 0 running local policy `policy`.
    fn engine_with(policy: &str) -> Engine<FakeKernel> {
        engine_configured(&format!("policy = \"{policy}\""))
    }

    /// An engine on CPU 0 with `extra` added to its config.
    fn engine_configured(extra: &str) -> Engine<FakeKernel> {
        let cfg = Config::parse(&format!("node = \"n0\"\ncpus = [0]\n{extra}"), "test").unwrap();
        Engine::new(
            FakeKernel::default(),
            cfg,
            RestoreLedger::new(None),
            "test",
            2,
        )
    }

    #[test]
    fn adopting_a_process_tracks_every_thread() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn_thread(101, 100, SchedAttr::other(0));
        assert_eq!(e.adopt(1, "a", &[100], None).unwrap(), 2);
        assert!(e.k.tracked.contains_key(&100) && e.k.tracked.contains_key(&101));
        assert_eq!(e.reg.task(101).unwrap().job, 1);
    }

    #[test]
    fn adopting_unknown_pid_fails_and_leaves_nothing() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        assert!(matches!(
            e.adopt(1, "a", &[100, 555], None),
            Err(EngineError::NoSuchProcess(555))
        ));
        assert!(e.reg.job(1).is_none());
        assert!(e.k.tracked.is_empty());
    }

    #[test]
    fn job_sched_request_is_applied_and_undone_on_shutdown() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(-1));
        e.adopt(1, "a", &[100], Some(SchedRequest::Nice { nice: 10 }))
            .unwrap();
        assert_eq!(e.k.attr(100), SchedAttr::other(10));
        let r = e.shutdown();
        assert_eq!(r.restored, 1);
        assert_eq!(e.k.attr(100), SchedAttr::other(-1));
        assert!(e.k.tracked.is_empty(), "shutdown stops tracking");
    }

    #[test]
    fn forked_thread_joins_its_job_and_is_restored_to_the_parent_original() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.adopt(1, "a", &[100], Some(SchedRequest::Nice { nice: 4 }))
            .unwrap();
        // Kernel side: the child inherits nice 4 and the fork program tracks it.
        e.k.spawn_thread(102, 100, SchedAttr::other(4));
        e.k.track(102, 0, 1).unwrap();
        e.k.events.push_back(Event {
            kind: event_kind::FORK,
            tid: 100,
            job_id: 1,
            flags: 0,
            ts_ns: 1,
            arg: 102,
        });
        e.handle_events(2);
        assert_eq!(e.reg.task(102).unwrap().job, 1);
        e.shutdown();
        assert_eq!(e.k.attr(102), SchedAttr::other(0));
    }

    #[test]
    fn exit_folds_final_counters_and_finishes_the_job() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.adopt(1, "a", &[100], None).unwrap();
        e.k.stats_mut(100).arrivals = 42;
        e.k.exit(100, 10);
        e.k.events.push_back(Event {
            kind: event_kind::EXIT,
            tid: 100,
            job_id: 1,
            flags: 0,
            ts_ns: 10,
            arg: 0,
        });
        let finished = e.poll(20, 0.0);
        assert_eq!(finished, vec![1]);
        let j = e.reg.job(1).unwrap();
        assert_eq!(j.totals.messages_observed, 42);
        assert!(matches!(j.state, JobState::Exited { .. }));
        assert!(!e.k.tracked.contains_key(&100), "exited task untracked");
    }

    #[test]
    fn lost_exit_event_is_caught_by_the_poll() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.adopt(1, "a", &[100], None).unwrap();
        e.k.stats_mut(100).sends = 7;
        e.k.exit(100, 10); // no event queued
        assert_eq!(e.poll(20, 0.0), vec![1]);
        assert_eq!(e.reg.job(1).unwrap().totals.sends, 7);
    }

    #[test]
    fn reaped_exit_code_is_reported() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.reserve_job(1, "a", 0, None).unwrap();
        e.manage_process(1, 100).unwrap();
        e.mark_launched(100);
        e.k.exit(100, 5);
        assert!(
            e.poll(8, 0.0).is_empty(),
            "a launched job ends when reaped, not when it vanishes"
        );
        e.process_reaped(100, Some(3), None);
        e.poll(10, 0.0);
        assert_eq!(
            e.reg.job(1).unwrap().state,
            JobState::Exited {
                code: Some(3),
                signal: None
            }
        );
    }

    #[test]
    fn live_counters_reach_job_totals_and_metrics() {
        let mut e = engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.adopt(7, "ring", &[100], None).unwrap();
        *e.k.stats_mut(100) = TaskStats {
            arrivals: 5,
            spin_ns: 2_000_000_000,
            job_id: 7,
            ..TaskStats::default()
        };
        e.poll(1, 0.0);
        assert_eq!(e.reg.job(7).unwrap().totals.messages_observed, 5);
        let text = e.metrics.render();
        assert!(
            text.contains("cosched_job_spin_seconds_total{job=\"ring\",job_id=\"7\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn gang_slice_demotes_other_jobs_and_restores_them_after() {
        let mut e = engine();
        job_a_slice_demoting_job_b(&mut e);
        assert_eq!(
            e.k.attr(100),
            SchedAttr::other(0),
            "slice owner runs normally"
        );
        assert_eq!(
            e.k.attr(200).policy,
            SchedPolicy::Idle,
            "other job only in idle time"
        );
        e.set_gang(Some(Gang {
            active: [2].into(),
            strict: true,
        }));
        assert!(e.k.tasks[&100].stopped, "strict mode stops the other job");
        assert_eq!(e.k.attr(200), SchedAttr::other(0));
        assert_eq!(e.k.tasks[&200].group_nice, 0, "back to its group weight");
        e.set_gang(None);
        assert!(!e.k.tasks[&100].stopped);
        assert_eq!(e.k.attr(100), SchedAttr::other(0));
    }

    #[test]
    fn fcs_class_demotion_is_not_a_wait_so_its_arrivals_do_not_wake_the_agent() {
        let mut e = engine_with("fcs");
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn(200, SchedAttr::other(0));
        e.adopt(1, "owner", &[100], None).unwrap();
        e.adopt(2, "other", &[200], None).unwrap();
        let until = e.k.now_ns() + 10_000_000;
        e.slot_started(Some(1), until);
        // New processes are measured as CS first: outside its slot, job 2
        // is in the lowest priority group.
        assert_eq!(e.k.attr(200).policy, SchedPolicy::Idle);
        assert_eq!(
            e.k.watched.get(&200).copied().unwrap_or(0) & watch_flags::HELD,
            0,
            "a priority group is not a wait for a message"
        );
    }

    #[test]
    fn spinner_blocked_past_its_threshold_has_its_arrivals_reported() {
        let mut e = engine_with("sb");
        e.k.spawn(100, SchedAttr::other(0));
        e.adopt(1, "spinner", &[100], None).unwrap();
        e.k.now = 1_000_000_000;
        *e.k.stats_mut(100) = TaskStats {
            on_cpu: 1,
            spin_episode_start_ns: e.k.now - 50_000_000,
            ..TaskStats::default()
        };
        e.policy_tick();
        e.k.now += 1_000_000;
        e.policy_tick();
        assert_ne!(
            e.k.attr(100),
            SchedAttr::other(0),
            "spun 50 ms without a message: held back"
        );
        assert_ne!(
            e.k.watched.get(&100).copied().unwrap_or(0) & watch_flags::HELD,
            0,
            "its next message ends the hold"
        );
    }

    #[test]
    fn task_adopted_during_a_slice_gets_the_overlay_and_shutdown_undoes_it() {
        let mut e = engine();
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: true,
        }));
        e.k.spawn(300, SchedAttr::other(3));
        e.adopt(3, "late", &[300], None).unwrap();
        assert!(e.k.tasks[&300].stopped);
        e.shutdown();
        assert!(!e.k.tasks[&300].stopped);
        assert_eq!(e.k.attr(300), SchedAttr::other(3));
    }

    #[test]
    fn invalid_reload_keeps_the_running_config() {
        let mut e = engine();
        let bad = Config::parse("node = \"n0\"\npolicy = \"nope\"", "t");
        let out = e.reload(bad);
        assert!(!out.accepted);
        assert_eq!(e.cfg.policy.as_str(), "local");
        assert!(
            e.metrics
                .render()
                .contains("cosched_config_reloads_total{outcome=\"rejected\"} 1")
        );
        let renamed = Config::parse("node = \"other\"", "t");
        assert!(!e.reload(renamed).accepted);
        assert_eq!(e.cfg.node, "n0");
    }

    #[test]
    fn valid_reload_is_applied() {
        let mut e = engine();
        let good = Config::parse(
            "node = \"n0\"\ncpus = [0]\n[ebpf]\npoll_interval_ms = 5",
            "t",
        );
        assert!(e.reload(good).accepted);
        assert_eq!(e.cfg.ebpf.poll_interval_ms, 5);
    }

    // --- demotion cgroups (`demote_cpu_cgroup`) ---------------------------

    const NODE_CG: &str = "/fake/cpu/node";

    fn cg(name: &str) -> std::path::PathBuf {
        std::path::Path::new(NODE_CG).join(name)
    }

    fn cgroup_engine() -> Engine<FakeKernel> {
        engine_configured(&format!("demote_cpu_cgroup = \"{NODE_CG}\""))
    }

    fn fork(e: &mut Engine<FakeKernel>, parent: u32, child: u32, job: JobId) {
        let tgid = e.k.tasks[&parent].tgid;
        let (attr, cgroup) = (e.k.attr(parent), e.k.cgroup(parent).to_path_buf());
        // Kernel side: the thread inherits its creator's attributes and
        // cgroup, and the fork program tracks it.
        e.k.spawn_thread(child, tgid, attr);
        e.k.tasks.get_mut(&child).unwrap().cpu_cgroup = cgroup;
        e.k.track(child, tgid, job).unwrap();
        e.k.events.push_back(Event {
            kind: event_kind::FORK,
            tid: parent,
            job_id: job,
            flags: 0,
            ts_ns: 1,
            arg: u64::from(child),
        });
        e.handle_events(2);
    }

    #[test]
    fn gang_slice_moves_other_jobs_into_the_idle_cgroup_and_back() {
        use crate::kernel::fake::Call;
        let mut e = cgroup_engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn(200, SchedAttr::other(0));
        e.adopt(1, "a", &[100], None).unwrap();
        e.adopt(2, "b", &[200], None).unwrap();
        let own = std::path::Path::new(crate::kernel::fake::FAKE_CPU_ROOT);
        assert_eq!(e.k.cgroup(100), own, "outside demoting slices: own cgroup");
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: false,
        }));
        assert_eq!(e.k.cgroup(100), cg("active"), "slice owner stays");
        assert_eq!(e.k.cgroup(200), cg("idle"), "other job demoted by cgroup");
        assert_eq!(e.k.tasks[&200].group_nice, 0, "no autogroup nice");
        e.k.calls.clear();
        e.set_gang(Some(Gang {
            active: [2].into(),
            strict: false,
        }));
        assert_eq!(e.k.cgroup(100), cg("idle"));
        assert_eq!(e.k.cgroup(200), cg("active"));
        assert_eq!(e.k.attr(200), SchedAttr::other(0));
        let promoted: Vec<&Call> =
            e.k.calls
                .iter()
                .filter(|c| matches!(c, Call::SetCpuCgroup(200, _) | Call::SetAttr(200, _)))
                .collect();
        assert!(
            matches!(promoted[..], [Call::SetCpuCgroup(..), Call::SetAttr(..)]),
            "into active before the attributes: {promoted:?}"
        );
        let demoted: Vec<&Call> =
            e.k.calls
                .iter()
                .filter(|c| matches!(c, Call::SetCpuCgroup(100, _) | Call::SetAttr(100, _)))
                .collect();
        assert!(
            matches!(demoted[..], [Call::SetAttr(..), Call::SetCpuCgroup(..)]),
            "into idle after the attributes: {demoted:?}"
        );
        // Leaving gang mode: everyone back in its own cgroup.
        e.set_gang(None);
        assert_eq!(e.k.cgroup(100), own);
        assert_eq!(e.k.cgroup(200), own);
        assert_eq!(e.k.attr(100), SchedAttr::other(0));
        // Strict slices stop, they do not move.
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: true,
        }));
        assert!(e.k.tasks[&200].stopped);
        assert_eq!(e.k.cgroup(200), own);
        assert_eq!(e.k.cgroup(100), own);
        // A task adopted during a demoting slice goes straight to its group.
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: false,
        }));
        assert!(!e.k.tasks[&200].stopped);
        assert_eq!(e.k.cgroup(200), cg("idle"));
        e.k.spawn(300, SchedAttr::other(0));
        e.adopt(3, "c", &[300], None).unwrap();
        assert_eq!(e.k.cgroup(300), cg("idle"));
        assert_eq!(e.k.attr(300).policy, SchedPolicy::Idle);
        assert_eq!(e.k.tasks[&300].group_nice, 0);
    }

    #[test]
    fn cgroup_demotion_does_not_write_the_journal() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("restore.json");
        let mut e = cgroup_engine();
        e.ledger = RestoreLedger::new(Some(journal.clone()));
        e.ledger
            .set_cpu_groups(Some(crate::cpu_group::CpuGroups::under(NODE_CG.as_ref())));
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn(200, SchedAttr::other(0));
        e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = "/fake/cpu/x".into();
        e.adopt(1, "a", &[100], None).unwrap();
        e.adopt(2, "b", &[200], None).unwrap();
        let written = RestoreLedger::load(&journal).unwrap();
        assert_eq!(
            written.get(200).unwrap().cpu_cgroup.as_deref(),
            Some(std::path::Path::new("/fake/cpu/x")),
            "original cgroup journaled at adoption"
        );
        let before = std::fs::read(&journal).unwrap();
        for owner in [1, 2, 1] {
            e.set_gang(Some(Gang {
                active: [owner].into(),
                strict: false,
            }));
        }
        assert_eq!(e.k.cgroup(200), cg("idle"));
        assert_eq!(
            std::fs::read(&journal).unwrap(),
            before,
            "the policy path wrote the journal"
        );
    }

    #[test]
    fn without_a_demotion_cgroup_no_task_changes_cgroup() {
        use crate::kernel::fake::{Call, FAKE_CPU_ROOT};
        let mut e = engine();
        job_a_slice_demoting_job_b(&mut e);
        assert_eq!(e.k.tasks[&200].group_nice, 19, "autogroup nice as before");
        e.shutdown();
        assert!(
            !e.k.calls
                .iter()
                .any(|c| matches!(c, Call::SetCpuCgroup(..))),
            "{:?}",
            e.k.calls
        );
        assert_eq!(e.k.cgroup(200), std::path::Path::new(FAKE_CPU_ROOT));
        assert!(e.ledger.is_empty());
    }

    #[test]
    fn shutdown_puts_every_task_back_in_its_original_cgroup() {
        use crate::kernel::fake::FAKE_CPU_ROOT;
        let mut e = cgroup_engine();
        e.k.spawn(100, SchedAttr::other(0));
        e.k.spawn_thread(101, 100, SchedAttr::other(0));
        e.k.spawn(200, SchedAttr::other(2));
        for t in [100, 101] {
            e.k.tasks.get_mut(&t).unwrap().cpu_cgroup = "/fake/cpu/jobs/a".into();
        }
        e.adopt(1, "a", &[100], None).unwrap();
        e.adopt(2, "b", &[200], None).unwrap();
        e.set_gang(Some(Gang {
            active: [1].into(),
            strict: false,
        }));
        assert_eq!(e.k.cgroup(200), cg("idle"));
        // Threads the ledger does not know: one of process 100 (its fork
        // event was lost) and a stranger someone put in idle.
        e.k.spawn_thread(102, 100, SchedAttr::other(0));
        e.k.tasks.get_mut(&102).unwrap().cpu_cgroup = cg("idle");
        e.k.spawn(300, SchedAttr::other(0));
        e.k.tasks.get_mut(&300).unwrap().cpu_cgroup = cg("idle");
        let r = e.shutdown();
        assert!(r.failed.is_empty(), "{r:?}");
        assert_eq!(e.k.cgroup(100), std::path::Path::new("/fake/cpu/jobs/a"));
        assert_eq!(e.k.cgroup(101), std::path::Path::new("/fake/cpu/jobs/a"));
        assert_eq!(e.k.cgroup(200), std::path::Path::new(FAKE_CPU_ROOT));
        assert_eq!(e.k.attr(200), SchedAttr::other(2));
        assert_eq!(
            e.k.cgroup(102),
            std::path::Path::new("/fake/cpu/jobs/a"),
            "swept to its process's original cgroup"
        );
        assert_eq!(
            e.k.cgroup(300),
            std::path::Path::new(FAKE_CPU_ROOT),
            "swept to the hierarchy root"
        );
        assert!(e.k.cpu_cgroup_tasks(&cg("idle")).unwrap().is_empty());
        assert!(e.k.cpu_cgroup_tasks(&cg("active")).unwrap().is_empty());
    }

    #[test]
    fn forked_thread_of_a_demoted_task_stays_demoted_then_follows_its_job() {
        let mut e = cgroup_engine();
        job_a_slice_demoting_job_b(&mut e);
        fork(&mut e, 200, 201, 2);
        assert_eq!(e.reg.task(201).unwrap().job, 2);
        assert_eq!(e.k.cgroup(201), cg("idle"), "demoted like its job");
        assert_eq!(e.k.attr(201).policy, SchedPolicy::Idle);
        // A thread of the slot's job starts in active.
        fork(&mut e, 100, 101, 1);
        assert_eq!(e.k.cgroup(101), cg("active"));
        e.set_gang(Some(Gang {
            active: [2].into(),
            strict: false,
        }));
        assert_eq!(e.k.cgroup(201), cg("active"), "promoted with its job");
        assert_eq!(e.k.attr(201), SchedAttr::other(0));
        assert_eq!(e.k.cgroup(101), cg("idle"));
        // Forked in idle, but its job owns the slot by the time the agent
        // sees the fork: it must not stay in idle.
        e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = cg("idle");
        fork(&mut e, 200, 202, 2);
        e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = cg("active");
        assert_eq!(e.k.cgroup(202), cg("active"));
        e.shutdown();
        for t in [100, 101, 200, 201, 202] {
            assert_eq!(
                e.k.cgroup(t),
                std::path::Path::new(crate::kernel::fake::FAKE_CPU_ROOT),
                "task {t}"
            );
        }
        assert_eq!(e.k.attr(201), SchedAttr::other(0));
    }
}
