//! One rank's progress through its plan, free of I/O.
//!
//! The runtime and the simulated message-passing tests drive the same engine:
//! they perform the current step (compute, send, wait), report arrivals and
//! mark the step done; the engine tracks the iteration, buffers early frames
//! and applies the stop agreement at each iteration's end.

use crate::header::{Header, Kind};
use crate::inbox::{Filing, Inbox};
use crate::pattern::{Pattern, Plan, plan};
use crate::stop::StopAgreement;

/// What became of an arriving pattern frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Filed (or flagged) by the inbox.
    Filed(Filing),
    /// This rank's plan never receives this kind from this sender.
    Unexpected,
}

#[derive(Debug)]
pub struct RankEngine {
    rank: usize,
    size: usize,
    plan: Plan,
    iteration: u64,
    step: usize,
    finished: bool,
    stop: StopAgreement,
    inbox: Inbox,
}

impl RankEngine {
    pub fn new(pattern: Pattern, rank: usize, size: usize, stop: StopAgreement) -> Self {
        Self {
            rank,
            size,
            plan: plan(pattern, rank, size),
            iteration: 0,
            step: 0,
            finished: false,
            stop,
            inbox: Inbox::default(),
        }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The iteration being run (the last one run, once finished).
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// Index into [`Plan::steps`] of the step to perform, `None` when done.
    pub fn step_index(&self) -> Option<usize> {
        (!self.finished).then_some(self.step)
    }

    /// True before the first step of an iteration: where rank 0 checks its clock.
    pub fn at_iteration_start(&self) -> bool {
        !self.finished && self.step == 0
    }

    pub fn stop(&self) -> &StopAgreement {
        &self.stop
    }

    /// Rank 0's time is up: choose the last iteration relative to this one.
    pub fn decide_stop(&mut self) {
        self.stop.decide(self.iteration, self.size);
    }

    /// Merges the stop iteration carried by any frame from this job.
    pub fn observe_stop(&mut self, peer_stop_iter: u64) {
        self.stop.observe(peer_stop_iter);
    }

    /// The current step is done; moves on, ending the run after the agreed
    /// last iteration.
    pub fn complete_step(&mut self) {
        if self.finished {
            return;
        }
        self.step += 1;
        if self.step < self.plan.steps().len() {
            return;
        }
        if self.stop.is_last(self.iteration) {
            self.finished = true;
        } else {
            self.iteration += 1;
            self.step = 0;
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Iterations fully completed so far.
    pub fn iterations_completed(&self) -> u64 {
        if self.finished {
            self.iteration + 1
        } else {
            self.iteration
        }
    }

    /// Takes in a pattern frame (any iteration) and its stop iteration.
    pub fn arrive(&mut self, header: &Header) -> Arrival {
        self.stop.observe(header.stop_iter);
        let src = header.src as usize;
        if src >= self.size || !self.plan.expects(header.kind, src) {
            return Arrival::Unexpected;
        }
        Arrival::Filed(
            self.inbox
                .file(self.iteration, header.iteration, header.kind, src),
        )
    }

    /// Whether a receive step of the current iteration can complete.
    pub fn receive_ready(&self, kind: Kind, from: &[usize]) -> bool {
        self.inbox.has_all(self.iteration, kind, from)
    }

    /// Senders the current receive step still waits for.
    pub fn missing_into(&self, kind: Kind, from: &[usize], missing: &mut Vec<usize>) {
        self.inbox.missing_into(self.iteration, kind, from, missing);
    }

    /// Consumes the frames of a completed receive step.
    pub fn consume(&mut self, kind: Kind, from: &[usize]) {
        self.inbox.take(self.iteration, kind, from);
    }

    /// Filed frames not consumed yet.
    pub fn buffered(&self) -> usize {
        self.inbox.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::job_hash;
    use crate::stop::NO_STOP;

    fn frame(kind: Kind, src: u32, iteration: u64, stop_iter: u64) -> Header {
        Header {
            kind,
            src,
            len: 64,
            job_hash: job_hash("t"),
            iteration,
            stop_iter,
        }
    }

    fn finish_iteration(engine: &mut RankEngine) {
        for _ in 0..engine.plan().steps().len() {
            engine.complete_step();
        }
    }

    #[test]
    fn runs_exactly_the_fixed_number_of_iterations() {
        let mut engine = RankEngine::new(Pattern::Ring, 0, 1, StopAgreement::fixed(3));
        let mut steps = 0;
        while engine.step_index().is_some() {
            engine.complete_step();
            steps += 1;
        }
        assert_eq!(engine.iterations_completed(), 3);
        assert_eq!(steps, 3 * engine.plan().steps().len());
    }

    #[test]
    fn a_stop_carried_by_a_frame_ends_the_run() {
        let mut engine = RankEngine::new(Pattern::Ring, 1, 2, StopAgreement::open());
        finish_iteration(&mut engine);
        assert_eq!(engine.iteration(), 1);
        engine.arrive(&frame(Kind::Data, 0, 1, 2));
        finish_iteration(&mut engine);
        assert!(!engine.is_finished());
        finish_iteration(&mut engine);
        assert!(engine.is_finished());
        assert_eq!(engine.iterations_completed(), 3);
    }

    #[test]
    fn decide_stop_is_relative_to_the_current_iteration() {
        let mut engine = RankEngine::new(Pattern::Ring, 0, 3, StopAgreement::open());
        finish_iteration(&mut engine);
        finish_iteration(&mut engine);
        engine.decide_stop();
        assert_eq!(engine.stop().stop_iter(), 2 + 3 + 2);
    }

    #[test]
    fn frames_are_checked_against_the_plan() {
        let mut engine = RankEngine::new(Pattern::Ring, 1, 3, StopAgreement::open());
        assert_eq!(
            engine.arrive(&frame(Kind::Data, 2, 0, NO_STOP)),
            Arrival::Unexpected
        );
        assert_eq!(
            engine.arrive(&frame(Kind::Task, 0, 0, NO_STOP)),
            Arrival::Unexpected
        );
        assert_eq!(
            engine.arrive(&frame(Kind::Data, 7, 0, NO_STOP)),
            Arrival::Unexpected
        );
        assert_eq!(
            engine.arrive(&frame(Kind::Data, 0, 1, NO_STOP)),
            Arrival::Filed(Filing::Accepted)
        );
        assert!(!engine.receive_ready(Kind::Data, &[0]));
        finish_iteration(&mut engine);
        assert!(engine.receive_ready(Kind::Data, &[0]));
        engine.consume(Kind::Data, &[0]);
        assert_eq!(engine.buffered(), 0);
    }

    #[test]
    fn even_unexpected_frames_carry_the_stop() {
        let mut engine = RankEngine::new(Pattern::Ring, 1, 3, StopAgreement::open());
        engine.arrive(&frame(Kind::Data, 2, 0, 9));
        assert_eq!(engine.stop().stop_iter(), 9);
    }
}
