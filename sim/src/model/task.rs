//! A task (one process of a job on one node) and where it is in its program.

use cosched_agent_common::TaskStats;
use cosched_policy::local::{Level, Reason};

use crate::executive::Ns;

/// Index of a task in the cluster (also its policy `TaskId`).
pub type TaskIdx = u32;

/// Where a task is in its iteration (ClusterSchedSim's `DoAppTask`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Compute,
    Io,
    /// About to pay the overhead of message `k` of the iteration.
    Send(u32),
    /// Overhead of message `k` paid: hand it to the network.
    Sent(u32),
    /// Receiving message `k` of the iteration.
    Recv(u32),
    Done,
}

/// Why a task sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sleep {
    Io,
    /// A blocking receive without its message.
    Message,
}

/// What the task does right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// Needs `remaining` CPU time (`work`: application compute, else
    /// messaging overhead).
    Cpu {
        remaining: Ns,
        work: bool,
    },
    /// Busy-waits for a message (runnable; burns CPU when it runs).
    Spin,
    /// Woken from a blocking receive: runnable, receives when it runs.
    Woken,
    Sleeping(Sleep),
    Done,
}

/// CPU time of a task by use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUse {
    pub compute_ns: Ns,
    pub overhead_ns: Ns,
    pub spin_ns: Ns,
}

impl CpuUse {
    pub fn total(&self) -> Ns {
        self.compute_ns + self.overhead_ns + self.spin_ns
    }
}

#[derive(Debug, Clone)]
pub struct Task {
    pub job: u32,
    pub rank: u32,
    pub node: u32,
    pub iteration: u32,
    pub phase: Phase,
    pub activity: Activity,
    /// The level the local policy set.
    pub wanted: Level,
    /// Gang slice membership: `None` outside gang mode.
    pub in_slice: Option<bool>,
    /// The level in force (gang overlay over `wanted`).
    pub effective: Level,
    /// CFS virtual runtime.
    pub vruntime: u64,
    /// The CPU it runs on.
    pub on_cpu: Option<u32>,
    /// A CPU is switching to it.
    pub incoming: bool,
    /// Messages received and not yet consumed, by iteration.
    pub inbox: Vec<(u32, u32)>,
    /// A wakeup (blocking receive) is on its way.
    pub wake_pending: bool,
    /// Order of entering the real-time class (FIFO among equal priorities).
    pub rt_seq: u64,
    pub used: CpuUse,
    /// Start of the current spin episode.
    pub spin_since: Option<Ns>,
    /// Last message arrival, and how many so far.
    pub last_arrival: Ns,
    pub arrivals: u64,
    /// `used.total()` at the start of the current gang slice.
    pub slice_mark: Ns,
    /// CPU time its last wakeup costs, paid at the next switch to it
    /// (`idle_wakeup_ns` or `busy_wakeup_ns`; 0 when not woken).
    pub wake_cost: Ns,
    /// What the policy wants for it and why (None: Normal), as the agent
    /// keeps it.
    pub why: Option<(Level, Reason)>,
    /// The counters the eBPF programs keep for it, updated at the same
    /// hooks (switches, receives, sends, arrivals, empty waits).
    pub stats: TaskStats,
    /// Its `WATCH` flags.
    pub watch: u32,
    /// Boosts the agent applied to it, and level changes of any kind.
    pub boosts: u64,
    pub actions: u64,
}

impl Task {
    pub fn new(job: u32, rank: u32, node: u32, vruntime: u64) -> Self {
        Self {
            job,
            rank,
            node,
            iteration: 0,
            phase: Phase::Compute,
            activity: Activity::Woken,
            wanted: Level::Normal,
            in_slice: None,
            effective: Level::Normal,
            vruntime,
            on_cpu: None,
            incoming: false,
            inbox: Vec::new(),
            wake_pending: false,
            rt_seq: 0,
            used: CpuUse::default(),
            spin_since: None,
            last_arrival: 0,
            arrivals: 0,
            slice_mark: 0,
            wake_cost: 0,
            why: None,
            stats: TaskStats {
                job_id: job,
                ..TaskStats::default()
            },
            watch: 0,
            boosts: 0,
            actions: 0,
        }
    }

    /// Wants a CPU: has work or spins, and is not stopped.
    pub fn runnable(&self) -> bool {
        matches!(
            self.activity,
            Activity::Cpu { .. } | Activity::Spin | Activity::Woken
        ) && self.effective != Level::Stop
    }

    /// Runnable and waiting for a CPU.
    pub fn waiting_for_cpu(&self) -> bool {
        self.runnable() && self.on_cpu.is_none() && !self.incoming
    }

    pub fn add_message(&mut self, iteration: u32) {
        match self.inbox.iter_mut().find(|(i, _)| *i == iteration) {
            Some((_, n)) => *n += 1,
            None => self.inbox.push((iteration, 1)),
        }
    }

    pub fn has_message(&self, iteration: u32) -> bool {
        self.inbox.iter().any(|&(i, n)| i == iteration && n > 0)
    }

    /// Consumes one message of `iteration`, if there is one.
    pub fn take_message(&mut self, iteration: u32) -> bool {
        let Some(pos) = self
            .inbox
            .iter()
            .position(|&(i, n)| i == iteration && n > 0)
        else {
            return false;
        };
        self.inbox[pos].1 -= 1;
        if self.inbox[pos].1 == 0 {
            self.inbox.swap_remove(pos);
        }
        true
    }
}

/// The scheduling class of a level, ordered: higher runs first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// SCHED_IDLE (`Demote`).
    Idle,
    /// SCHED_OTHER (`Normal`, and `Background` at nice 19).
    Fair,
    /// SCHED_FIFO at a priority (`Boost`).
    RealTime(u8),
}

/// The class of a runnable level (`Stop` never runs).
pub fn class_of(level: Level) -> Class {
    match level {
        Level::Boost { prio } => Class::RealTime(prio),
        Level::Normal | Level::Background => Class::Fair,
        Level::Demote | Level::Stop => Class::Idle,
    }
}

/// CFS load weight of a level (nice 0 = 1024, nice 19 = 15, SCHED_IDLE = 3).
pub fn weight_of(level: Level) -> u64 {
    match level {
        Level::Background => 15,
        Level::Demote | Level::Stop => 3,
        Level::Normal | Level::Boost { .. } => 1024,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_kept_per_iteration() {
        let mut t = Task::new(0, 0, 0, 0);
        t.add_message(3);
        t.add_message(4);
        t.add_message(3);
        assert!(!t.take_message(2));
        assert!(t.take_message(3));
        assert!(t.take_message(3));
        assert!(!t.has_message(3));
        assert!(t.has_message(4));
    }

    #[test]
    fn classes_order_boost_over_fair_over_idle() {
        assert!(class_of(Level::Boost { prio: 1 }) > class_of(Level::Normal));
        assert!(class_of(Level::Boost { prio: 20 }) > class_of(Level::Boost { prio: 10 }));
        assert!(class_of(Level::Background) > class_of(Level::Demote));
    }
}
