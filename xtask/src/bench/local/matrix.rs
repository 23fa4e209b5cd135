//! The bench's loop over cells (workload × MPL × policy). For each workload
//! and MPL: first the dedicated baseline of each of its job types (alone on
//! the cluster under plain Linux; measured once per bench and reused), then
//! for each policy: switch every agent, run the cell's jobs together `reps`
//! times, and turn the medians into rows. A failing cell becomes error rows
//! and the loop goes on; Ctrl-C stops it between runs.
use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow, bail};

use super::{
    super::outside_load::{Retry, undisturbed},
    interrupt::interrupted,
    metrics::{RunMetrics, slowdown},
    policies::{self, BASELINE},
    rows::{Row, RowKey, one_line},
    runner::{Allocator, run_once},
    workloads::{JobSlot, JobType, Workload},
};
use crate::{cluster::Cluster, progress::say};

/// What to measure.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub workloads: Vec<Workload>,
    pub mpls: Vec<u32>,
    pub policies: Vec<String>,
    pub reps: usize,
    pub duration_s: f64,
    pub wait: Option<super::SpinWait>,
}

/// The rows, and whether Ctrl-C cut the bench short.
#[derive(Debug)]
pub struct Measured {
    pub rows: Vec<Row>,
    pub interrupted: bool,
}

/// Dedicated medians per job type, or why they could not be measured (kept
/// as text: the error is reported again in every row that needed it).
pub type Baselines = BTreeMap<JobType, Result<RunMetrics, String>>;

/// Measures `kind`'s dedicated baseline unless `baselines` has it already
/// (each job type is measured once per bench run): the median of `reps`
/// runs of the job type alone under plain Linux.
pub fn ensure_baseline(
    baselines: &mut Baselines,
    cluster: &Cluster,
    synth: &str,
    kind: JobType,
    reps: usize,
    duration_s: f64,
    ids: &mut Allocator,
) {
    if baselines.contains_key(&kind) {
        return;
    }
    let mut measure = || -> anyhow::Result<RunMetrics> {
        policies::switch_all(cluster, BASELINE).context("the dedicated runs need plain Linux")?;
        let slot = [JobSlot {
            label: format!("{}-dedicated", kind.as_str()),
            kind,
        }];
        let mut runs = Vec::new();
        for rep in 1..=reps {
            if interrupted() {
                bail!("interrupted");
            }
            say(
                "bench",
                format!("dedicated {}: rep {rep}/{reps}", kind.as_str()),
            );
            let what = format!("dedicated {} rep {rep}/{reps}", kind.as_str());
            let r = undisturbed(
                Retry::DEFAULT,
                &what,
                || run_once(cluster, synth, &slot, duration_s, ids),
                |r| r.outside_cpu_percent,
            )
            .context(what.clone())?;
            runs.push(RunMetrics::of(&r.jobs[0], r.agent_cpu_percent));
        }
        Ok(RunMetrics::median(&runs))
    };
    let measured = measure().map_err(|e| format!("{e:#}"));
    if let Err(e) = &measured {
        say(
            "bench",
            format!("dedicated {}: {}", kind.as_str(), one_line(e)),
        );
    }
    baselines.insert(kind, measured);
}

/// The dedicated medians of `slots` in order, or the error to put in every
/// row of a cell that needs one that is missing.
pub fn dedicated_of(baselines: &Baselines, slots: &[JobSlot]) -> anyhow::Result<Vec<RunMetrics>> {
    slots
        .iter()
        .map(|slot| match baselines.get(&slot.kind) {
            Some(Ok(d)) => Ok(*d),
            Some(Err(e)) => {
                Err(anyhow!("{e}")
                    .context(format!("no dedicated baseline for {}", slot.kind.as_str())))
            }
            None => Err(anyhow!("no dedicated baseline for {}", slot.kind.as_str())),
        })
        .collect()
}

/// Runs every cell of `m`; never fails as a whole (failures are rows).
pub fn run(cluster: &Cluster, synth: &str, m: &Matrix) -> Measured {
    let mut ids = Allocator::waiting_by(m.wait);
    let mut baselines = Baselines::new();
    let mut rows = Vec::new();
    for &workload in &m.workloads {
        for &mpl in &m.mpls {
            let slots = workload.slots(mpl);
            for slot in &slots {
                if interrupted() {
                    return Measured {
                        rows,
                        interrupted: true,
                    };
                }
                ensure_baseline(
                    &mut baselines,
                    cluster,
                    synth,
                    slot.kind,
                    m.reps,
                    m.duration_s,
                    &mut ids,
                );
            }
            for policy in &m.policies {
                if interrupted() {
                    return Measured {
                        rows,
                        interrupted: true,
                    };
                }
                let cell = Cell {
                    workload,
                    mpl,
                    policy,
                    slots: &slots,
                };
                let cell_rows = cell.run(cluster, synth, m, &baselines, &mut ids);
                say("bench", cell.describe_result(&cell_rows));
                rows.extend(cell_rows);
            }
        }
    }
    Measured {
        rows,
        interrupted: interrupted(),
    }
}

/// One (workload, MPL, policy).
struct Cell<'a> {
    workload: Workload,
    mpl: u32,
    policy: &'a str,
    slots: &'a [JobSlot],
}

impl Cell<'_> {
    fn key(&self, slot: &JobSlot) -> RowKey {
        RowKey {
            workload: self.workload.as_str().into(),
            policy: self.policy.into(),
            mpl: self.mpl,
            job: slot.label.clone(),
        }
    }

    fn name(&self) -> String {
        format!(
            "{} MPL {} {}",
            self.workload.as_str(),
            self.mpl,
            self.policy
        )
    }

    fn error_rows(&self, e: &anyhow::Error, reps: usize) -> Vec<Row> {
        self.slots
            .iter()
            .map(|s| Row::error(self.key(s), e, reps))
            .collect()
    }

    fn run(
        &self,
        cluster: &Cluster,
        synth: &str,
        m: &Matrix,
        baselines: &Baselines,
        ids: &mut Allocator,
    ) -> Vec<Row> {
        let dedicated = match dedicated_of(baselines, self.slots) {
            Ok(d) => d,
            Err(e) => return self.error_rows(&e, 0),
        };
        if let Err(e) = policies::switch_all(cluster, self.policy) {
            return self.error_rows(&e, 0);
        }
        let mut runs: Vec<Vec<RunMetrics>> = vec![Vec::new(); self.slots.len()];
        for rep in 1..=m.reps {
            if interrupted() {
                return self.error_rows(&anyhow!("interrupted"), rep - 1);
            }
            say("bench", format!("{}: rep {rep}/{}", self.name(), m.reps));
            match run_once(cluster, synth, self.slots, m.duration_s, ids) {
                Ok(r) => {
                    let mut seen = Vec::new();
                    for ((per_job, job), d) in runs.iter_mut().zip(&r.jobs).zip(&dedicated) {
                        let run = RunMetrics::of(job, r.agent_cpu_percent);
                        seen.push(format!(
                            "{} {:.2} (pace {:.2})",
                            job.job,
                            slowdown(d.iterations_per_s, run.iterations_per_s),
                            run.pace_of_progress
                        ));
                        per_job.push(run);
                    }
                    say(
                        "bench",
                        format!("{}: rep {rep}: {}", self.name(), seen.join(", ")),
                    );
                }
                Err(e) => {
                    let e = e.context(format!("{} rep {rep}/{}", self.name(), m.reps));
                    return self.error_rows(&e, rep - 1);
                }
            }
        }
        self.slots
            .iter()
            .zip(&runs)
            .zip(&dedicated)
            .map(|((slot, per_job), d)| Row::ok(self.key(slot), per_job, d))
            .collect()
    }

    /// A progress line: the cell's slowdowns, or its error.
    fn describe_result(&self, rows: &[Row]) -> String {
        match rows.iter().find_map(|r| r.error.as_deref()) {
            Some(e) => format!("{}: error: {}", self.name(), one_line(e)),
            None => {
                let s: Vec<String> = rows
                    .iter()
                    .map(|r| format!("{} {:.2}", r.job, r.slowdown))
                    .collect();
                format!("{}: slowdown {}", self.name(), s.join(", "))
            }
        }
    }
}
