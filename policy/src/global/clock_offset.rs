//! Clock offset estimation for synchronised slice switches.
//!
//! Gang scheduling needs every node to switch at the same instant (ClusterSchedSim
//! §4.1). The coordinator announces switches in its own clock; each agent
//! converts them to its clock with an offset estimated from heartbeat
//! exchanges carrying four timestamps (the NTP on-wire method):
//! t1 coordinator send, t2 agent receive, t3 agent send, t4 coordinator
//! receive.
//!
//! - offset θ = ((t2 − t1) + (t3 − t4)) / 2  (agent clock − coordinator clock)
//! - round-trip delay δ = (t4 − t1) − (t3 − t2)
//!
//! θ is exact when both directions take equally long, and wrong by at most
//! δ/2 otherwise. Queueing delay is what makes directions unequal, and it also
//! lengthens δ, so the sample with the smallest δ in a recent window is the
//! most trustworthy one: its offset is the estimate. The window is short
//! (by count and by age) so clock drift does not pin an old sample.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The four timestamps of one heartbeat exchange, in nanoseconds of each
/// side's own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatTimestamps {
    /// t1, coordinator clock.
    pub coordinator_send_ns: u64,
    /// t2, agent clock.
    pub agent_receive_ns: u64,
    /// t3, agent clock.
    pub agent_send_ns: u64,
    /// t4, coordinator clock.
    pub coordinator_receive_ns: u64,
}

/// Offset and delay measured by one exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetSample {
    /// Agent clock minus coordinator clock.
    pub offset_ns: i64,
    pub round_trip_ns: u64,
    /// t4, used to age samples out.
    pub coordinator_receive_ns: u64,
}

/// A heartbeat exchange that cannot be right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ClockError {
    #[error("reply received (t4 = {t4}) before the request was sent (t1 = {t1})")]
    ReplyBeforeRequest { t1: u64, t4: u64 },
    #[error("agent replied (t3 = {t3}) before it received the request (t2 = {t2})")]
    AgentRepliedBeforeReceiving { t2: u64, t3: u64 },
    #[error("agent held the request {held_ns} ns, longer than the {round_trip_ns} ns round trip")]
    AgentHeldLongerThanRoundTrip { held_ns: u64, round_trip_ns: u64 },
    #[error("the clocks differ by more than an i64 of nanoseconds")]
    OffsetOutOfRange,
}

impl HeartbeatTimestamps {
    /// Offset and round-trip delay of this exchange.
    pub fn sample(&self) -> Result<OffsetSample, ClockError> {
        let (t1, t2, t3, t4) = (
            self.coordinator_send_ns,
            self.agent_receive_ns,
            self.agent_send_ns,
            self.coordinator_receive_ns,
        );
        if t4 < t1 {
            return Err(ClockError::ReplyBeforeRequest { t1, t4 });
        }
        if t3 < t2 {
            return Err(ClockError::AgentRepliedBeforeReceiving { t2, t3 });
        }
        let (round_trip_total, held) = (t4 - t1, t3 - t2);
        if held > round_trip_total {
            return Err(ClockError::AgentHeldLongerThanRoundTrip {
                held_ns: held,
                round_trip_ns: round_trip_total,
            });
        }
        let twice_offset = (i128::from(t2) - i128::from(t1)) + (i128::from(t3) - i128::from(t4));
        let offset_ns =
            i64::try_from(twice_offset / 2).map_err(|_| ClockError::OffsetOutOfRange)?;
        Ok(OffsetSample {
            offset_ns,
            round_trip_ns: round_trip_total - held,
            coordinator_receive_ns: t4,
        })
    }
}

/// How many and how old samples the estimate may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffsetConfig {
    /// Most recent samples kept. Default 16.
    #[serde(default = "default_window_samples")]
    pub window_samples: usize,
    /// Samples received more than this long before the newest one are
    /// dropped (the newest is always kept). Default 30 s.
    #[serde(default = "default_max_sample_age_ns")]
    pub max_sample_age_ns: u64,
}

fn default_window_samples() -> usize {
    16
}

fn default_max_sample_age_ns() -> u64 {
    30_000_000_000
}

impl Default for ClockOffsetConfig {
    fn default() -> Self {
        Self {
            window_samples: default_window_samples(),
            max_sample_age_ns: default_max_sample_age_ns(),
        }
    }
}

/// The current estimate of one agent's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetEstimate {
    /// Agent clock minus coordinator clock.
    pub offset_ns: i64,
    /// Round trip of the sample the estimate comes from.
    pub round_trip_ns: u64,
    /// The true offset lies within `offset_ns ± uncertainty_ns` (δ/2).
    pub uncertainty_ns: u64,
}

impl OffsetEstimate {
    /// A coordinator-clock instant in the agent's clock (saturating).
    pub fn to_agent_clock(&self, coordinator_ns: u64) -> u64 {
        coordinator_ns.saturating_add_signed(self.offset_ns)
    }

    /// An agent-clock instant in the coordinator's clock (saturating).
    pub fn to_coordinator_clock(&self, agent_ns: u64) -> u64 {
        match self.offset_ns.checked_neg() {
            Some(negated) => agent_ns.saturating_add_signed(negated),
            None => agent_ns.saturating_add(1 << 63),
        }
    }
}

/// How closely a node's slice schedule must follow its clock estimate.
///
/// A schedule (slices announced ahead, switched by the agent's own timer)
/// freezes the estimate of the moment it is sent into every instant it
/// tells, for as long as it is followed. So a schedule is re-announced
/// when the instant the current estimate gives differs from the one it
/// told: by more than `redrift_ns` once the estimate is certain (its
/// uncertainty, δ/2 of its sample, within `max_uncertainty_ns`), and by
/// anything at all before that, so every better sample is passed on at
/// once (at most one message per heartbeat). Falling back to a message per
/// slice for uncertain nodes instead was measured (docs/scale.md): at 1000
/// agents it saturates the coordinator, which delays heartbeats, which
/// keeps every estimate uncertain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleClockBounds {
    /// Default 250 µs: a quarter of the 1 ms skew target.
    pub max_uncertainty_ns: u64,
    /// Default 100 µs.
    pub redrift_ns: u64,
}

impl Default for ScheduleClockBounds {
    fn default() -> Self {
        Self {
            max_uncertainty_ns: 250_000,
            redrift_ns: 100_000,
        }
    }
}

impl ScheduleClockBounds {
    /// Whether `estimate` is certain enough for a schedule to stand on it
    /// (none yet: no).
    pub fn certain(&self, estimate: Option<&OffsetEstimate>) -> bool {
        estimate.is_some_and(|estimate| estimate.uncertainty_ns <= self.max_uncertainty_ns)
    }

    /// Whether an instant a schedule told (`told_ns`) still stands against
    /// the one `estimate` (the current one) gives (`now_ns`), both in the
    /// agent's clock.
    pub fn still_stands(
        &self,
        told_ns: u64,
        now_ns: u64,
        estimate: Option<&OffsetEstimate>,
    ) -> bool {
        let tolerance = if self.certain(estimate) {
            self.redrift_ns
        } else {
            0
        };
        told_ns.abs_diff(now_ns) <= tolerance
    }
}

/// Minimum-RTT offset filter for one agent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockOffsetEstimator {
    config: ClockOffsetConfig,
    samples: VecDeque<OffsetSample>,
}

impl ClockOffsetEstimator {
    pub fn new(config: ClockOffsetConfig) -> Self {
        Self {
            config,
            samples: VecDeque::new(),
        }
    }

    /// Adds one exchange and returns the updated estimate. A bad exchange is
    /// refused and leaves the window unchanged.
    pub fn record(&mut self, exchange: HeartbeatTimestamps) -> Result<OffsetEstimate, ClockError> {
        let sample = exchange.sample()?;
        self.samples.push_back(sample);
        let newest = self
            .samples
            .iter()
            .map(|sample| sample.coordinator_receive_ns)
            .max()
            .expect("just pushed");
        let oldest_allowed = newest.saturating_sub(self.config.max_sample_age_ns);
        self.samples
            .retain(|sample| sample.coordinator_receive_ns >= oldest_allowed);
        while self.samples.len() > self.config.window_samples.max(1) {
            self.samples.pop_front();
        }
        Ok(self.estimate().expect("the newest sample is always kept"))
    }

    /// The estimate from the window's minimum-RTT sample (the most recent one
    /// among equals), or `None` before any exchange.
    pub fn estimate(&self) -> Option<OffsetEstimate> {
        self.samples
            .iter()
            .rev()
            .min_by_key(|sample| sample.round_trip_ns)
            .map(|best| OffsetEstimate {
                offset_ns: best.offset_ns,
                round_trip_ns: best.round_trip_ns,
                uncertainty_ns: best.round_trip_ns.div_ceil(2),
            })
    }

    /// Samples currently in the window, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = &OffsetSample> {
        self.samples.iter()
    }

    /// A coordinator-clock instant in the agent's clock, once estimated.
    pub fn to_agent_clock(&self, coordinator_ns: u64) -> Option<u64> {
        self.estimate()
            .map(|estimate| estimate.to_agent_clock(coordinator_ns))
    }
}
