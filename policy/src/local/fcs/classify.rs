//! FCS process characterisation (seed 004 §2.4.2, §2.4.4, §4.6.1).
//!
//! Per process the scheduler keeps C_CS / C_DC (communication attempts while
//! coscheduled, i.e. scheduled as CS or F in its own slot / while not) and
//! W_CS / W_DC (time spent waiting for communication in each mode). A new
//! process runs as CS for a fixed number of its slots, then as DC for a fixed
//! number, then is classified at each of its slots:
//! 1. both modes communicate rarely → DC;
//! 2. otherwise long waits → F;
//! 3. otherwise much more communication coscheduled than not → CS;
//! 4. otherwise → DC.
//!
//! What is counted, and why:
//! - a communication attempt is a message arrival for the process (the agent
//!   observes receives, not sends);
//! - a wait is a spin episode, from its start to the arrival of the message;
//! - the seed compares C_CS with C_DC, but after the measuring phase the two
//!   modes get very different amounts of time, so raw counts would drift; the
//!   rates are compared instead: attempts per second of the process's own CPU
//!   time in that mode (time it spends spinning counts, so poor coscheduling
//!   lowers the rate);
//! - "long periods of waiting" is the mean wait *while coscheduled*: an F
//!   process needs coscheduling but does not get its benefit; long waits when
//!   not coscheduled are expected of every fine-grained process.

use super::params::FcsParams;
use serde::{Deserialize, Serialize};

/// The FCS classes (seed 004 §2.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FcsClass {
    /// Coscheduled, successfully: runs its whole slot, not preempted.
    Cs,
    /// Frustrated: needs coscheduling but still waits long.
    F,
    /// Don't care: rarely synchronises, fills gaps.
    Dc,
}

impl FcsClass {
    /// Every class, in the order CS, F, DC.
    pub const ALL: [FcsClass; 3] = [FcsClass::Cs, FcsClass::F, FcsClass::Dc];

    pub fn as_str(self) -> &'static str {
        match self {
            FcsClass::Cs => "cs",
            FcsClass::F => "f",
            FcsClass::Dc => "dc",
        }
    }
}

/// Counters of one mode (coscheduled or not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModeCounters {
    /// C: communication attempts.
    pub comms: u64,
    /// W: total time waiting for communication, ns.
    pub wait_ns: u64,
    /// Number of completed waits.
    pub waits: u64,
    /// CPU time the process got in this mode, ns.
    pub cpu_ns: u64,
}

/// CPU time below this is treated as this much when computing rates, so a
/// process that hardly ran in a mode does not get an absurd rate.
const MIN_RATE_CPU_NS: u64 = 1_000_000;

impl ModeCounters {
    /// Communication attempts per second of CPU time.
    pub fn comm_rate_per_cpu_sec(&self) -> f64 {
        self.comms as f64 * 1e9 / self.cpu_ns.max(MIN_RATE_CPU_NS) as f64
    }

    /// Mean wait, ns, if any wait completed.
    pub fn mean_wait_ns(&self) -> Option<f64> {
        (self.waits > 0).then(|| self.wait_ns as f64 / self.waits as f64)
    }
}

/// C_CS, W_CS (`coscheduled`) and C_DC, W_DC (`not_coscheduled`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FcsCounters {
    pub coscheduled: ModeCounters,
    pub not_coscheduled: ModeCounters,
}

/// The classification rule of the module docs.
pub fn classify(counters: &FcsCounters, params: &FcsParams) -> FcsClass {
    let cs_rate = counters.coscheduled.comm_rate_per_cpu_sec();
    let dc_rate = counters.not_coscheduled.comm_rate_per_cpu_sec();
    if cs_rate < params.rare_comm_per_cpu_sec && dc_rate < params.rare_comm_per_cpu_sec {
        return FcsClass::Dc;
    }
    if counters
        .coscheduled
        .mean_wait_ns()
        .is_some_and(|w| w > params.long_wait_ns() as f64)
    {
        return FcsClass::F;
    }
    if dc_rate == 0.0 || cs_rate / dc_rate >= params.cs_dc_rate_ratio {
        return FcsClass::Cs;
    }
    FcsClass::Dc
}

/// Where a process is in its life: measuring as CS, measuring as DC, or
/// classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    MeasuringCs { slots_done: u32 },
    MeasuringDc { slots_done: u32 },
    Classified(FcsClass),
}

/// One process's phase, counters and the clocks that feed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FcsProfile {
    pub phase: Phase,
    pub counters: FcsCounters,
    /// Counting into the coscheduled counters now.
    coscheduled: bool,
    /// On CPU since (counted into the current mode up to here).
    cpu_since: Option<u64>,
    /// Waiting since (counted into the current mode up to here).
    wait_since: Option<u64>,
    /// CPU time of both modes when the process's last own slot started.
    cpu_at_own_slot: u64,
}

impl Default for FcsProfile {
    fn default() -> Self {
        Self {
            phase: Phase::MeasuringCs { slots_done: 0 },
            counters: FcsCounters::default(),
            coscheduled: false,
            cpu_since: None,
            wait_since: None,
            cpu_at_own_slot: 0,
        }
    }
}

impl FcsProfile {
    /// The class the process is scheduled as now (measuring phases included).
    pub fn class(&self) -> FcsClass {
        match self.phase {
            Phase::MeasuringCs { .. } => FcsClass::Cs,
            Phase::MeasuringDc { .. } => FcsClass::Dc,
            Phase::Classified(class) => class,
        }
    }

    /// A slot of the process's own job starts: advance the measuring phase or
    /// classify again. A measuring slot counts for the phase it is run in
    /// only if the process ran in it (at least [`MIN_RATE_CPU_NS`] of CPU
    /// since its previous own slot started): a process that sleeps through
    /// its first slots (waiting for its peers to start, reading its input)
    /// would otherwise be classified from empty counters as DC, and a DC
    /// process is never coscheduled again to show otherwise.
    pub fn own_slot_started(&mut self, params: &FcsParams) {
        let cpu = self.counters.coscheduled.cpu_ns + self.counters.not_coscheduled.cpu_ns;
        let ran = cpu.saturating_sub(self.cpu_at_own_slot) >= MIN_RATE_CPU_NS;
        self.cpu_at_own_slot = cpu;
        if !ran
            && let Phase::MeasuringCs { slots_done } | Phase::MeasuringDc { slots_done } =
                &mut self.phase
        {
            // The last own slot measured nothing: it does not count.
            *slots_done = slots_done.saturating_sub(1);
        }
        self.phase = match self.phase {
            Phase::MeasuringCs { slots_done } if slots_done >= params.measure_cs_slots => {
                if params.measure_dc_slots == 0 {
                    Phase::Classified(classify(&self.counters, params))
                } else {
                    Phase::MeasuringDc { slots_done: 0 }
                }
            }
            Phase::MeasuringDc { slots_done } if slots_done >= params.measure_dc_slots => {
                Phase::Classified(classify(&self.counters, params))
            }
            Phase::Classified(_) => Phase::Classified(classify(&self.counters, params)),
            other => other,
        };
        match &mut self.phase {
            Phase::MeasuringCs { slots_done } | Phase::MeasuringDc { slots_done } => {
                *slots_done += 1
            }
            Phase::Classified(_) => {}
        }
    }

    /// Switches the counters being fed at `now`.
    pub fn set_coscheduled(&mut self, coscheduled: bool, now: u64) {
        if self.coscheduled != coscheduled {
            self.flush(now);
            self.coscheduled = coscheduled;
        }
    }

    pub fn switched_in(&mut self, now: u64) {
        self.cpu_since = Some(now);
    }

    pub fn switched_out(&mut self, now: u64) {
        self.flush(now);
        self.cpu_since = None;
    }

    pub fn wait_started(&mut self, now: u64) {
        self.wait_since.get_or_insert(now);
    }

    pub fn wait_ended(&mut self, now: u64) {
        if let Some(since) = self.wait_since.take() {
            let mode = self.mode();
            mode.wait_ns += now.saturating_sub(since);
            mode.waits += 1;
        }
    }

    pub fn communicated(&mut self) {
        self.mode().comms += 1;
    }

    /// Counts CPU and wait time up to `now` into the current mode.
    fn flush(&mut self, now: u64) {
        let (cpu_since, wait_since) = (self.cpu_since, self.wait_since);
        let mode = self.mode();
        if let Some(since) = cpu_since {
            mode.cpu_ns += now.saturating_sub(since);
        }
        if let Some(since) = wait_since {
            mode.wait_ns += now.saturating_sub(since);
        }
        self.cpu_since = cpu_since.map(|s| s.max(now));
        self.wait_since = wait_since.map(|s| s.max(now));
    }

    fn mode(&mut self) -> &mut ModeCounters {
        if self.coscheduled {
            &mut self.counters.coscheduled
        } else {
            &mut self.counters.not_coscheduled
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(cs: (u64, u64, u64), dc: (u64, u64, u64)) -> FcsCounters {
        let mode = |(comms, waits, wait_ns): (u64, u64, u64)| ModeCounters {
            comms,
            waits,
            wait_ns,
            cpu_ns: 1_000_000_000,
        };
        FcsCounters {
            coscheduled: mode(cs),
            not_coscheduled: mode(dc),
        }
    }

    #[test]
    fn classification_table() {
        let p = FcsParams::default();
        // rarely communicates
        assert_eq!(
            classify(&counters((5, 5, 5_000_000), (3, 3, 0)), &p),
            FcsClass::Dc
        );
        // long waits while coscheduled
        assert_eq!(
            classify(&counters((500, 500, 2_000_000_000), (100, 100, 0)), &p),
            FcsClass::F
        );
        // short waits, much better coscheduled
        assert_eq!(
            classify(&counters((1_000, 1_000, 50_000_000), (100, 100, 0)), &p),
            FcsClass::Cs
        );
        // short waits, no better coscheduled
        assert_eq!(
            classify(&counters((1_000, 1_000, 50_000_000), (900, 900, 0)), &p),
            FcsClass::Dc
        );
    }

    #[test]
    fn wait_and_cpu_split_at_mode_change() {
        let mut profile = FcsProfile::default();
        profile.set_coscheduled(true, 0);
        profile.switched_in(0);
        profile.wait_started(100);
        profile.set_coscheduled(false, 300);
        profile.wait_ended(400);
        profile.switched_out(1_000);
        assert_eq!(profile.counters.coscheduled.cpu_ns, 300);
        assert_eq!(profile.counters.coscheduled.wait_ns, 200);
        assert_eq!(profile.counters.not_coscheduled.cpu_ns, 700);
        assert_eq!(profile.counters.not_coscheduled.wait_ns, 100);
        assert_eq!(profile.counters.not_coscheduled.waits, 1);
    }
}
