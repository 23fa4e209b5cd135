//! Prometheus metrics of the coordinator link, registered in the agent's
//! registry. Labels are bounded: `reason` by the wire's fixed reject labels,
//! `outcome`/`event`/`slot` by fixed sets, `job_id` by the coordinator jobs
//! running here (series removed when a job ends).

use prometheus::{
    CounterVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

#[derive(Clone)]
pub struct CoordMetrics {
    /// Frames (and handshakes) from the coordinator refused, by reason.
    pub wire_rejected: IntCounterVec,
    pub connected: IntGauge,
    /// 1 while a gang slice overlay is enforced.
    pub gang_mode: IntGauge,
    /// Slice switches by outcome (applied, late, skipped, stale, refused).
    pub switches: IntCounterVec,
    /// How far from the announced instant switches were applied.
    pub switch_lateness: Histogram,
    /// Coordinator job CPU time inside and outside the job's own slots.
    pub slot_cpu: CounterVec,
    /// Link state changes (up, down).
    pub link_events: IntCounterVec,
    /// 2DCS-TDM division switches by outcome (applied, late, stale,
    /// refused).
    pub division_switches: IntCounterVec,
    /// How far from the announced instant divisions were applied.
    pub division_lateness: Histogram,
    /// `FrameReport`s sent.
    pub frame_reports: IntCounter,
}

fn register<T: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: T,
) -> prometheus::Result<T> {
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

impl CoordMetrics {
    /// Creates the metrics and registers them in `registry`.
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        Ok(Self {
            wire_rejected: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "cosched_wire_rejected_total",
                        "Wire frames and handshakes from the coordinator refused (malformed, unauthenticated, replayed, ...), by reason.",
                    ),
                    &["reason"],
                )?,
            )?,
            connected: register(
                registry,
                IntGauge::new(
                    "cosched_coordinator_connected",
                    "1 while registered with the coordinator.",
                )?,
            )?,
            gang_mode: register(
                registry,
                IntGauge::new(
                    "cosched_gang_mode",
                    "1 while the coordinator's slices are enforced on this node (0: the local policy runs alone).",
                )?,
            )?,
            switches: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "cosched_slice_switches_total",
                        "Slice switches from the coordinator, by outcome (applied, late, skipped, stale, refused).",
                    ),
                    &["outcome"],
                )?,
            )?,
            switch_lateness: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_slice_switch_apply_delay_seconds",
                        "Time from a switch's announced instant to the moment this agent applied it.",
                    )
                    .buckets(prometheus::exponential_buckets(1e-6, 2.0, 17)?),
                )?,
            )?,
            slot_cpu: register(
                registry,
                CounterVec::new(
                    Opts::new(
                        "cosched_gang_job_cpu_seconds_total",
                        "CPU time of coordinator jobs on this node inside (slot=in) and outside (slot=out) their own slices.",
                    ),
                    &["job_id", "slot"],
                )?,
            )?,
            link_events: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "cosched_coordinator_link_events_total",
                        "Coordinator link changes (up: registered, down: lost).",
                    ),
                    &["event"],
                )?,
            )?,
            division_switches: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "cosched_division_switches_total",
                        "2DCS-TDM division switches from the coordinator, by outcome (applied, late: applied at once, stale, refused).",
                    ),
                    &["outcome"],
                )?,
            )?,
            division_lateness: register(
                registry,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "cosched_division_switch_apply_delay_seconds",
                        "Time from a 2DCS-TDM division's announced instant to the moment this agent applied it.",
                    )
                    .buckets(prometheus::exponential_buckets(1e-6, 2.0, 17)?),
                )?,
            )?,
            frame_reports: register(
                registry,
                IntCounter::new(
                    "cosched_frame_reports_total",
                    "FrameReports (frame counts of the coordinator's real-time jobs) sent to the coordinator.",
                )?,
            )?,
        })
    }

    pub fn remove_job(&self, job: u32) {
        let id = job.to_string();
        for slot in ["in", "out"] {
            let _ = self.slot_cpu.remove_label_values(&[&id, slot]);
        }
    }
}
