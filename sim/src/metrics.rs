//! What a run reports (ClusterSchedSim §2.2 and §5.1): response, wait and
//! execution time, slowdown, throughput, utilisation, where the CPU time went,
//! fairness between job kinds, and the simulator's own speed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::SimConfig;
use crate::executive::{ExecutiveStats, Ns};
use crate::model::Cluster;

/// Bounded slowdown's threshold (Feitelson): jobs shorter than this count as
/// this long.
pub const BOUNDED_SLOWDOWN_S: f64 = 10.0;

/// One job's life.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    pub kind: String,
    pub nodes: u32,
    pub arrival_s: f64,
    pub wait_s: f64,
    pub response_s: f64,
    pub dedicated_s: f64,
    pub slowdown: f64,
}

/// Summary of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    pub mean: f64,
    pub median: f64,
    pub p95: f64,
    pub max: f64,
    /// Coefficient of variation.
    pub cv: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let at = |q: f64| v[((q * (n - 1.0)).round() as usize).min(v.len() - 1)];
        Self {
            mean,
            median: at(0.5),
            p95: at(0.95),
            max: v[v.len() - 1],
            cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        }
    }
}

/// Shares of the cluster's CPU time (ClusterSchedSim Fig. 9).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CpuShares {
    pub compute: f64,
    pub messaging_overhead: f64,
    pub spinning: f64,
    pub context_switch: f64,
    /// Other work (the noise interruptions and the agents' work at slice
    /// switches).
    #[serde(default)]
    pub other_work: f64,
    pub idle: f64,
}

/// Per job kind (fairness between classes).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct KindSummary {
    pub jobs: usize,
    pub response_s: Summary,
    pub slowdown: Summary,
}

/// Simulator counters.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SimCounters {
    pub instants: u64,
    pub bound_events: u64,
    pub conditional_fired: u64,
    pub context_switches: u64,
    pub messages: u64,
    /// Times the agents woke (ring-buffer reports and ticks).
    pub policy_events: u64,
    /// Of which ring-buffer reports (arrivals, spin starts, long spins).
    #[serde(default)]
    pub ring_reports: u64,
    pub level_changes: u64,
    pub slices: u64,
    #[serde(default)]
    pub noise: u64,
}

/// Wall-clock performance of the run (not deterministic).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Performance {
    pub wall_s: f64,
    /// B events plus C activities fired, per wall second.
    pub events_per_s: f64,
    /// Peak resident memory of the process (VmHWM), KiB.
    pub peak_rss_kib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub label: String,
    pub config: SimConfig,
    pub jobs: usize,
    pub completed: usize,
    pub makespan_s: f64,
    pub response_s: Summary,
    pub wait_s: Summary,
    pub execution_s: Summary,
    pub slowdown: Summary,
    pub bounded_slowdown: Summary,
    pub throughput_jobs_per_hour: f64,
    /// Compute time / CPU capacity over the makespan.
    pub utilization: f64,
    pub cpu: CpuShares,
    pub by_kind: BTreeMap<String, KindSummary>,
    pub counters: SimCounters,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub performance: Option<Performance>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub job_records: Vec<JobRecord>,
}

fn s(ns: Ns) -> f64 {
    ns as f64 / 1e9
}

/// Builds the report of a finished run; `dedicated[i]` is job i's dedicated time.
pub fn report(
    label: &str,
    cluster: &Cluster,
    stats: &ExecutiveStats,
    dedicated: &[Ns],
    end: Ns,
) -> Report {
    let mut records = Vec::new();
    for (index, run) in cluster.jobs.iter().enumerate() {
        let (Some(start), Some(finish)) = (run.start, run.end) else {
            continue;
        };
        let spec = &run.spec;
        let response = s(finish - spec.arrival);
        let ded = s(dedicated.get(index).copied().unwrap_or(0)).max(1e-9);
        records.push(JobRecord {
            id: spec.id,
            kind: spec.kind.clone(),
            nodes: spec.nodes,
            arrival_s: s(spec.arrival),
            wait_s: s(start - spec.arrival),
            response_s: response,
            dedicated_s: ded,
            slowdown: response / ded,
        });
    }
    let col = |f: fn(&JobRecord) -> f64| records.iter().map(f).collect::<Vec<_>>();
    let first_arrival = cluster
        .jobs
        .iter()
        .map(|j| j.spec.arrival)
        .min()
        .unwrap_or(0);
    let makespan = s(end.saturating_sub(first_arrival));
    let c = &cluster.config.cluster;
    let capacity = makespan * f64::from(c.nodes) * f64::from(c.cpus_per_node);
    let (mut compute, mut overhead, mut spin) = (0u64, 0u64, 0u64);
    for task in &cluster.tasks {
        compute += task.used.compute_ns;
        overhead += task.used.overhead_ns;
        spin += task.used.spin_ns;
    }
    let share = |ns: Ns| {
        if capacity > 0.0 {
            s(ns) / capacity
        } else {
            0.0
        }
    };
    let switching = cluster.counters.switch_ns;
    let cpu = CpuShares {
        compute: share(compute),
        messaging_overhead: share(overhead),
        spinning: share(spin),
        context_switch: share(switching),
        other_work: share(cluster.counters.noise_ns + cluster.counters.agent_switch_ns),
        idle: (1.0
            - share(
                compute
                    + overhead
                    + spin
                    + switching
                    + cluster.counters.noise_ns
                    + cluster.counters.agent_switch_ns,
            ))
        .max(0.0),
    };
    let mut by_kind: BTreeMap<String, Vec<&JobRecord>> = BTreeMap::new();
    for r in &records {
        by_kind.entry(r.kind.clone()).or_default().push(r);
    }
    let by_kind = by_kind
        .into_iter()
        .map(|(kind, rs)| {
            let resp: Vec<f64> = rs.iter().map(|r| r.response_s).collect();
            let slow: Vec<f64> = rs.iter().map(|r| r.slowdown).collect();
            (
                kind,
                KindSummary {
                    jobs: rs.len(),
                    response_s: Summary::of(&resp),
                    slowdown: Summary::of(&slow),
                },
            )
        })
        .collect();
    let bounded: Vec<f64> = records
        .iter()
        .map(|r| (r.response_s / r.dedicated_s.max(BOUNDED_SLOWDOWN_S)).max(1.0))
        .collect();
    let k = &cluster.counters;
    Report {
        label: label.to_owned(),
        config: cluster.config.clone(),
        jobs: cluster.jobs.len(),
        completed: records.len(),
        makespan_s: makespan,
        response_s: Summary::of(&col(|r| r.response_s)),
        wait_s: Summary::of(&col(|r| r.wait_s)),
        execution_s: Summary::of(&col(|r| r.response_s - r.wait_s)),
        slowdown: Summary::of(&col(|r| r.slowdown)),
        bounded_slowdown: Summary::of(&bounded),
        throughput_jobs_per_hour: if makespan > 0.0 {
            records.len() as f64 / makespan * 3600.0
        } else {
            0.0
        },
        utilization: share(compute),
        cpu,
        by_kind,
        counters: SimCounters {
            instants: stats.instants,
            bound_events: stats.bound_events,
            conditional_fired: stats.conditional_fired,
            context_switches: k.context_switches,
            messages: k.messages,
            policy_events: k.policy_events,
            ring_reports: k.ring_reports,
            level_changes: k.level_changes,
            slices: k.slices,
            noise: k.noise,
        },
        performance: None,
        job_records: records,
    }
}

/// Peak resident memory of this process, KiB (Linux `VmHWM`).
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_a_small_sample() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 10.0]);
        assert_eq!(s.mean, 4.0);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.max, 10.0);
        assert!(s.cv > 0.0);
        assert_eq!(Summary::of(&[]), Summary::default());
    }
}
