//! Recordings of separate machines on one clock.
//!
//! Each agent timestamps with its own CLOCK_MONOTONIC, which counts from its
//! machine's boot: two machines' recordings are seconds or days apart. The
//! coordinator already estimates every agent's clock offset from heartbeats
//! (minimum round trip, [`cosched_policy::global::OffsetEstimate`]) to time
//! slice switches; moving each recording onto the coordinator's clock with
//! that estimate puts the nodes side by side, within the estimate's
//! uncertainty (half the round trip it comes from).
use std::collections::BTreeMap;

use cosched_policy::global::OffsetEstimate;
use cosched_proto::timeline::{ClockAlignment, NodeTimeline};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AlignError {
    #[error("node {0:?} is not one of the coordinator's nodes: no clock offset to align it with")]
    UnknownNode(String),
    #[error(
        "node {0:?} has no clock offset estimate yet (its agent is not connected to the coordinator, or has not answered a heartbeat)"
    )]
    NoEstimate(String),
    #[error("node {0:?} is already on the {1} clock")]
    AlreadyAligned(String, String),
}

/// One recording on the reference clock: every timestamp minus the node's
/// offset. `reference` names the clock ("coordinator").
pub fn align(t: &NodeTimeline, estimate: OffsetEstimate, reference: &str) -> NodeTimeline {
    let shift = |ts: u64| estimate.to_coordinator_clock(ts);
    let mut out = t.clone();
    out.start_ns = shift(t.start_ns);
    out.end_ns = shift(t.end_ns);
    for s in &mut out.switches {
        s.ts_ns = shift(s.ts_ns);
    }
    for s in &mut out.spins {
        s.ts_ns = shift(s.ts_ns);
    }
    for a in &mut out.actions {
        a.ts_ns = shift(a.ts_ns);
    }
    for s in &mut out.slices {
        s.ts_ns = shift(s.ts_ns);
    }
    for d in &mut out.decisions {
        d.ts_ns = shift(d.ts_ns);
    }
    out.clock = Some(ClockAlignment {
        reference: reference.to_string(),
        offset_ns: estimate.offset_ns,
        uncertainty_ns: estimate.uncertainty_ns,
    });
    out
}

/// Every recording on the reference clock, each with its node's estimate
/// (`None`: the node is known but has no estimate yet). All or nothing: a
/// picture with some nodes moved and others not would line up events that
/// did not happen together.
pub fn align_all(
    nodes: &[NodeTimeline],
    estimates: &BTreeMap<String, Option<OffsetEstimate>>,
    reference: &str,
) -> Result<Vec<NodeTimeline>, AlignError> {
    nodes
        .iter()
        .map(|t| {
            if let Some(clock) = &t.clock {
                return Err(AlignError::AlreadyAligned(
                    t.node.clone(),
                    clock.reference.clone(),
                ));
            }
            match estimates.get(&t.node) {
                None => Err(AlignError::UnknownNode(t.node.clone())),
                Some(None) => Err(AlignError::NoEstimate(t.node.clone())),
                Some(Some(estimate)) => Ok(align(t, *estimate, reference)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_proto::timeline::{Action, Slice, Spin, Switch};

    fn estimate(offset_ns: i64, uncertainty_ns: u64) -> OffsetEstimate {
        OffsetEstimate {
            offset_ns,
            round_trip_ns: 2 * uncertainty_ns,
            uncertainty_ns,
        }
    }

    /// A node that switched job 1 → 2 at `switch_at` on its own clock, and
    /// applied a slice then.
    fn node(name: &str, start_ns: u64, switch_at: u64) -> NodeTimeline {
        NodeTimeline {
            node: name.into(),
            cpus: vec![0],
            start_ns,
            end_ns: start_ns + 10_000_000,
            switches: vec![Switch {
                ts_ns: switch_at,
                cpu: 0,
                prev_tid: 11,
                prev_job: 1,
                next_tid: 22,
                next_job: 2,
            }],
            spins: vec![Spin {
                ts_ns: switch_at + 1,
                tid: 22,
                job: 2,
                start: true,
            }],
            actions: vec![Action {
                ts_ns: switch_at + 2,
                tid: 22,
                job: 2,
                level: "boost".into(),
            }],
            slices: vec![Slice {
                ts_ns: switch_at - 3,
                active: Some(vec![2]),
                number: None,
            }],
            ..NodeTimeline::default()
        }
    }

    #[test]
    fn two_machines_booted_apart_switching_together_line_up_on_the_coordinator_clock() {
        // Both switch when the coordinator's clock reads 1 s; machine a
        // booted 5 s before the coordinator (its clock is 5 s ahead),
        // machine b 0.5 s after (0.5 s behind).
        let at = 1_000_000_000u64;
        let (a_offset, b_offset) = (5_000_000_000i64, -500_000_000i64);
        let on = |offset: i64| at.checked_add_signed(offset).unwrap();
        let a = node("a", on(a_offset) - 4_000_000, on(a_offset));
        let b = node("b", on(b_offset) - 4_000_000, on(b_offset));
        assert_ne!(a.switches[0].ts_ns, b.switches[0].ts_ns);
        let estimates = BTreeMap::from([
            ("a".to_string(), Some(estimate(a_offset, 40_000))),
            ("b".to_string(), Some(estimate(b_offset, 60_000))),
        ]);
        let aligned = align_all(&[a, b], &estimates, "coordinator").unwrap();
        for t in &aligned {
            assert_eq!(t.start_ns, at - 4_000_000);
            assert_eq!(t.switches[0].ts_ns, at);
            assert_eq!(t.spins[0].ts_ns, at + 1);
            assert_eq!(t.actions[0].ts_ns, at + 2);
            assert_eq!(t.slices[0].ts_ns, at - 3);
        }
        let clock = aligned[1].clock.as_ref().unwrap();
        assert_eq!(clock.reference, "coordinator");
        assert_eq!(clock.offset_ns, b_offset);
        assert_eq!(clock.uncertainty_ns, 60_000);
    }

    #[test]
    fn a_node_the_coordinator_does_not_know_refuses_the_whole_picture() {
        let estimates = BTreeMap::from([("a".to_string(), Some(estimate(0, 1)))]);
        let error = align_all(
            &[node("a", 10, 20), node("z", 10, 20)],
            &estimates,
            "coordinator",
        )
        .unwrap_err();
        assert_eq!(error, AlignError::UnknownNode("z".into()));
        assert!(
            error
                .to_string()
                .contains("not one of the coordinator's nodes")
        );
    }

    #[test]
    fn a_node_without_an_estimate_yet_is_named() {
        let estimates = BTreeMap::from([("a".to_string(), None)]);
        let error = align_all(&[node("a", 10, 20)], &estimates, "coordinator").unwrap_err();
        assert_eq!(error, AlignError::NoEstimate("a".into()));
    }

    #[test]
    fn a_recording_is_not_moved_twice() {
        let estimates = BTreeMap::from([("a".to_string(), Some(estimate(100, 1)))]);
        let once = align_all(&[node("a", 1_000, 2_000)], &estimates, "coordinator").unwrap();
        assert!(matches!(
            align_all(&once, &estimates, "coordinator"),
            Err(AlignError::AlreadyAligned(..))
        ));
    }

    #[test]
    fn a_zero_offset_changes_only_the_clock_note() {
        let t = node("a", 1_000, 2_000);
        let mut moved = align(&t, estimate(0, 5), "coordinator");
        assert!(moved.clock.take().is_some());
        assert_eq!(moved, t);
    }
}
