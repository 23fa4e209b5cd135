//! Admission of a placement that cannot change: an RT job whose processes
//! already run on given nodes (the coordinator never migrates a process),
//! checked again when the rule, the ratio or the scheme changes under it, or
//! whose launcher chose its nodes.
//!
//! The test for each process is the one its rule applies at arrival, on
//! the process's own node instead of the node the rule would pick:
//! - deterministic: Σ_i + load ≤ capacity over min(Γ_i, Γ_A) (§4.4);
//! - statistical: the node's utilization plus the process's stays within
//!   the bound;
//! - probabilistic: the node's estimated load with the process's fits the
//!   RT share at the target overload probability;
//! - none: anything fits.
//!
//! Processes are taken heaviest first and each is counted on its node before
//! the next, exactly as at arrival, so a placement the rule chose itself on
//! the same ledger passes.

use super::super::job::RtJob;
use super::super::ledger::{ClassLedger, RtPlacement};
use super::super::tdm::{AllocationError, RtLoadModel, node_loads, window_fit};
use super::probabilistic::check_probabilistic_in_place;
use super::statistical::node_loads_ppm;
use super::{AdmissionRule, Rejection};

impl AdmissionRule {
    /// Whether `placement` passes this rule next to what the ledger holds;
    /// the ledger is not changed.
    pub fn check_placement(
        &self,
        ledger: &ClassLedger,
        job: &RtJob,
        model: &RtLoadModel,
        placement: &RtPlacement,
    ) -> Result<(), Rejection> {
        job.validate()?;
        if ledger.contains(job.id) {
            return Err(Rejection::AlreadyPlaced(job.id));
        }
        let mismatch = placement.job != job.id
            || placement.nodes.len() != job.processes()
            || placement
                .nodes
                .iter()
                .any(|&node| node >= ledger.node_count())
            || (ledger.spreads_processes() && !placement.is_spread());
        if mismatch {
            return Err(Rejection::Allocation(AllocationError::PlacementMismatch {
                job: job.id,
                processes: job.processes(),
                given: placement.nodes.len(),
                nodes: ledger.node_count(),
            }));
        }
        match self {
            Self::None => Ok(()),
            Self::Deterministic => {
                let mut loads = node_loads(ledger, model);
                for process in job.heaviest_first() {
                    let node = placement.nodes[process];
                    let fit = window_fit(&loads[node], job, process, model);
                    if !fit.fits() {
                        return Err(Rejection::WindowCapacityInPlace {
                            job: job.id,
                            process,
                            node,
                            load_ns: fit.load_ns,
                            placed_ns: fit.placed_ns,
                            capacity_ns: fit.capacity_ns,
                        });
                    }
                    loads[node].add(fit.load_ns, job.process_spec(process).window_ns());
                }
                Ok(())
            }
            Self::Statistical(params) => {
                let capacity_ppm = model.capacity_ppm(params.bound_ppm);
                let mut placed = node_loads_ppm(ledger, model, params);
                for process in job.heaviest_first() {
                    let node = placement.nodes[process];
                    let load_ppm =
                        model.utilization_ppm(job.period_ns, job.process_work_ns[process]);
                    if placed[node].saturating_add(load_ppm) > capacity_ppm {
                        return Err(Rejection::UtilizationInPlace {
                            job: job.id,
                            process,
                            node,
                            load_ppm,
                            placed_ppm: placed[node],
                            capacity_ppm,
                        });
                    }
                    placed[node] += load_ppm;
                }
                Ok(())
            }
            Self::Probabilistic(params) => {
                check_probabilistic_in_place(ledger, job, model, params, &placement.nodes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classes::{FairnessRatio, ProbabilisticParams, StatisticalParams};
    use crate::global::JobId;

    fn model() -> RtLoadModel {
        RtLoadModel::bare(FairnessRatio::new(1, 1).unwrap())
    }

    fn job(id: u64, works: &[u64]) -> RtJob {
        RtJob::new(JobId(id), 100, 1, works.to_vec()).unwrap()
    }

    fn on(id: u64, nodes: &[usize]) -> RtPlacement {
        RtPlacement {
            job: JobId(id),
            nodes: nodes.to_vec(),
        }
    }

    #[test]
    fn a_placement_the_rule_chose_passes_and_one_past_the_share_is_named_where_it_runs() {
        let rules = [
            AdmissionRule::Deterministic,
            AdmissionRule::Statistical(StatisticalParams::default()),
            AdmissionRule::Probabilistic(ProbabilisticParams::default()),
        ];
        for rule in rules {
            let mut ledger = ClassLedger::one_process_per_node(2);
            let first = job(1, &[30, 20]);
            let chosen = rule.evaluate(&ledger, &first, &model()).unwrap();
            rule.check_placement(&ledger, &first, &model(), &chosen)
                .unwrap();
            ledger.place_rt(&first, chosen);
            // Half of each node is RT's; 30 + 30 on node 0 exceeds it.
            let second = job(2, &[30]);
            let error = rule
                .check_placement(&ledger, &second, &model(), &on(2, &[0]))
                .unwrap_err();
            assert!(error.to_string().contains("where it runs"), "{error}");
            assert!(error.to_string().contains("node 0"), "{error}");
            rule.check_placement(&ledger, &second, &model(), &on(2, &[1]))
                .unwrap();
        }
        let mut ledger = ClassLedger::new(1);
        ledger.place_rt(&job(1, &[50]), on(1, &[0]));
        AdmissionRule::None
            .check_placement(&ledger, &job(2, &[50]), &model(), &on(2, &[0]))
            .unwrap();
    }

    #[test]
    fn a_placement_of_the_wrong_shape_is_refused_as_a_mismatch() {
        let ledger = ClassLedger::one_process_per_node(2);
        let two = job(1, &[10, 10]);
        for nodes in [&[0][..], &[0, 2], &[1, 1]] {
            let error = AdmissionRule::None
                .check_placement(&ledger, &two, &model(), &on(1, nodes))
                .unwrap_err();
            assert!(
                matches!(
                    error,
                    Rejection::Allocation(AllocationError::PlacementMismatch { .. })
                ),
                "{nodes:?}: {error}"
            );
        }
        // Shared nodes are fine where processes may share them.
        AdmissionRule::None
            .check_placement(&ClassLedger::new(2), &two, &model(), &on(1, &[1, 1]))
            .unwrap();
    }
}
