//! The numbers each row reports, from what one run of a job did, and their
//! median over repetitions. ClusterSchedSim's metrics, made operational for what
//! this machine can measure:
//!
//! - slowdown: dedicated iterations/s ÷ shared iterations/s (the benchmark
//!   runs for a fixed time, so this is its response-time ratio);
//! - scheduling skewness: the mean wait per iteration in the shared run minus
//!   the same job's dedicated wait per iteration, in µs. The dedicated wait
//!   is what the communication itself costs; what remains is time spent
//!   waiting for a peer that was not scheduled, which is the seed's skewness
//!   (wait start → sender scheduled) summed per iteration;
//! - pace of progress: CPU share the job got, the benchmark's CPU seconds per
//!   rank per second of its measured window (W = the run);
//! - loss of CPU: share of the job's CPU time spent spinning (eBPF spin
//!   seconds ÷ eBPF CPU seconds); switch and interrupt costs are not
//!   separable here and are left out;
//! - spin fraction: share of the job's wall time spent spinning (eBPF spin
//!   seconds per rank per second of the run).
//!
//! Undefined values (a division by zero, no latency samples) are NaN, written
//! as `null` in JSON and `-` in the table.
use super::super::jobs::JobOutcome;

/// One job in one run, reduced to the reported numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunMetrics {
    pub iterations_per_s: f64,
    /// Time in receives per iteration and rank, µs.
    pub wait_per_iteration_us: f64,
    pub spin_fraction: f64,
    pub pace_of_progress: f64,
    pub loss_of_cpu: f64,
    pub boosts: f64,
    pub actions: f64,
    pub reaction_latency_p50_us: f64,
    pub reaction_latency_p99_us: f64,
    pub context_switches: f64,
    pub agent_cpu_percent: f64,
}

impl RunMetrics {
    /// `agent_cpu_percent` is the run's, the same for all of its jobs.
    pub fn of(o: &JobOutcome, agent_cpu_percent: f64) -> Self {
        let ranks = o.ranks as f64;
        let no_samples = o.reactions == 0;
        let latency = |v: f64| if no_samples { f64::NAN } else { v };
        Self {
            iterations_per_s: o.iterations_per_s,
            wait_per_iteration_us: ratio(o.wait_seconds * 1e6, ranks * o.iterations),
            spin_fraction: ratio(o.spin_seconds, ranks * o.elapsed_s),
            pace_of_progress: ratio(o.bench_cpu_seconds, ranks * o.elapsed_s),
            loss_of_cpu: ratio(o.spin_seconds, o.cpu_seconds),
            boosts: o.boosts as f64,
            actions: o.actions as f64,
            reaction_latency_p50_us: latency(o.reaction_latency_p50_us),
            reaction_latency_p99_us: latency(o.reaction_latency_p99_us),
            context_switches: o.context_switches as f64,
            agent_cpu_percent,
        }
    }

    /// Field by field median over repetitions (of the defined values).
    pub fn median(runs: &[Self]) -> Self {
        let m = |field: fn(&Self) -> f64| median_finite(runs.iter().map(field));
        Self {
            iterations_per_s: m(|r| r.iterations_per_s),
            wait_per_iteration_us: m(|r| r.wait_per_iteration_us),
            spin_fraction: m(|r| r.spin_fraction),
            pace_of_progress: m(|r| r.pace_of_progress),
            loss_of_cpu: m(|r| r.loss_of_cpu),
            boosts: m(|r| r.boosts),
            actions: m(|r| r.actions),
            reaction_latency_p50_us: m(|r| r.reaction_latency_p50_us),
            reaction_latency_p99_us: m(|r| r.reaction_latency_p99_us),
            context_switches: m(|r| r.context_switches),
            agent_cpu_percent: m(|r| r.agent_cpu_percent),
        }
    }
}

/// Dedicated iterations/s over shared iterations/s.
pub fn slowdown(dedicated_iterations_per_s: f64, shared_iterations_per_s: f64) -> f64 {
    ratio(dedicated_iterations_per_s, shared_iterations_per_s)
}

/// Extra wait per iteration caused by sharing, µs (see the module doc).
pub fn scheduling_skewness_us(shared: &RunMetrics, dedicated: &RunMetrics) -> f64 {
    shared.wait_per_iteration_us - dedicated.wait_per_iteration_us
}

/// Mean over agents of their CPU use during a run of `wall_s` seconds, in
/// percent of one core (what one node of a real cluster pays); agents with a
/// missing reading are left out.
pub fn agent_cpu_percent(before: &[Option<f64>], after: &[Option<f64>], wall_s: f64) -> f64 {
    let used: Vec<f64> = before
        .iter()
        .zip(after)
        .filter_map(|(b, a)| Some(a.as_ref()? - b.as_ref()?))
        .collect();
    ratio(used.iter().sum::<f64>() * 100.0, used.len() as f64 * wall_s)
}

/// Median of the finite values; NaN when there are none.
pub fn median_finite(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Geometric mean of the finite, positive values; NaN when there are none
/// (slowdowns are ratios, so they are averaged geometrically).
pub fn geometric_mean(values: impl IntoIterator<Item = f64>) -> f64 {
    let logs: Vec<f64> = values
        .into_iter()
        .filter(|x| x.is_finite() && *x > 0.0)
        .map(f64::ln)
        .collect();
    if logs.is_empty() {
        return f64::NAN;
    }
    (logs.iter().sum::<f64>() / logs.len() as f64).exp()
}

fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator == 0.0 || !denominator.is_finite() {
        f64::NAN
    } else {
        numerator / denominator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> JobOutcome {
        JobOutcome {
            ranks: 2,
            iterations_per_s: 1000.0,
            iterations: 2000.0,
            elapsed_s: 2.0,
            wait_seconds: 1.0,
            spin_seconds: 0.8,
            cpu_seconds: 3.2,
            bench_cpu_seconds: 3.0,
            boosts: 12,
            context_switches: 40,
            ..JobOutcome::default()
        }
    }

    #[test]
    fn run_metrics_follow_the_documented_formulas() {
        let m = RunMetrics::of(&outcome(), 1.5);
        assert_eq!(m.wait_per_iteration_us, 250.0); // 1 s / (2 ranks × 2000)
        assert_eq!(m.spin_fraction, 0.2); // 0.8 / (2 × 2 s)
        assert_eq!(m.pace_of_progress, 0.75); // 3 / (2 × 2 s)
        assert_eq!(m.loss_of_cpu, 0.25); // 0.8 / 3.2
        assert_eq!((m.boosts, m.context_switches), (12.0, 40.0));
        assert_eq!(m.agent_cpu_percent, 1.5);
        assert!(
            m.reaction_latency_p50_us.is_nan(),
            "no samples -> undefined"
        );
    }

    #[test]
    fn latency_is_kept_when_there_are_samples() {
        let o = JobOutcome {
            reactions: 3,
            reaction_latency_p50_us: 8.0,
            reaction_latency_p99_us: 30.0,
            ..outcome()
        };
        let m = RunMetrics::of(&o, 0.0);
        assert_eq!(
            (m.reaction_latency_p50_us, m.reaction_latency_p99_us),
            (8.0, 30.0)
        );
    }

    #[test]
    fn empty_runs_give_undefined_ratios_not_infinities() {
        let m = RunMetrics::of(&JobOutcome::default(), 0.0);
        assert!(m.wait_per_iteration_us.is_nan());
        assert!(m.loss_of_cpu.is_nan());
        assert!(slowdown(100.0, 0.0).is_nan());
    }

    #[test]
    fn slowdown_and_skewness() {
        assert_eq!(slowdown(30_000.0, 7_500.0), 4.0);
        let dedicated = RunMetrics {
            wait_per_iteration_us: 20.0,
            ..RunMetrics::default()
        };
        let shared = RunMetrics {
            wait_per_iteration_us: 95.0,
            ..RunMetrics::default()
        };
        assert_eq!(scheduling_skewness_us(&shared, &dedicated), 75.0);
    }

    #[test]
    fn median_is_per_field_and_ignores_undefined_values() {
        let r = |ips: f64, p50: f64| RunMetrics {
            iterations_per_s: ips,
            reaction_latency_p50_us: p50,
            ..RunMetrics::default()
        };
        let m = RunMetrics::median(&[r(3.0, f64::NAN), r(1.0, 10.0), r(2.0, 20.0)]);
        assert_eq!(m.iterations_per_s, 2.0);
        assert_eq!(m.reaction_latency_p50_us, 15.0);
        assert!(median_finite([f64::NAN]).is_nan());
    }

    #[test]
    fn agent_cpu_is_a_mean_per_agent_over_known_readings() {
        let before = [Some(1.0), Some(2.0), None];
        let after = [Some(1.1), Some(2.3), Some(9.0)];
        let p = agent_cpu_percent(&before, &after, 2.0);
        assert!((p - 10.0).abs() < 1e-9, "{p}"); // (0.1 + 0.3) / 2 agents / 2 s
        assert!(agent_cpu_percent(&[None], &[None], 2.0).is_nan());
    }

    #[test]
    fn geometric_mean_of_ratios() {
        assert!((geometric_mean([2.0, 8.0]) - 4.0).abs() < 1e-12);
        assert!(geometric_mean([f64::NAN]).is_nan());
    }
}
