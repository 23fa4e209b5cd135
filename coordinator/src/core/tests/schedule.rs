//! Gang slices announced ahead (protocol 1.5): one `SliceSchedule` per node,
//! re-announced only when what the node runs, or when, changes.

use cosched_proto::wire::{HeartbeatReply, ProtocolVersion};

use super::*;

fn ahead(nodes: usize, max_rows: usize) -> Core {
    clocked_cluster_of(CoreConfig {
        schedule_ahead: true,
        max_rows,
        ..config(nodes, GlobalPolicy::Gang)
    })
}

#[test]
fn steady_gang_sends_one_schedule_per_node_then_nothing_per_slice() {
    let mut core = ahead(2, 2);
    let a = submit(&mut core, job("a", 2)).id;
    let b = submit(&mut core, job("b", 2)).id;
    core.take_effects();
    let first = schedules(&plan(&mut core, 0));
    assert_eq!(first.len(), 2);
    let schedule = &first[0].1;
    assert_eq!(
        (schedule.first_slice, schedule.first_apply_at_ns),
        (0, NOW_NS)
    );
    assert_eq!(schedule.slice_ns, SLICE_NS);
    // What the node runs in the next slices, from the schedule alone.
    let owners: Vec<Vec<u32>> = (0..6)
        .map(|n| schedule.entry(n).unwrap().active_jobs.clone())
        .collect();
    assert_eq!(owners, [[a], [b], [a], [b], [a], [b]]);
    for k in 1..20 {
        assert!(sent(&plan(&mut core, k)).is_empty(), "slice {k} sent");
    }
}

#[test]
fn a_job_arriving_mid_cycle_re_announces_at_the_first_slice_that_differs() {
    let mut core = ahead(2, 3);
    let a = submit(&mut core, job("a", 2)).id;
    let b = submit(&mut core, job("b", 2)).id;
    core.take_effects();
    plan(&mut core, 0);
    plan(&mut core, 1);
    let c = submit(&mut core, job("c", 1)).id;
    core.take_effects();
    // Slices 2 and 3 run a and b as announced; slice 4 is c's row, which
    // the schedules did not have: both nodes get the new cycle then.
    assert!(sent(&plan(&mut core, 2)).is_empty());
    assert!(sent(&plan(&mut core, 3)).is_empty());
    let again = schedules(&plan(&mut core, 4));
    assert_eq!(again.len(), 2, "both nodes' cycles now have three rows");
    let on_0 = &again.iter().find(|(node, _)| *node == 0).unwrap().1;
    assert_eq!(on_0.first_slice, 4);
    assert_eq!(on_0.first_apply_at_ns, NOW_NS + 4 * SLICE_NS);
    let owners: Vec<Vec<u32>> = (4..10)
        .map(|n| on_0.entry(n).unwrap().active_jobs.clone())
        .collect();
    assert_eq!(owners, [[c], [a], [b], [c], [a], [b]]);
    assert!(sent(&plan(&mut core, 5)).is_empty());
}

#[test]
fn a_job_ending_re_announces_its_row_away() {
    let mut core = ahead(3, 2);
    let a = submit(&mut core, job("a", 3)).id;
    let b = submit(&mut core, job("b", 1)).id;
    core.take_effects();
    plan(&mut core, 0);
    plan(&mut core, 1);
    exit(&mut core, 0, b, 0, 0);
    core.take_effects();
    // Slice 2 is a's row, as announced; slice 3 would have been b's (now
    // empty): a runs again, so every node is told the cycle [a].
    assert!(sent(&plan(&mut core, 2)).is_empty());
    let again = schedules(&plan(&mut core, 3));
    assert_eq!(again.len(), 3);
    for (_, schedule) in &again {
        assert_eq!(schedule.first_slice, 3);
        assert_eq!(schedule.entry(9).unwrap().active_jobs, [a]);
    }
    assert!(sent(&plan(&mut core, 4)).is_empty());
}

#[test]
fn an_agent_that_joins_late_gets_its_schedule_at_its_first_slice() {
    let mut core = ahead(2, 2);
    let a = submit(&mut core, job("a", 1)).id;
    core.take_effects();
    assert_eq!(schedules(&plan(&mut core, 0)).len(), 2);
    core.disconnected(1, 2);
    assert!(sent(&plan(&mut core, 1)).is_empty());
    register(&mut core, 1, 7);
    inventory(&mut core, 1, &[]);
    clock_in_step(&mut core, 1);
    core.take_effects();
    let joined = schedules(&plan(&mut core, 2));
    assert_eq!(joined.len(), 1);
    assert_eq!(joined[0].0, 1);
    assert_eq!(joined[0].1.first_slice, 2);
    assert!(joined[0].1.entry(2).unwrap().active_jobs.is_empty());
    assert_eq!(joined[0].1.entry(2).unwrap().rows, [0]);
    let _ = a;
}

#[test]
fn an_agent_whose_clock_offset_moves_is_re_announced_in_its_clock() {
    let mut core = ahead(2, 2);
    submit(&mut core, job("a", 2));
    core.take_effects();
    plan(&mut core, 0);
    // A tighter exchange shows node 1 is 1 ms ahead.
    clock_1ms_ahead(&mut core, 1);
    core.take_effects();
    let moved = schedules(&plan(&mut core, 1));
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].0, 1);
    assert_eq!(moved[0].1.first_apply_at_ns, NOW_NS + SLICE_NS + 1_000_000);
    // A sub-threshold wobble is not worth a message.
    let wobble = HeartbeatReply {
        seq: 2,
        t1_ns: 20_000_000,
        t2_ns: 21_060_000,
        t3_ns: 21_065_000,
    };
    core.heartbeat_reply(1, &wobble, 20_045_000).unwrap();
    core.take_effects();
    assert!(sent(&plan(&mut core, 2)).is_empty());
}

#[test]
fn an_agent_of_protocol_1_4_still_gets_a_switch_every_slice() {
    let mut core = Core::new(CoreConfig {
        schedule_ahead: true,
        ..config(2, GlobalPolicy::Gang)
    })
    .unwrap();
    register(&mut core, 0, 1);
    register_speaking(&mut core, 1, 2, ProtocolVersion { major: 1, minor: 4 });
    for node in 0..2 {
        inventory(&mut core, node, &[]);
        clock_in_step(&mut core, node);
    }
    submit(&mut core, job("a", 2));
    core.take_effects();
    for k in 0..3 {
        let effects = plan(&mut core, k);
        let old: Vec<usize> = switches(&effects).iter().map(|(node, _)| *node).collect();
        assert_eq!(old, [1], "slice {k}");
        assert_eq!(schedules(&effects).len(), usize::from(k == 0));
    }
}

#[test]
fn scheduled_agents_report_one_slice_in_a_report_period_and_skew_is_complete() {
    let mut core = ahead(2, 2);
    submit(&mut core, job("a", 2));
    core.take_effects();
    let schedule = schedules(&plan(&mut core, 0))[0].1.clone();
    let every = schedule.report_every;
    assert_eq!(
        every,
        (super::super::slicing::REPORT_PERIOD_NS / SLICE_NS).max(1)
    );
    for k in 1..=every {
        plan(&mut core, k);
    }
    let report = |node_clock| SliceSwitched {
        epoch: core.epoch(),
        slice: every,
        switched_at_ns: node_clock,
    };
    let at = NOW_NS + every * SLICE_NS;
    let (first, second) = (report(at + 10), report(at + 40));
    core.slice_switched(0, &first);
    let observations = core.slice_switched(1, &second);
    assert_eq!(
        observations.last(),
        Some(&SwitchObservation::Skew {
            seconds: 30e-9,
            nodes: 2
        })
    );
}

#[test]
fn idle_ends_the_schedules_with_a_switch() {
    let mut core = ahead(1, 2);
    let a = submit(&mut core, job("a", 1)).id;
    core.take_effects();
    plan(&mut core, 0);
    exit(&mut core, 0, a, 0, 0);
    core.take_effects();
    let idle = switches(&plan(&mut core, 1));
    assert_eq!(idle.len(), 1);
    assert!(idle[0].1.rows.is_empty());
}

#[test]
fn an_uncertain_clock_estimate_is_passed_on_at_every_move_until_certain() {
    let mut core = Core::new(CoreConfig {
        schedule_ahead: true,
        ..config(2, GlobalPolicy::Gang)
    })
    .unwrap();
    for node in 0..2 {
        register(&mut core, node, node as u64 + 1);
        inventory(&mut core, node, &[]);
    }
    clock_in_step(&mut core, 0);
    let reply = |seq, t1_ns, t2_ns, t3_ns| HeartbeatReply {
        seq,
        t1_ns,
        t2_ns,
        t3_ns,
    };
    // Node 1's only exchange queued 2 ms behind a burst: its offset
    // (500 µs) is known to ±1 ms.
    let queued = core
        .heartbeat_reply(1, &reply(1, 10_000_000, 11_520_000, 11_525_000), 12_045_000)
        .unwrap();
    assert_eq!(
        (queued.offset_ns, queued.uncertainty_ns),
        (500_000, 1_020_000)
    );
    submit(&mut core, job("a", 2));
    core.take_effects();
    let first = schedules(&plan(&mut core, 0));
    assert_eq!(first.len(), 2);
    assert_eq!(first[1].1.first_apply_at_ns, NOW_NS + 500_000);
    assert!(sent(&plan(&mut core, 1)).is_empty());
    // A slightly better sample, still uncertain, moves it by 10 µs: far
    // below the re-drift of a certain estimate, but passed on.
    core.heartbeat_reply(1, &reply(2, 20_000_000, 21_500_000, 21_505_000), 22_025_000)
        .unwrap();
    let moved = schedules(&plan(&mut core, 2));
    assert_eq!(moved.len(), 1);
    assert_eq!(
        moved[0].1.first_apply_at_ns,
        NOW_NS + 2 * SLICE_NS + 490_000
    );
    // A quiet exchange: node 1 is in step after all, and now certain.
    core.heartbeat_reply(1, &reply(3, 30_000_000, 30_020_000, 30_025_000), 30_045_000)
        .unwrap();
    let certain = schedules(&plan(&mut core, 3));
    assert_eq!(certain.len(), 1);
    assert_eq!(certain[0].1.first_apply_at_ns, NOW_NS + 3 * SLICE_NS);
    // From now on a 60 µs wobble is not worth a message.
    core.heartbeat_reply(1, &reply(4, 40_000_000, 40_080_000, 40_085_000), 40_045_000)
        .unwrap();
    assert!(sent(&plan(&mut core, 4)).is_empty());
}
