//! A submission is admitted only once the agents of the nodes it would run on
//! confirmed that its program can start there (`CheckProgram` /
//! `ProgramChecked`); until then it holds no cell and no job id, so a job
//! whose program is missing is refused, never queued.
//!
//! Which nodes: the ones the matrix would place the job on now; a job that
//! would be queued may later land on any node, so every connected node is
//! asked. The placement is computed again when the answers are in (other
//! jobs may have come or gone meanwhile), and nodes not asked yet are asked
//! in another round. A node the job would be placed on must be connected;
//! an agent that does not answer within the timeout, or disconnects first,
//! fails the submission with its name. Agents of protocol 1.0 cannot be
//! asked: their nodes are skipped (a missing program then shows as the
//! rank's launch failure, as before).

use std::collections::{BTreeMap, BTreeSet};

use cosched_policy::global::{JobRequest, NodeIndex, SubmitOutcome};
use cosched_proto::wire::{CheckProgram, MessageKind, ProgramCheck, ProgramChecked};

use super::{Core, Effect, classes::placement::Placed, lifecycle::policy_id, validate_submission};
use crate::admin::protocol::{JobView, Submission};

/// What [`Core::submit`] did with a submission.
#[derive(Debug, Clone, PartialEq)]
pub enum Submitted {
    /// Admitted at once (no agent had to be asked).
    Job(Box<JobView>),
    /// Waiting for program checks: the answer comes as
    /// [`Effect::Submitted`] with this check id.
    Checking(u64),
}

/// A submission waiting for its nodes' answers.
#[derive(Debug, Clone)]
pub(super) struct PendingCheck {
    submission: Submission,
    submitted_unix_ms: u64,
    /// Asked in the current round, not answered yet.
    waiting: BTreeSet<NodeIndex>,
    /// Found the program.
    passed: BTreeSet<NodeIndex>,
    /// Could not start it (or did not answer), and why.
    refused: BTreeMap<NodeIndex, String>,
    deadline_ns: u64,
}

impl Core {
    /// Admits a job once its program is known to start where it will run;
    /// `Err` for a submission refused at once (bad fields, too many nodes, a
    /// node it would run on is not connected).
    pub fn submit(
        &mut self,
        submission: Submission,
        now_unix_ms: u64,
        now_ns: u64,
    ) -> Result<Submitted, String> {
        self.advance(now_ns);
        self.check_class(&submission)?;
        validate_submission(&submission)?;
        self.check_size(&submission)?;
        let id = self.next_check;
        self.next_check += 1;
        let mut check = PendingCheck {
            submission,
            submitted_unix_ms: now_unix_ms,
            waiting: BTreeSet::new(),
            passed: BTreeSet::new(),
            refused: BTreeMap::new(),
            deadline_ns: 0,
        };
        if self.ask_next_round(id, &mut check, now_ns)? {
            self.checks.insert(id, check);
            return Ok(Submitted::Checking(id));
        }
        self.admit(check.submission, check.submitted_unix_ms, now_ns)
            .map(|view| Submitted::Job(Box::new(view)))
    }

    /// An agent's answer. `Err` (for the log) when nothing waits for it.
    pub fn program_checked(
        &mut self,
        node: NodeIndex,
        answer: &ProgramChecked,
        now_ns: u64,
    ) -> Result<(), String> {
        let check = self
            .checks
            .get_mut(&answer.check_id)
            .filter(|check| check.waiting.contains(&node))
            .ok_or_else(|| format!("no submission waits for check {}", answer.check_id))?;
        check.waiting.remove(&node);
        match &answer.outcome {
            ProgramCheck::Runnable { path } => {
                tracing::debug!(node = %self.nodes[node].record.name, %path, "program found");
                check.passed.insert(node);
            }
            ProgramCheck::NotRunnable { reason } => {
                check.refused.insert(node, reason.clone());
            }
        }
        self.settle(answer.check_id, now_ns);
        Ok(())
    }

    /// Fails the submissions whose agents did not answer by `now_ns`.
    pub fn expire_checks(&mut self, now_ns: u64) {
        let timeout_ms = self.config.check_timeout_ns / 1_000_000;
        let expired: Vec<u64> = self
            .checks
            .iter()
            .filter(|(_, check)| check.deadline_ns <= now_ns)
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            let check = self.checks.get_mut(&id).expect("listed above");
            for node in std::mem::take(&mut check.waiting) {
                check.refused.insert(
                    node,
                    format!("its agent did not answer within {timeout_ms} ms"),
                );
            }
            self.settle(id, now_ns);
        }
    }

    /// When [`Core::expire_checks`] has something to do next.
    pub fn next_check_deadline(&self) -> Option<u64> {
        self.checks.values().map(|check| check.deadline_ns).min()
    }

    /// `node`'s agent went away: the checks waiting for it fail.
    pub(super) fn checks_lost_node(&mut self, node: NodeIndex) {
        let waiting: Vec<u64> = self
            .checks
            .iter()
            .filter(|(_, check)| check.waiting.contains(&node))
            .map(|(&id, _)| id)
            .collect();
        for id in waiting {
            let check = self.checks.get_mut(&id).expect("listed above");
            check.waiting.remove(&node);
            check
                .refused
                .insert(node, "its agent disconnected before answering".into());
            // A refusal ends the submission: no next round, no clock needed.
            self.settle(id, 0);
        }
    }

    /// After an answer: wait for the rest, fail, ask the nodes a changed
    /// placement added, or admit the job.
    fn settle(&mut self, id: u64, now_ns: u64) {
        let Some(mut check) = self.checks.remove(&id) else {
            return;
        };
        if !check.waiting.is_empty() {
            self.checks.insert(id, check);
            return;
        }
        let result = if !check.refused.is_empty() {
            Err(self.refusal(&check))
        } else {
            match self.ask_next_round(id, &mut check, now_ns) {
                Ok(true) => {
                    self.checks.insert(id, check);
                    return;
                }
                Ok(false) => self.admit(check.submission, check.submitted_unix_ms, now_ns),
                Err(why) => Err(why),
            }
        };
        if let Err(why) = &result {
            tracing::info!(check = id, "submission refused: {why}");
        }
        self.out.push(Effect::Submitted {
            check: id,
            result: result.map(Box::new),
        });
    }

    /// Sends `CheckProgram` to the nodes the job would run on now that have
    /// not confirmed yet; `Ok(false)` when every such node has.
    fn ask_next_round(
        &mut self,
        id: u64,
        check: &mut PendingCheck,
        now_ns: u64,
    ) -> Result<bool, String> {
        let targets = self.check_targets(&check.submission, now_ns)?;
        let (ask, old): (Vec<NodeIndex>, Vec<NodeIndex>) = targets
            .into_iter()
            .filter(|node| !check.passed.contains(node))
            .partition(|&node| self.nodes[node].knows(MessageKind::CheckProgram));
        for node in old {
            tracing::warn!(
                node = %self.node_name(node),
                "this node's agent speaks protocol 1.0 and cannot check programs; not checked there"
            );
            check.passed.insert(node);
        }
        if ask.is_empty() {
            return Ok(false);
        }
        let message = CheckProgram {
            check_id: id,
            command: check.submission.command.clone(),
            search_path: check.submission.env.get("PATH").cloned(),
        };
        for &node in &ask {
            self.send(node, message.clone());
        }
        check.waiting = ask.into_iter().collect();
        check.deadline_ns = now_ns.saturating_add(self.config.check_timeout_ns);
        Ok(true)
    }

    /// Where a submission would go now, leaving everything as it is.
    fn would_place(&mut self, submission: &Submission, now_ns: u64) -> Result<Placed, String> {
        if !self.policy.uses_matrix() {
            return self.would_place_classed(self.next_job_id, submission, now_ns);
        }
        let mut request = JobRequest::new(policy_id(self.next_job_id), submission.nodes);
        request.exclusive = submission.exclusive;
        let mut tentative = self.matrix.clone();
        let outcome = tentative
            .submit(request)
            .map_err(|error| error.to_string())?;
        Ok(match outcome {
            SubmitOutcome::Placed(placed) => Placed::Start(placed.columns),
            SubmitOutcome::Queued { .. } => Placed::Queue,
        })
    }

    /// The nodes a submission must be checked on: where it would be placed
    /// now (each must be connected), or every connected node if it would
    /// wait.
    fn check_targets(
        &mut self,
        submission: &Submission,
        now_ns: u64,
    ) -> Result<Vec<NodeIndex>, String> {
        match self.would_place(submission, now_ns)? {
            Placed::Start(columns) => {
                if let Some(&down) = columns.iter().find(|&&node| !self.nodes[node].is_up()) {
                    return Err(format!(
                        "cannot check that {:?} starts on {}, where the job would run: its agent is not connected",
                        submission.command,
                        self.node_name(down)
                    ));
                }
                Ok(columns)
            }
            Placed::Queue => {
                let up: Vec<NodeIndex> = (0..self.nodes.len())
                    .filter(|&node| self.nodes[node].is_up())
                    .collect();
                if up.is_empty() {
                    return Err(format!(
                        "cannot check that {:?} starts anywhere: no agent is connected",
                        submission.command
                    ));
                }
                Ok(up)
            }
        }
    }

    /// "cannot start "prog" on n1: why; on n2: why".
    fn refusal(&self, check: &PendingCheck) -> String {
        let nodes: Vec<String> = check
            .refused
            .iter()
            .map(|(&node, why)| format!("{}: {why}", self.node_name(node)))
            .collect();
        format!(
            "cannot start {:?} on {}",
            check.submission.command,
            nodes.join("; on ")
        )
    }
}
