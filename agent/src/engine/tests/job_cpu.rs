//! Jobs' CPU time as a gang slice switch reads it.
use cosched_agent_common::CpuSlot;

use super::*;

/// Job 7 with task 100 (10 s on CPU by its own counters) adopted on CPU 0.
fn job_seven() -> Engine<FakeKernel> {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(7, "a", &[100], None).unwrap();
    e.k.stats_mut(100).oncpu_ns = 10_000_000_000;
    e
}

#[test]
fn a_job_with_a_per_job_counter_is_read_from_it_plus_its_run_under_way() {
    let mut e = job_seven();
    e.k.job_cpu.insert(7, 2_000_000_000);
    e.k.cpus.insert(
        0,
        CpuSlot {
            tid: 100,
            job_id: 7,
            managed: 1,
            prev_tid: 0,
            since_ns: 4_000_000,
        },
    );
    let cpu = e.jobs_cpu_seconds([7], 5_000_000);
    // 2 s of completed runs + 1 ms running now; the task's own counter
    // (10 s) is not what was read.
    assert!((cpu[&7] - 2.001).abs() < 1e-9, "{cpu:?}");
}

#[test]
fn a_job_without_a_counter_is_read_task_by_task_and_an_unknown_one_left_out() {
    let e = job_seven();
    let cpu = e.jobs_cpu_seconds([7, 8], 5_000_000);
    assert_eq!(cpu.keys().copied().collect::<Vec<_>>(), [7]);
    assert!((cpu[&7] - 10.0).abs() < 1e-9, "{cpu:?}");
}

#[test]
fn a_job_reserved_afresh_does_not_inherit_the_counter_of_an_earlier_job_of_its_id() {
    let mut e = engine();
    e.k.job_cpu.insert(7, 5_000_000_000);
    e.reserve_job(7, "new", 0, None).unwrap();
    assert!(!e.k.job_cpu.contains_key(&7));
}

#[test]
fn a_finished_job_drops_its_counter() {
    let mut e = job_seven();
    e.k.job_cpu.insert(7, 2_000_000_000);
    e.k.exit(100, 10);
    assert_eq!(e.poll(20, 0.0), vec![7]);
    assert!(!e.k.job_cpu.contains_key(&7));
}
