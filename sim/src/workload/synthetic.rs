//! A statistical job stream (seed 003 §V.A: "statistically modeled"; the
//! shapes usual in the parallel-workload literature): Poisson arrivals scaled
//! to an offered load, log-uniform sizes with a bias to powers of two,
//! log-uniform run times; each job is made a communication-, I/O- or
//! CPU-bound program (ClusterSchedSim §2.2) of a given granularity.

use serde::{Deserialize, Serialize};

use super::job::{JobSpec, Pattern, RecvMode};
use crate::executive::Ns;
use crate::rng::{Rng, unit_from_key};

/// How a job's size and dedicated run time become a program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobShape {
    /// Compute per iteration of communicating jobs.
    pub granularity_ns: Ns,
    /// Share of jobs that communicate every iteration.
    pub comm_fraction: f64,
    /// Share of jobs that also do I/O every iteration (the rest of the
    /// non-communicating jobs are CPU-bound: one long compute).
    pub io_fraction: f64,
    /// Share of an I/O job's iteration spent in I/O.
    pub io_share: f64,
    pub pattern: Pattern,
    pub recv: RecvMode,
    pub message_bytes: u64,
    pub compute_jitter: f64,
}

impl Default for JobShape {
    fn default() -> Self {
        Self {
            granularity_ns: 50_000_000,
            comm_fraction: 0.6,
            io_fraction: 0.2,
            io_share: 0.5,
            pattern: Pattern::NearestNeighbour,
            recv: RecvMode::Spin,
            message_bytes: 4096,
            compute_jitter: 0.1,
        }
    }
}

/// Parameters of a generated stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamParams {
    pub jobs: usize,
    /// Cluster size: the offered load is relative to it.
    pub nodes: u32,
    /// Offered load: total dedicated node-time / (nodes × span of arrivals).
    pub load: f64,
    pub max_size: u32,
    /// Share of sizes rounded to a power of two.
    pub pow2_fraction: f64,
    pub min_runtime_s: f64,
    pub max_runtime_s: f64,
    pub seed: u64,
}

impl Default for StreamParams {
    fn default() -> Self {
        Self {
            jobs: 1000,
            nodes: 64,
            load: 0.7,
            max_size: 64,
            pow2_fraction: 0.75,
            min_runtime_s: 10.0,
            max_runtime_s: 1000.0,
            seed: 1,
        }
    }
}

/// Turns (id, arrival, size, dedicated run time) into programs.
pub fn shape_jobs(raw: &[(u64, Ns, u32, f64)], shape: &JobShape) -> Vec<JobSpec> {
    raw.iter()
        .map(|&(id, arrival, nodes, run_s)| shape_one(id, arrival, nodes, run_s, shape))
        .collect()
}

fn shape_one(id: u64, arrival: Ns, nodes: u32, run_s: f64, shape: &JobShape) -> JobSpec {
    let run_ns = (run_s * 1e9).max(1.0);
    let u = unit_from_key(&[id, 0x5eed]);
    let g = shape.granularity_ns.max(1) as f64;
    let base = JobSpec {
        id,
        arrival,
        nodes,
        iterations: 1,
        compute_ns: run_ns as Ns,
        compute_jitter: 0.0,
        rank_compute_ns: Vec::new(),
        io_ns: 0,
        pattern: Pattern::None,
        message_bytes: shape.message_bytes,
        recv: shape.recv,
        kind: "cpu".into(),
    };
    if u < shape.comm_fraction && nodes > 1 {
        let iterations = (run_ns / g).round().clamp(1.0, f64::from(u32::MAX)) as u32;
        JobSpec {
            iterations,
            compute_ns: (run_ns / f64::from(iterations)) as Ns,
            compute_jitter: shape.compute_jitter,
            pattern: shape.pattern,
            kind: "comm".into(),
            ..base
        }
    } else if u < shape.comm_fraction + shape.io_fraction {
        let iterations = (run_ns / g).round().clamp(1.0, f64::from(u32::MAX)) as u32;
        let per = run_ns / f64::from(iterations);
        let io = (per * shape.io_share.clamp(0.0, 1.0)) as Ns;
        JobSpec {
            iterations,
            compute_ns: (per as Ns).saturating_sub(io).max(1),
            io_ns: io,
            compute_jitter: shape.compute_jitter,
            pattern: if nodes > 1 {
                shape.pattern
            } else {
                Pattern::None
            },
            kind: "io".into(),
            ..base
        }
    } else {
        base
    }
}

/// Generates a stream: sizes and run times first, then Poisson arrivals whose
/// rate gives the offered load.
pub fn generate(params: &StreamParams, shape: &JobShape) -> Vec<JobSpec> {
    let mut rng = Rng::new(params.seed);
    let max_size = params.max_size.clamp(1, params.nodes.max(1));
    let mut sized = Vec::with_capacity(params.jobs);
    for _ in 0..params.jobs {
        let mut size = rng.log_uniform(1.0, f64::from(max_size) + 1.0).floor() as u32;
        if rng.chance(params.pow2_fraction) {
            size = 1 << (31 - size.max(1).leading_zeros());
        }
        let size = size.clamp(1, max_size);
        let run_s = rng.log_uniform(params.min_runtime_s, params.max_runtime_s);
        sized.push((size, run_s));
    }
    let mean_work: f64 =
        sized.iter().map(|&(n, r)| f64::from(n) * r).sum::<f64>() / sized.len().max(1) as f64;
    let capacity = f64::from(params.nodes.max(1)) * params.load.max(1e-9);
    let mean_gap_s = mean_work / capacity;
    let mut t = 0.0;
    let raw: Vec<(u64, Ns, u32, f64)> = sized
        .into_iter()
        .enumerate()
        .map(|(i, (size, run_s))| {
            let at = (t * 1e9) as Ns;
            t += rng.exponential(mean_gap_s);
            (i as u64, at, size, run_s)
        })
        .collect();
    shape_jobs(&raw, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_load_matches_the_request() {
        let params = StreamParams {
            jobs: 4000,
            ..StreamParams::default()
        };
        let jobs = generate(&params, &JobShape::default());
        let work_s: f64 = jobs
            .iter()
            .map(|j| {
                f64::from(j.nodes) * j.iterations as f64 * (j.compute_ns + j.io_ns) as f64 / 1e9
            })
            .sum();
        let span_s = jobs.last().unwrap().arrival as f64 / 1e9;
        let load = work_s / (span_s * f64::from(params.nodes));
        assert!((load - params.load).abs() < 0.1, "offered load {load}");
        assert!(jobs.iter().all(|j| (1..=64).contains(&j.nodes)));
        assert!(jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    }

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let params = StreamParams::default();
        assert_eq!(
            generate(&params, &JobShape::default()),
            generate(&params, &JobShape::default())
        );
    }
}
