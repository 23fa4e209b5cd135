//! Changing the policy, or the `[classes]` settings, while jobs run.
//!
//! Running processes never move, so a change is only made when every active
//! job keeps its nodes under it; otherwise it is refused with the list of
//! jobs that would not, and nothing changes:
//! - to a policy without classes (fcfs, gang, paired-gang, fcs) while RT
//!   jobs are active: refused, naming them (those policies give no
//!   guarantee; cancel them or let them end first). Running BE jobs take
//!   the lowest matrix row where their nodes are free (none: refused);
//!   waiting ones queue in arrival order.
//! - to one-level-gang: every active job arrives again in arrival order,
//!   running ones first, in a fresh 1GS matrix; a running job must be
//!   allocated on its own nodes (an RT job on the r rows admission wants).
//!   Waiting jobs may start, or wait again from now (their wait restarts).
//! - to 2dcs-tdm or 2dcs-ps: running jobs are counted on their nodes in
//!   arrival order, each RT job passing the admission rule where it runs
//!   ([`AdmissionRule::check_placement`]); waiting jobs are placed as new
//!   arrivals, and one the rule rejects refuses the change.
//!
//! Agents must all speak protocol 1.3 for a BE/RT policy.
//!
//! [`AdmissionRule::check_placement`]: cosched_policy::classes::AdmissionRule::check_placement

use cosched_policy::{
    classes::{ClassLedger, OneLevelGang, RtPlacement, one_level_gang::ArrivalDecision},
    global::{JobId, JobRequest, Matrix, NodeIndex, SubmitOutcome},
};
use cosched_proto::wire::{MessageKind, SetPolicy};

use super::{
    Admission, ClassState, Divided, one_gs_job,
    placement::{Placed, place_divided},
    rt_job, rt_spec,
};
use crate::{
    admin::protocol::JobStateView,
    config::ClassesConfig,
    core::{Core, JobRecord, Rotation, rebuild_matrix},
    policy::GlobalPolicy,
};

/// A change that keeps every running job where it is.
struct Plan {
    classes: ClassState,
    matrix: Matrix,
    /// Waiting jobs that start under it, with their nodes.
    start: Vec<(u32, Vec<NodeIndex>)>,
}

/// "job 4 (rt:...)" for messages.
fn describe(job: &JobRecord) -> String {
    format!(
        "job {} ({}, {})",
        job.id,
        job.submission.name,
        job.class_label()
    )
}

fn sorted_nodes(job: &JobRecord) -> Vec<NodeIndex> {
    let mut nodes: Vec<NodeIndex> = job.ranks.iter().map(|rank| rank.node).collect();
    nodes.sort_unstable();
    nodes
}

fn in_order(job: &JobRecord) -> Vec<NodeIndex> {
    job.ranks.iter().map(|rank| rank.node).collect()
}

impl Core {
    /// Switches the global policy: refused, with nothing changed, when a
    /// running job could not keep its nodes under it (see the module docs).
    pub fn set_policy(&mut self, policy: GlobalPolicy, now_ns: u64) -> Result<(), String> {
        if policy == self.policy {
            return Ok(());
        }
        let classes = self.config.classes.clone();
        self.change_regime(policy, classes, now_ns)
    }

    /// New `[classes]` settings (a config reload): under a BE/RT policy its
    /// jobs are placed again under them, as for a policy switch; refused,
    /// keeping the old settings, when one would not keep its nodes. Under
    /// 1GS, settings that leave its matrix as it is (Δ, w, the 2DCS costs)
    /// are only recorded (a new w applies to later arrivals), since placing
    /// its jobs again could give running ones other columns.
    pub fn set_classes(&mut self, classes: ClassesConfig, now_ns: u64) -> Result<(), String> {
        if classes == self.config.classes {
            return Ok(());
        }
        let same_matrix = self.classes.one_gs().is_some_and(|gang| {
            *gang.config()
                == classes.one_gs_config(self.nodes.len(), self.config.slice_ns, self.config.queue)
        });
        if self.policy.uses_matrix() || same_matrix {
            self.config.classes = classes;
            if same_matrix {
                let settings = self.config.classes.wire_settings();
                for node in 0..self.nodes.len() {
                    if self.nodes[node].knows(MessageKind::ClassSettings) {
                        self.send(node, settings);
                    }
                }
            }
            return Ok(());
        }
        self.change_regime(self.policy, classes, now_ns)
    }

    pub(in crate::core) fn change_regime(
        &mut self,
        policy: GlobalPolicy,
        classes: ClassesConfig,
        now_ns: u64,
    ) -> Result<(), String> {
        self.advance(now_ns);
        if policy.has_classes() {
            self.check_agents_speak_classes(policy)?;
        }
        let plan = if policy.uses_matrix() && self.policy.uses_matrix() {
            let (matrix, started) =
                rebuild_matrix(&self.matrix, self.config.matrix_config(policy))?;
            Plan {
                classes: ClassState::Matrix,
                matrix,
                start: started
                    .into_iter()
                    .map(|placed| (placed.id().0 as u32, placed.columns))
                    .collect(),
            }
        } else {
            self.plan_regime(policy, &classes, now_ns)
                .map_err(|why| format!("cannot switch to {policy}: {why}; {} stays", self.policy))?
        };
        self.matrix = plan.matrix;
        self.classes = plan.classes;
        self.config.classes = classes;
        self.policy = policy;
        self.rotation = Rotation::new(policy, self.config.pairing);
        self.epoch += 1;
        self.slice_counter = 0;
        self.current = None;
        self.idle_sent = false;
        self.util.clear();
        tracing::info!(%policy, epoch = self.epoch, "global policy switched");
        for node in 0..self.nodes.len() {
            self.announce_policy(node);
        }
        for (id, nodes) in plan.start {
            self.start_on(id, &nodes);
        }
        for job in self.jobs.values_mut() {
            if job.state == JobStateView::Queued && rt_spec(&job.submission.class).is_some() {
                job.admission = Some(Admission::Waiting);
            }
        }
        self.refresh_satisfied();
        self.persist();
        Ok(())
    }

    /// `SetPolicy`, then under a BE/RT policy `ClassSettings`.
    pub(in crate::core) fn announce_policy(&mut self, node: NodeIndex) {
        self.send(
            node,
            SetPolicy {
                policy: self.policy.as_str().into(),
            },
        );
        if self.policy.has_classes() && self.nodes[node].knows(MessageKind::ClassSettings) {
            self.send(node, self.config.classes.wire_settings());
        }
    }

    /// Every connected agent must know the 1.3 messages.
    fn check_agents_speak_classes(&self, policy: GlobalPolicy) -> Result<(), String> {
        let old: Vec<String> = self
            .nodes
            .iter()
            .filter(|node| node.is_up() && !node.knows(MessageKind::ClassSettings))
            .map(|node| {
                format!(
                    "{} ({}.{})",
                    node.record.name, node.protocol.major, node.protocol.minor
                )
            })
            .collect();
        if old.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{policy} needs agents of protocol 1.3 or later (class settings, divisions, frame reports); these speak older ones: {} (upgrade them first)",
            old.join(", ")
        ))
    }

    /// The state under `policy` and `classes` with every active job placed
    /// again, or the jobs that could not be.
    fn plan_regime(
        &self,
        policy: GlobalPolicy,
        classes: &ClassesConfig,
        now_ns: u64,
    ) -> Result<Plan, String> {
        let running: Vec<&JobRecord> = self
            .jobs
            .values()
            .filter(|job| job.state == JobStateView::Running)
            .collect();
        let queued: Vec<&JobRecord> = self
            .jobs
            .values()
            .filter(|job| job.state == JobStateView::Queued)
            .collect();
        let mut failures = Vec::new();
        let mut plan = Plan {
            classes: ClassState::new(
                policy,
                classes,
                self.nodes.len(),
                self.config.slice_ns,
                self.config.queue,
            )?,
            matrix: Matrix::new(self.config.matrix_config(policy))
                .map_err(|error| error.to_string())?,
            start: Vec::new(),
        };
        match &mut plan.classes {
            ClassState::Matrix => {
                let rt: Vec<String> = running
                    .iter()
                    .chain(&queued)
                    .filter(|job| rt_spec(&job.submission.class).is_some())
                    .map(|job| describe(job))
                    .collect();
                if !rt.is_empty() {
                    return Err(format!(
                        "{policy} cannot keep real-time guarantees and these real-time jobs are active: {} (cancel them or wait for them to end)",
                        rt.join(", ")
                    ));
                }
                let matrix = &mut plan.matrix;
                for job in &running {
                    let mut request = JobRequest::new(JobId(u64::from(job.id)), job.ranks.len());
                    request.exclusive = job.submission.exclusive;
                    if let Err(error) = matrix.attach(request, &sorted_nodes(job)) {
                        failures.push(format!("{}: {error}", describe(job)));
                    }
                }
                for job in &queued {
                    let mut request =
                        JobRequest::new(JobId(u64::from(job.id)), job.submission.nodes);
                    request.exclusive = job.submission.exclusive;
                    match matrix.submit(request) {
                        Ok(SubmitOutcome::Placed(placed)) => {
                            plan.start.push((job.id, placed.columns));
                        }
                        Ok(SubmitOutcome::Queued { .. }) => {}
                        Err(error) => failures.push(format!("{}: {error}", describe(job))),
                    }
                }
            }
            ClassState::OneGs(gang) => {
                for job in &running {
                    if let Some(why) = rearrive_running(gang, job, classes, now_ns) {
                        failures.push(format!("{}: {why}", describe(job)));
                    }
                }
                for job in &queued {
                    let arrival =
                        one_gs_job(job.id, job.submission.nodes, &job.submission.class, classes);
                    match gang.arrive(arrival, now_ns).map(|outcome| outcome.decision) {
                        Ok(ArrivalDecision::Refused {
                            rows_needed,
                            rt_rows,
                        }) => failures.push(format!(
                            "{} (waiting) would need {rows_needed} rows of a real-time set of {rt_rows}",
                            describe(job)
                        )),
                        Ok(_) => {}
                        Err(error) => failures.push(format!("{}: {error}", describe(job))),
                    }
                }
                for job in &queued {
                    if let Some(held) = gang.allocation(JobId(u64::from(job.id))) {
                        plan.start.push((job.id, held.columns.clone()));
                    }
                }
            }
            ClassState::Divided(divided) => {
                self.replace_divided(
                    divided,
                    policy,
                    classes,
                    &running,
                    &queued,
                    &mut plan.start,
                    &mut failures,
                );
            }
        }
        if failures.is_empty() {
            Ok(plan)
        } else {
            Err(failures.join("; "))
        }
    }

    /// 2DCS: running jobs counted where they run, waiting ones placed anew.
    #[allow(clippy::too_many_arguments)]
    fn replace_divided(
        &self,
        divided: &mut Divided,
        policy: GlobalPolicy,
        classes: &ClassesConfig,
        running: &[&JobRecord],
        queued: &[&JobRecord],
        start: &mut Vec<(u32, Vec<NodeIndex>)>,
        failures: &mut Vec<String>,
    ) {
        let ledger = &mut divided.ledger;
        let rule = classes.rule();
        let model = classes.load_model(policy);
        let measured_before = self.classes.ledger();
        for job in running {
            let id = JobId(u64::from(job.id));
            let Some(spec) = rt_spec(&job.submission.class) else {
                ledger.place_be(id, in_order(job));
                continue;
            };
            let rt = rt_job(job.id, job.ranks.len(), spec);
            let placement = RtPlacement {
                job: id,
                nodes: in_order(job),
            };
            match rule.check_placement(ledger, &rt, &model, &placement) {
                Ok(()) => {
                    ledger.place_rt(&rt, placement);
                    carry_measurements(measured_before, ledger, id, job.ranks.len());
                }
                Err(rejection) => failures.push(format!(
                    "{} no longer passes {} admission: {rejection}",
                    describe(job),
                    classes.admission.as_str()
                )),
            }
        }
        for job in queued {
            match place_divided(ledger, policy, classes, job.id, &job.submission) {
                Ok(Placed::Start(nodes)) => start.push((job.id, nodes)),
                Ok(Placed::Queue) => unreachable!("2DCS places or rejects"),
                Err(refusal) => failures.push(format!(
                    "{} (waiting) would be refused: {}",
                    describe(job),
                    refusal.message
                )),
            }
        }
    }
}

/// A running job arrives in a fresh 1GS matrix: `None` when it gets its
/// own nodes, else why not.
fn rearrive_running(
    gang: &mut OneLevelGang,
    job: &JobRecord,
    classes: &ClassesConfig,
    now_ns: u64,
) -> Option<String> {
    let arrival = one_gs_job(job.id, job.ranks.len(), &job.submission.class, classes);
    let nodes = sorted_nodes(job);
    match gang.arrive(arrival, now_ns) {
        Ok(outcome) => match outcome.decision {
            ArrivalDecision::Allocated { columns, .. } if columns == nodes => None,
            ArrivalDecision::Allocated { columns, .. } => Some(format!(
                "1GS would give it nodes {columns:?} but it runs on {nodes:?}"
            )),
            ArrivalDecision::Waiting { .. } => {
                Some("1GS has no room for it on its nodes: it would have to wait".into())
            }
            ArrivalDecision::Refused {
                rows_needed,
                rt_rows,
            } => Some(format!(
                "its frames need {rows_needed} rows of a real-time set of {rt_rows}"
            )),
        },
        Err(error) => Some(error.to_string()),
    }
}

/// Statistical and probabilistic admission count measured work: keep what
/// agents measured.
fn carry_measurements(
    before: Option<&ClassLedger>,
    ledger: &mut ClassLedger,
    job: JobId,
    processes: usize,
) {
    let Some(before) = before else {
        return;
    };
    for process in 0..processes {
        if let Some(measured) = before.measured(job, process) {
            ledger.set_measured(job, process, measured);
        }
        if let Some(moments) = before.moments(job, process) {
            ledger.set_moments(job, process, moments);
        }
    }
}
