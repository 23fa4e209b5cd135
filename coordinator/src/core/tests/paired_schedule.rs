//! Paired gang's slices announced ahead (`paired_schedule_ahead`): one
//! `SliceSchedule` per node planned from the current predictions,
//! re-announced from the first slice a prediction changes.

use super::*;

/// Paired gang on `nodes` registered nodes with certain clocks, three rows.
fn paired(nodes: usize, paired_schedule_ahead: bool) -> Core {
    clocked_cluster_of(CoreConfig {
        schedule_ahead: true,
        paired_schedule_ahead,
        max_rows: 3,
        ..config(nodes, GlobalPolicy::PairedGang)
    })
}

/// Every node reports `job` at `utilisation` for `quantum`.
fn report(core: &mut Core, nodes: usize, job: u32, quantum: u64, utilisation: f64) {
    for node in 0..nodes {
        let jobs = vec![JobUtilisation {
            job_id: job,
            quantum,
            cpu_utilisation: utilisation,
        }];
        core.util_report(node, &UtilReport { jobs });
    }
}

/// Jobs a (30 %) and b (40 %), which pair, and c (90 %), which runs alone,
/// each on every node.
fn three_jobs(core: &mut Core, nodes: usize) -> [u32; 3] {
    let ids = ["a", "b", "c"].map(|name| submit(core, job(name, nodes)).id);
    for (id, utilisation) in ids.into_iter().zip([0.3, 0.4, 0.9]) {
        report(core, nodes, id, 0, utilisation);
    }
    core.take_effects();
    ids
}

/// The jobs `schedule` runs in slices `from..to`, as sets.
fn runs(schedule: &SliceSchedule, from: u64, to: u64) -> Vec<BTreeSet<u32>> {
    (from..to)
        .map(|n| {
            let entry = schedule.entry(n).expect("the schedule repeats");
            entry.active_jobs.iter().copied().collect()
        })
        .collect()
}

#[test]
fn steady_paired_gang_sends_one_schedule_per_node_then_nothing_per_slice() {
    let mut core = paired(2, true);
    let [a, b, c] = three_jobs(&mut core, 2);
    let first = schedules(&plan(&mut core, 0));
    assert_eq!(first.len(), 2, "one schedule per node");
    let pair = BTreeSet::from([a, b]);
    let alone = BTreeSet::from([c]);
    for (_, schedule) in &first {
        assert_eq!(schedule.entry(0).unwrap().rows.len(), 2, "a paired slice");
        assert_eq!(
            runs(schedule, 0, 6),
            [&pair, &alone, &pair, &alone, &pair, &alone].map(Clone::clone)
        );
    }
    for k in 1..20 {
        assert!(sent(&plan(&mut core, k)).is_empty(), "slice {k} sent");
    }
}

#[test]
fn a_utilisation_change_re_announces_every_node_at_the_slice_it_changes() {
    let mut core = paired(3, true);
    let [a, b, c] = three_jobs(&mut core, 3);
    plan(&mut core, 0);
    for k in 1..4 {
        assert!(sent(&plan(&mut core, k)).is_empty());
    }
    // b jumps to 90 %: a sharp change, so b runs alone from its next turn
    // (slice 4 starts a round; the schedules had a and b together there).
    report(&mut core, 3, b, 1, 0.9);
    core.take_effects();
    let again = schedules(&plan(&mut core, 4));
    let nodes: BTreeSet<usize> = again.iter().map(|(node, _)| *node).collect();
    assert_eq!(nodes, BTreeSet::from([0, 1, 2]), "every node is told");
    for (_, schedule) in &again {
        // Announced when slice 4 is planned (a lead before it starts), for
        // slice 4's instant.
        assert_eq!(schedule.first_slice, 4);
        assert_eq!(schedule.first_apply_at_ns, NOW_NS + 4 * SLICE_NS);
        assert_eq!(
            runs(schedule, 4, 7),
            [[a], [b], [c]].map(BTreeSet::from),
            "a and b apart"
        );
    }
    for k in 5..12 {
        assert!(sent(&plan(&mut core, k)).is_empty(), "slice {k} sent");
    }
}

#[test]
fn paired_gang_keeps_a_switch_per_slice_unless_told_to_announce_ahead() {
    let mut core = paired(2, false);
    three_jobs(&mut core, 2);
    for k in 0..4 {
        let effects = plan(&mut core, k);
        assert_eq!(switches(&effects).len(), 2, "slice {k}");
        assert!(schedules(&effects).is_empty());
    }
    assert!(!core.keeps_slice_grid());
}

#[test]
fn paired_gang_announced_ahead_keeps_the_slice_grid_of_the_schedules() {
    assert!(paired(1, true).keeps_slice_grid());
}
