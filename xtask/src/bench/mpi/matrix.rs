//! The loop of `bench mpi`, interleaved so that slow drift of the machine
//! (a build starting, thermal state) spreads over every column instead of
//! biasing the ones measured last: every repetition runs, for each library
//! and workload, the dedicated run, then every runnable column at every
//! MPL, the columns' order rotated by one from one repetition to the next.
//! A failed run is repeated once (a hung MPI start-up is rare but real);
//! a disturbed one (outside load) as `bench local` does.
use std::collections::BTreeMap;

use super::{
    columns::Column,
    coordinator_config,
    run::{Ctx, Handoff, RunResult, run_once},
    workloads::MpiWorkload,
};
use crate::{
    bench::{
        coordinator::{CoordAdmin, IDLE_COORDINATOR_POLICY},
        local::{interrupt::interrupted, policies, rows::one_line},
        outside_load::{Retry, undisturbed},
    },
    mpi::Library,
    progress::say,
};

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub libs: Vec<Library>,
    pub workloads: Vec<MpiWorkload>,
    pub mpls: Vec<u32>,
    pub columns: Vec<Column>,
    pub reps: usize,
}

impl Plan {
    /// The (library, workload) pairs that can run.
    pub fn pairs(&self) -> Vec<(Library, MpiWorkload)> {
        self.libs
            .iter()
            .flat_map(|&l| self.workloads.iter().map(move |&w| (l, w)))
            .filter(|(l, w)| w.supported(*l))
            .collect()
    }

    /// The columns measured for `lib`.
    pub fn runnable(&self, lib: Library) -> Vec<&Column> {
        self.columns
            .iter()
            .filter(|c| c.not_runnable(lib).is_none())
            .collect()
    }
}

/// A cell: library, workload, MPL (1 = dedicated), column label.
pub type Key = (Library, MpiWorkload, u32, String);

/// Every run's result per cell, and the errors met.
#[derive(Debug, Default)]
pub struct Samples {
    pub runs: BTreeMap<Key, Vec<RunResult>>,
    pub errors: BTreeMap<Key, String>,
    /// Runs per cell that failed (an error, or hung past the job timeout)
    /// and were repeated or given up, kept apart from the medians.
    pub failed_runs: BTreeMap<Key, u32>,
    pub interrupted: bool,
}

/// The dedicated cell of a library and workload.
pub fn dedicated_key(lib: Library, w: MpiWorkload) -> Key {
    (lib, w, 1, "dedicated".into())
}

/// Runs the plan; never fails as a whole.
pub fn run(ctx: &mut Ctx<'_>, plan: &Plan) -> Samples {
    let mut s = Samples::default();
    for rep in 0..plan.reps {
        for (lib, w) in plan.pairs() {
            for (mpl, col) in cells_of_rep(rep, &plan.runnable(lib), &plan.mpls) {
                if interrupted() {
                    s.interrupted = true;
                    return s;
                }
                let key: Key = match col {
                    None => dedicated_key(lib, w),
                    Some(c) => (lib, w, mpl, c.label()),
                };
                let what = format!(
                    "{} {} MPL {mpl} {} rep {}/{}",
                    lib.as_str(),
                    w.as_str(),
                    key.3,
                    rep + 1,
                    plan.reps
                );
                say("bench", &what);
                let mut failed = 0;
                let result = measure(ctx, lib, w, mpl, col, &what, &mut failed);
                if failed > 0 {
                    *s.failed_runs.entry(key.clone()).or_default() += failed;
                }
                match result {
                    Ok(r) => s.runs.entry(key).or_default().push(r),
                    Err(e) => {
                        let e = format!("{e:#}");
                        say("bench", format!("{what}: error: {}", one_line(&e)));
                        s.errors.insert(key, e);
                    }
                }
            }
        }
    }
    s
}

/// The runs of one repetition of a library and workload, in order: the
/// columns rotated by `rep`, each MPL's block of them bracketed by dedicated
/// runs (MPL 1, no column). Why bracketed: the dedicated time divides every
/// slowdown, and one dedicated run per repetition moved 7–10 % from one
/// invocation to the next (gang's own time per iteration did not), so a
/// verdict 5 % from its target was decided by that one run; dedicated runs
/// are short, and sampled before and after each block they span the same
/// stretch of the machine's time as the columns they divide.
pub fn cells_of_rep<'c>(
    rep: usize,
    cols: &[&'c Column],
    mpls: &[u32],
) -> Vec<(u32, Option<&'c Column>)> {
    if cols.is_empty() {
        return vec![(1, None)];
    }
    let mut cols = cols.to_vec();
    let by = rep % cols.len();
    cols.rotate_left(by);
    let mut cells = vec![(1, None)];
    for &mpl in mpls {
        cells.extend(cols.iter().map(|c| (mpl, Some(*c))));
        cells.push((1, None));
    }
    cells
}

fn measure(
    ctx: &mut Ctx<'_>,
    lib: Library,
    w: MpiWorkload,
    mpl: u32,
    col: Option<&Column>,
    what: &str,
    failed: &mut u32,
) -> anyhow::Result<RunResult> {
    let policy = col.map_or(policies::BASELINE, |c| c.agent_policy());
    let global = match col {
        Some(Column::Coordinator { policy, .. }) => Some(*policy),
        _ => None,
    };
    // A coordinator column may need the coordinator's config changed
    // (`paired-gang-ahead`): restarted, idle, before anything is switched.
    if let Some(c) = col {
        coordinator_config::ensure(ctx.cluster, c)?;
    }
    // The coordinator idles (enforcing nothing, the agents keep their own
    // policy) unless its column runs; switched first, so that the agents'
    // policy is set after it.
    if ctx.cluster.coordinator.is_some() {
        CoordAdmin::of(ctx.cluster).set_global(IDLE_COORDINATOR_POLICY)?;
    }
    policies::switch_all(ctx.cluster, policy)?;
    if let Some(global) = global {
        CoordAdmin::of(ctx.cluster).set_policy(global, policy)?;
    }
    let handoff = match global {
        Some(_) => Handoff::Attach,
        None => Handoff::Adopt,
    };
    let yield_when_idle = matches!(col, Some(Column::Yield));
    undisturbed(
        Retry::DEFAULT,
        what,
        || {
            run_once(ctx, lib, w, yield_when_idle, handoff, mpl)
                .or_else(|e| {
                    *failed += 1;
                    say(
                        "bench",
                        format!("{what}: {}; trying once more", one_line(&format!("{e:#}"))),
                    );
                    run_once(ctx, lib, w, yield_when_idle, handoff, mpl)
                })
                .inspect_err(|_| *failed += 1)
        },
        |r| r.outside_cpu_percent,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(cells: &[(u32, Option<&Column>)]) -> Vec<String> {
        cells
            .iter()
            .map(|(mpl, c)| match c {
                None => "dedicated".to_string(),
                Some(c) => format!("{}@{mpl}", c.label()),
            })
            .collect()
    }

    #[test]
    fn every_mpl_block_is_bracketed_by_dedicated_runs() {
        let (a, b) = (Column::Policy("local".into()), Column::Yield);
        let cells = cells_of_rep(0, &[&a, &b], &[2, 3]);
        assert_eq!(
            labels(&cells),
            [
                "dedicated",
                "local@2",
                "yield@2",
                "dedicated",
                "local@3",
                "yield@3",
                "dedicated"
            ]
        );
    }

    #[test]
    fn the_columns_order_rotates_with_the_repetition_but_dedicated_runs_stay_put() {
        let (a, b, c) = (
            Column::Policy("local".into()),
            Column::Yield,
            Column::Policy("dcs".into()),
        );
        let cells = cells_of_rep(4, &[&a, &b, &c], &[2]);
        assert_eq!(
            labels(&cells),
            ["dedicated", "yield@2", "dcs@2", "local@2", "dedicated"]
        );
    }

    #[test]
    fn without_runnable_columns_one_dedicated_run_remains() {
        let cells = cells_of_rep(1, &[], &[2, 3]);
        assert_eq!(labels(&cells), ["dedicated"]);
    }
}
