//! A small driver for scenario tests: delivers events in time order, ticks the
//! policy whenever it asked for a wakeup before the next event (as the agent
//! does), and records every action with its time.

use crate::local::{
    Action, CpuSnapshot, Event, JobId, Level, LocalPolicy, LocalPolicyConfig, NodeSnapshot,
    PolicyKind, Reason, SwitchOut, TaskId, TaskInfo, TaskSnapshot, build_policy,
};

pub const fn us(n: u64) -> u64 {
    n * 1_000
}

pub const fn ms(n: u64) -> u64 {
    n * 1_000_000
}

pub const T1: TaskId = TaskId(101);
pub const T2: TaskId = TaskId(102);
pub const T3: TaskId = TaskId(103);
pub const T4: TaskId = TaskId(104);
pub const JA: JobId = JobId(1);
pub const JB: JobId = JobId(2);
pub const JC: JobId = JobId(3);

/// What a tick sees when a message came for `task`, off CPU, at `arrived_at`
/// (`preempted`: its last switch-out was a preemption, not a block) while
/// `running` holds CPU 0. Fields a scenario needs otherwise are set on the
/// returned snapshot's task.
pub fn message_pending_off_cpu(
    task: TaskId,
    arrived_at: u64,
    preempted: bool,
    running: TaskId,
) -> NodeSnapshot {
    NodeSnapshot {
        tasks: vec![TaskSnapshot {
            task,
            on_cpu: false,
            spinning_since: None,
            pending_message: true,
            preempted,
            last_arrival_ns: arrived_at,
            last_wait_end_ns: 0,
            oncpu_ns: 0,
            arrivals: 1,
        }],
        cpus: vec![CpuSnapshot {
            cpu: 0,
            running: Some(running),
        }],
    }
}

/// A policy under test, its clock and everything it did.
pub struct Harness<P: LocalPolicy = Box<dyn LocalPolicy>> {
    pub policy: P,
    pub now: u64,
    /// `(time, action)` in emission order.
    pub log: Vec<(u64, Action)>,
}

impl Harness {
    pub fn new(config: LocalPolicyConfig) -> Self {
        Self::with_policy(build_policy(&config).expect("valid test config"))
    }

    pub fn of_kind(kind: PolicyKind) -> Self {
        Self::new(LocalPolicyConfig::for_kind(kind))
    }
}

impl<P: LocalPolicy> Harness<P> {
    pub fn with_policy(policy: P) -> Self {
        Self {
            policy,
            now: 0,
            log: Vec::new(),
        }
    }

    /// Delivers the ticks the policy asked for up to and including `t`.
    pub fn advance_to(&mut self, t: u64) {
        let mut guard = 0;
        while let Some(due) = self.policy.next_wakeup()
            && due <= t
        {
            guard += 1;
            assert!(
                guard < 1_000_000,
                "policy keeps asking for wakeups at {due}"
            );
            let due = due.max(self.now);
            self.deliver(Event::Tick {
                at: due,
                snapshot: None,
            });
        }
        self.now = self.now.max(t);
    }

    /// Delivers `event` after the ticks due before it.
    pub fn send(&mut self, event: Event<'_>) {
        self.advance_to(event.at());
        self.deliver(event);
    }

    fn deliver(&mut self, event: Event<'_>) {
        self.now = self.now.max(event.at());
        let mut actions = Vec::new();
        self.policy.on_event(&event, &mut actions);
        self.log.extend(actions.into_iter().map(|a| (self.now, a)));
    }

    pub fn tick_with(&mut self, at: u64, snapshot: &NodeSnapshot) {
        self.advance_to(at);
        self.deliver(Event::Tick {
            at,
            snapshot: Some(snapshot),
        });
    }

    pub fn add(&mut self, task: TaskId, job: JobId, at: u64) {
        self.send(Event::TaskAdded {
            task,
            info: TaskInfo::of_job(job),
            at,
        });
    }

    pub fn run(&mut self, task: TaskId, cpu: u32, at: u64) {
        self.send(Event::SwitchedIn { task, cpu, at });
    }

    pub fn preempt(&mut self, task: TaskId, at: u64) {
        self.send(Event::SwitchedOut {
            task,
            at,
            how: SwitchOut::Preempted,
        });
    }

    pub fn sleep(&mut self, task: TaskId, at: u64) {
        self.send(Event::SwitchedOut {
            task,
            at,
            how: SwitchOut::Voluntary,
        });
    }

    pub fn spin(&mut self, task: TaskId, at: u64) {
        self.send(Event::SpinStarted { task, at });
    }

    pub fn receive(&mut self, task: TaskId, at: u64) {
        self.send(Event::DataReceived { task, at });
    }

    /// A message for `task`; whether it is on CPU is the caller's claim.
    pub fn arrive(&mut self, task: TaskId, at: u64, on_cpu: bool) {
        self.send(Event::MessageArrived {
            task,
            at,
            on_cpu,
            spinning: false,
        });
    }

    pub fn slot(&mut self, owner: Option<JobId>, at: u64, until: u64) {
        self.send(Event::SlotStarted { at, owner, until });
    }

    pub fn level(&self, task: TaskId) -> Level {
        self.policy.level_of(task)
    }

    /// `(time, level, reason)` of every level change for `task`.
    pub fn history(&self, task: TaskId) -> Vec<(u64, Level, Reason)> {
        self.log
            .iter()
            .filter_map(|&(t, action)| match action {
                Action::SetLevel {
                    task: a,
                    level,
                    reason,
                } => (a == task).then_some((t, level, reason)),
                Action::Refused { .. } => None,
            })
            .collect()
    }

    /// `(time, reason)` of every boost refused to `task` without a level
    /// change ([`Action::Refused`]).
    pub fn refusals(&self, task: TaskId) -> Vec<(u64, Reason)> {
        self.log
            .iter()
            .filter_map(|&(t, action)| match action {
                Action::Refused { task: a, reason } => (a == task).then_some((t, reason)),
                Action::SetLevel { .. } => None,
            })
            .collect()
    }

    /// The last action for `task`.
    pub fn last(&self, task: TaskId) -> Option<(u64, Level, Reason)> {
        self.history(task).last().copied()
    }

    /// Total time `task` spent at a boost level in `[from, to)`.
    pub fn boosted_ns(&self, task: TaskId, from: u64, to: u64) -> u64 {
        let mut total = 0;
        let mut since: Option<u64> = None;
        for (t, level, _) in self.history(task) {
            match (since, level.is_boost()) {
                (None, true) => since = Some(t),
                (Some(s), false) => {
                    total += overlap(s, t, from, to);
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            total += overlap(s, self.now.max(to), from, to);
        }
        total
    }
}

fn overlap(a: u64, b: u64, from: u64, to: u64) -> u64 {
    b.min(to).saturating_sub(a.max(from))
}

pub const BOOST10: Level = Level::Boost { prio: 10 };
