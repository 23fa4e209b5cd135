//! FCS process characterisation (the Scheduler Testbed report §2.4.2, §2.4.4, §4.6.1).
//!
//! Per process the scheduler keeps C_CS / C_DC (communication attempts while
//! coscheduled, i.e. run as CS or F in its own slot / run as DC in its own
//! slot) and W_CS / W_DC (time spent waiting for communication in each mode).
//! A new process runs as CS for a fixed number of its slots, then as DC for a
//! fixed number, then is classified at each of its slots:
//! 1. both modes communicate rarely → DC;
//! 2. otherwise long waits → F;
//! 3. otherwise much more communication coscheduled than not → CS;
//! 4. otherwise → DC.
//!
//! What is counted, and why:
//! - only the process's own slots count: the seed's measuring phase runs the
//!   same process for a number of its slots as CS and then as DC, so C_CS and
//!   C_DC compare one treatment of the same slots with the other; slots of
//!   other jobs would mix in how busy the node is with them;
//! - a communication attempt is a message arrival for the process (the agent
//!   observes receives, not sends), all of them: from the kernel's per-task
//!   counter at each look, not one per look that saw a new message (a
//!   fine-grain process gets thousands a second, the agent looks every
//!   millisecond);
//! - an own slot the process took no part in (no message, under a
//!   millisecond of CPU: asleep, or waiting for its peers to start) is
//!   dropped from the counters, not only from the measuring phase;
//! - a wait is a spin episode, from its start to the arrival of the message;
//! - the seed compares C_CS with C_DC; after the measuring phase a process
//!   keeps one mode, so raw counts would drift: rates are compared instead,
//!   attempts per second of own-slot time in that mode. Per second of the
//!   slot, not of the process's CPU time: a process that mostly sleeps (I/O)
//!   has a high rate per CPU second in every mode, and small differences in
//!   its CPU cost per message (a cold cache when it runs between others)
//!   made it look CS and kept it demoted outside its slots;
//! - "long periods of waiting" is the mean wait *while coscheduled*: an F
//!   process needs coscheduling but does not get its benefit; long waits when
//!   not coscheduled are expected of every fine-grained process.

use super::params::FcsParams;
use serde::{Deserialize, Serialize};

/// The FCS classes (the Scheduler Testbed report §2.4.2).
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
    /// Own-slot time spent in this mode, ns.
    pub time_ns: u64,
}

/// A process that ran less than this in an own slot did not run in it (see
/// [`FcsProfile::own_slot_started`]); time in a mode below this counts as this
/// much when computing rates, so a mode hardly seen yet gets no absurd rate.
const MIN_RUN_NS: u64 = 1_000_000;

impl ModeCounters {
    /// Communication attempts per second of own-slot time in this mode.
    pub fn comm_rate_per_sec(&self) -> f64 {
        self.comms as f64 * 1e9 / self.time_ns.max(MIN_RUN_NS) as f64
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
    let cs_rate = counters.coscheduled.comm_rate_per_sec();
    let dc_rate = counters.not_coscheduled.comm_rate_per_sec();
    if cs_rate < params.rare_comm_per_sec && dc_rate < params.rare_comm_per_sec {
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
    /// Counting now: Some(true) into the coscheduled counters (own slot, run
    /// as CS or F), Some(false) into the others (own slot, run as DC), None
    /// not at all (another job's slot, or none).
    counting: Option<bool>,
    /// Counted into the current mode up to here.
    counted_until: u64,
    /// On CPU since (counted into the current mode up to here).
    cpu_since: Option<u64>,
    /// Waiting since (counted into the current mode up to here).
    wait_since: Option<u64>,
    /// The counters when the process's last own slot started.
    at_own_slot: FcsCounters,
}

impl Default for FcsProfile {
    fn default() -> Self {
        Self {
            phase: Phase::MeasuringCs { slots_done: 0 },
            counters: FcsCounters::default(),
            counting: None,
            counted_until: 0,
            cpu_since: None,
            wait_since: None,
            at_own_slot: FcsCounters::default(),
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
    /// only if the process took part in it (at least [`MIN_RUN_NS`] of CPU or
    /// one message in it; an I/O-bound process uses far less CPU than that
    /// per slot and would never be classified): a process that sleeps through
    /// its first slots (waiting for its peers to start, reading its input)
    /// would otherwise be classified from empty counters as DC, and a DC
    /// process is never coscheduled again to show otherwise.
    pub fn own_slot_started(&mut self, params: &FcsParams) {
        let total = |c: &FcsCounters| {
            (
                c.coscheduled.cpu_ns + c.not_coscheduled.cpu_ns,
                c.coscheduled.comms + c.not_coscheduled.comms,
            )
        };
        let ((cpu, comms), (cpu_before, comms_before)) =
            (total(&self.counters), total(&self.at_own_slot));
        let ran = cpu.saturating_sub(cpu_before) >= MIN_RUN_NS || comms > comms_before;
        if !ran {
            // The last own slot measured nothing: it is no measurement (its
            // time would dilute the rates), and no measuring slot.
            self.counters = self.at_own_slot;
            if let Phase::MeasuringCs { slots_done } | Phase::MeasuringDc { slots_done } =
                &mut self.phase
            {
                *slots_done = slots_done.saturating_sub(1);
            }
        }
        self.at_own_slot = self.counters;
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

    /// Switches the counters being fed at `now`: `Some(coscheduled)` in the
    /// process's own slot, None outside it.
    pub fn set_counting(&mut self, counting: Option<bool>, now: u64) {
        if self.counting != counting {
            self.flush(now);
            self.counting = counting;
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
        let Some(since) = self.wait_since.take() else {
            return;
        };
        if let Some(mode) = self.mode() {
            mode.wait_ns += now.saturating_sub(since);
            mode.waits += 1;
        }
    }

    /// `n` communication attempts (message arrivals).
    pub fn communicated(&mut self, n: u64) {
        if let Some(mode) = self.mode() {
            mode.comms += n;
        }
    }

    /// Counts own-slot, CPU and wait time up to `now` into the current mode
    /// (into none outside the process's own slots).
    fn flush(&mut self, now: u64) {
        let (since, cpu_since, wait_since) = (self.counted_until, self.cpu_since, self.wait_since);
        if let Some(mode) = self.mode() {
            mode.time_ns += now.saturating_sub(since);
            if let Some(since) = cpu_since {
                mode.cpu_ns += now.saturating_sub(since);
            }
            if let Some(since) = wait_since {
                mode.wait_ns += now.saturating_sub(since);
            }
        }
        self.counted_until = self.counted_until.max(now);
        self.cpu_since = cpu_since.map(|s| s.max(now));
        self.wait_since = wait_since.map(|s| s.max(now));
    }

    fn mode(&mut self) -> Option<&mut ModeCounters> {
        match self.counting? {
            true => Some(&mut self.counters.coscheduled),
            false => Some(&mut self.counters.not_coscheduled),
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
            time_ns: 1_000_000_000,
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
        profile.set_counting(Some(true), 0);
        profile.switched_in(0);
        profile.wait_started(100);
        profile.set_counting(Some(false), 300);
        profile.wait_ended(400);
        profile.switched_out(1_000);
        profile.set_counting(None, 1_000);
        assert_eq!(profile.counters.coscheduled.cpu_ns, 300);
        assert_eq!(profile.counters.coscheduled.wait_ns, 200);
        assert_eq!(profile.counters.coscheduled.time_ns, 300);
        assert_eq!(profile.counters.not_coscheduled.cpu_ns, 700);
        assert_eq!(profile.counters.not_coscheduled.wait_ns, 100);
        assert_eq!(profile.counters.not_coscheduled.waits, 1);
        assert_eq!(profile.counters.not_coscheduled.time_ns, 700);
    }

    /// Other jobs' slots count into neither mode: what the process does
    /// there depends on how busy the node is with them.
    #[test]
    fn nothing_is_counted_outside_the_own_slots() {
        let mut profile = FcsProfile::default();
        profile.set_counting(Some(true), 0);
        profile.switched_in(0);
        profile.communicated(1);
        profile.set_counting(None, 1_000);
        profile.communicated(1);
        profile.wait_started(1_500);
        profile.wait_ended(1_800);
        profile.switched_out(2_000);
        profile.set_counting(Some(false), 5_000);
        profile.set_counting(None, 6_000);
        let c = profile.counters;
        assert_eq!(
            (
                c.coscheduled.comms,
                c.coscheduled.time_ns,
                c.coscheduled.cpu_ns
            ),
            (1, 1_000, 1_000)
        );
        assert_eq!((c.not_coscheduled.comms, c.not_coscheduled.waits), (0, 0));
        assert_eq!(
            (c.not_coscheduled.time_ns, c.not_coscheduled.cpu_ns),
            (1_000, 0)
        );
    }

    /// An I/O-bound process: a few barriers per slot, each after a long
    /// sleep, and as many whether its peers run at the same time or not. It
    /// uses little CPU, more per message when it runs between other jobs
    /// (cold caches), so per CPU second it looked CS; per second of its own
    /// slots both modes are alike.
    #[test]
    fn io_bound_process_as_fast_without_coscheduling_is_dc() {
        let p = FcsParams::default();
        let mode = |comms: u64, cpu_ns: u64| ModeCounters {
            comms,
            waits: 0,
            wait_ns: 0,
            cpu_ns,
            time_ns: 20_000_000,
        };
        let c = FcsCounters {
            coscheduled: mode(4, 80_000),
            not_coscheduled: mode(4, 160_000),
        };
        assert_eq!(classify(&c, &p), FcsClass::Dc);
    }
}
