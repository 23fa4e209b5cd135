//! 1GS's RT rows over the fake kernel: an RT job's processes run at a
//! real-time priority inside their own rows, lose it at the row's end
//! (stopped, and back to their own attributes when gang mode ends), over
//! their budget, and at shutdown; the agent holds its periodic work only
//! while such a row runs with the job past its start-up.
use std::path::{Path, PathBuf};

use cosched_proto::class::parse_class;

use super::*;
use crate::{classes::CoordinatorClasses, kernel::fake_counters::record};

const MS: u64 = 1_000_000;
/// d = 10 ms, b = 2, τ = 2 ms: a budget of 4.8 ms per 20 ms window.
const SPEC: &str = "rt:10000000:2:2000000";

/// An engine under the coordinator's 1GS (class overlay held off), RT job
/// 1 (process 100) and BE job 2 (process 200) launched.
fn one_level_gang() -> (Engine<FakeKernel>, PathBuf) {
    let mut e = engine_configured("state_dir = \"/st\"");
    e.k.now = MS;
    e.set_coordinator_classes(CoordinatorClasses::Off).unwrap();
    e.k.spawn(100, SchedAttr::other(0));
    e.reserve_job(1, "rt", 0, None).unwrap();
    let dir = e
        .set_job_class(1, &parse_class(SPEC).unwrap(), true)
        .unwrap()
        .unwrap();
    e.manage_process(1, 100).unwrap();
    e.k.spawn(200, SchedAttr::other(0));
    e.reserve_job(2, "be", 0, None).unwrap();
    e.manage_process(2, 200).unwrap();
    (e, dir)
}

fn row(job: JobId) -> Option<Gang> {
    Some(Gang {
        active: [job].into(),
        strict: true,
    })
}

fn publish(e: &mut Engine<FakeKernel>, dir: &Path, pid: u32) {
    let counter = record(pid, MS + 1, 0, 0);
    e.k.counters
        .write(&dir.join(format!("{pid}.frames")), 0, &counter);
}

fn tick_at(e: &mut Engine<FakeKernel>, at_ns: u64) {
    e.k.now = at_ns;
    e.policy_tick();
}

fn fifo(prio: u32) -> (SchedPolicy, u32) {
    (SchedPolicy::Fifo, prio)
}

fn sched(e: &Engine<FakeKernel>, tid: u32) -> (SchedPolicy, u32) {
    let a = e.k.attr(tid);
    (a.policy, a.priority)
}

#[test]
fn under_1gs_an_rt_jobs_process_runs_at_the_top_of_the_rt_band_in_its_own_row() {
    let (mut e, _) = one_level_gang();
    e.set_gang(row(1));
    assert_eq!(sched(&e, 100), fifo(39), "below the agent (50)");
    assert!(!e.k.tasks[&100].stopped);
    assert!(e.k.tasks[&200].stopped, "the BE job waits for its row");
    // The BE job's row: the RT process is stopped; the BE task runs at its
    // own attributes.
    e.set_gang(row(2));
    assert!(e.k.tasks[&100].stopped);
    assert_eq!(e.k.attr(200), SchedAttr::other(0));
    // Its next row: priority again.
    e.set_gang(row(1));
    assert_eq!(sched(&e, 100), fifo(39));
    assert!(!e.k.tasks[&100].stopped);
}

#[test]
fn when_gang_mode_ends_the_rt_process_gets_its_own_attributes_back() {
    let (mut e, _) = one_level_gang();
    e.set_gang(row(1));
    e.set_gang(row(2));
    e.set_gang(None);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    assert!(!e.k.tasks[&100].stopped);
}

#[test]
fn a_demoting_row_switch_takes_the_priority_away_at_once() {
    let (mut e, _) = one_level_gang();
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    assert_eq!(sched(&e, 100), fifo(39));
    e.set_gang(Some(Gang {
        active: [2].into(),
        strict: false,
    }));
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Idle);
}

#[test]
fn an_rt_process_over_its_budget_loses_its_rows_priority_until_its_next_window() {
    let (mut e, dir) = one_level_gang();
    publish(&mut e, &dir, 100);
    e.set_gang(row(1));
    tick_at(&mut e, 2 * MS);
    assert_eq!(sched(&e, 100), fifo(39));
    // 6 ms of CPU without a frame: past its 4.8 ms budget.
    e.k.stats_mut(100).oncpu_ns = 6 * MS;
    tick_at(&mut e, 8 * MS);
    assert_eq!(
        e.k.attr(100),
        SchedAttr::other(0),
        "throttled: its own attributes"
    );
    tick_at(&mut e, 22 * MS);
    assert_eq!(sched(&e, 100), fifo(39), "its next window");
}

#[test]
fn the_rows_priority_is_undone_at_shutdown() {
    let (mut e, _) = one_level_gang();
    e.set_gang(row(1));
    assert_eq!(sched(&e, 100), fifo(39));
    e.shutdown();
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    assert!(!e.k.tasks[&200].stopped);
}

#[test]
fn outside_1gs_a_gang_slice_leaves_an_rt_process_at_its_policys_level() {
    let (mut e, _) = one_level_gang();
    e.set_coordinator_classes(CoordinatorClasses::Config)
        .unwrap();
    e.set_gang(row(1));
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    assert!(!e.in_rt_row());
}

#[test]
fn periodic_work_is_held_only_in_an_rt_row_whose_processes_are_past_start_up() {
    let (mut e, dir) = one_level_gang();
    e.set_gang(row(1));
    assert!(
        !e.in_rt_row(),
        "start-up: the RT tick must see the counter appear"
    );
    publish(&mut e, &dir, 100);
    tick_at(&mut e, 2 * MS);
    assert!(e.in_rt_row());
    e.set_gang(row(2));
    assert!(!e.in_rt_row(), "a BE row");
    e.set_gang(None);
    assert!(!e.in_rt_row());
}
