//! 2DCS-TDM on a node whose coordinator stops sending divisions.

use super::support::ms;
use crate::classes::{
    Class, DEFAULT_GRACE_PERIODS, DivisionError, DivisionFallback, DivisionSource, FairnessRatio,
};

const RT: Class = Class::RealTime;
const BE: Class = Class::BestEffort;

/// Δ = 30 ms split 2:1: 20 ms RT, 10 ms BE; the local clock after 3 Δ.
fn fallback(now_ns: u64) -> DivisionFallback {
    DivisionFallback::new(
        ms(30),
        FairnessRatio::new(2, 1).unwrap(),
        DEFAULT_GRACE_PERIODS,
        now_ns,
    )
    .unwrap()
}

#[test]
fn divisions_that_stop_arriving_leave_the_node_in_its_division_only_for_the_grace_time() {
    let mut f = fallback(0);
    f.coordinator_division(ms(100)); // an RT division from the coordinator
    assert_eq!(f.local_division(ms(150), RT), None, "one late division");
    assert_eq!(f.local_division(ms(189), RT), None);
    assert_eq!(f.source(), DivisionSource::Coordinator);
    // 3 Δ of silence: the node's own clock, starting with the starved BE.
    let d = f.local_division(ms(190), RT).expect("local clock");
    assert_eq!((d.class, d.start_ns, d.end_ns), (BE, ms(190), ms(200)));
    assert_eq!(f.source(), DivisionSource::Local);
}

#[test]
fn divisions_that_stop_arriving_are_replaced_by_local_ones_in_the_coordinators_ratio() {
    let mut f = fallback(0);
    let mut current = RT;
    let mut time = [0u64; 2];
    // 90 ms of silence, then 3 s sampled every ms.
    for t in 90..3090 {
        if let Some(d) = f.local_division(ms(t), current) {
            current = d.class;
        }
        time[usize::from(current == BE)] += 1;
    }
    assert_eq!(time, [2000, 1000], "RT:BE = 2:1 over whole periods");
}

#[test]
fn divisions_that_stop_arriving_in_a_be_division_restart_with_the_starved_rt_one() {
    let mut f = fallback(0);
    f.coordinator_division(ms(20)); // BE division
    let d = f.local_division(ms(110), BE).expect("local clock");
    assert_eq!((d.class, d.start_ns, d.end_ns), (RT, ms(110), ms(130)));
    assert_eq!(f.local_division(ms(130), RT).unwrap().class, BE);
}

#[test]
fn divisions_that_resume_end_the_local_clock_at_once() {
    let mut f = fallback(0);
    assert!(f.local_division(ms(95), RT).is_some(), "never heard at all");
    f.coordinator_division(ms(97));
    assert_eq!(f.source(), DivisionSource::Coordinator);
    assert_eq!(f.local_division(ms(150), RT), None, "the coordinator rules");
    // A late division older than the last heard does not move it back.
    f.coordinator_division(ms(96));
    assert_eq!(f.local_division(ms(186), RT), None);
    assert!(f.local_division(ms(187), RT).is_some());
}

#[test]
fn a_period_too_short_to_split_has_no_fallback_clock() {
    let error = DivisionFallback::new(1, FairnessRatio::new(2, 1).unwrap(), 3, 0).unwrap_err();
    assert!(matches!(error, DivisionError::EmptyDivision { .. }));
}
