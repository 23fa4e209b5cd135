//! What the coordinator's slices cost and see, as on the real cluster: the
//! agents' work at each switch, and a paired-gang plan made before the
//! slice still running has been reported.

mod support;

use cosched_policy::local::PolicyKind;
use cosched_sim::config::GlobalMode;
use cosched_sim::executive::{Calendar, Executive};
use cosched_sim::model::Cluster;
use cosched_sim::workload::{JobSpec, Pattern};
use support::{MS, US, config, response, run};

#[test]
fn the_agents_switch_work_takes_the_cpu_from_the_slices_job() {
    let mut cfg = config(1, GlobalMode::Gang, PolicyKind::Local);
    cfg.sched.slice_ns = 10 * MS;
    let job = || vec![JobSpec::simple(0, 0, 1, 1, 100 * MS, Pattern::None)];
    let free = run(cfg.clone(), job());
    cfg.cluster.slice_switch_cpu_ns = MS;
    let ex = run(cfg.clone(), job());
    let slices = ex.model.counters.slices;
    assert!(slices >= 10, "{slices} slices of 10 ms in a 100 ms job");
    assert_eq!(ex.model.counters.agent_switch_ns, slices * MS);
    // Every switch held the job off its CPU for the agent's work (and a
    // context switch back); the job's own work is unchanged.
    let lost = response(&ex, 0) - response(&free, 0);
    assert!(
        lost >= (slices - 1) * MS,
        "lost {lost} ns over {slices} slices"
    );
    assert!(lost <= slices * (MS + 10 * US), "lost {lost} ns");
    assert_eq!(ex.model.tasks[0].used.compute_ns, 100 * MS);
}

#[test]
fn paired_gang_plans_a_slice_before_the_running_slice_is_reported() {
    // Two light (I/O-bound) jobs. Each is new, so each is first measured
    // alone. The coordinator plans a slice while the one before it still
    // runs, so the round after the two measuring slices still sees the
    // second job at its speculative 100 % and runs both alone once more:
    // the first pair is the fifth slice (the third if plans saw every
    // report).
    let mut cfg = config(2, GlobalMode::PairedGang, PolicyKind::Local);
    cfg.sched.slice_ns = 10 * MS;
    let light = |id| JobSpec {
        io_ns: 5 * MS,
        ..JobSpec::simple(id, 0, 2, 100, 100 * US, Pattern::None)
    };
    let mut calendar = Calendar::default();
    let model = Cluster::new(cfg, vec![light(0), light(1)], &mut calendar).expect("valid");
    let mut ex = Executive::from_parts(model, calendar);
    ex.run_while(|m, _| m.counters.paired_slices == 0 && !m.all_done());
    assert_eq!(ex.model.counters.paired_slices, 1, "the light jobs pair");
    assert_eq!(ex.model.counters.slices, 5);
}
