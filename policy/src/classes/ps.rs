//! 2DCS-PS, the two-level dynamic coscheduler with proportional share (the
//! BE/RT coscheduling paper §4.3, Figure 4): each node alone, at every
//! scheduling event, picks the class to run by virtual time; there is no
//! global synchronisation. Allocation and admission are 2DCS-TDM's.
//!
//! - The class that ran for `elapsed` since the last event advances its
//!   virtual time by elapsed·(x+y)/part, so the class with the larger part
//!   advances more slowly and gets proportionally more of the CPU.
//! - The ready class with the lower virtual time runs; a tie goes to RT
//!   (Figure 4(a)); if the chosen class has nothing ready the other runs.
//! - A class that becomes ready after having nothing ready takes the other
//!   class's virtual time, so credit saved while asleep cannot be spent
//!   monopolising the node on return.
//!
//! - A class with nothing ready while the other runs is *armed* when it
//!   would take the CPU the moment it became ready ([`PsNode::takes_cpu_on_return`]):
//!   it is at or behind its share. The node cannot see every wakeup when
//!   it happens (a task woken by its timer is seen at its next switch-in),
//!   so the agent leaves an armed class's tasks able to preempt the other
//!   class at their wakeup, as the paper's scheduling event "I/O
//!   completion" would; a class ahead of its share waits for the next
//!   event that finds it behind.
//!
//! Two readings of §4.3 are ours:
//! - The paper says the returning class's virtual time "is set equal to that
//!   of the other class". If it was ahead, lowering it would reward blocking
//!   (block briefly, come back with a gift), so it is only ever raised.
//! - Figure 4(d) shows vt_RT still at 15 when A returns, while the text's
//!   rule would make it 75 (RT still runs, by the tie). The two agree if a
//!   returning class may keep a bounded credit: [`PsParams::sleeper_credit`]
//!   (in virtual-time ns) is how far behind the other class it may stay. The
//!   default, 0, is the text's rule; 60 or more reproduces the figure.
//!
//! Virtual times are kept exactly, scaled by x·y, so no rounding drifts the
//! shares over a long run.

use serde::{Deserialize, Serialize};

use super::ratio::{Class, FairnessRatio, RatioError};

/// Parameters of 2DCS-PS on a node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PsParams {
    pub ratio: FairnessRatio,
    /// How far (virtual-time ns) a class that returns may stay behind the
    /// other: 0 resets it to the other's virtual time.
    pub sleeper_credit: u64,
}

impl PsParams {
    /// Refuses a ratio with a zero part (that class would never advance its
    /// virtual time, or never get the CPU).
    pub fn validate(&self) -> Result<(), RatioError> {
        self.ratio.validate()
    }
}

/// Whether each class has a ready task on the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Readiness {
    pub rt: bool,
    pub be: bool,
}

impl Readiness {
    pub fn of(&self, class: Class) -> bool {
        match class {
            Class::RealTime => self.rt,
            Class::BestEffort => self.be,
        }
    }
}

/// The top-level scheduler of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsNode {
    ratio: FairnessRatio,
    /// Sleeper credit, scaled like the virtual times.
    credit: u128,
    /// Virtual times [RT, BE], scaled by x·y.
    vt: [u128; 2],
    ready: Readiness,
    running: Option<Class>,
    last_ns: u64,
    run_ns: [u64; 2],
}

fn slot(class: Class) -> usize {
    match class {
        Class::RealTime => 0,
        Class::BestEffort => 1,
    }
}

impl PsNode {
    /// A node with nothing ready at `now_ns`, both virtual times 0.
    pub fn new(params: PsParams, now_ns: u64) -> Self {
        let ratio = params.ratio;
        let scale = u128::from(ratio.rt) * u128::from(ratio.be);
        Self {
            ratio,
            credit: u128::from(params.sleeper_credit) * scale,
            vt: [0, 0],
            ready: Readiness::default(),
            running: None,
            last_ns: now_ns,
            run_ns: [0, 0],
        }
    }

    /// A scheduling event at `now_ns` after which `ready` says which classes
    /// have a ready task: charges the class that ran, applies returns, and
    /// returns the class to run (`None`: nothing ready).
    pub fn on_event(&mut self, now_ns: u64, ready: Readiness) -> Option<Class> {
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        if let Some(class) = self.running {
            self.charge(class, elapsed);
        }
        for class in [Class::RealTime, Class::BestEffort] {
            if ready.of(class) && !self.ready.of(class) {
                let other = self.vt[slot(class.other())];
                let own = &mut self.vt[slot(class)];
                *own = (*own).max(other.saturating_sub(self.credit));
            }
        }
        self.ready = ready;
        self.running = self.choose();
        self.running
    }

    /// Whether `class`, having nothing ready at the last event, would be
    /// chosen if it became ready now: the other class runs and the
    /// returning class's virtual time (after the return rule) is not
    /// ahead of the other's (a tie goes to RT). False for a class that is
    /// ready (it is chosen or not by [`Self::on_event`]) and when nothing
    /// runs (the class would run anyway).
    pub fn takes_cpu_on_return(&self, class: Class) -> bool {
        if self.ready.of(class) || self.running != Some(class.other()) {
            return false;
        }
        let other = self.vt[slot(class.other())];
        let returning = self.vt[slot(class)].max(other.saturating_sub(self.credit));
        match class {
            Class::RealTime => returning <= other,
            Class::BestEffort => returning < other,
        }
    }

    /// The class's virtual time in ns (rounded down).
    pub fn virtual_time(&self, class: Class) -> u64 {
        let scale = u128::from(self.ratio.rt) * u128::from(self.ratio.be);
        u64::try_from(self.vt[slot(class)] / scale.max(1)).unwrap_or(u64::MAX)
    }

    /// The class chosen at the last event.
    pub fn running(&self) -> Option<Class> {
        self.running
    }

    /// CPU time charged to the class so far.
    pub fn run_time_ns(&self, class: Class) -> u64 {
        self.run_ns[slot(class)]
    }

    fn charge(&mut self, class: Class, elapsed: u64) {
        // elapsed·(x+y)/part, times x·y: elapsed·(x+y)·(the other part).
        let step = u128::from(elapsed)
            * u128::from(self.ratio.total())
            * u128::from(self.ratio.part(class.other()));
        self.vt[slot(class)] = self.vt[slot(class)].saturating_add(step);
        self.run_ns[slot(class)] = self.run_ns[slot(class)].saturating_add(elapsed);
    }

    fn choose(&self) -> Option<Class> {
        let preferred = if self.vt[slot(Class::RealTime)] <= self.vt[slot(Class::BestEffort)] {
            Class::RealTime
        } else {
            Class::BestEffort
        };
        [preferred, preferred.other()]
            .into_iter()
            .find(|&class| self.ready.of(class))
    }
}
