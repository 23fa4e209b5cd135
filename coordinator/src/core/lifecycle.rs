//! A job's life: submitted, queued or placed, launched rank by rank, ended
//! rank by rank, removed from the matrix (which may start queued jobs).

use std::collections::BTreeSet;

use cosched_policy::global::{JobId, JobRequest, NodeIndex, PlacedJob, SubmitOutcome};
use cosched_proto::wire::{CancelJob, JobExited, LaunchJob, MessageKind};

use super::{
    Core, JobRecord, Observed, Rank, RankState,
    classes::{Admission, placement::Placed, rt_spec},
    validate_submission,
};
use crate::{
    admin::protocol::{JobStateView, JobView, Submission},
    policy::GlobalPolicy,
};

pub(super) fn policy_id(job: u32) -> JobId {
    JobId(u64::from(job))
}

impl Core {
    /// Refuses a job wider than the cluster.
    pub(super) fn check_size(&self, submission: &Submission) -> Result<(), String> {
        if submission.nodes > self.nodes.len() {
            return Err(format!(
                "the job wants {} nodes but the cluster has {}",
                submission.nodes,
                self.nodes.len()
            ));
        }
        Ok(())
    }

    /// Refuses an RT job under a policy without classes, and an RT class no
    /// schedule can meet. A refusal is counted.
    pub(super) fn check_class(&mut self, submission: &Submission) -> Result<(), String> {
        if rt_spec(&submission.class).is_none() {
            return Ok(());
        }
        let refused = |reason| Observed::RtRejected { reason };
        if let Err(why) = super::classes::validate_class(&submission.class) {
            self.observe(refused("invalid_spec"));
            return Err(why);
        }
        if self.policy.uses_matrix() {
            self.observe(refused("policy"));
            return Err(format!(
                "real-time jobs need a policy with classes ({}); the coordinator runs {} (switch with `cosched policy set 2dcs-tdm`)",
                GlobalPolicy::CLASS_POLICIES,
                self.policy
            ));
        }
        Ok(())
    }

    /// Admits a checked job: placed (and launched where its nodes are
    /// ready) or queued, in the matrix or the BE/RT policy's state.
    pub(super) fn admit(
        &mut self,
        submission: Submission,
        now_unix_ms: u64,
        now_ns: u64,
    ) -> Result<JobView, String> {
        self.advance(now_ns);
        self.check_class(&submission)?;
        validate_submission(&submission)?;
        self.check_size(&submission)?;
        let id = self.next_job_id;
        let (placed, knock) = if self.policy.uses_matrix() {
            let mut request = JobRequest::new(policy_id(id), submission.nodes);
            request.exclusive = submission.exclusive;
            let outcome = self
                .matrix
                .submit(request)
                .map_err(|error| error.to_string())?;
            let placed = match outcome {
                SubmitOutcome::Placed(placed) => Placed::Start(placed.columns),
                SubmitOutcome::Queued { .. } => Placed::Queue,
            };
            (Ok(placed), Default::default())
        } else {
            self.place_classed(id, &submission, now_ns)
        };
        let placed = match placed {
            Ok(placed) => placed,
            Err(why) => {
                self.settle_knock(knock);
                return Err(why);
            }
        };
        self.next_job_id = self.next_job_id.checked_add(1).unwrap_or(1);
        let mut record = JobRecord::new(id, submission, now_unix_ms);
        if rt_spec(&record.submission.class).is_some() {
            record.admission = Some(Admission::Waiting);
        }
        self.jobs.insert(id, record);
        if let Placed::Start(nodes) = placed {
            self.start_on(id, &nodes);
        }
        self.settle_knock(knock);
        self.persist();
        Ok(self.job_view(id).expect("just inserted"))
    }

    /// A job got cells: give it a port and ranks, launch what can be.
    pub(super) fn start_job(&mut self, placed: &PlacedJob) {
        self.start_on(placed.id().0 as u32, &placed.columns);
    }

    /// A job got nodes (rank r on `nodes[r]`): give it a port and ranks,
    /// launch what can be.
    pub(super) fn start_on(&mut self, id: u32, nodes: &[NodeIndex]) {
        // An attached job's processes find each other themselves.
        let attached = self.jobs.get(&id).is_some_and(|job| job.attached);
        let port = if attached { None } else { self.free_port(id) };
        let Some(job) = self.jobs.get_mut(&id) else {
            tracing::error!(job = id, "placed job has no record");
            return;
        };
        job.state = JobStateView::Running;
        job.ranks = nodes
            .iter()
            .map(|&node| Rank {
                node,
                state: RankState::Pending,
            })
            .collect();
        job.port = port;
        if job.admission.is_some() && job.admission != Some(Admission::Admitted) {
            job.admission = Some(Admission::Admitted);
            self.observe(Observed::RtAdmitted);
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if port.is_none() && !attached {
            let reason = "no free job port (raise job_port_count)".to_string();
            for rank in &mut job.ranks {
                rank.state = RankState::Lost {
                    reason: reason.clone(),
                };
            }
            job.reason = Some(reason);
            self.finish_job(id);
            return;
        }
        self.launch_job(id);
        self.persist();
    }

    /// The lowest free port at or after this job's offset, wrapping, so a
    /// port just released is not reused at once.
    fn free_port(&self, job: u32) -> Option<u16> {
        let count = u32::from(self.config.job_port_count);
        let used: BTreeSet<u16> = self.jobs.values().filter_map(|job| job.port).collect();
        (0..count)
            .map(|step| {
                let offset = (job % count + step) % count;
                self.config.job_port_base + offset as u16
            })
            .find(|port| !used.contains(port))
    }

    /// Under 1GS no rank is launched while no slice runs (the matrix was
    /// empty: agents then leave gang mode and let every job run): the
    /// ranks would run at once, before the first slice stops them, and an
    /// RT job's first frame — which starts its windows — would start
    /// outside its start row (measured: a window 0 three frames short).
    /// They are launched right after the next slice is sent, so the agents
    /// hold them until their rows.
    fn launch_waits_for_a_slice(&self) -> bool {
        self.policy == GlobalPolicy::OneLevelGang && self.current.is_none()
    }

    /// Sends `LaunchJob` for every pending rank of every running job whose
    /// node is ready (and whose peers' addresses are all known).
    pub(super) fn launch_pending(&mut self) {
        let ids: Vec<u32> = self
            .jobs
            .values()
            .filter(|job| {
                job.state == JobStateView::Running
                    && job
                        .ranks
                        .iter()
                        .any(|rank| rank.state == RankState::Pending)
            })
            .map(|job| job.id)
            .collect();
        for id in ids {
            self.launch_job(id);
        }
    }

    fn launch_job(&mut self, id: u32) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.attached {
            self.expect_job(id);
            return;
        }
        if self.launch_waits_for_a_slice() {
            // Launched right after the next slice (`plan_slice`).
            return;
        }
        let Some(port) = job.port else {
            return;
        };
        let addresses: Option<Vec<String>> = job
            .ranks
            .iter()
            .map(|rank| {
                self.nodes[rank.node]
                    .record
                    .address
                    .map(|ip| std::net::SocketAddr::new(ip, port).to_string())
            })
            .collect();
        let Some(peers) = addresses else {
            return; // a node never registered: its address is unknown yet
        };
        // 1GS with admission control picks an RT job's first-frame instant
        // later (`FirstFrameAt`); agents that know it publish a pending
        // gate meanwhile.
        let first_frame_wait_ns = self
            .classes
            .one_gs()
            .and_then(|gang| gang.first_frame_wait_ns(JobId(u64::from(id))));
        let mut launches = Vec::new();
        for (index, rank) in job.ranks.iter().enumerate() {
            if rank.state == RankState::Pending && self.nodes[rank.node].is_ready() {
                launches.push((
                    index,
                    rank.node,
                    LaunchJob {
                        job_id: id,
                        name: job.submission.name.clone(),
                        rank: index as u32,
                        size: job.ranks.len() as u32,
                        peers: peers.clone(),
                        command: job.submission.command.clone(),
                        args: job.submission.args.clone(),
                        env: job.submission.env.clone(),
                        cpus: Vec::new(),
                        class: job.submission.class.clone(),
                        exclusive: job.submission.exclusive,
                        first_frame_wait_ns: first_frame_wait_ns
                            .filter(|_| self.nodes[rank.node].knows(MessageKind::FirstFrameAt)),
                    },
                ));
            }
        }
        if launches.is_empty() {
            return;
        }
        for (index, node, launch) in launches {
            self.jobs.get_mut(&id).expect("present").ranks[index].state = RankState::Launched;
            self.send(node, launch);
        }
        self.persist();
    }

    /// A rank ended on `node`. Reports for unknown jobs, other nodes' ranks
    /// or ranks already ended are ignored (`Err` says why, for the log).
    pub fn job_exited(&mut self, node: NodeIndex, exited: &JobExited) -> Result<(), String> {
        let node_name = self.node_name(node);
        let job = self
            .jobs
            .get_mut(&exited.job_id)
            .ok_or_else(|| format!("job {} is not active", exited.job_id))?;
        let rank = job
            .ranks
            .get_mut(exited.rank as usize)
            .filter(|rank| rank.node == node)
            .ok_or_else(|| {
                format!(
                    "job {} has no rank {} on {node_name}",
                    exited.job_id, exited.rank
                )
            })?;
        if rank.state.is_ended() {
            return Err(format!(
                "rank {} of job {} already ended",
                exited.rank, exited.job_id
            ));
        }
        rank.state = RankState::Exited(exited.status.clone());
        if let Some(why) = rank.state.failure() {
            job.reason
                .get_or_insert_with(|| format!("rank {} on {node_name}: {why}", exited.rank));
            self.stop_ranks(exited.job_id, "the job failed on another node");
        }
        self.persist();
        self.finish_if_ended(exited.job_id);
        Ok(())
    }

    /// Stops the job's live ranks: `CancelJob` where the node is reachable
    /// (the rank ends when its exit is reported), given up where it is not
    /// (its node reaps it when its agent is back).
    pub(super) fn stop_ranks(&mut self, id: u32, reason: &str) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let mut cancel_on = BTreeSet::new();
        let mut give_up = Vec::new();
        for (index, rank) in job.ranks.iter().enumerate() {
            if rank.state.is_ended() {
                continue;
            }
            if rank.state.may_run() && self.nodes[rank.node].is_up() {
                cancel_on.insert(rank.node);
            } else {
                give_up.push(index);
            }
        }
        for index in give_up {
            self.give_up_rank(id, index, reason);
        }
        for node in cancel_on {
            self.send(node, CancelJob { job_id: id });
        }
    }

    pub(super) fn finish_if_ended(&mut self, id: u32) {
        if self.jobs.get(&id).is_some_and(JobRecord::all_ranks_ended) {
            self.finish_job(id);
        }
    }

    /// Removes an ended (or cancelled) job from the matrix (or the BE/RT
    /// policy's state) and starts the queued jobs that now fit.
    fn finish_job(&mut self, id: u32) {
        if !self.jobs.contains_key(&id) {
            return;
        }
        let started = if self.policy.uses_matrix() {
            match self.matrix.remove(policy_id(id)) {
                Ok(outcome) => outcome.started,
                Err(error) => {
                    tracing::error!(job = id, "removing a finished job: {error}");
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let knock = self.release_classed(id);
        self.retire(id);
        for placed in started {
            self.start_job(&placed);
        }
        self.settle_knock(knock);
        self.persist();
    }

    /// Moves an ended job's record to the finished ones (it holds nothing
    /// any more).
    pub(super) fn retire(&mut self, id: u32) {
        let Some(mut job) = self.jobs.remove(&id) else {
            return;
        };
        // Cancelled and evicted jobs already say how they ended.
        if job.state.is_active() {
            let failure = job.first_failure(|node| self.node_name(node));
            job.state = match failure {
                None => JobStateView::Completed,
                Some(why) => {
                    job.reason.get_or_insert(why);
                    JobStateView::Failed
                }
            };
        }
        self.predictor.forget(policy_id(id));
        self.util.forget(id);
        job.final_frames = self.frames.view(id);
        self.frames.forget(id);
        tracing::info!(job = id, state = job.state.as_str(), reason = ?job.reason, "job ended");
        self.finished.push_back(job);
        while self.finished.len() > self.config.finished_retention {
            self.finished.pop_front();
        }
        self.persist();
    }

    /// Cancels a queued or running job: it leaves the matrix at once, and its
    /// ranks are killed on their nodes (see [`Core::give_up_rank`]).
    pub fn cancel(&mut self, id: u32) -> Result<JobView, String> {
        let Some(job) = self.jobs.get(&id) else {
            return Err(match self.finished.iter().find(|job| job.id == id) {
                Some(job) => format!("job {id} already ended ({})", job.state.as_str()),
                None => format!("unknown job {id}"),
            });
        };
        let live = job.live_ranks();
        // The job leaves the matrix now: its ranks are given up, and their
        // nodes kill them (now where the agent is ready, else once it is).
        for index in live {
            self.give_up_rank(id, index, "cancelled");
        }
        let job = self.jobs.get_mut(&id).expect("checked above");
        job.state = JobStateView::Cancelled;
        job.reason = Some("cancelled by the user".into());
        let view = self.job_view(id).expect("still active");
        self.finish_job(id);
        Ok(view)
    }
}
