//! The switch timer's armed deadlines, without I/O: which token fires
//! when, and which deadline the kernel timer must wake the agent for.

use std::collections::{BTreeMap, BTreeSet};

/// Absolute CLOCK_MONOTONIC deadlines, each with the token it fires.
/// Served by time, not by arming order: a new schedule's first slice may be
/// due before a slice armed earlier (and cancelled or not).
#[derive(Debug, Clone, Default)]
pub struct Deadlines {
    by_time: BTreeSet<(u64, u64)>,
    by_token: BTreeMap<u64, u64>,
}

impl Deadlines {
    /// Fires `token` at `at_ns` (a token armed again moves).
    pub fn arm(&mut self, at_ns: u64, token: u64) {
        self.cancel(token);
        self.by_time.insert((at_ns, token));
        self.by_token.insert(token, at_ns);
    }

    /// `token` will not fire (nothing if it fired already or was never armed).
    pub fn cancel(&mut self, token: u64) {
        if let Some(at_ns) = self.by_token.remove(&token) {
            self.by_time.remove(&(at_ns, token));
        }
    }

    /// The earliest deadline, the one the kernel timer must be set to.
    pub fn earliest(&self) -> Option<u64> {
        self.by_time.first().map(|&(at_ns, _)| at_ns)
    }

    /// Takes the tokens due at `now_ns`, earliest first.
    pub fn take_due(&mut self, now_ns: u64) -> Vec<u64> {
        let mut due = Vec::new();
        while let Some(&(at_ns, token)) = self.by_time.first()
            && at_ns <= now_ns
        {
            self.by_time.pop_first();
            self.by_token.remove(&token);
            due.push(token);
        }
        due
    }

    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_armed_after_a_later_one_fires_first() {
        let mut d = Deadlines::default();
        d.arm(3_000, 1);
        d.arm(2_000, 2);
        assert_eq!(d.earliest(), Some(2_000));
        assert_eq!(d.take_due(2_500), [2]);
        assert_eq!(d.earliest(), Some(3_000));
        assert_eq!(d.take_due(10_000), [1]);
        assert!(d.is_empty());
        assert_eq!(d.earliest(), None);
    }

    #[test]
    fn only_deadlines_already_passed_are_taken_and_all_of_them_in_time_order() {
        let mut d = Deadlines::default();
        d.arm(500, 7);
        d.arm(100, 8);
        d.arm(900, 9);
        assert!(d.take_due(99).is_empty());
        assert_eq!(d.take_due(500), [8, 7]);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_cancelled_token_never_fires_and_no_longer_sets_the_timer() {
        let mut d = Deadlines::default();
        d.arm(100, 1);
        d.arm(200, 2);
        d.cancel(1);
        d.cancel(42);
        assert_eq!(d.earliest(), Some(200));
        assert_eq!(d.take_due(1_000), [2]);
    }

    #[test]
    fn a_token_armed_again_fires_once_at_its_new_deadline() {
        let mut d = Deadlines::default();
        d.arm(100, 1);
        d.arm(300, 1);
        assert_eq!(d.earliest(), Some(300));
        assert!(d.take_due(200).is_empty());
        assert_eq!(d.take_due(300), [1]);
        assert!(d.is_empty());
    }

    #[test]
    fn equal_deadlines_fire_together_in_token_order() {
        let mut d = Deadlines::default();
        d.arm(100, 5);
        d.arm(100, 4);
        assert_eq!(d.take_due(100), [4, 5]);
    }
}
