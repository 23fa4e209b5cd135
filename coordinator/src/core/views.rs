//! What the admin socket shows: jobs, the matrix, nodes, status.

use cosched_policy::global::JobId;

use super::{Core, JobRecord, RankState};
use crate::admin::protocol::{
    JobStateView, JobView, MatrixView, NodeView, RankView, SkewSummary, StatusView,
};

impl Core {
    fn view_of(&self, job: &JobRecord) -> JobView {
        let id = JobId(u64::from(job.id));
        let active = job.state.is_active();
        let prediction = active.then(|| self.predictor.predict(id));
        let mut view = JobView {
            id: job.id,
            name: job.submission.name.clone(),
            state: job.state,
            nodes_wanted: job.submission.nodes,
            nodes: job
                .ranks
                .iter()
                .map(|rank| self.node_name(rank.node))
                .collect(),
            row: self.matrix.placement(id).map(|placed| placed.row),
            queue_position: self.matrix.queue_position(id),
            class: job.class_label(),
            exclusive: job.submission.exclusive,
            cpu_percent: job.last_cpu_percent,
            predicted_percent: prediction.map(|prediction| prediction.percent),
            prediction: prediction.map(|prediction| prediction.to_string()),
            pair: if job.state == JobStateView::Running {
                self.rotation.explain(&self.matrix, job.id)
            } else {
                None
            },
            port: job.port,
            ranks: job
                .ranks
                .iter()
                .enumerate()
                .map(|(index, rank)| RankView {
                    rank: index as u32,
                    node: self.node_name(rank.node),
                    // An attached job's rank is not launched: its agent
                    // waits for the launcher's processes to join.
                    state: if job.attached && rank.state == RankState::Launched {
                        "expected".into()
                    } else {
                        rank.state.describe()
                    },
                })
                .collect(),
            reason: job.reason.clone(),
            submitted_unix_ms: job.submitted_unix_ms,
            attached: job.attached,
            owner: job.owner,
            admission: None,
            rows_held: Vec::new(),
            replica_rows: Vec::new(),
            guarantee: None,
            frames: None,
        };
        self.class_view(job, &mut view);
        view
    }

    /// One job, active or recently finished.
    pub fn job_view(&self, id: u32) -> Option<JobView> {
        self.jobs
            .get(&id)
            .or_else(|| self.finished.iter().rev().find(|job| job.id == id))
            .map(|job| self.view_of(job))
    }

    /// Active jobs in id order; with `all`, the retained finished ones first.
    /// Active jobs in `state`, without building their views (the daemon
    /// updates its gauges after every event: with jobs of a thousand ranks,
    /// views cost more than the event itself).
    pub fn count_jobs(&self, state: JobStateView) -> usize {
        self.jobs.values().filter(|job| job.state == state).count()
    }

    pub fn jobs_view(&self, all: bool) -> Vec<JobView> {
        let finished = self.finished.iter().filter(|_| all);
        let mut jobs: Vec<JobView> = finished
            .chain(self.jobs.values())
            .map(|job| self.view_of(job))
            .collect();
        jobs.sort_by_key(|job| job.id);
        jobs
    }

    pub fn matrix_view(&self) -> MatrixView {
        let mut view = MatrixView {
            nodes: self
                .nodes
                .iter()
                .map(|node| node.record.name.clone())
                .collect(),
            cells: (0..self.matrix.rows())
                .map(|row| {
                    (0..self.matrix.nodes())
                        .map(|node| self.matrix.cell(row, node).map(|job| job.0 as u32))
                        .collect()
                })
                .collect(),
            active_rows: self
                .current
                .as_ref()
                .map(|current| current.rows.clone())
                .unwrap_or_default(),
            alternates: self
                .current
                .as_ref()
                .map(|current| current.alternates.clone())
                .unwrap_or_default(),
            queue: self
                .matrix
                .queued_jobs()
                .map(|request| request.id.0 as u32)
                .collect(),
            row_classes: Vec::new(),
            replicas: Vec::new(),
        };
        self.one_gs_matrix_view(&mut view);
        view
    }

    pub fn nodes_view(&self) -> Vec<NodeView> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(index, node)| {
                let estimate = node.estimate();
                // The jobs with a rank here (the same as the matrix's cells
                // of the column under the matrix policies).
                let jobs: Vec<u32> = self
                    .jobs
                    .values()
                    .filter(|job| {
                        job.state == JobStateView::Running && job.rank_on(index).is_some()
                    })
                    .map(|job| job.id)
                    .collect();
                NodeView {
                    index,
                    name: node.record.name.clone(),
                    connected: node.is_up(),
                    address: node.record.address.map(|ip| ip.to_string()),
                    cpus: node.record.cpus.clone(),
                    clock_offset_ns: estimate.map(|estimate| estimate.offset_ns),
                    clock_uncertainty_ns: estimate.map(|estimate| estimate.uncertainty_ns),
                    jobs,
                    protocol: node
                        .is_up()
                        .then(|| format!("{}.{}", node.protocol.major, node.protocol.minor)),
                    unreaped: node
                        .record
                        .unreaped
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                }
            })
            .collect()
    }

    pub fn status_view(&self, slice_ms: u64, switch_lead_us: u64) -> StatusView {
        let count = |state| self.jobs.values().filter(|job| job.state == state).count();
        StatusView {
            policy: self.policy,
            slice_ms,
            switch_lead_us,
            epoch: self.epoch,
            slices: self.slice_counter,
            nodes_connected: self.nodes.iter().filter(|node| node.is_up()).count(),
            nodes: self.nodes.len(),
            jobs_running: count(JobStateView::Running),
            jobs_queued: count(JobStateView::Queued),
            skew: self.skew_summary(),
            division_skew: self.division_skew.summary(),
            classes: self.classes_status(),
        }
    }

    pub fn skew_summary(&self) -> SkewSummary {
        self.skew.summary()
    }
}
