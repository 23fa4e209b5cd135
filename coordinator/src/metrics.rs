//! Prometheus metrics of the coordinator (`cosched_` prefix, help on every
//! metric, labels bounded: `reason` by the wire's fixed reject labels, `node`
//! by the configured nodes, `op`/`state`/`outcome` by fixed sets).

use prometheus::{
    Encoder as _, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::core::SwitchObservation;

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
}
