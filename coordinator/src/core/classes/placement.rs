//! A job arriving under a BE/RT policy, and one leaving.
//!
//! - 1GS: `OneLevelGang::arrive` — allocated (its columns), waiting (queued,
//!   evicted after w), or refused (it needs more rows than the RT set has).
//!   Every arrival and departure may also start waiting jobs and evict RT
//!   jobs whose wait ran out: what else an event did comes back as a
//!   [`Knock`].
//! - 2DCS-TDM and 2DCS-PS: an RT job passes the configured admission rule
//!   on the ledger (its nodes: the laxity allocation's, one process per
//!   node) or is rejected with the rule's reason; a BE job goes to the nodes
//!   with the fewest BE processes. Nothing waits.
//!
//! Placement runs on a copy of the state first when the submission is only
//! being checked (the agents confirm the program on the nodes it would get).

use cosched_policy::{
    classes::{
        ClassLedger, Rejection,
        one_level_gang::{ArrivalDecision, Evicted},
        tdm::allocate_be,
    },
    global::{JobId, NodeIndex},
};

use super::{ClassState, one_gs_job, rt_job, rt_spec};
use crate::{admin::protocol::Submission, config::ClassesConfig, core::Core, policy::GlobalPolicy};

/// Where a new job goes now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// It runs on these nodes: rank r on the r-th.
    Start(Vec<NodeIndex>),
    /// It waits for room.
    Queue,
}

/// Why a job is refused, with the label it is counted under
/// (`cosched_rt_jobs_rejected_total{reason}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub label: &'static str,
}

impl Refusal {
    fn of(rejection: &Rejection) -> Self {
        Self {
            message: format!("real-time job rejected by admission control: {rejection}"),
            label: rejection.label(),
        }
    }
}

/// What else an event of 1GS did: waiting jobs it allocated, RT jobs whose
/// wait ran out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Knock {
    pub started: Vec<u32>,
    pub evicted: Vec<Evicted>,
}

fn job_id(id: JobId) -> u32 {
    id.0 as u32
}

/// Places job `id` in `state` under `policy` (the state changes as the
/// placement does, also when it is refused: 1GS may have evicted others).
pub fn place(
    state: &mut ClassState,
    policy: GlobalPolicy,
    classes: &ClassesConfig,
    id: u32,
    submission: &Submission,
    now_ns: u64,
) -> (Result<Placed, Refusal>, Knock) {
    match state {
        ClassState::Matrix => unreachable!("matrix policies place through the matrix"),
        ClassState::OneGs(gang) => {
            let job = one_gs_job(id, submission.nodes, &submission.class, classes);
            let outcome = match gang.arrive(job, now_ns) {
                Ok(outcome) => outcome,
                Err(error) => {
                    let refusal = Refusal {
                        message: error.to_string(),
                        label: "invalid_spec",
                    };
                    return (Err(refusal), Knock::default());
                }
            };
            let knock = Knock {
                started: outcome.started.into_iter().map(job_id).collect(),
                evicted: outcome.evicted,
            };
            let placed = match outcome.decision {
                ArrivalDecision::Allocated { columns, .. } => Ok(Placed::Start(columns)),
                ArrivalDecision::Waiting { .. } => Ok(Placed::Queue),
                ArrivalDecision::Refused {
                    rows_needed,
                    rt_rows,
                } => Err(Refusal {
                    message: format!(
                        "real-time job rejected by admission control: its frames need {rows_needed} rows of 1GS's real-time set every cycle but the set has {rt_rows} (raise classes.one_gs_rows, the ratio's RT part, or the period)"
                    ),
                    label: "rows",
                }),
            };
            (placed, knock)
        }
        ClassState::Divided(divided) => {
            let placed = place_divided(&mut divided.ledger, policy, classes, id, submission);
            (placed, Knock::default())
        }
    }
}

pub(super) fn place_divided(
    ledger: &mut ClassLedger,
    policy: GlobalPolicy,
    classes: &ClassesConfig,
    id: u32,
    submission: &Submission,
) -> Result<Placed, Refusal> {
    match rt_spec(&submission.class) {
        Some(spec) => {
            let job = rt_job(id, submission.nodes, spec);
            let placement = classes
                .rule()
                .admit(ledger, &job, &classes.load_model(policy))
                .map_err(|rejection| Refusal::of(&rejection))?;
            Ok(Placed::Start(placement.nodes))
        }
        None => {
            let nodes = allocate_be(ledger, submission.nodes).map_err(|error| Refusal {
                message: error.to_string(),
                label: "allocation",
            })?;
            ledger.place_be(JobId(u64::from(id)), nodes.clone());
            Ok(Placed::Start(nodes))
        }
    }
}

impl Core {
    /// Places a new job under the current BE/RT policy. A refused RT job is
    /// counted; whatever else the event did is in the [`Knock`], to settle
    /// once the new job is recorded.
    pub(in crate::core) fn place_classed(
        &mut self,
        id: u32,
        submission: &Submission,
        now_ns: u64,
    ) -> (Result<Placed, String>, Knock) {
        let (placed, knock) = place(
            &mut self.classes,
            self.policy,
            &self.config.classes,
            id,
            submission,
            now_ns,
        );
        (self.counted(placed, submission), knock)
    }

    /// Where a new job would go now, leaving the state as it is (for the
    /// program check). A refusal is final, and counted.
    pub(in crate::core) fn would_place_classed(
        &mut self,
        id: u32,
        submission: &Submission,
        now_ns: u64,
    ) -> Result<Placed, String> {
        let mut copy = self.classes.clone();
        let (placed, _) = place(
            &mut copy,
            self.policy,
            &self.config.classes,
            id,
            submission,
            now_ns,
        );
        self.counted(placed, submission)
    }

    /// A refused RT job is counted.
    fn counted(
        &mut self,
        placed: Result<Placed, Refusal>,
        submission: &Submission,
    ) -> Result<Placed, String> {
        placed.map_err(|refusal| {
            if rt_spec(&submission.class).is_some() {
                self.observe(super::super::Observed::RtRejected {
                    reason: refusal.label,
                });
            }
            refusal.message
        })
    }

    /// An attached job under a BE/RT policy, on the nodes its launcher
    /// chose (rank r on the r-th in node order, as in the matrix): a BE job
    /// is recorded there, an RT job must pass the admission rule there.
    pub(in crate::core) fn attach_classed(
        &mut self,
        id: u32,
        submission: &Submission,
        mut nodes: Vec<NodeIndex>,
    ) -> Result<Vec<NodeIndex>, String> {
        nodes.sort_unstable();
        let policy = self.policy;
        let classes = &self.config.classes;
        let refusal = match &mut self.classes {
            ClassState::Matrix => unreachable!("matrix policies attach through the matrix"),
            ClassState::OneGs(_) => {
                return Err(format!(
                    "{policy} chooses a job's nodes itself (free columns of its rows), so a job whose launcher chose its nodes cannot be attached under it: use 2dcs-tdm, 2dcs-ps or gang"
                ));
            }
            ClassState::Divided(divided) => {
                let job = JobId(u64::from(id));
                let Some(spec) = rt_spec(&submission.class) else {
                    divided.ledger.place_be(job, nodes.clone());
                    return Ok(nodes);
                };
                let rt = rt_job(id, nodes.len(), spec);
                let placement = cosched_policy::classes::RtPlacement {
                    job,
                    nodes: nodes.clone(),
                };
                match classes.rule().check_placement(
                    &divided.ledger,
                    &rt,
                    &classes.load_model(policy),
                    &placement,
                ) {
                    Ok(()) => {
                        divided.ledger.place_rt(&rt, placement);
                        return Ok(nodes);
                    }
                    Err(rejection) => Refusal::of(&rejection),
                }
            }
        };
        self.observe(super::super::Observed::RtRejected {
            reason: refusal.label,
        });
        Err(refusal.message)
    }

    /// Job `id` leaves the BE/RT policy's state: the jobs that start in the
    /// room it left (1GS) and the RT waits that ran out meanwhile.
    pub(in crate::core) fn release_classed(&mut self, id: u32) -> Knock {
        let policy_id = JobId(u64::from(id));
        match &mut self.classes {
            ClassState::Matrix => Knock::default(),
            ClassState::OneGs(gang) => match gang.depart(policy_id, self.now_ns) {
                Ok(outcome) => Knock {
                    started: outcome.started.into_iter().map(job_id).collect(),
                    evicted: outcome.evicted,
                },
                Err(error) => {
                    tracing::error!(job = id, "removing a finished job from 1GS: {error}");
                    Knock::default()
                }
            },
            ClassState::Divided(divided) => {
                divided.ledger.remove(policy_id);
                Knock::default()
            }
        }
    }

    /// Starts the jobs an event allocated and ends the RT jobs it evicted.
    pub(in crate::core) fn settle_knock(&mut self, knock: Knock) {
        for evicted in knock.evicted {
            self.evict(&evicted);
        }
        for id in knock.started {
            let columns = self
                .classes
                .one_gs()
                .and_then(|gang| gang.allocation(JobId(u64::from(id))))
                .map(|held| held.columns.clone());
            match columns {
                Some(columns) => self.start_on(id, &columns),
                None => tracing::error!(job = id, "an allocated 1GS job has no columns"),
            }
        }
    }
}
