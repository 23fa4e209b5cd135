//! The policies hear what the real agent hears, when it hears it: the eBPF
//! side reports only some arrivals and spin starts at once, everything else
//! reaches the policy through the counters at the agent's tick.

mod support;

use cosched_policy::local::{Level, PolicyKind};
use cosched_sim::config::GlobalMode;
use cosched_sim::progress_over;
use cosched_sim::workload::{JobSpec, Pattern, RecvMode};
use support::{MS, US, config, machine_config, run};

fn fine_jobs(count: u64, iterations: u32) -> Vec<JobSpec> {
    (0..count)
        .map(|id| JobSpec {
            recv: RecvMode::Spin,
            ..JobSpec::simple(id, 0, 2, iterations, MS / 10, Pattern::Ring)
        })
        .collect()
}

#[test]
fn a_lone_spinning_job_under_dcs_never_wakes_the_agent_with_an_arrival() {
    // Alone on its nodes, each receiver is always on its CPU when its
    // message comes: the eBPF side only counts such arrivals.
    let ex = run(
        config(2, GlobalMode::Local, PolicyKind::Dcs),
        fine_jobs(1, 500),
    );
    let k = ex.model.counters;
    assert!(k.messages >= 1000);
    assert_eq!(k.ring_reports, 0, "{k:?}");
    assert_eq!(k.level_changes, 0, "nothing to boost");
}

#[test]
fn dcs_is_woken_by_arrivals_for_preempted_spinners_and_boosts_them() {
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Dcs);
    cfg.sched.mpl = 2;
    let ex = run(cfg, fine_jobs(2, 500));
    let k = ex.model.counters;
    assert!(k.ring_reports > 0, "{k:?}");
    assert!(
        k.ring_reports < k.messages / 2,
        "most arrivals find their receiver on its CPU or reported nothing: {k:?}"
    );
    assert!(k.level_changes > 0, "boosts: {k:?}");
}

#[test]
fn without_a_policy_the_agent_never_wakes() {
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    cfg.sched.mpl = 2;
    let ex = run(cfg, fine_jobs(2, 200));
    let k = ex.model.counters;
    assert_eq!(
        (k.policy_events, k.ring_reports, k.level_changes),
        (0, 0, 0)
    );
}

#[test]
fn fcs_hears_the_gang_slots_and_acts_only_with_them() {
    let mut jobs = fine_jobs(2, 2000);
    // Two job kinds, so the classes differ.
    jobs[1].compute_ns = 2 * MS;
    jobs[1].iterations = 100;
    let mut gang = config(2, GlobalMode::Gang, PolicyKind::Fcs);
    gang.sched.mpl = 2;
    gang.sched.slice_ns = 20 * MS;
    let mut local = gang.clone();
    local.sched.global = GlobalMode::Local;
    let with_slots = run(gang, jobs.clone()).model.counters;
    let without = run(local, jobs).model.counters;
    assert!(with_slots.slices > 0);
    assert!(with_slots.level_changes > 0, "slot owners: {with_slots:?}");
    assert_eq!(without.level_changes, 0, "no slot, no claim: {without:?}");
}

#[test]
fn spin_block_hears_a_long_spin_when_it_passes_the_threshold() {
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Sb);
    cfg.sched.mpl = 2;
    cfg.sched.local.sb.spin_threshold_us = 200;
    cfg.sched.local.sb.wake_boost = true;
    // The fixed threshold: MPL-aware SB leaves a spinner next to one other
    // task alone up to its 4 ms bound, past these 2 ms waits.
    cfg.sched.local.sb.mpl_aware = false;
    let mut jobs = fine_jobs(2, 300);
    // Rank 1 computes longer: rank 0 waits 2 ms each iteration.
    jobs.iter_mut()
        .for_each(|j| j.rank_compute_ns = vec![MS / 10, 2 * MS]);
    let ex = run(cfg, jobs);
    let k = ex.model.counters;
    assert!(k.ring_reports > 0, "long spins reported: {k:?}");
    assert!(k.level_changes > 0, "blocked: {k:?}");
}

#[test]
fn a_spin_longer_than_the_spin_gap_is_one_episode_and_passes_a_longer_threshold() {
    // A spinner polls all the time; the model only looks at events, which
    // come more than a spin gap apart while nothing else happens. Those
    // looks must not read the stretch between them as computation (a new
    // episode at every look): SB's 500 µs threshold, above the 200 µs gap,
    // is passed, reported and acted on.
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Sb);
    cfg.sched.mpl = 2;
    cfg.sched.local.sb.spin_threshold_us = 500;
    cfg.sched.local.sb.wake_boost = true;
    // The fixed threshold: MPL-aware SB leaves a spinner next to one other
    // task alone up to its 4 ms bound, past these 2 ms waits.
    cfg.sched.local.sb.mpl_aware = false;
    assert!(cfg.cluster.spin_gap_ns < 500 * US);
    let mut jobs = fine_jobs(2, 300);
    // Rank 1 computes longer: rank 0 waits 2 ms each iteration.
    jobs.iter_mut()
        .for_each(|j| j.rank_compute_ns = vec![MS / 10, 2 * MS]);
    let ex = run(cfg, jobs);
    let k = ex.model.counters;
    assert!(k.ring_reports > 0, "long spins reported: {k:?}");
    assert!(k.level_changes > 0, "blocked: {k:?}");
    let rank0 = &ex.model.tasks[0];
    assert!(
        rank0.stats.spin_episodes < 2 * 300 + 10,
        "one episode per wait, not one per look: {}",
        rank0.stats.spin_episodes
    );
}

#[test]
fn with_a_reaction_tail_decisions_still_apply_in_the_order_taken() {
    // A demotion and the wake boost after it must not swap places, or the
    // woken task stays demoted and its job starves (this machine, SB, two
    // fine-spin jobs: 20.6 against 1.1 when each decision drew its own
    // delay and they could swap).
    let mut cfg = machine_config(PolicyKind::Sb, 2);
    let mut jobs = fine_jobs(2, u32::MAX);
    jobs.iter_mut().for_each(|j| j.compute_ns = 20 * US);
    for seed in 1..=3 {
        cfg.cluster.seed = seed;
        let p = progress_over(&cfg, &jobs, 2_000 * MS).expect("valid");
        let (a, b) = (p[0].slowdown, p[1].slowdown);
        assert!(a.max(b) / a.min(b) < 1.5, "seed {seed}: {a:.2} vs {b:.2}");
    }
}

#[test]
fn unequal_reaction_times_let_dcs_pairs_fall_into_step() {
    // With one fixed reaction time the two nodes stay mirror images: each
    // job runs on one node while its peer waits on the other, and every
    // iteration costs a boost. Varying reactions break the symmetry.
    let boosts_per_iteration = |tail: u64| {
        let mut cfg = config(2, GlobalMode::Local, PolicyKind::Dcs);
        cfg.sched.mpl = 2;
        cfg.cluster.agent_delay_tail_ns = tail;
        let ex = run(cfg, fine_jobs(2, 3000));
        let boosts: u64 = ex.model.tasks.iter().map(|t| t.boosts).sum();
        boosts as f64 / (4.0 * 3000.0)
    };
    let (fixed, varying) = (boosts_per_iteration(0), boosts_per_iteration(10 * US));
    assert!(
        varying < fixed / 2.0,
        "{fixed:.3} vs {varying:.3} boosts per rank and iteration"
    );
}

#[test]
fn the_agents_looks_take_its_nodes_cpu_only_while_a_policy_acts() {
    // The agent is pinned to its node's CPU and runs at real-time priority
    // while its policy acts: every look (tick, report) preempts the rank
    // running there. Plain Linux's agent acts on nothing and costs nothing.
    let cost = 20 * US;
    let agent_cpu = |kind: PolicyKind, look: u64| {
        let mut cfg = config(2, GlobalMode::Local, kind);
        cfg.sched.mpl = 2;
        cfg.cluster.agent_look_cpu_ns = look;
        let ex = run(cfg, fine_jobs(2, 500));
        (
            ex.model.counters.agent_switch_ns,
            ex.model.counters.context_switches,
        )
    };
    let (dcs_cpu, dcs_switches) = agent_cpu(PolicyKind::Dcs, cost);
    assert!(dcs_cpu > 0 && dcs_cpu % cost == 0, "{dcs_cpu}");
    let (free_cpu, free_switches) = agent_cpu(PolicyKind::Dcs, 0);
    assert_eq!(free_cpu, 0);
    assert!(
        dcs_switches > free_switches,
        "looks preempt ranks: {dcs_switches} vs {free_switches} switches"
    );
    assert_eq!(agent_cpu(PolicyKind::Local, cost).0, 0, "plain Linux");
}

#[test]
fn the_agent_changes_levels_while_it_holds_the_nodes_cpu() {
    // SY on the bench's mix: a fine-spin ring and two compute jobs per
    // node. The agent (pinned to the node's CPU, real-time priority) is
    // woken, reads, decides and calls sched_setattr on that CPU: the CPU
    // time of a look that changes levels ends when the change is done, so
    // the change is made while the ranks are off the CPU and the kernel
    // picks afresh when the agent leaves (a yielded spinner returned to
    // SCHED_OTHER competes then, not only at a later tick).
    let cfg = machine_config(PolicyKind::Sy, 3);
    let mut jobs = fine_jobs(1, u32::MAX);
    jobs[0].compute_ns = 20 * US;
    for id in 1..=4 {
        jobs.push(JobSpec::simple(id, 0, 1, u32::MAX, MS, Pattern::None));
    }
    let mut calendar = cosched_sim::executive::Calendar::default();
    let model = cosched_sim::model::Cluster::new(cfg, jobs, &mut calendar).expect("valid");
    let mut ex = cosched_sim::executive::Executive::from_parts(model, calendar);
    ex.run_while(|m, _| m.tasks.is_empty());
    let spinner = 0;
    let node = ex.model.tasks[spinner].node as usize;
    let (mut was, mut held_until) = (Level::Normal, 0);
    let (mut changes, mut held) = (0, 0);
    while ex.model.now() < 1_000 * MS && ex.step() {
        let level = ex.model.tasks[spinner].effective;
        if level != was {
            changes += 1;
            // The agent's burst began before this instant and ends at it.
            if held_until >= ex.model.now() {
                held += 1;
            }
        }
        was = level;
        let cpu = &ex.model.nodes[node].cpus[0];
        held_until = if cpu.noise { cpu.noise_until } else { 0 };
    }
    assert!(changes >= 20, "{changes} level changes");
    assert!(
        held * 10 >= changes * 9,
        "{held} of {changes} level changes made while the agent held the CPU"
    );
}
