//! What agents report of their RT ranks (`FrameReport`, protocol 1.3): the
//! latest counts per job and node. Counts are cumulative per rank, so the
//! latest report replaces the one before; nothing here is persisted (an
//! agent reports again after a coordinator restart).
//!
//! They feed three things: the miss rate `cosched job` shows, 1GS's set of
//! satisfied RT jobs (left out of replication), and under statistical
//! admission the work the rule counts for admitted processes (the p95 for
//! `statistical`, the mean and deviation for `probabilistic`).

use std::collections::BTreeMap;

use cosched_policy::{
    classes::{MeasuredWork, WorkMoments},
    global::{JobId, NodeIndex},
};
use cosched_proto::wire::{FrameReport, JobFrames};

use super::ClassState;
use crate::{admin::protocol::FramesView, core::Core};

/// Latest frame counts by job, then node.
#[derive(Debug, Clone, Default)]
pub struct FrameBook {
    jobs: BTreeMap<u32, BTreeMap<NodeIndex, JobFrames>>,
}

impl FrameBook {
    /// Whether every one of `nodes` reported the job satisfied (none: no).
    pub fn satisfied(&self, job: u32, nodes: &[NodeIndex]) -> bool {
        let Some(reports) = self.jobs.get(&job) else {
            return false;
        };
        !nodes.is_empty()
            && nodes
                .iter()
                .all(|node| reports.get(node).is_some_and(|report| report.satisfied))
    }

    /// Whether every one of `nodes` reported the job's processes ready for
    /// their first frame, a node `legacy` says cannot report it counting as
    /// ready (none: no).
    pub fn ready(&self, job: u32, nodes: &[NodeIndex], legacy: impl Fn(NodeIndex) -> bool) -> bool {
        let reports = self.jobs.get(&job);
        !nodes.is_empty()
            && nodes.iter().all(|&node| {
                legacy(node)
                    || reports
                        .and_then(|reports| reports.get(&node))
                        .is_some_and(|report| report.ready)
            })
    }

    /// The job's counts summed over its nodes; the measured work is the
    /// largest of the nodes' (the job's τ_max).
    pub fn view(&self, job: u32) -> Option<FramesView> {
        let reports = self.jobs.get(&job)?;
        let mut view = FramesView::default();
        for report in reports.values() {
            view.frames += report.frames;
            view.expected += report.expected;
            view.met += report.met;
            view.missed += report.missed;
            view.work_p95_ns = view.work_p95_ns.max(report.work_p95_ns);
        }
        view.nodes_reporting = reports.len();
        view.miss_rate_percent =
            (view.expected > 0).then(|| view.missed as f64 * 100.0 / view.expected as f64);
        Some(view)
    }

    pub fn forget(&mut self, job: u32) {
        self.jobs.remove(&job);
    }

    pub fn clear(&mut self) {
        self.jobs.clear();
    }
}

impl Core {
    /// `node`'s agent reports its RT ranks. Entries for jobs without a rank
    /// there, or that are not RT, are ignored (`Err` lists them, for the
    /// log).
    pub fn frame_report(&mut self, node: NodeIndex, report: &FrameReport) -> Result<(), String> {
        let mut ignored = Vec::new();
        for entry in &report.jobs {
            let known = self.jobs.get(&entry.job_id).and_then(|job| {
                let rank = job.rank_on(node)?;
                super::rt_spec(&job.submission.class).map(|_| rank)
            });
            let Some(rank) = known else {
                ignored.push(entry.job_id);
                continue;
            };
            self.frames
                .jobs
                .entry(entry.job_id)
                .or_default()
                .insert(node, *entry);
            if let ClassState::Divided(divided) = &mut self.classes {
                // Rank r of a 2DCS job is process r of its placement.
                let job = JobId(u64::from(entry.job_id));
                if let Some(work_ns) = entry.work_p95_ns {
                    divided.ledger.set_measured(
                        job,
                        rank,
                        MeasuredWork {
                            frames: entry.frames,
                            work_ns,
                        },
                    );
                }
                if let (Some(mean_ns), Some(sd_ns)) = (entry.work_mean_ns, entry.work_sd_ns) {
                    divided.ledger.set_moments(
                        job,
                        rank,
                        WorkMoments {
                            frames: entry.frames,
                            mean_ns,
                            sd_ns,
                        },
                    );
                }
            }
        }
        self.refresh_satisfied();
        self.refresh_ready();
        if ignored.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "frame counts for jobs without an RT rank on {}: {ignored:?}",
                self.node_name(node)
            ))
        }
    }
}
