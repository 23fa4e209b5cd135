//! What the stand-in agents saw, shared by their tasks and the switch timer:
//! per-slice switch instants (one clock for all: CLOCK_MONOTONIC of this
//! machine), how far ahead of its instant each switch arrived, heartbeat
//! round trips, sessions and their failures.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use serde::Serialize;

/// One slice as the agents saw it.
#[derive(Debug, Clone, Copy)]
struct SliceSeen {
    switched: u32,
    first_ns: u64,
    last_ns: u64,
    /// The earliest and latest instant the agents were told (agent clocks
    /// = this machine's clock): their spread is what the coordinator's
    /// per-node clock-offset estimates alone put between the switches.
    first_at_ns: u64,
    last_at_ns: u64,
    /// Announcements that arrived after their instant.
    late_arrivals: u32,
}

/// Per agent: sessions and what happened in the latest one.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct AgentSeen {
    /// Sessions that completed the handshake and sent `Register`.
    pub sessions: u32,
    /// When the latest session sent `Register` (CLOCK_MONOTONIC ns).
    pub registered_ns: Option<u64>,
    /// When the latest session got its first `SetPolicy` (the coordinator
    /// took the registration).
    pub accepted_ns: Option<u64>,
    /// When the latest session got its first `SwitchSlice` with a job on
    /// this node (the node is back in the slices).
    pub first_active_switch_ns: Option<u64>,
    /// Switches received (all sessions), and those naming a job here.
    pub switches: u64,
    pub active_switches: u64,
    /// Jobs launched here (all sessions).
    pub launches: u64,
}

#[derive(Debug, Default)]
struct Samples {
    /// Announcement margin: instant minus arrival, ns (negative: late).
    margins: Vec<i64>,
    /// Switch lateness: switched minus instant, ns.
    lateness: Vec<i64>,
    /// Round trips of the agents' own heartbeats, ns.
    heartbeat_rtts: Vec<u64>,
}

/// Counters any task bumps.
#[derive(Debug, Default, Serialize)]
pub struct Counters {
    pub connect_failures: AtomicU64,
    pub handshake_failures: AtomicU64,
    pub sessions_ended: AtomicU64,
    pub errors_from_coordinator: AtomicU64,
    pub heartbeats_sent: AtomicU64,
    pub heartbeat_replies: AtomicU64,
    pub coordinator_heartbeats_answered: AtomicU64,
    pub program_checks: AtomicU64,
    pub cancels: AtomicU64,
    pub reaps: AtomicU64,
    pub switches_applied_late: AtomicU64,
    pub switches_stale: AtomicU64,
    /// `SliceSchedule`s received (protocol 1.5).
    pub schedules: AtomicU64,
    /// 1 when the switch timer runs SCHED_FIFO.
    pub timer_fifo: AtomicU64,
    /// Coordinator heartbeats answered with the kernel's receive stamp.
    pub heartbeats_kernel_stamped: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
pub struct Stats {
    pub counters: Counters,
    agents: Mutex<Vec<AgentSeen>>,
    slices: Mutex<HashMap<(u64, u64), SliceSeen>>,
    samples: Mutex<Samples>,
    /// Samples are kept only while recording (a measurement window).
    recording: AtomicBool,
    /// The schedules' `report_every` (0: none seen): the slices the
    /// coordinator measures its own skew on.
    report_every: AtomicU64,
}

/// Percentiles of a sample, in the sample's unit.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub samples: usize,
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(values: &mut [f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| values[((values.len() - 1) as f64 * p).round() as usize];
        Self {
            samples: values.len(),
            min: values[0],
            p50: at(0.5),
            p99: at(0.99),
            max: values[values.len() - 1],
        }
    }
}

/// The agents' view of the slices switched while recording.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SwitchView {
    /// Slices at least two agents switched.
    pub slices: usize,
    /// Agents that switched each slice.
    pub agents_per_slice: Percentiles,
    /// Spread of the switch instants of each slice, µs.
    pub skew_us: Percentiles,
    /// The same on report slices only (multiples of the schedules'
    /// `report_every`): the slices the coordinator's own skew figure is
    /// measured on, where every stand-in also sends its `SliceSwitched`.
    pub report_slice_skew_us: Percentiles,
    /// Per slice: the spread of the instants the agents were told (the
    /// part of the skew due to the coordinator's clock-offset estimates;
    /// the rest is late arrival).
    pub instant_spread_us: Percentiles,
    /// Announcement margin (instant minus arrival), µs; negative = late.
    pub margin_us: Percentiles,
    /// Announcements that arrived after their instant.
    pub late_arrivals: u64,
    /// Switch instant minus the announced instant, µs.
    pub lateness_us: Percentiles,
    /// Round trips of the agents' heartbeats, µs.
    pub heartbeat_rtt_us: Percentiles,
}

impl Stats {
    pub fn new(agents: usize) -> Self {
        Self {
            counters: Counters::default(),
            agents: Mutex::new(vec![AgentSeen::default(); agents]),
            slices: Mutex::new(HashMap::new()),
            samples: Mutex::new(Samples::default()),
            recording: AtomicBool::new(false),
            report_every: AtomicU64::new(0),
        }
    }

    /// Starts a measurement window: forgets earlier slices and samples.
    pub fn start_recording(&self) {
        self.slices.lock().expect("stats").clear();
        *self.samples.lock().expect("stats") = Samples::default();
        self.recording.store(true, Ordering::SeqCst);
    }

    pub fn stop_recording(&self) {
        self.recording.store(false, Ordering::SeqCst);
    }

    fn recording(&self) -> bool {
        self.recording.load(Ordering::Relaxed)
    }

    pub fn agent(&self, index: usize) -> AgentSeen {
        self.agents.lock().expect("stats")[index]
    }

    pub fn agents(&self) -> Vec<AgentSeen> {
        self.agents.lock().expect("stats").clone()
    }

    pub fn with_agent(&self, index: usize, update: impl FnOnce(&mut AgentSeen)) {
        update(&mut self.agents.lock().expect("stats")[index]);
    }

    /// A `SwitchSlice` arrived at `received_ns` for `apply_at_ns`.
    pub fn announced(&self, key: (u64, u64), received_ns: u64, apply_at_ns: u64) {
        if !self.recording() {
            return;
        }
        let margin = apply_at_ns as i64 - received_ns as i64;
        self.samples.lock().expect("stats").margins.push(margin);
        if margin < 0 {
            let mut slices = self.slices.lock().expect("stats");
            slices
                .entry(key)
                .or_insert_with(|| fresh(received_ns))
                .late_arrivals += 1;
        }
    }

    /// An agent switched slice `key` at `switched_ns` (its instant was
    /// `apply_at_ns`).
    pub fn switched(&self, key: (u64, u64), switched_ns: u64, apply_at_ns: u64) {
        if !self.recording() {
            return;
        }
        self.samples
            .lock()
            .expect("stats")
            .lateness
            .push(switched_ns as i64 - apply_at_ns as i64);
        let mut slices = self.slices.lock().expect("stats");
        let seen = slices.entry(key).or_insert_with(|| fresh(switched_ns));
        if seen.switched == 0 {
            seen.first_ns = switched_ns;
            seen.last_ns = switched_ns;
            seen.first_at_ns = apply_at_ns;
            seen.last_at_ns = apply_at_ns;
        }
        seen.switched += 1;
        seen.first_at_ns = seen.first_at_ns.min(apply_at_ns);
        seen.last_at_ns = seen.last_at_ns.max(apply_at_ns);
        seen.first_ns = seen.first_ns.min(switched_ns);
        seen.last_ns = seen.last_ns.max(switched_ns);
    }

    /// A schedule reports one slice in `every`.
    pub fn report_every(&self, every: u64) {
        self.report_every.store(every, Ordering::Relaxed);
    }

    pub fn heartbeat_rtt(&self, rtt_ns: u64) {
        if self.recording() {
            self.samples
                .lock()
                .expect("stats")
                .heartbeat_rtts
                .push(rtt_ns);
        }
    }

    /// The switches recorded since [`Stats::start_recording`].
    pub fn switch_view(&self) -> SwitchView {
        let slices = self.slices.lock().expect("stats");
        let samples = self.samples.lock().expect("stats");
        let complete: Vec<&SliceSeen> = slices.values().filter(|s| s.switched >= 2).collect();
        let every = self.report_every.load(Ordering::Relaxed);
        let us = |ns: f64| ns / 1e3;
        SwitchView {
            slices: complete.len(),
            agents_per_slice: Percentiles::of(
                &mut complete
                    .iter()
                    .map(|s| f64::from(s.switched))
                    .collect::<Vec<_>>(),
            ),
            skew_us: Percentiles::of(
                &mut complete
                    .iter()
                    .map(|s| us((s.last_ns - s.first_ns) as f64))
                    .collect::<Vec<_>>(),
            ),
            report_slice_skew_us: Percentiles::of(
                &mut slices
                    .iter()
                    .filter(|((_, slice), seen)| {
                        seen.switched >= 2 && every > 0 && slice.is_multiple_of(every)
                    })
                    .map(|(_, s)| us((s.last_ns - s.first_ns) as f64))
                    .collect::<Vec<_>>(),
            ),
            instant_spread_us: Percentiles::of(
                &mut complete
                    .iter()
                    .map(|s| us((s.last_at_ns - s.first_at_ns) as f64))
                    .collect::<Vec<_>>(),
            ),
            margin_us: Percentiles::of(
                &mut samples
                    .margins
                    .iter()
                    .map(|&m| us(m as f64))
                    .collect::<Vec<_>>(),
            ),
            late_arrivals: slices.values().map(|s| u64::from(s.late_arrivals)).sum(),
            lateness_us: Percentiles::of(
                &mut samples
                    .lateness
                    .iter()
                    .map(|&m| us(m as f64))
                    .collect::<Vec<_>>(),
            ),
            heartbeat_rtt_us: Percentiles::of(
                &mut samples
                    .heartbeat_rtts
                    .iter()
                    .map(|&m| us(m as f64))
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

fn fresh(at_ns: u64) -> SliceSeen {
    SliceSeen {
        switched: 0,
        first_ns: at_ns,
        last_ns: at_ns,
        first_at_ns: at_ns,
        last_at_ns: at_ns,
        late_arrivals: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_is_the_spread_of_one_slices_switch_instants() {
        let stats = Stats::new(3);
        stats.start_recording();
        stats.switched((1, 5), 1_000_000, 1_000_000);
        stats.switched((1, 5), 1_000_300, 1_000_000);
        stats.switched((1, 5), 1_000_100, 1_000_000);
        stats.switched((1, 6), 2_000_000, 2_000_000);
        stats.switched((1, 6), 2_000_050, 2_000_000);
        let view = stats.switch_view();
        assert_eq!(view.slices, 2);
        assert_eq!(view.skew_us.max, 0.3);
        assert_eq!(view.skew_us.min, 0.05);
        assert_eq!(view.lateness_us.max, 0.3);
    }

    #[test]
    fn instants_told_apart_by_offset_estimates_are_a_spread_even_when_on_time() {
        let stats = Stats::new(2);
        stats.start_recording();
        // Two agents told instants 200 ns apart, both switch on time.
        stats.switched((1, 5), 1_000_000, 1_000_000);
        stats.switched((1, 5), 1_000_200, 1_000_200);
        let view = stats.switch_view();
        assert_eq!(view.instant_spread_us.max, 0.2);
        assert_eq!(view.skew_us.max, 0.2);
        assert_eq!(view.lateness_us.max, 0.0);
    }

    #[test]
    fn late_announcements_count_and_have_negative_margins() {
        let stats = Stats::new(2);
        stats.start_recording();
        stats.announced((1, 1), 900, 1_000);
        stats.announced((1, 1), 1_200, 1_000);
        let view = stats.switch_view();
        assert_eq!(view.late_arrivals, 1);
        assert_eq!(view.margin_us.min, -0.2);
        assert_eq!(view.margin_us.max, 0.1);
    }

    #[test]
    fn nothing_is_kept_outside_a_window() {
        let stats = Stats::new(1);
        stats.switched((1, 1), 5, 5);
        stats.heartbeat_rtt(10);
        let view = stats.switch_view();
        assert_eq!(view.slices, 0);
        assert_eq!(view.heartbeat_rtt_us.samples, 0);
    }
}
