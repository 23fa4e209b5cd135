//! 1GS's slots announced ahead (`one_gs_schedule_ahead`): one
//! `SliceSchedule` per node planned on a copy of the 1GS rotor, re-announced
//! from the first slot an arrival, a departure or a readiness report
//! changes; the same slots, slot by slot, as the per-slice switches.

use super::classes::rt;
use super::*;

const MS: u64 = 1_000_000;

/// 1GS on `nodes` registered nodes with certain clocks: M = 3 rows at 2:1
/// (rows 0 and 1 RT, row 2 BE), 100 ms slots, admission control on.
fn one_gs(nodes: usize, one_gs_schedule_ahead: bool) -> Core {
    clocked_cluster_of(CoreConfig {
        schedule_ahead: true,
        one_gs_schedule_ahead,
        ..config(nodes, GlobalPolicy::OneLevelGang)
    })
}

/// d = 100 ms, b = 30, τ = 40 ms: 2 rows of the RT set, start row 1.
fn heavy(name: &str, nodes: usize) -> Submission {
    rt(name, nodes, 100 * MS, 30, 40 * MS)
}

/// Every node of `job` reports its processes ready for their first frame.
fn ready_everywhere(core: &mut Core, nodes: usize, job: u32) {
    let report = ready(job);
    for node in 0..nodes {
        core.frame_report(node, &report).unwrap();
    }
}

/// An RT job (ready before its start row) and a BE job, on every node.
fn video_and_batch(core: &mut Core, nodes: usize) -> (u32, u32) {
    let video = submit(core, heavy("video", nodes)).id;
    let batch = submit(core, job("batch", nodes)).id;
    ready_everywhere(core, nodes, video);
    core.take_effects();
    (video, batch)
}

/// What tells the agents about slots: schedules and switches.
fn announcements(effects: &[Effect]) -> Vec<(usize, Message)> {
    sent(effects)
        .into_iter()
        .filter(|(_, message)| {
            matches!(message, Message::SliceSchedule(_) | Message::SwitchSlice(_))
        })
        .collect()
}

#[test]
fn steady_1gs_sends_one_schedule_per_node_then_nothing_per_slot() {
    let mut core = one_gs(2, true);
    let (video, batch) = video_and_batch(&mut core, 2);
    let effects = plan(&mut core, 0);
    assert!(switches(&effects).is_empty());
    let first = schedules(&effects);
    assert_eq!(first.len(), 2, "one schedule per node");
    for (_, schedule) in &first {
        assert!(schedule.strict, "1GS switches are strict");
        assert_eq!(schedule.first_slice, 0);
        assert_eq!(schedule.first_apply_at_ns, NOW_NS);
        let rows: Vec<u32> = (0..6).map(|n| schedule.entry(n).unwrap().rows[0]).collect();
        assert_eq!(rows, [0, 1, 2, 0, 1, 2], "M = 3 rows in turn");
        // The RT job sits out row 0 until its start row (1) comes up, then
        // runs in both of its rows; the BE job in row 2.
        let runs = |n: u64| schedule.entry(n).unwrap().active_jobs.clone();
        assert!(!runs(0).contains(&video));
        assert_eq!(runs(1), [video]);
        assert_eq!(runs(2), [batch]);
        assert_eq!(runs(3), [video]);
        assert_eq!(runs(7), [video], "repeats the next round");
    }
    for k in 1..30 {
        assert!(
            announcements(&plan(&mut core, k)).is_empty(),
            "slot {k} announced"
        );
    }
}

#[test]
fn under_1gs_an_rt_arrival_re_announces_every_node_at_the_slot_it_changes() {
    let mut core = one_gs(2, true);
    let batch = submit(&mut core, job("batch", 2)).id;
    core.take_effects();
    plan(&mut core, 0);
    for k in 1..4 {
        assert!(announcements(&plan(&mut core, k)).is_empty());
    }
    let video = submit(&mut core, heavy("video", 2)).id;
    ready_everywhere(&mut core, 2, video);
    core.take_effects();
    let again = schedules(&plan(&mut core, 4));
    let nodes: BTreeSet<usize> = again.iter().map(|(node, _)| *node).collect();
    assert_eq!(nodes, BTreeSet::from([0, 1]), "every node is told");
    for (_, schedule) in &again {
        // Announced when slot 4 is planned (a lead before it starts), for
        // slot 4's instant.
        assert_eq!(schedule.first_slice, 4);
        assert_eq!(schedule.first_apply_at_ns, NOW_NS + 4 * SLICE_NS);
        let runs: Vec<Vec<u32>> = (4..10)
            .map(|n| schedule.entry(n).unwrap().active_jobs.clone())
            .collect();
        assert!(runs.iter().any(|jobs| jobs.contains(&video)));
        assert!(runs.iter().any(|jobs| jobs == &[batch]));
    }
    for k in 5..20 {
        assert!(
            announcements(&plan(&mut core, k)).is_empty(),
            "slot {k} announced"
        );
    }
}

#[test]
fn under_1gs_a_departure_re_announces_every_node_at_the_next_slot() {
    let mut core = one_gs(2, true);
    let (video, batch) = video_and_batch(&mut core, 2);
    for k in 0..5 {
        plan(&mut core, k);
    }
    exit(&mut core, 0, batch, 0, 0);
    exit(&mut core, 1, batch, 1, 0);
    core.take_effects();
    let again = schedules(&plan(&mut core, 5));
    assert_eq!(again.len(), 2, "every node is told");
    for (_, schedule) in &again {
        assert_eq!(schedule.first_slice, 5);
        for n in 5..11 {
            let jobs = &schedule.entry(n).unwrap().active_jobs;
            assert!(!jobs.contains(&batch), "slot {n} still runs the BE job");
        }
        assert!((5..8).any(|n| schedule.entry(n).unwrap().active_jobs == [video]));
    }
    for k in 6..20 {
        assert!(announcements(&plan(&mut core, k)).is_empty());
    }
}

#[test]
fn under_1gs_readiness_after_the_start_row_re_announces_at_the_first_slot_it_changes() {
    let mut core = one_gs(2, true);
    let video = submit(&mut core, heavy("video", 2)).id;
    core.take_effects();
    // Not ready at its start row (1): the schedule has it warm up there,
    // sitting out row 0.
    let first = schedules(&plan(&mut core, 0));
    assert_eq!(first.len(), 2);
    assert!(!first[0].1.entry(3).unwrap().active_jobs.contains(&video));
    plan(&mut core, 1);
    ready_everywhere(&mut core, 2, video);
    core.take_effects();
    // Slot 2 (row 2) does not change; slot 3 (row 0) now runs it.
    assert!(announcements(&plan(&mut core, 2)).is_empty());
    let again = schedules(&plan(&mut core, 3));
    assert_eq!(again.len(), 2);
    for (_, schedule) in &again {
        assert_eq!(schedule.first_slice, 3);
        assert!(schedule.entry(3).unwrap().active_jobs.contains(&video));
    }
}

#[test]
fn under_1gs_the_announced_schedules_run_what_per_slot_switches_would_over_rounds() {
    // Two coordinators, the same events: one announces ahead, the other
    // switches slot by slot. Every node's latest schedule must give each
    // slot exactly the other's switch, and in the quiet rounds at the end
    // no schedule is re-sent (a copy of the rotor that drifts from the
    // real one would mispredict, and be re-sent, there).
    let nodes = 3;
    let mut ahead = one_gs(nodes, true);
    let mut per_slot = one_gs(nodes, false);
    let mut latest: BTreeMap<usize, SliceSchedule> = BTreeMap::new();
    let mut video = 0;
    let mut resent_from = None;
    for k in 0..40u64 {
        for core in [&mut ahead, &mut per_slot] {
            match k {
                0 => {
                    submit(core, job("batch", nodes));
                    video = submit(core, heavy("video", 2)).id;
                }
                3 => ready_everywhere(core, 2, video),
                7 => {
                    submit(core, rt("audio", 1, 100 * MS, 30, 10 * MS));
                }
                12 => {
                    exit(core, 0, video, 0, 0);
                    exit(core, 1, video, 1, 0);
                }
                _ => {}
            }
            core.take_effects();
        }
        let told = plan(&mut ahead, k);
        assert!(switches(&told).is_empty(), "slot {k}: a switch");
        let sent_schedules = schedules(&told);
        if !sent_schedules.is_empty() {
            resent_from = Some(k);
        }
        latest.extend(sent_schedules);
        let expected = switches(&plan(&mut per_slot, k));
        assert_eq!(expected.len(), nodes, "slot {k}");
        for (node, switch) in expected {
            let schedule = &latest[&node];
            let entry = schedule.entry(k).expect("the schedule covers it");
            assert_eq!(entry.rows, switch.rows, "slot {k}, node {node}");
            assert_eq!(
                entry.active_jobs, switch.active_jobs,
                "slot {k}, node {node}"
            );
            assert_eq!(schedule.apply_at_ns(k), Some(switch.apply_at_ns));
            assert_eq!(schedule.strict, switch.strict);
        }
    }
    let last = resent_from.expect("announced at least once");
    assert!(
        last < 20,
        "re-announced at slot {last}, 7 quiet rounds later"
    );
}

#[test]
fn under_1gs_slots_are_switched_one_by_one_unless_told_to_announce_ahead() {
    let mut core = one_gs(2, false);
    video_and_batch(&mut core, 2);
    for k in 0..6 {
        let effects = plan(&mut core, k);
        assert_eq!(switches(&effects).len(), 2, "slot {k}");
        assert!(schedules(&effects).is_empty());
    }
    assert!(core.keeps_slice_grid(), "1GS keeps its grid either way");
}
