//! Jobs that something else launches (mpirun, mpiexec, srun), attached on
//! the nodes the launcher chose (`cosched attach`).
//!
//! Such a job is placed in the lowest matrix row where all its nodes are
//! free ([`cosched_policy::global::Matrix::attach`]: never queued, since
//! its processes are about to exist whatever the matrix says) and from then
//! on is a job like any other: same slices, same `SwitchSlice` to the
//! agents, same utilisation, same cancel and views. What differs is how its
//! ranks come to be: instead of `LaunchJob`, each node's agent gets
//! `ExpectJob` (protocol 1.2) and takes the processes that join
//! (`cosched join`). A rank ends when every process that joined on its node
//! has exited; the job ends when all ranks have, or when its launcher exits
//! (`Detach`), which reaps whatever is left of it on its nodes.

use cosched_policy::global::{JobRequest, NodeIndex};
use cosched_proto::wire::{ExitStatus, ExpectJob, MessageKind};

use super::{Core, JobRecord, RankState, lifecycle::policy_id, validate_submission};
use crate::admin::protocol::{Attachment, JobView, Submission};

impl Core {
    /// Places an attached job on its nodes and tells their agents to
    /// expect it. Refused, with nothing changed, for unknown, repeated or
    /// unconnected nodes, agents too old to expect jobs, or when no row has
    /// all of the nodes free.
    pub fn attach(&mut self, job: Attachment, now_unix_ms: u64) -> Result<JobView, String> {
        self.attach_as(job, None, now_unix_ms)
    }

    /// [`Core::attach`] for `owner` (an unprivileged user's uid; None:
    /// root), who alone may then detach or cancel the job as a user.
    pub fn attach_as(
        &mut self,
        job: Attachment,
        owner: Option<u32>,
        now_unix_ms: u64,
    ) -> Result<JobView, String> {
        let submission = Submission {
            name: job.name.clone(),
            nodes: job.nodes.len(),
            command: if job.command.is_empty() {
                "(attached)".into()
            } else {
                job.command.join(" ")
            },
            args: Vec::new(),
            env: Default::default(),
            class: job.class.clone(),
            exclusive: job.exclusive,
        };
        self.check_class(&submission)?;
        validate_submission(&submission)?;
        let columns = self.attached_columns(&job.nodes)?;
        let id = self.next_job_id;
        let nodes = if self.policy.uses_matrix() {
            let mut request = JobRequest::new(policy_id(id), columns.len());
            request.exclusive = job.exclusive;
            let placed = self
                .matrix
                .attach(request, &columns)
                .map_err(|error| match error {
                    cosched_policy::global::MatrixError::NoRowFree { .. } => {
                        self.explain_no_room(error.to_string(), &columns)
                    }
                    other => other.to_string(),
                })?;
            placed.columns
        } else {
            self.attach_classed(id, &submission, columns)?
        };
        self.next_job_id = self.next_job_id.checked_add(1).unwrap_or(1);
        let mut record = JobRecord::new(id, submission, now_unix_ms);
        record.attached = true;
        record.owner = owner;
        if super::classes::rt_spec(&record.submission.class).is_some() {
            record.admission = Some(super::classes::Admission::Waiting);
        }
        self.jobs.insert(id, record);
        tracing::info!(job = id, name = %job.name, nodes = ?job.nodes, "job attached");
        self.start_on(id, &nodes);
        self.persist();
        Ok(self.job_view(id).expect("just inserted"))
    }

    /// Who owns active job `id`: `Some(None)` root, `Some(Some(uid))` that
    /// user; `None` for a job that is not active.
    pub fn owner_of(&self, id: u32) -> Option<Option<u32>> {
        self.jobs.get(&id).map(|job| job.owner)
    }

    /// The launcher of attached job `id` exited with `code`: every rank
    /// still live ends (its leftovers are reaped on its node) and the job
    /// ends, completed if the launcher succeeded.
    pub fn detach(&mut self, id: u32, code: i32) -> Result<JobView, String> {
        let Some(job) = self.jobs.get(&id) else {
            return Err(match self.finished.iter().rev().find(|job| job.id == id) {
                Some(job) => format!("job {id} already ended ({})", job.state.as_str()),
                None => format!("unknown job {id}"),
            });
        };
        if !job.attached {
            return Err(format!(
                "job {id} was submitted, not attached: cancel it instead"
            ));
        }
        let live = job.live_ranks();
        for &index in &live {
            self.give_up_rank(id, index, "its launcher exited");
        }
        let job = self.jobs.get_mut(&id).expect("checked above");
        for index in live {
            job.ranks[index].state = RankState::Exited(ExitStatus::Exited { code });
        }
        if code != 0 {
            job.reason
                .get_or_insert_with(|| format!("the launcher exited with code {code}"));
        }
        self.finish_if_ended(id);
        Ok(self.job_view(id).expect("active or just finished"))
    }

    /// Sends `ExpectJob` for every pending rank of attached job `id` whose
    /// node is ready; an agent that cannot expect jobs fails its rank.
    pub(super) fn expect_job(&mut self, id: u32) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let size = job.ranks.len() as u32;
        let name = job.submission.name.clone();
        let owner = job.owner;
        let pending: Vec<(usize, NodeIndex)> = job
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, rank)| rank.state == RankState::Pending)
            .filter(|(_, rank)| self.nodes[rank.node].is_ready())
            .map(|(index, rank)| (index, rank.node))
            .collect();
        let mut failed = false;
        for (index, node) in pending {
            let rank = &mut self.jobs.get_mut(&id).expect("present").ranks[index];
            if self.nodes[node].knows(MessageKind::ExpectJob) {
                rank.state = RankState::Launched;
                self.send(
                    node,
                    ExpectJob {
                        job_id: id,
                        name: name.clone(),
                        rank: index as u32,
                        size,
                        // An older agent would refuse the unknown field;
                        // it then learns the owner from the first join.
                        owner: owner.filter(|_| {
                            self.nodes[node].protocol.minor
                                >= cosched_proto::wire::EXPECT_OWNER_SINCE_MINOR
                        }),
                    },
                );
            } else {
                rank.state = RankState::Exited(ExitStatus::LaunchFailed {
                    reason: "its agent is older than protocol 1.2 and cannot take attached jobs"
                        .into(),
                });
                failed = true;
            }
        }
        if failed {
            self.stop_ranks(id, "the job failed on another node");
            self.finish_if_ended(id);
        }
        self.persist();
    }

    /// The matrix columns of the named nodes: each known, named once,
    /// connected, and with an agent that can expect attached jobs.
    fn attached_columns(&self, names: &[String]) -> Result<Vec<NodeIndex>, String> {
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            let node = self
                .nodes
                .iter()
                .position(|node| &node.record.name == name)
                .ok_or_else(|| {
                    format!(
                        "unknown node {name:?}; this cluster's nodes are {:?}",
                        self.config.nodes
                    )
                })?;
            if columns.contains(&node) {
                return Err(format!("node {name:?} is named twice"));
            }
            if !self.nodes[node].is_up() {
                return Err(format!(
                    "node {name:?} has no connected agent: its processes could not be expected"
                ));
            }
            if !self.nodes[node].knows(MessageKind::ExpectJob) {
                return Err(format!(
                    "the agent of node {name:?} is older than protocol 1.2 and cannot take attached jobs"
                ));
            }
            columns.push(node);
        }
        Ok(columns)
    }

    fn explain_no_room(&self, error: String, columns: &[NodeIndex]) -> String {
        let names: Vec<String> = columns.iter().map(|&node| self.node_name(node)).collect();
        format!(
            "{error}: nodes {} are taken in every row (wait for a job to end, or cancel one)",
            names.join(",")
        )
    }
}
