//! The machine effects added for the calibration against the real benches
//! (docs/simulator.md, "Calibration"): tick-granular slices, other work
//! interrupting the CPUs, the cost of waking a halted CPU, and measuring
//! like the benches (iteration rates over a window).

mod support;

use cosched_policy::local::PolicyKind;
use cosched_sim::config::{GlobalMode, TickPhase};
use cosched_sim::executive::{Calendar, Executive, Model};
use cosched_sim::model::{Cluster, SimEvent};
use cosched_sim::progress_over;
use cosched_sim::workload::{JobSpec, Pattern, RecvMode};
use support::{MS, US, config, response, run};

fn two_compute_jobs() -> Vec<JobSpec> {
    vec![
        JobSpec::simple(0, 0, 1, 1, 40 * MS, Pattern::None),
        JobSpec::simple(1, 0, 1, 1, 40 * MS, Pattern::None),
    ]
}

#[test]
fn with_a_tick_two_compute_jobs_switch_only_at_ticks_after_their_base_slice() {
    let mut cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    cfg.cluster.quantum_ns = 1_500 * US;
    cfg.cluster.tick_ns = 4 * MS;
    let ex = run(cfg.clone(), two_compute_jobs());
    let switches = ex.model.counters.context_switches;
    // Exact 1.5 ms slices would switch ~53 times in 80 ms; at 4 ms ticks a
    // task keeps the CPU for a whole tick period: ~20 switches.
    assert!((18..=22).contains(&switches), "{switches} switches");
    let last = response(&ex, 0).max(response(&ex, 1));
    assert_eq!(last, 80 * MS + switches * cfg.cluster.context_switch_ns);
}

#[test]
fn random_tick_phases_differ_between_nodes_and_aligned_ones_do_not() {
    let mut cfg = config(4, GlobalMode::Local, PolicyKind::Local);
    cfg.cluster.tick_ns = 4 * MS;
    let phases = |cfg: &cosched_sim::SimConfig| {
        let ex = run(
            cfg.clone(),
            vec![JobSpec::simple(0, 0, 1, 1, MS, Pattern::None)],
        );
        ex.model
            .nodes
            .iter()
            .map(|n| n.tick_phase)
            .collect::<Vec<_>>()
    };
    assert_eq!(phases(&cfg), vec![0; 4]);
    cfg.cluster.tick_phase = TickPhase::Random;
    let random = phases(&cfg);
    assert!(random.iter().all(|&p| p < 4 * MS));
    assert!(random.windows(2).any(|w| w[0] != w[1]), "{random:?}");
}

#[test]
fn other_work_takes_cpu_time_from_a_lone_compute_job() {
    let mut cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let job = || vec![JobSpec::simple(0, 0, 1, 1, 100 * MS, Pattern::None)];
    let quiet = response(&run(cfg.clone(), job()), 0);
    cfg.cluster.noise_per_s = 200.0;
    cfg.cluster.noise_ns = 500 * US;
    let ex = run(cfg.clone(), job());
    let noise = ex.model.counters.noise;
    assert!(noise > 5, "{noise} interruptions in ~100 ms at 200/s");
    // Every interruption that hit the job cost its length and a switch back.
    let lost = response(&ex, 0) - quiet;
    assert!(lost >= 5 * 500 * US, "lost {lost} ns");
    assert_eq!(ex.model.tasks[0].used.compute_ns, 100 * MS);
}

#[test]
fn a_share_of_the_interruptions_is_long_and_the_rest_short() {
    // Other work on this machine is mostly tens of µs with a few
    // interruptions of milliseconds (the benches' own timelines): every
    // interruption takes one of the two lengths, the long one at its share.
    let mut cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let job = || vec![JobSpec::simple(0, 0, 1, 1, 2_000 * MS, Pattern::None)];
    cfg.cluster.noise_per_s = 200.0;
    cfg.cluster.noise_ns = 20 * US;
    cfg.cluster.noise_long_share = 0.1;
    cfg.cluster.noise_long_ns = 2 * MS;
    let ex = run(cfg.clone(), job());
    let (n, total) = (ex.model.counters.noise, ex.model.counters.noise_ns);
    let long = (total - n * 20 * US) / (2 * MS - 20 * US);
    assert_eq!(total, long * 2 * MS + (n - long) * 20 * US);
    assert!(n > 200, "{n} interruptions in over 2 s at 200/s");
    assert!(
        (n / 20..=n / 5).contains(&long),
        "{long} long of {n}, share 0.1"
    );
    // Without a long share every interruption is short.
    cfg.cluster.noise_long_share = 0.0;
    let ex = run(cfg, job());
    let (n, total) = (ex.model.counters.noise, ex.model.counters.noise_ns);
    assert_eq!(total, n * 20 * US);
}

#[test]
fn other_work_does_not_interrupt_a_boosted_task() {
    // Run two spinning rings under DCS until a boosted (SCHED_FIFO) rank
    // holds a CPU, then let other work arrive on that CPU: normal-priority
    // work cannot preempt a real-time task, so the rank keeps the CPU.
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Dcs);
    cfg.sched.local.dcs.end_on_wait = Some(false);
    cfg.cluster.noise_ns = 20 * US;
    let jobs = vec![
        JobSpec::simple(0, 0, 2, 400, 200 * US, Pattern::Ring),
        JobSpec::simple(1, 0, 2, 400, 200 * US, Pattern::Ring),
    ];
    let mut calendar = Calendar::default();
    let model = Cluster::new(cfg, jobs, &mut calendar).expect("valid set-up");
    let mut ex = Executive::from_parts(model, calendar);
    let boosted_on_cpu = |m: &Cluster| {
        m.tasks
            .iter()
            .position(|t| t.effective.is_boost() && t.on_cpu.is_some())
    };
    ex.run_while(|m, _| boosted_on_cpu(m).is_none() && !m.all_done());
    let t = boosted_on_cpu(&ex.model).expect("DCS boosted a rank that runs");
    let (node, cpu) = (ex.model.tasks[t].node, ex.model.tasks[t].on_cpu.unwrap());
    ex.model
        .bound(SimEvent::Noise { node, cpu }, &mut ex.calendar);
    assert_eq!(ex.model.counters.noise_held_off, 1);
    assert_eq!(ex.model.counters.noise, 0);
    assert_eq!(
        ex.model.tasks[t].on_cpu,
        Some(cpu),
        "the boosted rank kept its CPU"
    );
}

#[test]
fn uncoordinated_spinning_rings_lose_their_lockstep_to_other_work() {
    // Two fine-grain spinning rings on two single-CPU nodes with aligned
    // ticks: without noise both nodes rotate in step (slowdown ~2); noise
    // shifts each node's rotation, so a rank often spins while its peer is
    // descheduled, as measured on real nodes (3.5-3.9).
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    cfg.cluster.quantum_ns = 1_500 * US;
    cfg.cluster.tick_ns = 4 * MS;
    let rings = || {
        (0..2)
            .map(|id| JobSpec::simple(id, 0, 2, 1_000_000, 20 * US, Pattern::Ring))
            .collect::<Vec<_>>()
    };
    let slowdown = |cfg: &cosched_sim::SimConfig| {
        let p = progress_over(cfg, &rings(), 2_000 * MS).expect("valid");
        (p[0].slowdown + p[1].slowdown) / 2.0
    };
    let quiet = slowdown(&cfg);
    assert!(quiet < 2.2, "in step without noise: {quiet}");
    cfg.cluster.noise_per_s = 28.0;
    cfg.cluster.noise_ns = 144 * US;
    let noisy = slowdown(&cfg);
    assert!(noisy > 2.8, "out of step with noise: {noisy}");
}

#[test]
fn a_sleeper_woken_on_an_idle_cpu_first_pays_the_idle_wakeup() {
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    let job = || {
        vec![JobSpec {
            recv: RecvMode::Block,
            ..JobSpec::simple(0, 0, 2, 10, 100 * US, Pattern::Ring)
        }]
    };
    let plain = response(&run(cfg.clone(), job()), 0);
    cfg.cluster.idle_wakeup_ns = 50 * US;
    let halted = response(&run(cfg.clone(), job()), 0);
    // Each of the 10 iterations wakes a blocked receiver on an idle CPU.
    assert_eq!(halted - plain, 10 * 50 * US);
}

#[test]
fn a_window_measures_rates_like_the_benches() {
    // Two compute-only jobs on one CPU, each alone and together: each gets
    // half the CPU, so its rate slowdown is 2 (plus its switches).
    let cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let jobs = vec![
        JobSpec::simple(0, 0, 1, 1_000_000, MS, Pattern::None),
        JobSpec::simple(1, 0, 1, 1_000_000, MS, Pattern::None),
    ];
    let p = progress_over(&cfg, &jobs, 1_000 * MS).expect("valid");
    for job in &p {
        assert!(
            (990.0..=1000.0).contains(&job.dedicated_iterations_per_s),
            "{job:?}"
        );
        assert!((1.95..=2.05).contains(&job.slowdown), "{job:?}");
    }
}

#[test]
fn a_sleeper_woken_on_a_busy_cpu_pays_the_busy_wakeup() {
    // A blocking ring beside a compute job on each node: the receivers
    // wake while their CPU runs the compute job.
    let mut cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    let jobs = || {
        vec![
            JobSpec {
                recv: RecvMode::Block,
                ..JobSpec::simple(0, 0, 2, 10, 100 * US, Pattern::Ring)
            },
            JobSpec::simple(1, 0, 2, 100, MS, Pattern::None),
        ]
    };
    let plain = response(&run(cfg.clone(), jobs()), 0);
    cfg.cluster.idle_wakeup_ns = 0;
    cfg.cluster.busy_wakeup_ns = 50 * US;
    let busy = response(&run(cfg.clone(), jobs()), 0);
    assert!(busy > plain, "busy wakeups cost nothing: {plain} -> {busy}");
}

/// One rank that computes 100 µs and sleeps `io` per iteration, alone on
/// its node: its CPU halts while it sleeps.
fn sleeper(io: u64) -> Vec<JobSpec> {
    vec![JobSpec {
        io_ns: io,
        ..JobSpec::simple(0, 0, 1, 10, 100 * US, Pattern::None)
    }]
}

#[test]
fn a_sleep_ends_the_timer_slack_late() {
    let mut cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let plain = response(&run(cfg.clone(), sleeper(2 * MS)), 0);
    cfg.cluster.timer_slack_ns = 50 * US;
    let slack = response(&run(cfg.clone(), sleeper(2 * MS)), 0);
    assert_eq!(slack - plain, 10 * 50 * US);
}

#[test]
fn a_cpu_halted_for_long_wakes_its_sleeper_later_than_after_a_short_halt() {
    let mut cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    cfg.cluster.idle_wakeup_ns = 16 * US;
    let plain = |io| response(&run(cfg.clone(), sleeper(io)), 0);
    let (short, long) = (plain(MS), plain(10 * MS));
    cfg.cluster.long_halt_after_ns = 2 * MS;
    cfg.cluster.long_halt_wakeup_per_ms_ns = 7 * US;
    let halted = |io| response(&run(cfg.clone(), sleeper(io)), 0);
    // A 1 ms halt is short: nothing changes.
    assert_eq!(halted(MS), short);
    // Each wakeup ends a halt of the sleep plus the wakeup latency, 8 ms
    // and 10 µs past the threshold: 7 µs per ms of it. The last of the 10
    // sleeps ends the job, so 9 wakeups run something.
    let past = 10 * MS + cfg.cluster.wakeup_latency_ns - 2 * MS;
    assert_eq!(halted(10 * MS) - long, 9 * (past * 7 * US / MS));
}
