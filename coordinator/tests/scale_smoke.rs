//! The real coordinator binary driving 50 stand-in agents over loopback on
//! the real wire protocol (the scale harness, `cargo xtask bench scale`, at
//! a size CI runs without root): every agent registers, every agent gets
//! slice switches naming its jobs, and 10 links broken at once come back
//! with the jobs still running. No timing is asserted.

use cosched_scale::scenario::{self, ScenarioConfig};

#[test]
fn fifty_agents_register_switch_and_rejoin() {
    let agents = 50;
    let mut config =
        ScenarioConfig::smoke(env!("CARGO_BIN_EXE_cosched-coordinator").into(), agents);
    config.drop_agents = 10;
    let report = scenario::run(config, |line| eprintln!("scale: {line}")).expect("scenario");

    let registration = &report.registration;
    assert!(registration.all_accepted_s.is_some(), "{registration:?}");
    assert!(
        registration.coordinator_all_connected_s.is_some(),
        "{registration:?}"
    );

    assert_eq!(report.submission.ranks_launched, 4 * agents as u64);
    assert_eq!(
        report.agents_with_active_switches, agents,
        "every agent switched slices with its jobs"
    );
    let steady = &report.steady;
    assert!(steady.slices_sent > 0);
    assert!(steady.agents.slices > 0, "{:?}", steady.agents);
    assert!(steady.agent_heartbeat_replies > 0 && steady.coordinator_heartbeats_answered > 0);
    assert!(report.memory.rss_registered_kib > 0);

    let rejoin = report.drop_rejoin.as_ref().expect("drop phase ran");
    assert_eq!(rejoin.dropped, 10);
    assert!(rejoin.all_accepted_s.is_some(), "{rejoin:?}");
    assert!(rejoin.all_active_s.is_some(), "{rejoin:?}");
    assert_eq!(rejoin.nodes_connected_after, agents as u64);
    assert!(rejoin.jobs_lost.is_empty(), "{rejoin:?}");
    assert_eq!(rejoin.jobs_after.get("running"), Some(&4), "{rejoin:?}");
    assert_eq!(rejoin.handshake_failures, 0, "{rejoin:?}");
}
