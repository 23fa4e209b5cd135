//! Pattern frames that arrived but were not consumed yet.
//!
//! Peers run ahead: in a ring a rank may be several iterations ahead of its
//! successor, and in all-to-all a fast rank's iteration `k + 1` frame can
//! arrive before the slow rank finished `k`. Frames are therefore filed by
//! (iteration, kind, sender) and taken when the plan's receive step for that
//! iteration runs.

use std::collections::HashSet;

use crate::header::Kind;

/// What happened to one arriving pattern frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filing {
    /// Kept until its receive step.
    Accepted,
    /// Belongs to an iteration this rank already finished.
    Stale,
    /// A second frame for the same (iteration, kind, sender).
    Duplicate,
}

#[derive(Debug, Default)]
pub struct Inbox {
    arrived: HashSet<(u64, Kind, usize)>,
}

impl Inbox {
    /// Files a frame from `src` for `iteration`, seen while this rank is at
    /// `current_iteration`.
    pub fn file(
        &mut self,
        current_iteration: u64,
        iteration: u64,
        kind: Kind,
        src: usize,
    ) -> Filing {
        if iteration < current_iteration {
            Filing::Stale
        } else if self.arrived.insert((iteration, kind, src)) {
            Filing::Accepted
        } else {
            Filing::Duplicate
        }
    }

    /// Whether every sender in `from` has delivered its `kind` frame of `iteration`.
    pub fn has_all(&self, iteration: u64, kind: Kind, from: &[usize]) -> bool {
        from.iter()
            .all(|&src| self.arrived.contains(&(iteration, kind, src)))
    }

    /// Replaces `missing` with the senders in `from` still owing their frame.
    pub fn missing_into(
        &self,
        iteration: u64,
        kind: Kind,
        from: &[usize],
        missing: &mut Vec<usize>,
    ) {
        missing.clear();
        missing.extend(
            from.iter()
                .copied()
                .filter(|&src| !self.arrived.contains(&(iteration, kind, src))),
        );
    }

    /// Consumes the frames a completed receive step waited for.
    pub fn take(&mut self, iteration: u64, kind: Kind, from: &[usize]) {
        for &src in from {
            self.arrived.remove(&(iteration, kind, src));
        }
    }

    /// Frames still waiting; zero at the end of a clean run.
    pub fn len(&self) -> usize {
        self.arrived.len()
    }

    pub fn is_empty(&self) -> bool {
        self.arrived.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_from_future_iterations_wait_for_their_step() {
        let mut inbox = Inbox::default();
        assert_eq!(inbox.file(3, 4, Kind::Data, 1), Filing::Accepted);
        assert!(!inbox.has_all(3, Kind::Data, &[1]));
        assert!(inbox.has_all(4, Kind::Data, &[1]));
        inbox.take(4, Kind::Data, &[1]);
        assert!(inbox.is_empty());
    }

    #[test]
    fn reports_missing_senders_in_order() {
        let mut inbox = Inbox::default();
        inbox.file(0, 0, Kind::Data, 2);
        let mut missing = vec![99];
        inbox.missing_into(0, Kind::Data, &[1, 2, 3], &mut missing);
        assert_eq!(missing, vec![1, 3]);
        inbox.file(0, 0, Kind::Data, 1);
        inbox.file(0, 0, Kind::Data, 3);
        inbox.missing_into(0, Kind::Data, &[1, 2, 3], &mut missing);
        assert!(missing.is_empty());
    }

    #[test]
    fn kinds_are_kept_apart() {
        let mut inbox = Inbox::default();
        inbox.file(0, 0, Kind::Arrive, 1);
        assert!(!inbox.has_all(0, Kind::Release, &[1]));
        assert!(inbox.has_all(0, Kind::Arrive, &[1]));
    }

    #[test]
    fn stale_and_duplicate_frames_are_flagged_not_kept() {
        let mut inbox = Inbox::default();
        assert_eq!(inbox.file(5, 4, Kind::Data, 1), Filing::Stale);
        assert_eq!(inbox.len(), 0);
        assert_eq!(inbox.file(5, 5, Kind::Data, 1), Filing::Accepted);
        assert_eq!(inbox.file(5, 5, Kind::Data, 1), Filing::Duplicate);
        assert_eq!(inbox.len(), 1);
    }

    #[test]
    fn take_only_removes_the_named_frames() {
        let mut inbox = Inbox::default();
        inbox.file(0, 0, Kind::Data, 1);
        inbox.file(0, 1, Kind::Data, 1);
        inbox.take(0, Kind::Data, &[1]);
        assert_eq!(inbox.len(), 1);
        assert!(inbox.has_all(1, Kind::Data, &[1]));
    }
}
