//! What `cosched jobs`, `job`, `matrix` and `status` show of the BE/RT
//! policies: admission, 1GS rows and guarantee, frame counts, the ratio and
//! the current division.

use cosched_policy::{
    classes::{Class, one_level_gang::CellKind},
    global::JobId,
};

use super::{Admission, ClassState};
use crate::{
    admin::protocol::{AdmissionView, ClassesStatusView, DivisionView, JobView, MatrixView},
    core::{Core, JobRecord},
};

fn class_name(class: Class) -> &'static str {
    match class {
        Class::RealTime => "rt",
        Class::BestEffort => "be",
    }
}

impl Core {
    /// Fills the BE/RT parts of a job's view.
    pub(in crate::core) fn class_view(&self, job: &JobRecord, view: &mut JobView) {
        view.admission = job.admission.as_ref().map(|admission| AdmissionView {
            state: admission.as_str().into(),
            reason: match admission {
                Admission::Rejected { reason } => Some(reason.clone()),
                Admission::Admitted | Admission::Waiting => None,
            },
        });
        view.frames = self
            .frames
            .view(job.id)
            .or_else(|| job.final_frames.clone());
        let Some(gang) = self.classes.one_gs() else {
            return;
        };
        let id = JobId(u64::from(job.id));
        if let Some(held) = gang.allocation(id) {
            view.row = held.rows.first().copied();
            view.rows_held = held.rows.clone();
            view.replica_rows = gang.replica_rows(id);
        }
        view.queue_position = gang.queue_position(id);
        view.guarantee = gang.guaranteed_frames_per_cycle(id).map(|guarantee| {
            format!(
                "{} of {} rows needed: {:.1} ms of CPU per {:.1} ms cycle, {:.1} ms needed ({})",
                guarantee.rows_held,
                guarantee.rows_needed,
                guarantee.cpu_per_cycle_ns as f64 / 1e6,
                guarantee.cycle_ns as f64 / 1e6,
                guarantee.cpu_needed_per_cycle_ns as f64 / 1e6,
                if guarantee.is_met() {
                    "met"
                } else {
                    "not guaranteed"
                }
            )
        });
    }

    /// The 1GS matrix, rows marked by class, replicas marked.
    pub(in crate::core) fn one_gs_matrix_view(&self, view: &mut MatrixView) {
        let ClassState::OneGs(gang) = &self.classes else {
            return;
        };
        let cells = |row: usize, node: usize| gang.cell(row, node);
        view.cells = (0..gang.rows())
            .map(|row| {
                (0..gang.nodes())
                    .map(|node| cells(row, node).map(|cell| cell.job.0 as u32))
                    .collect()
            })
            .collect();
        view.replicas = (0..gang.rows())
            .map(|row| {
                (0..gang.nodes())
                    .map(|node| cells(row, node).is_some_and(|cell| cell.kind == CellKind::Replica))
                    .collect()
            })
            .collect();
        let split = gang.split();
        view.row_classes = (0..gang.rows())
            .filter_map(|row| {
                split
                    .class_of(row)
                    .map(|class| class_name(class).to_string())
            })
            .collect();
        view.queue = [Class::RealTime, Class::BestEffort]
            .into_iter()
            .flat_map(|class| gang.waiting(class).map(|waiting| waiting.job.id.0 as u32))
            .collect();
    }

    /// The BE/RT settings and state, under a BE/RT policy.
    pub(in crate::core) fn classes_status(&self) -> Option<ClassesStatusView> {
        if self.policy.uses_matrix() {
            return None;
        }
        let classes = &self.config.classes;
        let rt_jobs = |admission: Admission| {
            self.jobs
                .values()
                .filter(|job| job.admission.as_ref() == Some(&admission))
                .count()
        };
        let split = self.classes.one_gs().map(|gang| gang.split());
        Some(ClassesStatusView {
            ratio: classes.ratio_text(),
            admission: classes.admission.as_str().into(),
            tdm_period_ms: classes.tdm_period_ms,
            rt_max_wait_ms: classes.rt_max_wait_ms,
            one_gs_rows_rt: split.map(|split| split.rt_rows),
            one_gs_rows_be: split.map(|split| split.be_rows),
            rt_jobs_admitted: rt_jobs(Admission::Admitted),
            rt_jobs_waiting: rt_jobs(Admission::Waiting),
            division: self.current_division().map(|track| DivisionView {
                number: track.number,
                class: class_name(track.current.class).into(),
                start_ns: track.current.start_ns,
                end_ns: track.current.end_ns,
            }),
        })
    }
}
