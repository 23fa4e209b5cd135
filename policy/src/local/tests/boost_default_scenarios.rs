//! Which boosts a policy gives when `dcs.end_on_wait` is not set: `dcs`
//! per-message boosts, `dcs-sb` quantum boosts (SB's spin threshold ends a
//! boost whose peers stopped answering; measured in docs/benchmarks.md,
//! "(session 17)"); a value set in the config wins over either default.

use super::harness::*;
use crate::local::{Level, LocalPolicyConfig, PolicyKind, Reason};

/// T1 (job A) was preempted at 1 ms while it waited (spun) for a message,
/// T2 (job B) runs; T1's message comes at 2 ms, T1 takes the CPU, consumes
/// the message and at 2.3 ms waits again (its peer answers within
/// microseconds).
fn boosted_rank_waits_again(config: LocalPolicyConfig) -> Harness {
    let mut h = Harness::new(config);
    h.add(T1, JA, 0);
    h.add(T2, JB, 0);
    h.run(T1, 0, 0);
    h.spin(T1, us(800));
    h.preempt(T1, ms(1));
    h.run(T2, 0, ms(1));
    h.arrive(T1, ms(2), false);
    assert_eq!(
        h.last(T1),
        Some((ms(2), BOOST10, Reason::ArrivalBoost)),
        "a message for a preempted waiting rank boosts it"
    );
    h.preempt(T2, ms(2) + us(5));
    h.run(T1, 0, ms(2) + us(5));
    h.receive(T1, ms(2) + us(20));
    h.spin(T1, ms(2) + us(300));
    h
}

#[test]
fn dcs_sb_by_default_keeps_a_boost_across_the_ranks_short_waits() {
    let h = boosted_rank_waits_again(LocalPolicyConfig::for_kind(PolicyKind::DcsSb));
    assert_eq!(h.level(T1), BOOST10, "a quantum boost outlasts the wait");
    assert_eq!(h.last(T1), Some((ms(2), BOOST10, Reason::ArrivalBoost)));
}

#[test]
fn dcs_by_default_ends_a_boost_at_the_ranks_first_wait() {
    let h = boosted_rank_waits_again(LocalPolicyConfig::for_kind(PolicyKind::Dcs));
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(300), Level::Normal, Reason::BoostEndWaiting)),
        "plain DCS keeps per-message boosts"
    );
}

#[test]
fn dcs_sb_with_end_on_wait_set_ends_a_boost_at_the_ranks_first_wait() {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::DcsSb);
    config.dcs.end_on_wait = Some(true);
    let h = boosted_rank_waits_again(config);
    assert_eq!(
        h.last(T1),
        Some((ms(2) + us(300), Level::Normal, Reason::BoostEndWaiting)),
        "the config's value wins over the policy's default"
    );
}

#[test]
fn dcs_with_end_on_wait_false_keeps_a_boost_across_the_ranks_short_waits() {
    let mut config = LocalPolicyConfig::for_kind(PolicyKind::Dcs);
    config.dcs.end_on_wait = Some(false);
    let h = boosted_rank_waits_again(config);
    assert_eq!(h.level(T1), BOOST10, "the config's value wins");
}
