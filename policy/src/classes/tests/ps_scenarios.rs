//! 2DCS-PS on a node: the virtual-time choice of class (Figure 4).

use crate::classes::{Class, FairnessRatio, PsNode, PsParams, Readiness};

const RT: Class = Class::RealTime;
const BE: Class = Class::BestEffort;

fn ready(rt: bool, be: bool) -> Readiness {
    Readiness { rt, be }
}

fn node(sleeper_credit: u64) -> PsNode {
    PsNode::new(
        PsParams {
            ratio: FairnessRatio::new(2, 1).unwrap(),
            sleeper_credit,
        },
        0,
    )
}

fn vts(node: &PsNode) -> (u64, u64) {
    (node.virtual_time(RT), node.virtual_time(BE))
}

/// Figure 4 (a)–(c): RT job A, BE jobs B and C, x:y = 2:1.
fn figure_4_a_to_c(node: &mut PsNode) {
    // (a) t = 0: both virtual times 0, the tie goes to RT: A runs.
    assert_eq!(node.on_event(0, ready(true, true)), Some(RT));
    assert_eq!(vts(node), (0, 0));
    // (b) t = 10: A blocks for a message; vt_RT = 0 + 10·(2+1)/2 = 15 > vt_BE.
    assert_eq!(node.on_event(10, ready(false, true)), Some(BE));
    assert_eq!(vts(node), (15, 0));
    // (c) t = 30: B's quantum expires; vt_BE = 0 + 20·(2+1)/1 = 60. RT is
    // behind but has nothing ready: BE goes on (with C).
    assert_eq!(node.on_event(30, ready(false, true)), Some(BE));
    assert_eq!(vts(node), (15, 60));
}

#[test]
fn figure_4_a_to_d_under_the_texts_rule() {
    let mut node = node(0);
    figure_4_a_to_c(&mut node);
    // (d) t = 35: A gets its message; vt_BE = 60 + 5·3 = 75. RT had nothing
    // ready, so it comes back at BE's virtual time, and the tie picks RT.
    assert_eq!(node.on_event(35, ready(true, true)), Some(RT));
    assert_eq!(vts(&node), (75, 75));
    assert_eq!((node.run_time_ns(RT), node.run_time_ns(BE)), (10, 25));
}

#[test]
fn figure_4_a_to_d_as_drawn_with_a_sleeper_credit() {
    // The figure keeps vt_RT at 15 in (d): a returning class may stay up to
    // 60 behind.
    let mut node = node(60);
    figure_4_a_to_c(&mut node);
    assert_eq!(node.on_event(35, ready(true, true)), Some(RT));
    assert_eq!(vts(&node), (15, 75));
}

#[test]
fn a_be_class_that_returns_after_a_long_sleep_does_not_monopolise() {
    let mut node = node(0);
    // BE sleeps for a second of RT running alone.
    node.on_event(0, ready(true, false));
    node.on_event(1_000_000_000, ready(true, false));
    // BE wakes; then events every 3 ms with both always ready.
    let mut t = 1_000_000_000;
    node.on_event(t, ready(true, true));
    let (rt0, be0) = (node.run_time_ns(RT), node.run_time_ns(BE));
    for _ in 0..100 {
        t += 3_000_000;
        node.on_event(t, ready(true, true));
    }
    let be = node.run_time_ns(BE) - be0;
    let rt = node.run_time_ns(RT) - rt0;
    // 2:1 from the return on, not a second of BE catching up.
    assert_eq!(be + rt, 300_000_000);
    assert!((97_000_000..=103_000_000).contains(&be), "BE got {be} ns");
}

#[test]
fn without_the_reset_the_sleeper_would_take_the_node() {
    // A credit as large as the sleep shows what the reset prevents.
    let mut node = node(u64::MAX / 8);
    node.on_event(0, ready(true, false));
    let mut t = 1_000_000_000;
    node.on_event(t, ready(true, true));
    for _ in 0..100 {
        t += 3_000_000;
        assert_eq!(node.on_event(t, ready(true, true)), Some(BE));
    }
}

#[test]
fn a_class_that_was_ahead_keeps_its_virtual_time_when_it_returns() {
    let mut node = node(0);
    node.on_event(0, ready(true, true));
    node.on_event(100, ready(false, true)); // RT ran 100: vt_RT = 150
    node.on_event(110, ready(true, true)); // BE ran 10: vt_BE = 30
    assert_eq!(vts(&node), (150, 30));
    assert_eq!(node.running(), Some(BE));
}

#[test]
fn with_nothing_ready_the_node_idles_and_idle_time_is_charged_to_nobody() {
    let mut node = node(0);
    assert_eq!(node.on_event(0, ready(false, false)), None);
    assert_eq!(node.on_event(50, ready(false, true)), Some(BE));
    assert_eq!(vts(&node), (0, 0));
    assert_eq!(node.on_event(60, ready(false, false)), None);
    assert_eq!(node.on_event(500, ready(true, false)), Some(RT));
    assert_eq!((node.run_time_ns(RT), node.run_time_ns(BE)), (0, 10));
}

#[test]
fn a_blocked_rt_class_behind_its_share_is_armed_to_take_the_cpu_at_its_wakeup() {
    let mut node = node(0);
    node.on_event(0, ready(true, true));
    // RT ran 1 ms (vt_RT 1.5 ms) and blocked on its timer; BE runs.
    assert_eq!(node.on_event(1_000_000, ready(false, true)), Some(BE));
    // BE has not caught up yet (vt_BE 0.3 ms): a wakeup now would find RT
    // ahead of its share, and BE keeps the CPU.
    assert_eq!(node.on_event(1_100_000, ready(false, true)), Some(BE));
    assert!(!node.takes_cpu_on_return(RT));
    // BE ran 0.5 ms in all (vt_BE 1.5 ms): the tie goes to RT, so a
    // waking RT task takes the CPU at once.
    assert_eq!(node.on_event(1_500_000, ready(false, true)), Some(BE));
    assert!(node.takes_cpu_on_return(RT));
    // It stays armed however long BE runs.
    assert_eq!(node.on_event(9_000_000, ready(false, true)), Some(BE));
    assert!(node.takes_cpu_on_return(RT));
    // When the RT task is seen ready, RT runs by the return rule.
    assert_eq!(node.on_event(10_000_000, ready(true, true)), Some(RT));
    assert!(!node.takes_cpu_on_return(RT), "ready: not armed");
}

#[test]
fn a_blocked_be_class_is_armed_only_when_strictly_behind_and_nothing_is_armed_on_an_idle_node() {
    let mut node = node(0);
    node.on_event(0, ready(true, true));
    // RT ran 1 ms: vt_RT 1.5 ms; BE then ran until vt_BE 1.5 ms and blocked.
    node.on_event(1_000_000, ready(true, true));
    assert_eq!(node.on_event(1_500_000, ready(true, false)), Some(RT));
    // RT runs with vt_RT = vt_BE: a waking BE task would lose the tie.
    assert!(!node.takes_cpu_on_return(BE));
    node.on_event(1_600_000, ready(true, false));
    assert!(!node.takes_cpu_on_return(BE), "RT is now ahead, BE at par");
    // Nothing ready: whichever class wakes runs anyway.
    node.on_event(2_000_000, ready(false, false));
    assert!(!node.takes_cpu_on_return(RT) && !node.takes_cpu_on_return(BE));
}
