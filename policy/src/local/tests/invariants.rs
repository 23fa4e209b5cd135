//! Property tests: random event sequences into every policy, with random
//! parameters, checked against an oracle that replays the emitted actions.
//!
//! The driver behaves like the agent: it delivers a tick whenever the policy's
//! `next_wakeup` falls before the next event. Checked after every delivery:
//! - actions only change levels, and only of tasks that are managed (added,
//!   not exited or forgotten); `level_of` agrees with the replay;
//! - no boost lasts longer than its bound, no block/yield longer than its
//!   bound, and while a task is held away from `Normal` a wakeup is pending;
//! - per job and aligned window, boosted time never exceeds the budget, nor
//!   does all jobs' boosted time exceed the node's share;
//! - after a long quiet time every timed boost has ended, FCS has given up its
//!   slot, and `release_all` returns every task to `Normal`.

use crate::local::{
    Action, BlockMethod, CpuSnapshot, Event, JobId, Level, LocalPolicy, LocalPolicyConfig,
    NodeSnapshot, PolicyKind, Reason, SwitchOut, TaskId, TaskInfo, TaskSnapshot, YieldLevel,
    build_policy,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use std::collections::{BTreeMap, BTreeSet};

const TASKS: u32 = 4;

fn task(i: u8) -> TaskId {
    TaskId(200 + u32::from(i) % TASKS)
}

fn job_of(task: TaskId) -> JobId {
    JobId(1 + task.0 % 2)
}

#[derive(Debug, Clone)]
struct SnapTask {
    present: bool,
    on_cpu: bool,
    spinning: Option<u16>,
    pending: bool,
    runnable: bool,
}

#[derive(Debug, Clone)]
enum Step {
    Add(u8),
    Exit(u8),
    Forget(u8),
    Arrive {
        task: u8,
        on_cpu: bool,
        spinning: bool,
    },
    SwitchIn {
        task: u8,
        cpu: u8,
    },
    SwitchOut {
        task: u8,
        preempted: bool,
    },
    Spin(u8),
    Receive(u8),
    Tick(Option<(Vec<SnapTask>, [Option<u8>; 2])>),
    Slot {
        owner: Option<u8>,
        len_ms: u8,
    },
}

fn snap_task() -> impl Strategy<Value = SnapTask> {
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(0u16..5_000),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(present, on_cpu, spinning, pending, runnable)| SnapTask {
            present,
            on_cpu,
            spinning,
            pending,
            runnable,
        })
}

fn step() -> impl Strategy<Value = Step> {
    let t = 0u8..TASKS as u8;
    prop_oneof![
        3 => t.clone().prop_map(Step::Add),
        1 => t.clone().prop_map(Step::Exit),
        1 => t.clone().prop_map(Step::Forget),
        6 => (t.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(task, on_cpu, spinning)| Step::Arrive { task, on_cpu, spinning }),
        5 => (t.clone(), 0u8..2).prop_map(|(task, cpu)| Step::SwitchIn { task, cpu }),
        4 => (t.clone(), any::<bool>()).prop_map(|(task, preempted)| Step::SwitchOut { task, preempted }),
        5 => t.clone().prop_map(Step::Spin),
        3 => t.clone().prop_map(Step::Receive),
        2 => proptest::option::of((
            proptest::collection::vec(snap_task(), TASKS as usize),
            [proptest::option::of(0u8..TASKS as u8), proptest::option::of(0u8..TASKS as u8)],
        ))
        .prop_map(Step::Tick),
        2 => (proptest::option::of(1u8..3), 1u8..60).prop_map(|(owner, len_ms)| Step::Slot { owner, len_ms }),
    ]
}

fn config() -> impl Strategy<Value = LocalPolicyConfig> {
    (
        proptest::sample::select(PolicyKind::ALL.to_vec()),
        any::<bool>(),
        any::<bool>(),
        (1_000u64..200_000, 1u8..=90),
        (
            100u64..10_000,
            100u64..5_000,
            1_000u64..150_000,
            50u64..2_000,
        ),
        (0u32..3, 0u32..3, 1_000u64..150_000),
        any::<bool>(),
    )
        .prop_map(
            |(
                kind,
                stop,
                learn,
                (window_us, percent),
                (boost_us, period_us, max_block_us, spin_us),
                fcs,
                mpl_aware,
            )| {
                let mut c = LocalPolicyConfig::for_kind(kind);
                c.fairness.window_us = window_us;
                c.fairness.max_boosted_percent = percent;
                c.fairness.max_node_boosted_percent = u16::from(percent) + 30;
                c.dcs.max_boost_us = boost_us;
                c.pb.period_us = period_us;
                c.sb.block_by = if stop {
                    BlockMethod::Stop
                } else {
                    BlockMethod::Demote
                };
                c.sb.learn_spin_time = learn;
                c.sb.learning.min_samples = 2;
                c.sb.spin_threshold_us = spin_us;
                c.sb.mpl_aware = mpl_aware;
                // DCS-SB's opt-in follows, so its invariants cover both rules.
                c.sb.mpl_aware_in_dcs_sb = mpl_aware;
                c.sb.max_block_us = max_block_us;
                c.sb.wake_boost_us = boost_us;
                c.sy.learn_spin_time = learn;
                c.sy.spin_threshold_us = spin_us;
                c.sy.max_yield_us = max_block_us;
                c.sy.yield_to = if stop {
                    YieldLevel::Nice19
                } else {
                    YieldLevel::Idle
                };
                c.fcs.measure_cs_slots = fcs.0;
                c.fcs.measure_dc_slots = fcs.1;
                c.fcs.slot_grace_us = fcs.2;
                c.fcs.learn_spin_time = learn;
                c.fcs.f_spin_us = spin_us;
                c
            },
        )
}

/// Replays actions and checks every invariant.
struct Oracle {
    config: LocalPolicyConfig,
    policy: Box<dyn LocalPolicy>,
    now: u64,
    managed: BTreeSet<TaskId>,
    /// Current non-Normal level of each task and since when.
    held: BTreeMap<TaskId, (Level, u64)>,
    /// Closed boost intervals `(job, start, end)`.
    boosts: Vec<(JobId, u64, u64)>,
    /// Blocks (or yields) for a spin past the threshold.
    threshold_blocks: usize,
}

impl Oracle {
    fn new(config: LocalPolicyConfig) -> Self {
        let policy = build_policy(&config).expect("generated configs are valid");
        Self {
            config,
            policy,
            now: 0,
            managed: BTreeSet::new(),
            held: BTreeMap::new(),
            boosts: Vec::new(),
            threshold_blocks: 0,
        }
    }

    fn kind(&self) -> PolicyKind {
        self.config.kind
    }

    fn us(v: u64) -> u64 {
        v * 1_000
    }

    fn budget_ns(&self) -> u64 {
        self.config.fairness.budget_ns()
    }

    /// Longest a boost may last, if bounded by time (FCS: by its slots).
    fn boost_bound(&self) -> Option<u64> {
        let c = &self.config;
        let periodic = 2 * self.budget_ns();
        match self.kind() {
            PolicyKind::Dcs | PolicyKind::DcsSb => Some(Self::us(c.dcs.max_boost_us)),
            PolicyKind::Sb => Some(Self::us(c.sb.wake_boost_us)),
            PolicyKind::Pb => Some(periodic),
            PolicyKind::PbSb => Some(periodic.max(Self::us(c.sb.wake_boost_us))),
            PolicyKind::Local | PolicyKind::Sy | PolicyKind::Fcs => None,
        }
    }

    /// Longest a block/yield may last (FCS groups are not blocks).
    fn block_bound(&self) -> Option<u64> {
        match self.kind() {
            PolicyKind::Sb | PolicyKind::PbSb | PolicyKind::DcsSb => {
                Some(Self::us(self.config.sb.max_block_us))
            }
            PolicyKind::Sy => Some(Self::us(self.config.sy.max_yield_us)),
            _ => None,
        }
    }

    fn deliver(&mut self, event: Event<'_>) {
        let mut out = Vec::new();
        self.policy.on_event(&event, &mut out);
        self.record(out);
    }

    /// Ticks the policy asked for, up to `t`.
    fn advance_to(&mut self, t: u64) {
        let mut ticks = 0;
        while let Some(due) = self.policy.next_wakeup()
            && due <= t
        {
            ticks += 1;
            assert!(ticks < 200_000, "too many ticks");
            assert!(
                due >= self.now,
                "wakeup {due} in the past (now {})",
                self.now
            );
            self.now = due;
            self.deliver(Event::Tick {
                at: due,
                snapshot: None,
            });
            if let Some(next) = self.policy.next_wakeup() {
                assert!(next > due, "tick at {due} asks for another tick at {next}");
            }
        }
        self.now = self.now.max(t);
    }

    fn record(&mut self, actions: Vec<Action>) {
        for action in actions {
            let Action::SetLevel {
                task,
                level,
                reason,
            } = action
            else {
                let Action::Refused { task, reason } = action else {
                    unreachable!()
                };
                assert!(reason.is_refusal(), "refusal for {task} by {reason}");
                assert!(self.managed.contains(&task), "refusal for unmanaged {task}");
                continue;
            };
            assert!(
                self.managed.contains(&task),
                "action for unmanaged {task}: {level:?}"
            );
            if reason == Reason::SpinThresholdBlock {
                self.threshold_blocks += 1;
            }
            let current = self.held.get(&task).map_or(Level::Normal, |&(l, _)| l);
            assert_ne!(current, level, "redundant action for {task}");
            self.close(task);
            if !level.is_normal() {
                self.held.insert(task, (level, self.now));
            }
        }
        for &task in &self.managed {
            let replayed = self.held.get(&task).map_or(Level::Normal, |&(l, _)| l);
            assert_eq!(self.policy.level_of(task), replayed, "level_of({task})");
        }
        self.check_open_holds();
    }

    /// Ends `task`'s current hold at `now`, checking its length.
    fn close(&mut self, task: TaskId) {
        let Some((level, since)) = self.held.remove(&task) else {
            return;
        };
        let length = self.now - since;
        if level.is_boost() {
            if let Some(bound) = self.boost_bound() {
                assert!(length <= bound, "{task} boosted {length} ns > {bound}");
            }
            self.boosts.push((job_of(task), since, self.now));
        } else if let Some(bound) = self.block_bound() {
            assert!(
                length <= bound,
                "{task} held at {level:?} {length} ns > {bound}"
            );
        }
    }

    /// Open holds are within their bounds and a wakeup is pending for them.
    fn check_open_holds(&self) {
        for (&task, &(level, since)) in &self.held {
            let bound = if level.is_boost() {
                self.boost_bound()
            } else {
                self.block_bound()
            };
            let wakeup = self.policy.next_wakeup();
            assert!(
                wakeup.is_some(),
                "{task} at {level:?} with no wakeup pending"
            );
            if let (Some(bound), Some(wakeup)) = (bound, wakeup) {
                assert!(
                    self.now - since <= bound,
                    "{task} at {level:?} since {since}, now {}",
                    self.now
                );
                assert!(
                    wakeup <= since + bound,
                    "{task} at {level:?}: next wakeup {wakeup} after its bound"
                );
            }
        }
    }

    fn step(&mut self, dt_us: u64, step: &Step) {
        let at = self.now + Self::us(dt_us);
        self.advance_to(at);
        self.now = at;
        let snapshot;
        match *step {
            Step::Add(i) => {
                self.managed.insert(task(i));
                let info = TaskInfo::of_job(job_of(task(i)));
                self.deliver(Event::TaskAdded {
                    task: task(i),
                    info,
                    at,
                });
            }
            Step::Exit(i) => {
                self.unmanage(task(i));
                self.deliver(Event::TaskExited { task: task(i), at });
            }
            Step::Forget(i) => {
                self.unmanage(task(i));
                self.policy.forget(task(i));
                self.check_open_holds();
            }
            Step::Arrive {
                task: i,
                on_cpu,
                spinning,
            } => self.deliver(Event::MessageArrived {
                task: task(i),
                at,
                on_cpu,
                spinning,
            }),
            Step::SwitchIn { task: i, cpu } => self.deliver(Event::SwitchedIn {
                task: task(i),
                cpu: cpu.into(),
                at,
            }),
            Step::SwitchOut { task: i, preempted } => {
                let how = if preempted {
                    SwitchOut::Preempted
                } else {
                    SwitchOut::Voluntary
                };
                self.deliver(Event::SwitchedOut {
                    task: task(i),
                    at,
                    how,
                })
            }
            Step::Spin(i) => self.deliver(Event::SpinStarted { task: task(i), at }),
            Step::Receive(i) => self.deliver(Event::DataReceived { task: task(i), at }),
            Step::Tick(None) => self.deliver(Event::Tick { at, snapshot: None }),
            Step::Tick(Some((ref tasks, cpus))) => {
                snapshot = NodeSnapshot {
                    tasks: (0..TASKS as u8)
                        .zip(tasks)
                        .filter(|(_, s)| s.present)
                        .map(|(i, s)| TaskSnapshot {
                            task: task(i),
                            on_cpu: s.on_cpu,
                            spinning_since: s
                                .spinning
                                .map(|ago| at.saturating_sub(Self::us(ago.into()))),
                            pending_message: s.pending,
                            preempted: s.runnable && !s.on_cpu,
                            last_arrival_ns: if s.pending { at } else { 0 },
                            // A task seen not spinning stopped waiting by
                            // itself (received, sent or blocked) just now.
                            last_wait_end_ns: if s.spinning.is_none() { at } else { 0 },
                            oncpu_ns: 0,
                            arrivals: 0,
                        })
                        .collect(),
                    cpus: (0..2u32)
                        .zip(cpus)
                        .map(|(cpu, running)| CpuSnapshot {
                            cpu,
                            running: running.map(task),
                        })
                        .collect(),
                };
                self.deliver(Event::Tick {
                    at,
                    snapshot: Some(&snapshot),
                });
            }
            Step::Slot { owner, len_ms } => {
                let until = at + u64::from(len_ms) * 1_000_000;
                self.deliver(Event::SlotStarted {
                    at,
                    owner: owner.map(|j| JobId(j.into())),
                    until,
                });
            }
        }
    }

    fn unmanage(&mut self, task: TaskId) {
        self.close(task);
        self.managed.remove(&task);
    }

    /// Per job and aligned window, boosted time within the budget.
    fn check_budget(&self) {
        if matches!(self.kind(), PolicyKind::Fcs | PolicyKind::Local) {
            return;
        }
        let window = self.config.fairness.window_ns();
        let mut used: BTreeMap<(JobId, u64), u64> = BTreeMap::new();
        for &(job, start, end) in &self.boosts {
            let mut t = start;
            while t < end {
                let k = t / window;
                let segment_end = end.min((k + 1) * window);
                *used.entry((job, k)).or_default() += segment_end - t;
                t = segment_end;
            }
        }
        let mut node: BTreeMap<u64, u64> = BTreeMap::new();
        for ((job, k), ns) in used {
            assert!(
                ns <= self.budget_ns(),
                "{job} boosted {ns} ns in window {k} > {}",
                self.budget_ns()
            );
            *node.entry(k).or_default() += ns;
        }
        let node_budget = self.config.fairness.node_budget_ns();
        for (k, ns) in node {
            assert!(
                ns <= node_budget,
                "the node boosted {ns} ns in window {k} > {node_budget}"
            );
        }
    }

    fn finish(&mut self) {
        // A long quiet time: every timer fires.
        let quiet = self.now + 2_000_000_000;
        self.advance_to(quiet);
        let boosted: Vec<TaskId> = self
            .held
            .iter()
            .filter(|(_, (l, _))| l.is_boost())
            .map(|(&t, _)| t)
            .collect();
        match self.kind() {
            PolicyKind::Dcs | PolicyKind::Sb | PolicyKind::Sy | PolicyKind::DcsSb => {
                assert!(boosted.is_empty(), "boosts never ended: {boosted:?}")
            }
            PolicyKind::Fcs | PolicyKind::Local => {
                assert!(
                    self.held.is_empty(),
                    "FCS holds after its slots ended: {:?}",
                    self.held
                )
            }
            // PB re-boosts as long as its (stale) view shows a spinner; each
            // boost is still bounded, as checked above.
            PolicyKind::Pb | PolicyKind::PbSb => {}
        }
        let mut out = Vec::new();
        self.policy.release_all(&mut out);
        self.record(out);
        assert!(self.held.is_empty(), "release_all left {:?}", self.held);
        for &task in &self.managed {
            assert_eq!(self.policy.level_of(task), Level::Normal);
        }
        self.check_budget();
    }
}

/// `step` on tasks 0 and 1 only (jobs 1 and 2): no task ever has more
/// than one other managed task on its CPU.
fn on_two_tasks(step: &Step) -> Step {
    let two = |i: u8| i % 2;
    match step.clone() {
        Step::Add(i) => Step::Add(two(i)),
        Step::Exit(i) => Step::Exit(two(i)),
        Step::Forget(i) => Step::Forget(two(i)),
        Step::Arrive {
            task,
            on_cpu,
            spinning,
        } => Step::Arrive {
            task: two(task),
            on_cpu,
            spinning,
        },
        Step::SwitchIn { task, cpu } => Step::SwitchIn {
            task: two(task),
            cpu,
        },
        Step::SwitchOut { task, preempted } => Step::SwitchOut {
            task: two(task),
            preempted,
        },
        Step::Spin(i) => Step::Spin(two(i)),
        Step::Receive(i) => Step::Receive(two(i)),
        Step::Tick(Some((mut tasks, cpus))) => {
            for t in tasks.iter_mut().skip(2) {
                t.present = false;
            }
            Step::Tick(Some((tasks, cpus.map(|c| c.map(two)))))
        }
        other @ (Step::Tick(None) | Step::Slot { .. }) => other,
    }
}

proptest! {
    // Failing cases are saved next to this file (invariants.regressions) and
    // replayed first on every run.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_event_sequences_keep_every_policy_invariant(
        config in config(),
        steps in proptest::collection::vec((0u64..3_000, step()), 1..80),
    ) {
        let mut oracle = Oracle::new(config);
        for (dt_us, step) in &steps {
            oracle.step(*dt_us, step);
        }
        oracle.finish();
    }

    /// MPL-aware SB or PB-SB with its bound beyond the run (≤ 80 steps of
    /// ≤ 3 ms, then 2 s of quiet): a spinner that shares its CPU with one
    /// other task at most is never blocked, whatever happens.
    #[test]
    fn mpl_aware_sb_never_blocks_a_spinner_with_one_other_task_before_its_bound(
        pb in any::<bool>(),
        stop in any::<bool>(),
        steps in proptest::collection::vec((0u64..3_000, step()), 1..80),
    ) {
        let kind = if pb { PolicyKind::PbSb } else { PolicyKind::Sb };
        let mut config = LocalPolicyConfig::for_kind(kind);
        config.sb.mpl_aware = true;
        config.sb.max_spin_threshold_us = 10_000_000;
        config.sb.block_by = if stop { BlockMethod::Stop } else { BlockMethod::Demote };
        let mut oracle = Oracle::new(config);
        for (dt_us, step) in &steps {
            oracle.step(*dt_us, &on_two_tasks(step));
        }
        oracle.finish();
        prop_assert_eq!(oracle.threshold_blocks, 0);
    }

    #[test]
    fn forgotten_tasks_are_never_named_again(
        config in config(),
        steps in proptest::collection::vec((0u64..3_000, step()), 1..60),
    ) {
        let mut oracle = Oracle::new(config);
        for i in 0..TASKS as u8 {
            oracle.step(0, &Step::Add(i));
        }
        for (dt_us, step) in &steps {
            oracle.step(*dt_us, step);
        }
        for i in 0..TASKS as u8 {
            oracle.step(1, &Step::Forget(i));
        }
        // Everything may still happen to them; nothing may name them.
        for (dt_us, step) in steps.iter().filter(|(_, s)| !matches!(s, Step::Add(_))) {
            oracle.step(*dt_us, step);
        }
        oracle.finish();
        prop_assert!(oracle.held.is_empty());
    }
}
