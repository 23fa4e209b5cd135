//! The matching algorithm of Paired Gang Scheduling Fig. 4: sort by predicted CPU
//! utilisation and match from both ends.
//!
//! Run once per round of the matrix (not at every switch) for fairness
//! (§2.4): each candidate gets a distinct partner when one exists; only a
//! candidate that matched no unmatched one is matched to an already matched
//! (lighter) one. Candidates are generic so the same code matches single jobs
//! or, as paired gang does (§2.5), whole rows by their maximum utilisation.

/// Something to match and its predicted utilisation (percent).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchCandidate<K> {
    pub key: K,
    pub percent: f64,
}

/// One decision of the algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatchDecision<K> {
    /// `heavy` and `light` run together. `light_shared` is true when `light`
    /// was already matched to another candidate (the `pback` step).
    Pair {
        heavy: K,
        light: K,
        light_shared: bool,
    },
    /// Runs alone: no lighter candidate satisfies x + y + m < 100.
    Alone(K),
}

/// The pairing condition of Paired Gang Scheduling §2.4: x + y + m < 100 %.
pub fn can_pair(x_percent: f64, y_percent: f64, margin_percent: f64) -> bool {
    x_percent + y_percent + margin_percent < 100.0
}

/// Fig. 4. Candidates are sorted ascending by utilisation (ties by key, so
/// the outcome is deterministic); `pstart` walks up from the lightest,
/// `pend` down from the heaviest. While the pair (pstart, pend) is too
/// heavy, pend gives up on pstart and takes the heaviest already matched
/// candidate below pstart that fits (`pback`), or runs alone; then pstart and
/// pend are matched and both pointers move.
///
/// Fig. 4 leaves a candidate unvisited when the pointers meet (for example
/// the middle of three, or the candidate the final `pend = pend − 1` skips).
/// Such a candidate "did not match any other unmatched job", so it gets the
/// same treatment as a `pend` that found no unmatched partner: the `pback`
/// search, else alone. Every candidate thus appears in at least one decision.
///
/// Decisions are returned in the order the algorithm makes them.
pub fn match_from_both_ends<K: Copy + Ord>(
    candidates: &[MatchCandidate<K>],
    margin_percent: f64,
) -> Vec<MatchDecision<K>> {
    let mut sorted = candidates.to_vec();
    sorted.sort_by(|a, b| a.percent.total_cmp(&b.percent).then(a.key.cmp(&b.key)));
    let fits = |a: usize, b: usize| can_pair(sorted[a].percent, sorted[b].percent, margin_percent);
    let mut decided = vec![false; sorted.len()];
    let mut decisions = Vec::new();
    // The pback step: heaviest already matched light candidate below `below`
    // that fits with `heavy`.
    let shared_partner =
        |heavy: usize, below: usize| (0..below).rev().find(|&back| fits(back, heavy));
    let decide_without_unmatched_partner =
        |heavy: usize, below: usize| match shared_partner(heavy, below) {
            Some(back) => MatchDecision::Pair {
                heavy: sorted[heavy].key,
                light: sorted[back].key,
                light_shared: true,
            },
            None => MatchDecision::Alone(sorted[heavy].key),
        };

    if sorted.is_empty() {
        return decisions;
    }
    let (mut pstart, mut pend) = (0usize, sorted.len() - 1);
    while pstart < pend {
        while pstart < pend && !fits(pstart, pend) {
            decisions.push(decide_without_unmatched_partner(pend, pstart));
            decided[pend] = true;
            pend -= 1;
        }
        if pstart < pend {
            decisions.push(MatchDecision::Pair {
                heavy: sorted[pend].key,
                light: sorted[pstart].key,
                light_shared: false,
            });
            decided[pstart] = true;
            decided[pend] = true;
            pstart += 1;
        }
        // Fig. 4's unconditional `pend = pend − 1`; may skip a candidate,
        // which the leftover pass below picks up.
        match pend.checked_sub(1) {
            Some(next) => pend = next,
            None => break,
        }
    }
    for leftover in (0..sorted.len()).rev().filter(|&index| !decided[index]) {
        // Every candidate below a leftover has been matched as a light one.
        decisions.push(decide_without_unmatched_partner(
            leftover,
            leftover.min(pstart),
        ));
    }
    decisions
}
