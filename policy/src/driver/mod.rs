//! Feeding a local policy: turning what the eBPF side reports into the
//! policy's typed events, and keeping the policy's tick schedule.
//!
//! Arrivals for off-CPU tasks and spin starts of watched (boosted) tasks come
//! from the ring buffer as they happen. Everything else the policies want —
//! switches in/out, spin starts, data received — is derived at each tick by
//! comparing the task's counters with the previous tick's, with the kernel's
//! own timestamps, so no per-context-switch event ever crosses to userspace.
use std::collections::HashMap;

pub mod wakeup;

use crate::local::{
    Action, CpuSnapshot, Event, JobId, LocalPolicy, LocalPolicyConfig, NodeSnapshot, PolicyKind,
    SwitchOut, TaskId, TaskInfo, TaskSnapshot, build_policy,
};
use cosched_agent_common::{DEFAULT_SPIN_GAP_NS, TaskStats, in_spin_episode};

/// With no managed task spinning for this long, the periodic tick slows
/// down by [`QUIET_TICK_FACTOR`].
const QUIET_AFTER_NS: u64 = 10_000_000;
/// How much slower the periodic tick runs while no task spins. What the
/// spin-wait policies (SB, SY, PB) act on is a spin, and DCS only boosts waiting
/// (spinning) receivers; with no spin, a 1 ms tick only reads counters and
/// takes the CPU from the jobs: with blocking receives on busy nodes that
/// cost the tick-driven policies 7–8 % of slowdown at MPL 3. A spin that
/// starts meanwhile is seen at the next tick, at most `QUIET_TICK_FACTOR`
/// ticks late. PB asks for its period only while a task spins (or its own
/// boost runs). FCS keeps its 1 ms tick while it knows a gang slot: its
/// counters are built from the ticks' switch events
/// ([`LocalPolicy::counts_every_tick`]).
const QUIET_TICK_FACTOR: u64 = 10;
/// The longest interval between ticks while no managed task runs at all
/// (every one asleep or blocked): each tick that finds nothing ran doubles
/// the interval up to this. A task that starts running again is seen at the
/// next tick at the latest; an arrival or a spin start reported by the eBPF
/// side brings the normal pace back at once. With many sleeping jobs the
/// agent then wakes a few times a second instead of a hundred.
const IDLE_TICK_MAX_NS: u64 = 100_000_000;

pub struct PolicyDriver {
    policy: Box<dyn LocalPolicy>,
    kind: PolicyKind,
    tick_ns: u64,
    /// The spin gap (see [`spinning_since`]).
    spin_gap_ns: u64,
    last_tick: u64,
    /// When a tick last saw a managed task in a spin episode.
    last_spin_seen: u64,
    /// Consecutive ticks that found no managed task had run since the one
    /// before.
    idle_ticks: u32,
    prev: HashMap<u32, TaskStats>,
    /// Tasks the policy was told about and not told are gone.
    known: std::collections::HashSet<u32>,
    actions: Vec<Action>,
}

impl std::fmt::Debug for PolicyDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyDriver")
            .field("kind", &self.kind)
            .finish()
    }
}

/// Is the task in a spin episode at `now` (also while preempted in it), and
/// since when. The eBPF side ends an episode when the task receives, sends
/// or blocks, and checks the gap at its next wait and at switch-out; a task
/// that waited once and has computed on its CPU ever since does neither, so
/// the gap is checked here too: past `gap_ns` of on-CPU time since its last
/// empty wait it is computing, not waiting.
pub fn spinning_since(s: &TaskStats, now: u64, gap_ns: u64) -> Option<u64> {
    in_spin_episode(s, now, gap_ns).then_some(s.spin_episode_start_ns)
}

/// What changed for one task between two counter snapshots, as policy events
/// with the kernel's timestamps; `cur` was read at `now`.
pub fn derived_events(
    tid: u32,
    prev: Option<&TaskStats>,
    cur: &TaskStats,
    now: u64,
    gap_ns: u64,
) -> Vec<Event<'static>> {
    let task = TaskId(tid);
    let zero = TaskStats::default();
    let p = prev.unwrap_or(&zero);
    let mut ev = Vec::new();
    let outs = |s: &TaskStats| s.switches_out_voluntary + s.switches_out_preempted;
    if cur.switches_in > p.switches_in && cur.last_run_start_ns != 0 {
        ev.push(Event::SwitchedIn {
            task,
            cpu: cur.cpu,
            at: cur.last_run_start_ns,
        });
    }
    if outs(cur) > outs(p) && cur.last_switch_out_ns != 0 {
        let how = if cur.last_out_preempted != 0 {
            SwitchOut::Preempted
        } else {
            SwitchOut::Voluntary
        };
        ev.push(Event::SwitchedOut {
            task,
            at: cur.last_switch_out_ns,
            how,
        });
    }
    // A send ends an episode, so one that is going on now started after the
    // sends counted here: they come first (a stable sort keeps the order).
    if cur.sends > p.sends {
        let at = match spinning_since(cur, now, gap_ns) {
            Some(since) => since,
            None => now,
        };
        ev.push(Event::DataSent { task, at });
    }
    // An episode is reported once, by its start (the previous snapshot may
    // have shown it already, within the gap then or not).
    if let Some(since) = spinning_since(cur, now, gap_ns)
        && p.spin_episode_start_ns != since
    {
        ev.push(Event::SpinStarted { task, at: since });
    }
    if cur.recv_ok > p.recv_ok && cur.last_recv_ok_ns != 0 {
        ev.push(Event::DataReceived {
            task,
            at: cur.last_recv_ok_ns,
        });
    }
    ev.sort_by_key(Event::at);
    ev
}

pub fn task_snapshot(tid: u32, s: &TaskStats, now: u64, gap_ns: u64) -> TaskSnapshot {
    let pending = s.message_pending();
    TaskSnapshot {
        task: TaskId(tid),
        on_cpu: s.on_cpu != 0,
        spinning_since: spinning_since(s, now, gap_ns),
        pending_message: pending,
        preempted: s.on_cpu == 0 && s.last_out_preempted != 0,
        last_arrival_ns: s.last_arrival_ns,
        last_wait_end_ns: s.last_wait_end_ns,
        oncpu_ns: s.oncpu_ns,
        arrivals: s.arrivals,
    }
}

impl PolicyDriver {
    pub fn new(cfg: &LocalPolicyConfig, tick_us: u64) -> Result<Self, String> {
        let policy = build_policy(cfg).map_err(|e| e.to_string())?;
        Ok(Self {
            policy,
            kind: cfg.kind,
            tick_ns: tick_us * 1000,
            spin_gap_ns: DEFAULT_SPIN_GAP_NS,
            last_tick: 0,
            last_spin_seen: 0,
            idle_ticks: 0,
            prev: HashMap::new(),
            known: Default::default(),
            actions: Vec::new(),
        })
    }

    pub fn kind(&self) -> PolicyKind {
        self.kind
    }

    /// The spin gap the eBPF side applies too (`[detect] spin_gap_us`).
    pub fn set_spin_gap(&mut self, gap_ns: u64) {
        self.spin_gap_ns = gap_ns;
    }

    /// Does this policy react to anything at all (else the agent only observes).
    pub fn active(&self) -> bool {
        self.kind != PolicyKind::Local
    }

    /// Does the policy act now: active, and not dormant
    /// ([`LocalPolicy::dormant`], FCS without gang slots). A dormant policy
    /// gets no periodic tick, and the agent need not run above the jobs.
    pub fn acting(&self) -> bool {
        self.active() && !self.policy.dormant()
    }

    fn feed(&mut self, ev: &Event<'_>) {
        self.policy.on_event(ev, &mut self.actions);
    }

    pub fn task_added(&mut self, tid: u32, job: u32, now: u64) {
        self.known.insert(tid);
        self.feed(&Event::TaskAdded {
            task: TaskId(tid),
            info: TaskInfo::of_job(JobId(job)),
            at: now,
        });
    }

    pub fn task_exited(&mut self, tid: u32, now: u64) {
        self.feed(&Event::TaskExited {
            task: TaskId(tid),
            at: now,
        });
        self.policy.forget(TaskId(tid));
        self.prev.remove(&tid);
        self.known.remove(&tid);
    }

    pub fn arrival(&mut self, tid: u32, at: u64, on_cpu: bool, spinning: bool) {
        self.idle_ticks = 0;
        self.feed(&Event::MessageArrived {
            task: TaskId(tid),
            at,
            on_cpu,
            spinning,
        });
    }

    pub fn spin_started(&mut self, tid: u32, at: u64) {
        self.last_spin_seen = self.last_spin_seen.max(at);
        self.idle_ticks = 0;
        self.feed(&Event::SpinStarted {
            task: TaskId(tid),
            at,
        });
    }

    /// A gang slot started (FCS): `owner` owns the CPU until `until`.
    pub fn slot_started(&mut self, at: u64, owner: Option<u32>, until: u64) {
        self.feed(&Event::SlotStarted {
            at,
            owner: owner.map(JobId),
            until,
        });
    }

    /// Brings the policy's view of one task up to date from its counters
    /// read at `now` (the task holding a CPU, right before an arrival for
    /// another task is judged).
    pub fn observe(&mut self, tid: u32, s: &TaskStats, now: u64) {
        let events = derived_events(tid, self.prev.get(&tid), s, now, self.spin_gap_ns);
        self.prev.insert(tid, *s);
        for ev in &events {
            self.feed(ev);
        }
    }

    /// How many tasks the policy knows.
    pub fn task_count(&self) -> usize {
        self.known.len()
    }

    /// When the last tick ran (0: none yet).
    pub fn last_tick(&self) -> u64 {
        self.last_tick
    }

    /// The interval between ticks now, ns: the configured one while tasks
    /// spin, [`QUIET_TICK_FACTOR`] times longer after [`QUIET_AFTER_NS`]
    /// without a spin — or always, for a policy that hears of the spins it
    /// acts on from the eBPF side ([`LocalPolicy::needs_spin_ticks`]): MPI
    /// ranks always spin, and on a fully subscribed node each tick preempts
    /// a rank and makes the kernel pick again, mostly the other job
    /// (docs/benchmarks.md, "Why the local policies lose on OpenMPI").
    pub fn tick_ns(&self) -> u64 {
        let spinning = self.policy.needs_spin_ticks()
            && self.last_tick.saturating_sub(self.last_spin_seen) <= QUIET_AFTER_NS;
        if self.policy.counts_every_tick() || spinning {
            self.tick_ns
        } else {
            let quiet = self.tick_ns * QUIET_TICK_FACTOR;
            let idle = quiet.saturating_mul(1 << self.idle_ticks.saturating_sub(1).min(16));
            idle.min(IDLE_TICK_MAX_NS).max(quiet)
        }
    }

    /// No managed task has run for several ticks and the tick interval
    /// reached its longest: the periodic tick then rides on the agent's
    /// poll (see `Engine::poll`) instead of waking the agent on its own.
    /// The policy's own timers still do.
    pub fn resting(&self) -> bool {
        self.active() && !self.policy.counts_every_tick() && self.tick_ns() >= IDLE_TICK_MAX_NS
    }

    /// When the driver next needs [`Self::tick`] (absolute CLOCK_MONOTONIC ns):
    /// the policy's own timers, and the periodic tick unless the policy is
    /// dormant.
    pub fn next_wakeup(&self) -> Option<u64> {
        if !self.active() {
            return None;
        }
        let periodic = (self.acting() && !self.resting()).then(|| self.last_tick + self.tick_ns());
        match (self.policy.next_wakeup(), periodic) {
            (Some(timer), Some(periodic)) => Some(timer.min(periodic)),
            (timer, periodic) => timer.or(periodic),
        }
    }

    /// Derives events from the counters of the managed tasks, then ticks.
    /// `holders`: (cpu, managed task holding it).
    pub fn tick(&mut self, now: u64, stats: &[(u32, TaskStats)], holders: &[(u32, u32)]) {
        self.last_tick = now;
        let gap = self.spin_gap_ns;
        if stats
            .iter()
            .any(|(_, s)| spinning_since(s, now, gap).is_some())
        {
            self.last_spin_seen = now;
        }
        let ran = stats.iter().any(|(tid, s)| {
            s.on_cpu != 0
                || self
                    .prev
                    .get(tid)
                    .is_none_or(|p| p.switches_in != s.switches_in)
        });
        self.idle_ticks = if ran {
            0
        } else {
            self.idle_ticks.saturating_add(1)
        };
        let mut events = Vec::new();
        for (tid, s) in stats {
            events.extend(derived_events(*tid, self.prev.get(tid), s, now, gap));
            self.prev.insert(*tid, *s);
        }
        events.sort_by_key(Event::at);
        for ev in &events {
            self.feed(ev);
        }
        let snapshot = self.policy.uses_snapshots().then(|| NodeSnapshot {
            tasks: stats
                .iter()
                .map(|(t, s)| task_snapshot(*t, s, now, gap))
                .collect(),
            cpus: holders
                .iter()
                .map(|&(cpu, tid)| CpuSnapshot {
                    cpu,
                    running: Some(TaskId(tid)),
                })
                .collect(),
        });
        self.feed(&Event::Tick {
            at: now,
            snapshot: snapshot.as_ref(),
        });
    }

    /// The class the policy put `tid` in (FCS), if any.
    pub fn task_class(&self, tid: u32) -> Option<&'static str> {
        self.policy.task_class(TaskId(tid))
    }

    /// Hands every task back at Normal (policy switch or shutdown).
    pub fn release_all(&mut self) {
        self.policy.release_all(&mut self.actions);
    }

    /// The actions decided since the last call.
    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.actions)
    }
}

#[cfg(test)]
mod tests {
    use crate::local::Level;

    use super::*;

    /// A spin gap for the tests, ns.
    const GAP: u64 = 100_000;

    fn stats() -> TaskStats {
        TaskStats::default()
    }

    #[test]
    fn counters_that_moved_become_events_in_time_order() {
        let prev = stats();
        let cur = TaskStats {
            switches_in: 1,
            last_run_start_ns: 100,
            switches_out_preempted: 1,
            last_switch_out_ns: 50,
            last_out_preempted: 1,
            recv_ok: 2,
            last_recv_ok_ns: 120,
            spin_last_ns: 130,
            spin_episode_start_ns: 125,
            ..stats()
        };
        let ev = derived_events(7, Some(&prev), &cur, 140, GAP);
        let kinds: Vec<u64> = ev.iter().map(Event::at).collect();
        assert_eq!(kinds, vec![50, 100, 120, 125]);
        assert!(matches!(
            ev[0],
            Event::SwitchedOut {
                how: SwitchOut::Preempted,
                ..
            }
        ));
        assert!(matches!(ev[3], Event::SpinStarted { .. }));
    }

    #[test]
    fn a_send_comes_before_the_wait_that_followed_it() {
        let prev = stats();
        let cur = TaskStats {
            sends: 1,
            spin_last_ns: 130,
            spin_episode_start_ns: 130,
            on_cpu: 1,
            ..stats()
        };
        let ev = derived_events(7, Some(&prev), &cur, 140, GAP);
        assert!(matches!(ev[0], Event::DataSent { at: 130, .. }));
        assert!(matches!(ev[1], Event::SpinStarted { at: 130, .. }));
        assert_eq!(ev.len(), 2);
    }

    #[test]
    fn unchanged_counters_make_no_events() {
        let s = TaskStats {
            switches_in: 3,
            last_run_start_ns: 10,
            spin_last_ns: 20,
            spin_episode_start_ns: 15,
            ..stats()
        };
        assert!(derived_events(1, Some(&s), &s, 30, GAP).is_empty());
    }

    #[test]
    fn same_spin_episode_is_reported_once() {
        let a = TaskStats {
            spin_last_ns: 20,
            spin_episode_start_ns: 15,
            ..stats()
        };
        let b = TaskStats {
            spin_last_ns: 90,
            spin_episode_start_ns: 15,
            ..stats()
        };
        assert!(derived_events(1, Some(&a), &b, 100, GAP).is_empty());
        let c = TaskStats {
            spin_last_ns: 95,
            spin_episode_start_ns: 93,
            ..stats()
        };
        assert_eq!(derived_events(1, Some(&b), &c, 100, GAP).len(), 1);
    }

    #[test]
    fn pending_message_comes_from_timestamps_and_preempted_from_the_switch_out() {
        let s = TaskStats {
            last_arrival_ns: 10,
            last_recv_ok_ns: 5,
            ..stats()
        };
        let snap = task_snapshot(1, &s, 20, GAP);
        assert!(snap.pending_message && !snap.on_cpu);
        assert!(
            !snap.preempted,
            "woken from a blocking receive: the kernel's wakeup decides, not a boost"
        );
        assert_eq!(snap.last_arrival_ns, 10);
        let s = TaskStats {
            last_arrival_ns: 10,
            last_recv_ok_ns: 15,
            last_out_preempted: 1,
            ..stats()
        };
        let snap = task_snapshot(1, &s, 20, GAP);
        assert!(snap.preempted && !snap.pending_message);
        let running = TaskStats { on_cpu: 1, ..s };
        assert!(!task_snapshot(1, &running, 20, GAP).preempted, "on a CPU");
    }

    #[test]
    fn tick_slows_down_while_no_task_spins_and_speeds_up_at_a_spin() {
        // Learned spin times differ per task: the tick finds the spinners.
        let mut learning = LocalPolicyConfig::for_kind(PolicyKind::Sb);
        learning.sb.learn_spin_time = true;
        let mut d = PolicyDriver::new(&learning, 1000).unwrap();
        let quiet = TaskStats::default();
        let ms = 1_000_000;
        d.tick(ms, &[(7, quiet)], &[]);
        assert_eq!(d.tick_ns(), ms, "a spin was seen recently enough (start)");
        d.tick(20 * ms, &[(7, quiet)], &[]);
        assert_eq!(d.tick_ns(), 10 * ms, "no spin for 20 ms");
        assert_eq!(d.next_wakeup(), Some(30 * ms));
        let spinning = TaskStats {
            spin_episode_start_ns: 29 * ms,
            ..quiet
        };
        d.tick(30 * ms, &[(7, spinning)], &[]);
        assert_eq!(d.tick_ns(), ms);
        assert_eq!(d.next_wakeup(), Some(31 * ms));
        let mut fcs =
            PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Fcs), 1000).unwrap();
        fcs.tick(ms, &[(7, quiet)], &[]);
        fcs.tick(20 * ms, &[(7, quiet)], &[]);
        assert_eq!(
            fcs.tick_ns(),
            10 * ms,
            "FCS without gang slots only observes"
        );
        fcs.slot_started(21 * ms, Some(3), 31 * ms);
        fcs.tick(22 * ms, &[(7, quiet)], &[]);
        assert_eq!(
            fcs.tick_ns(),
            ms,
            "FCS counts from every tick in gang slots"
        );
    }

    /// Two MPI ranks spinning on one CPU under FCS with no coordinator: FCS
    /// keeps every process at its own attributes, so the agent wakes for
    /// nothing (no periodic tick, not even the quiet one) and need not run
    /// above the ranks; the first slot broadcast brings the 1 ms tick, and
    /// once the coordinator has been quiet past the grace period the ticks
    /// stop again.
    #[test]
    fn slotless_fcs_over_spinning_ranks_gets_no_tick_until_a_slot_comes() {
        let ms = 1_000_000;
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Fcs), 1000).unwrap();
        d.task_added(7, 1, 0);
        d.task_added(8, 2, 0);
        let spinning = |start: u64, last: u64| TaskStats {
            on_cpu: 1,
            switches_in: 1,
            last_run_start_ns: start,
            spin_episode_start_ns: start,
            spin_last_ns: last,
            ..TaskStats::default()
        };
        d.tick(
            ms,
            &[(7, spinning(0, ms)), (8, TaskStats::default())],
            &[(0, 7)],
        );
        assert!(d.active() && !d.acting(), "FCS, but nothing to act on");
        assert_eq!(
            d.next_wakeup(),
            None,
            "no periodic tick, not even the quiet one"
        );
        assert!(d.take_actions().is_empty());
        d.slot_started(5 * ms, Some(1), 15 * ms);
        assert!(d.acting());
        assert_eq!(
            d.next_wakeup(),
            Some(2 * ms),
            "the 1 ms tick, from the last one"
        );
        d.tick(
            6 * ms,
            &[(7, spinning(0, 6 * ms)), (8, TaskStats::default())],
            &[(0, 7)],
        );
        assert_eq!(d.next_wakeup(), Some(7 * ms));
        // The coordinator goes quiet: the slot ends at 15 ms, its grace
        // (100 ms) passes, and FCS gives up on slots.
        d.tick(15 * ms, &[(7, spinning(0, 15 * ms))], &[(0, 7)]);
        assert!(d.acting(), "within the grace period the groups hold");
        d.tick(116 * ms, &[(7, spinning(0, 116 * ms))], &[(0, 7)]);
        assert!(!d.acting());
        assert_eq!(d.next_wakeup(), None);
    }

    /// SB with its fixed threshold on a node whose ranks always spin (real
    /// MPI): the eBPF side reports the spin that passed the threshold, so
    /// the tick stays at the quiet pace, and the report leads to the block.
    #[test]
    fn spin_block_told_of_long_spins_keeps_the_quiet_tick_while_ranks_spin() {
        // The fixed threshold: each task is alone on its CPU here, where
        // MPL-aware blocking would wait for its bound (its own scenarios
        // are in sb_mpl_scenarios.rs).
        let mut config = LocalPolicyConfig::for_kind(PolicyKind::Sb);
        config.sb.mpl_aware = false;
        let mut d = PolicyDriver::new(&config, 1000).unwrap();
        let ms = 1_000_000;
        d.task_added(7, 1, 0);
        d.task_added(8, 2, 0);
        let quiet = TaskStats::default();
        d.tick(ms, &[(7, quiet), (8, quiet)], &[]);
        d.tick(20 * ms, &[(7, quiet), (8, quiet)], &[]);
        let running = |cpu: u32| TaskStats {
            cpu,
            on_cpu: 1,
            switches_in: 1,
            run_start_ns: 25 * ms,
            last_run_start_ns: 25 * ms,
            ..quiet
        };
        let spinning = |cpu: u32, start: u64, last: u64| TaskStats {
            spin_episode_start_ns: start,
            spin_last_ns: last,
            ..running(cpu)
        };
        // Task 7 spins (for 100 µs so far), task 8 computes.
        let at = 30 * ms;
        d.tick(
            at,
            &[(7, spinning(0, at - 100_000, at)), (8, running(1))],
            &[(0, 7), (1, 8)],
        );
        assert_eq!(d.tick_ns(), 10 * ms, "a spin alone keeps the quiet pace");
        assert!(d.take_actions().is_empty());
        assert_eq!(
            d.next_wakeup(),
            Some(30 * ms + 400_000),
            "task 7's own threshold; no 1 ms tick, no timer for task 8"
        );
        // Task 8 starts waiting at 31 ms; the eBPF side reports it at
        // 31.5 ms (500 µs spun), and the agent ticks at once: it is blocked
        // then, not at the next quiet tick (40 ms).
        let at = 31 * ms + 500_000;
        d.tick(
            at,
            &[
                (7, spinning(0, 30 * ms - 100_000, at)),
                (8, spinning(1, 31 * ms, at)),
            ],
            &[(0, 7), (1, 8)],
        );
        let blocked: Vec<u32> = d
            .take_actions()
            .iter()
            .filter_map(|a| match a {
                Action::SetLevel {
                    task,
                    level: Level::Demote,
                    ..
                } => Some(task.0),
                _ => None,
            })
            .collect();
        assert!(blocked.contains(&8), "blocked: {blocked:?}");
        assert_eq!(d.tick_ns(), 10 * ms);
    }

    /// SY on a node whose ranks always spin (real MPI): its threshold is
    /// the cost of a boost-less wake, the eBPF side reports the spin that
    /// passes it, and the agent does not tick every millisecond (each such
    /// tick preempted a rank). A rank whose message comes after 1 ms of
    /// spin keeps its CPU; one that has spun 2 ms yields.
    #[test]
    fn spin_yield_keeps_the_quiet_tick_while_ranks_spin_and_yields_at_the_cost_of_a_yield() {
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Sy), 1000).unwrap();
        let ms = 1_000_000;
        d.task_added(7, 1, 0);
        let spinning = |start: u64, last: u64| TaskStats {
            on_cpu: 1,
            switches_in: 1,
            run_start_ns: 25 * ms,
            last_run_start_ns: 25 * ms,
            spin_episode_start_ns: start,
            spin_last_ns: last,
            ..TaskStats::default()
        };
        let demoted = |d: &mut PolicyDriver| {
            d.take_actions().iter().any(|a| {
                matches!(
                    a,
                    Action::SetLevel {
                        level: Level::Demote,
                        ..
                    }
                )
            })
        };
        d.tick(30 * ms, &[(7, spinning(29 * ms, 30 * ms))], &[(0, 7)]);
        assert_eq!(d.tick_ns(), 10 * ms, "ranks spin, yet the quiet pace");
        assert!(!demoted(&mut d), "1 ms of spin: cheaper than a yield");
        assert_eq!(d.next_wakeup(), Some(31 * ms), "its own threshold");
        d.tick(31 * ms, &[(7, spinning(29 * ms, 31 * ms))], &[(0, 7)]);
        assert!(demoted(&mut d), "2 ms of spin: yielded");
    }

    #[test]
    fn ticks_back_off_while_no_task_runs_and_resume_at_an_arrival() {
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Dcs), 1000).unwrap();
        let ms = 1_000_000;
        let asleep = TaskStats {
            switches_in: 5,
            ..TaskStats::default()
        };
        let mut now = 100 * ms;
        let mut intervals = Vec::new();
        for _ in 0..8 {
            now += d.tick_ns();
            assert!(!d.resting() || d.tick_ns() == IDLE_TICK_MAX_NS);
            d.tick(now, &[(7, asleep)], &[]);
            intervals.push(d.tick_ns() / ms);
        }
        assert_eq!(
            intervals,
            [10, 10, 20, 40, 80, 100, 100, 100],
            "quiet after 10 ms without a spin, then doubling up to 100 ms"
        );
        assert!(d.resting());
        assert_eq!(d.next_wakeup(), None, "ticks ride on the poll now");
        d.arrival(7, now, false, false);
        assert_eq!(d.tick_ns(), 10 * ms, "an arrival ends the idle back-off");
        assert_eq!(d.next_wakeup(), Some(now + 10 * ms));
        let ran = TaskStats {
            switches_in: 6,
            ..asleep
        };
        d.tick(now + 10 * ms, &[(7, asleep)], &[]);
        d.tick(now + 20 * ms, &[(7, ran)], &[]);
        assert_eq!(d.tick_ns(), 10 * ms, "a task that ran ends it too");
    }

    /// A task on CPU since `run_start` whose last empty wait (and episode
    /// start) was at `wait`.
    fn waited_at(run_start: u64, wait: u64) -> TaskStats {
        TaskStats {
            on_cpu: 1,
            run_start_ns: run_start,
            switches_in: 1,
            last_run_start_ns: run_start,
            spin_episode_start_ns: wait,
            spin_last_ns: wait,
            empty_polls: 1,
            ..stats()
        }
    }

    /// Runs SB (500 µs threshold) over one task for 5 ms of 100 µs ticks;
    /// `at(now)` gives its counters. Returns the levels SB asked for.
    fn spin_block_levels(gap_ns: u64, at: impl Fn(u64) -> TaskStats) -> Vec<Level> {
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Sb), 100).unwrap();
        d.set_spin_gap(gap_ns);
        d.task_added(7, 1, 0);
        let mut levels = Vec::new();
        for step in 1..=50 {
            let now = 1_000_000 + step * 100_000;
            d.tick(now, &[(7, at(now))], &[(0, 7)]);
            levels.extend(d.take_actions().into_iter().filter_map(|a| match a {
                Action::SetLevel { level, .. } => Some(level),
                Action::Refused { .. } => None,
            }));
        }
        levels
    }

    #[test]
    fn a_task_that_polled_once_and_then_computes_is_not_blocked_by_spin_block() {
        // One empty poll at 1 ms, then computation on its CPU.
        let polled_once = |_| waited_at(900_000, 1_000_000);
        assert_eq!(spin_block_levels(GAP, polled_once), vec![]);
        // Control: were the gap longer than its computation, the one poll
        // would look like a wait that never ends, and SB would block it.
        assert!(
            spin_block_levels(100_000_000, polled_once).contains(&Level::Demote),
            "with a gap longer than the computation SB blocks"
        );
    }

    #[test]
    fn a_task_that_keeps_polling_is_blocked_by_spin_block() {
        // Polls every 10 µs from 1 ms on: one long wait, past SB's threshold.
        let polling = |now: u64| TaskStats {
            spin_last_ns: now - 10_000,
            empty_polls: (now - 1_000_000) / 10_000,
            ..waited_at(900_000, 1_000_000)
        };
        assert!(spin_block_levels(GAP, polling).contains(&Level::Demote));
    }

    #[test]
    fn a_spinner_preempted_for_long_is_still_waiting_when_read() {
        // Preempted 1 µs after its last poll, off CPU for 50 ms since.
        let preempted = TaskStats {
            on_cpu: 0,
            run_start_ns: 0,
            spin_last_ns: 0,
            gap_oncpu_ns: 1_000,
            last_out_preempted: 1,
            ..waited_at(900_000, 1_000_000)
        };
        let snap = task_snapshot(7, &preempted, 51_000_000, GAP);
        assert_eq!(snap.spinning_since, Some(1_000_000));
        assert!(snap.preempted);
    }

    #[test]
    fn a_new_wait_after_computing_is_reported_as_a_new_spin_start() {
        let first = waited_at(0, 1_000);
        let later = 1_000 + GAP + 1;
        assert_eq!(spinning_since(&first, later, GAP), None, "computing");
        let again = waited_at(0, 5_000_000);
        let ev = derived_events(7, Some(&first), &again, 5_000_010, GAP);
        assert!(
            matches!(ev[..], [Event::SpinStarted { at: 5_000_000, .. }]),
            "{ev:?}"
        );
    }

    /// A receiver spinning on its socket can take a message off the queue
    /// before the sender's `sk_data_ready` stamps its arrival: the stamp
    /// then comes after the receive that read it. The receiver answers and
    /// spins for the next message, which does not come (its peer stopped).
    /// Its empty receives show nothing is pending: SB (defaults, the task
    /// alone on its CPU) blocks it once it has spun its MPL-aware bound,
    /// at the wake-up it asked for. (Judged by the stamps alone, it stayed
    /// "with a message to read" and was never blocked.)
    #[test]
    fn a_receiver_that_read_its_message_before_the_arrival_was_stamped_is_blocked_when_it_spins_on()
    {
        let ms = 1_000_000;
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Sb), 1000).unwrap();
        d.task_added(7, 1, 0);
        let received = 9 * ms;
        let waits_from = received + 50_000;
        let spinning = |now: u64| TaskStats {
            on_cpu: 1,
            switches_in: 1,
            run_start_ns: 5 * ms,
            last_run_start_ns: 5 * ms,
            recv_ok: 1,
            last_recv_ok_ns: received,
            arrivals: 1,
            last_arrival_ns: received + 100,
            sends: 1,
            spin_episode_start_ns: waits_from,
            spin_last_ns: now,
            last_found_empty_ns: now,
            recv_empty: 1,
            ..TaskStats::default()
        };
        let mut now = 10 * ms;
        let mut demoted_at = None;
        for _ in 0..5 {
            d.tick(now, &[(7, spinning(now))], &[(0, 7)]);
            let demoted = d.take_actions().iter().any(|a| {
                matches!(
                    a,
                    Action::SetLevel {
                        level: Level::Demote,
                        ..
                    }
                )
            });
            if demoted {
                demoted_at = Some(now);
                break;
            }
            now = d.next_wakeup().expect("SB ticks while a task spins");
        }
        assert_eq!(
            demoted_at,
            Some(waits_from + 4 * ms),
            "blocked at its 4 ms bound (alone on its CPU)"
        );
    }

    /// Counters of a task alone on CPU 0 since 5 ms that has waited (empty
    /// receives) from `from` until its latest empty look at `last_wait`.
    fn spinning_alone(from: u64, last_wait: u64) -> TaskStats {
        TaskStats {
            on_cpu: 1,
            switches_in: 1,
            run_start_ns: 5_000_000,
            last_run_start_ns: 5_000_000,
            recv_ok: 1,
            last_recv_ok_ns: from - 50_000,
            last_wait_end_ns: from - 50_000,
            sends: 1,
            spin_episode_start_ns: from,
            spin_last_ns: last_wait,
            last_found_empty_ns: last_wait,
            recv_empty: 1,
            ..TaskStats::default()
        }
    }

    /// SB (defaults) over a task spinning alone on its CPU from 10 ms on,
    /// ticked at the wake-ups it asks for until it is demoted. Returns the
    /// driver and the time of the demotion.
    fn demoted_spinner(from: u64) -> (PolicyDriver, u64) {
        let mut d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Sb), 1000).unwrap();
        d.task_added(7, 1, 0);
        let mut now = from + 1_000_000;
        for _ in 0..10 {
            d.tick(now, &[(7, spinning_alone(from, now))], &[(0, 7)]);
            if levels_of(d.take_actions()).contains(&Level::Demote) {
                return (d, now);
            }
            now = d.next_wakeup().expect("SB ticks while a task spins");
        }
        panic!("never demoted");
    }

    fn levels_of(actions: Vec<Action>) -> Vec<Level> {
        actions
            .into_iter()
            .filter_map(|a| match a {
                Action::SetLevel { level, .. } => Some(level),
                Action::Refused { .. } => None,
            })
            .collect()
    }

    /// On a virtual machine the hypervisor can stall a vCPU for
    /// milliseconds (measured here: 7 ms): a demoted spinner alone on its
    /// CPU is then "on CPU" with no empty wait for longer than the spin
    /// gap, as if it computed. It never stopped waiting (no data, no send,
    /// no block): it stays demoted. (Handed back on the gap alone, it was
    /// released with no message: the flaky spin-block root test.)
    #[test]
    fn a_demoted_spinner_whose_vcpu_stalls_past_the_spin_gap_stays_demoted() {
        let ms = 1_000_000;
        let from = 10 * ms;
        let (mut d, demoted) = demoted_spinner(from);
        // Spinning on after the demotion, then a 7 ms stall on its CPU.
        let stall_from = demoted + 5 * ms;
        d.tick(
            stall_from,
            &[(7, spinning_alone(from, stall_from))],
            &[(0, 7)],
        );
        let stalled = stall_from + 7 * ms;
        d.tick(stalled, &[(7, spinning_alone(from, stall_from))], &[(0, 7)]);
        // The same stall ended by a preemption: the kernel side closes the
        // episode (computed past the gap), still without a wait end.
        let preempted = TaskStats {
            on_cpu: 0,
            last_out_preempted: 1,
            switches_out_preempted: 1,
            last_switch_out_ns: stalled + ms,
            spin_episode_start_ns: 0,
            spin_last_ns: 0,
            ..spinning_alone(from, stall_from)
        };
        d.tick(stalled + 2 * ms, &[(7, preempted)], &[]);
        assert_eq!(levels_of(d.take_actions()), vec![], "still demoted");
    }

    /// A demoted task that sends (or blocks) has stopped waiting by itself:
    /// it is handed back even though no message was seen arriving.
    #[test]
    fn a_demoted_spinner_that_sends_is_handed_back() {
        let ms = 1_000_000;
        let from = 10 * ms;
        let (mut d, demoted) = demoted_spinner(from);
        let sent = demoted + 2 * ms;
        let after_send = TaskStats {
            sends: 2,
            last_wait_end_ns: sent,
            spin_episode_start_ns: 0,
            spin_last_ns: 0,
            ..spinning_alone(from, demoted)
        };
        d.tick(sent + ms, &[(7, after_send)], &[(0, 7)]);
        assert_eq!(
            levels_of(d.take_actions()),
            vec![Level::Normal],
            "handed back (on its CPU already: no wake boost)"
        );
    }

    #[test]
    fn local_policy_needs_no_ticks_and_others_do() {
        let d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Local), 1000).unwrap();
        assert_eq!(d.next_wakeup(), None);
        let d = PolicyDriver::new(&LocalPolicyConfig::for_kind(PolicyKind::Pb), 1000).unwrap();
        assert!(d.next_wakeup().is_some());
    }
}
