//! Agreement on the last iteration, so a `--duration` run ends without
//! deadlock and with every rank having run the same number of iterations.
//!
//! Only rank 0 looks at the clock. When its time is up at iteration `k` it
//! picks `k + size + 2` as the last iteration; every frame carries the
//! sender's choice and every rank keeps the minimum it has seen. Information
//! moves at least one hop per iteration in every pattern and no pattern's
//! diameter exceeds `size`, so every rank learns the value before it could
//! pass it. Ranks started with different `--iterations` would not agree
//! (a smaller count travels without margin), so the start handshake
//! compares every rank's value and refuses to start on a mismatch.

/// "No stop chosen yet" on the wire.
pub const NO_STOP: u64 = u64::MAX;

/// One rank's view of the agreed last iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopAgreement {
    stop_iter: u64,
}

impl StopAgreement {
    /// Runs of fixed length: every rank knows the last iteration from the start.
    pub fn fixed(iterations: u64) -> Self {
        assert!(iterations > 0, "a run has at least one iteration");
        Self {
            stop_iter: iterations - 1,
        }
    }

    /// Runs of fixed duration: the last iteration is decided later by rank 0.
    pub fn open() -> Self {
        Self { stop_iter: NO_STOP }
    }

    /// The last iteration to run, or [`NO_STOP`]; sent in every header.
    pub fn stop_iter(&self) -> u64 {
        self.stop_iter
    }

    /// Whether a last iteration is known.
    pub fn is_decided(&self) -> bool {
        self.stop_iter != NO_STOP
    }

    /// Merges a peer's view carried by a received frame.
    pub fn observe(&mut self, peer_stop_iter: u64) {
        self.stop_iter = self.stop_iter.min(peer_stop_iter);
    }

    /// Rank 0, at the start of `iteration`, found its time is up.
    ///
    /// The margin of `size + 2` iterations covers the longest path any
    /// pattern needs to carry the decision to every rank.
    pub fn decide(&mut self, iteration: u64, size: usize) {
        self.observe(iteration.saturating_add(size as u64 + 2));
    }

    /// Whether `iteration`, just completed, was the last one.
    pub fn is_last(&self, iteration: u64) -> bool {
        iteration >= self.stop_iter
    }

    /// Iterations run when the agreement ends after `stop_iter`.
    pub fn iterations(&self) -> Option<u64> {
        self.is_decided().then(|| self.stop_iter + 1)
    }
}

/// Names a rank's run length for error messages.
pub fn describe_run_length(stop_iter: u64) -> String {
    if stop_iter == NO_STOP {
        "a --duration run".to_owned()
    } else {
        format!("--iterations {}", stop_iter + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_runs_stop_after_the_last_iteration() {
        let agreement = StopAgreement::fixed(3);
        assert!(!agreement.is_last(1));
        assert!(agreement.is_last(2));
        assert_eq!(agreement.iterations(), Some(3));
    }

    #[test]
    fn open_runs_never_stop_until_decided() {
        let mut agreement = StopAgreement::open();
        assert!(!agreement.is_last(1_000_000));
        assert_eq!(agreement.iterations(), None);
        agreement.decide(10, 4);
        assert_eq!(agreement.stop_iter(), 16);
        assert!(agreement.is_last(16));
        assert!(!agreement.is_last(15));
    }

    #[test]
    fn observing_keeps_the_minimum_and_ignores_no_stop() {
        let mut agreement = StopAgreement::open();
        agreement.observe(NO_STOP);
        assert!(!agreement.is_decided());
        agreement.observe(40);
        agreement.observe(50);
        agreement.observe(NO_STOP);
        assert_eq!(agreement.stop_iter(), 40);
        agreement.observe(30);
        assert_eq!(agreement.stop_iter(), 30);
    }

    #[test]
    fn run_lengths_are_described_in_cli_terms() {
        assert_eq!(describe_run_length(NO_STOP), "a --duration run");
        assert_eq!(
            describe_run_length(StopAgreement::fixed(200).stop_iter()),
            "--iterations 200"
        );
    }

    #[test]
    fn a_later_decision_does_not_extend_an_earlier_one() {
        let mut agreement = StopAgreement::open();
        agreement.decide(5, 2);
        agreement.decide(9, 2);
        assert_eq!(agreement.stop_iter(), 9);
    }
}
