//! Prometheus metrics of the coordinator (`cosched_` prefix, help on every
//! metric, labels bounded: `reason` by the wire's fixed reject labels, `node`
//! by the configured nodes, `op`/`state`/`outcome` by fixed sets).

use prometheus::{
    Encoder as _, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::core::{Observed, SwitchObservation};

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Frames and connections refused: by `StreamError::reason()`, or a
    /// handshake that timed out or was evicted (see `net::gate`).
    pub wire_rejected: IntCounterVec,
    pub switch_skew: Histogram,
    pub switch_lateness: Histogram,
    pub slices: IntCounter,
    pub nodes_connected: IntGauge,
    pub jobs: IntGaugeVec,
    pub jobs_submitted: IntCounter,
    pub connections: IntCounterVec,
    pub admin_requests: IntCounterVec,
    pub clock_offset: GaugeVec,
    pub clock_uncertainty: GaugeVec,
    pub state_write_errors: IntCounter,
    pub rt_admitted: IntCounter,
    pub rt_rejected: IntCounterVec,
    pub rt_evicted: IntCounter,
    pub division_switches: IntCounterVec,
    pub division_skew: Histogram,
    pub division_lateness: Histogram,
    pub config_reloads: IntCounterVec,
}

fn register<T: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: T) -> T {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are unique");
    metric
}

/// Switch-timing buckets: 1 µs to ~67 ms, doubling.
fn switch_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(1e-6, 2.0, 17).expect("valid buckets")
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let r = &registry;
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            register(
                r,
                IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let gauge_vec = |name: &str, help: &str, labels: &[&str]| {
            register(
                r,
                GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        Self {
            wire_rejected: counter_vec(
                "cosched_wire_rejected_total",
                "Wire frames and connections refused (malformed, unauthenticated, replayed, handshake_timeout, register_timeout, unauthenticated_per_address_limit, unauthenticated_limit, ...), by reason.",
                &["reason"],
            ),
            switch_skew: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_slice_switch_skew_seconds",
                        "Per slice, the spread of the instants the nodes switched at (coordinator clock).",
                    )
                    .buckets(switch_buckets()),
                )
                .expect("valid metric"),
            ),
            switch_lateness: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_slice_switch_lateness_seconds",
                        "Per node and slice, how far from the announced instant the node switched (absolute).",
                    )
                    .buckets(switch_buckets()),
                )
                .expect("valid metric"),
            ),
            slices: register(
                r,
                IntCounter::new("cosched_slices_total", "Slice switches broadcast.")
                    .expect("valid metric"),
            ),
            nodes_connected: register(
                r,
                IntGauge::new("cosched_nodes_connected", "Agents registered now.")
                    .expect("valid metric"),
            ),
            jobs: register(
                r,
                IntGaugeVec::new(
                    Opts::new("cosched_jobs", "Active jobs by state (queued, running)."),
                    &["state"],
                )
                .expect("valid metric"),
            ),
            jobs_submitted: register(
                r,
                IntCounter::new("cosched_jobs_submitted_total", "Jobs accepted.")
                    .expect("valid metric"),
            ),
            connections: counter_vec(
                "cosched_agent_connections_total",
                "Agent connections by outcome (registered, refused, handshake_failed, closed).",
                &["outcome"],
            ),
            admin_requests: counter_vec(
                "cosched_admin_requests_total",
                "Admin socket requests by operation and outcome (ok, error).",
                &["op", "outcome"],
            ),
            clock_offset: gauge_vec(
                "cosched_clock_offset_seconds",
                "Estimated agent clock minus coordinator clock (minimum-RTT heartbeat sample).",
                &["node"],
            ),
            clock_uncertainty: gauge_vec(
                "cosched_clock_uncertainty_seconds",
                "Half the round trip of the heartbeat the clock offset comes from.",
                &["node"],
            ),
            state_write_errors: register(
                r,
                IntCounter::new(
                    "cosched_state_write_errors_total",
                    "State file writes that failed.",
                )
                .expect("valid metric"),
            ),
            rt_admitted: register(
                r,
                IntCounter::new(
                    "cosched_rt_jobs_admitted_total",
                    "Real-time jobs that got their rows (1GS) or nodes (2DCS) under admission control.",
                )
                .expect("valid metric"),
            ),
            rt_rejected: counter_vec(
                "cosched_rt_jobs_rejected_total",
                "Real-time jobs refused at submission, by reason (window_capacity, utilization, rows, allocation, invalid_spec, policy).",
                &["reason"],
            ),
            rt_evicted: register(
                r,
                IntCounter::new(
                    "cosched_rt_jobs_evicted_total",
                    "Real-time jobs evicted after waiting classes.rt_max_wait_ms for 1GS rows.",
                )
                .expect("valid metric"),
            ),
            division_switches: counter_vec(
                "cosched_division_switches_total",
                "2DCS-TDM divisions broadcast, by class (real-time, best-effort).",
                &["class"],
            ),
            division_skew: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_division_switch_skew_seconds",
                        "Per 2DCS-TDM division, the spread of the instants the nodes switched at (coordinator clock).",
                    )
                    .buckets(switch_buckets()),
                )
                .expect("valid metric"),
            ),
            division_lateness: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_division_switch_lateness_seconds",
                        "Per node and 2DCS-TDM division, how far from the announced instant the node switched (absolute).",
                    )
                    .buckets(switch_buckets()),
                )
                .expect("valid metric"),
            ),
            config_reloads: counter_vec(
                "cosched_config_reloads_total",
                "Config reloads (SIGHUP) by outcome (applied, invalid, refused, unchanged).",
                &["outcome"],
            ),
            registry,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn observe(&self, observations: &[SwitchObservation]) {
        for observation in observations {
            match *observation {
                SwitchObservation::Skew { seconds, .. } => self.switch_skew.observe(seconds),
                SwitchObservation::Lateness { seconds, .. } => {
                    self.switch_lateness.observe(seconds.abs());
                }
            }
        }
    }

    /// Counts what the core observed under the BE/RT policies.
    pub fn observed(&self, observed: &Observed) {
        match observed {
            Observed::RtAdmitted => self.rt_admitted.inc(),
            Observed::RtRejected { reason } => {
                self.rt_rejected.with_label_values(&[reason]).inc();
            }
            Observed::RtEvicted => self.rt_evicted.inc(),
            Observed::DivisionSwitch { class } => {
                self.division_switches
                    .with_label_values(&[class.as_str()])
                    .inc();
            }
            Observed::DivisionSkew(SwitchObservation::Skew { seconds, .. }) => {
                self.division_skew.observe(*seconds);
            }
            Observed::DivisionSkew(SwitchObservation::Lateness { seconds, .. }) => {
                self.division_lateness.observe(seconds.abs());
            }
        }
    }

    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .expect("text encoding cannot fail");
        String::from_utf8(buffer).expect("prometheus text is UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_help_and_skew_is_a_histogram() {
        let metrics = Metrics::new();
        metrics.wire_rejected.with_label_values(&["bad_tag"]).inc();
        metrics.observe(&[SwitchObservation::Skew {
            seconds: 20e-6,
            nodes: 2,
        }]);
        let text = metrics.render();
        assert!(
            text.contains("cosched_wire_rejected_total{reason=\"bad_tag\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cosched_slice_switch_skew_seconds_bucket"),
            "{text}"
        );
        for line in text.lines().filter(|line| line.starts_with("# HELP")) {
            assert!(line.split_whitespace().count() > 3, "empty help: {line}");
        }
    }

    #[test]
    fn class_observations_land_in_their_metrics() {
        use cosched_proto::wire::DivisionClass;
        let metrics = Metrics::new();
        metrics.observed(&Observed::RtAdmitted);
        metrics.observed(&Observed::RtRejected {
            reason: "window_capacity",
        });
        metrics.observed(&Observed::RtEvicted);
        metrics.observed(&Observed::DivisionSwitch {
            class: DivisionClass::RealTime,
        });
        metrics.observed(&Observed::DivisionSkew(SwitchObservation::Skew {
            seconds: 30e-6,
            nodes: 2,
        }));
        let text = metrics.render();
        for expected in [
            "cosched_rt_jobs_admitted_total 1",
            "cosched_rt_jobs_rejected_total{reason=\"window_capacity\"} 1",
            "cosched_rt_jobs_evicted_total 1",
            "cosched_division_switches_total{class=\"real-time\"} 1",
            "cosched_division_switch_skew_seconds_count 1",
        ] {
            assert!(text.contains(expected), "{expected}: {text}");
        }
    }
}
