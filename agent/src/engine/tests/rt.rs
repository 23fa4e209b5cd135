//! Real-time jobs over the fake kernel: frame counting, the class overlay
//! (2DCS-TDM from the coordinator, 2DCS-PS from the config), SCHED_DEADLINE
//! and its fallback, and nothing left behind.
use std::path::{Path, PathBuf};

use cosched_policy::{
    classes::{Class, Division, FairnessRatio},
    local::{Level, Reason},
};
use cosched_proto::{class::parse_class, wire::JobClass};

use super::*;
use crate::{
    classes::{BeUnderRt, ClassMode},
    kernel::fake_counters::record,
};

const MS: u64 = 1_000_000;
/// d = 10 ms, b = 2, τ = 2 ms: windows of 20 ms, a budget of 4 ms (plus
/// the default slack of 20 %: 4.8 ms).
const SPEC: &str = "rt:10000000:2:2000000";

/// An engine with `[classes]` set to `classes`, its clock at 1 ms.
fn rt_engine(classes: &str) -> Engine<FakeKernel> {
    let mut e = engine_configured(&format!("state_dir = \"/st\"\n[classes]\n{classes}"));
    e.k.now = MS;
    e
}

/// Launches job `job` of class `class` as process `pid`, as the daemon
/// does: reserve, class (its counter directory), take the process.
fn launch_rt(e: &mut Engine<FakeKernel>, job: u32, pid: u32, class: &str) -> PathBuf {
    e.k.spawn(pid, SchedAttr::other(0));
    e.reserve_job(job, &format!("rt{job}"), 0, None).unwrap();
    let dir = e
        .set_job_class(job, &parse_class(class).unwrap(), true)
        .unwrap()
        .expect("a launched RT job has its own directory");
    e.manage_process(job, pid).unwrap();
    dir
}

/// Process `pid` reports `frames` so far through its counter in `dir`.
fn report(e: &mut Engine<FakeKernel>, dir: &Path, pid: u32, frames: u64) {
    let counter = record(pid, MS + 1, frames, frames * 2 * MS);
    e.k.counters
        .write(&dir.join(format!("{pid}.frames")), 0, &counter);
}

/// Advances the clock to `at_ns` and runs the tick.
fn tick_at(e: &mut Engine<FakeKernel>, at_ns: u64) {
    e.k.now = at_ns;
    e.policy_tick();
}

fn is_boost(a: SchedAttr) -> bool {
    a.policy == SchedPolicy::Fifo
}

fn tdm() -> ClassMode {
    ClassMode::Tdm {
        ratio: FairnessRatio::new(2, 1).unwrap(),
        rt_band: None,
        be_under_rt: BeUnderRt::Capped,
        period_ns: 0,
    }
}

fn division(class: Class, at_ns: u64) -> Division {
    Division {
        number: 0,
        class,
        start_ns: at_ns,
        end_ns: at_ns + 10 * MS,
    }
}

#[test]
fn an_rt_task_that_completes_its_frames_is_seen_satisfied_and_demoted_until_its_window_ends() {
    let mut e = rt_engine("mode = \"ps\"");
    let dir = launch_rt(&mut e, 1, 100, SPEC);
    assert_eq!(dir, PathBuf::from("/st/rt/1"));
    assert!(e.k.counters.dir_exists(&dir));
    tick_at(&mut e, 2 * MS);
    let a = e.k.attr(100);
    assert!(is_boost(a) && (21..=39).contains(&a.priority), "due: {a:?}");
    report(&mut e, &dir, 100, 2);
    tick_at(&mut e, 6 * MS);
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Idle, "satisfied: held");
    let info = e.job_info(1).unwrap();
    let rt = info.rt.unwrap();
    assert_eq!(info.class, SPEC);
    assert_eq!(
        (rt.frames, rt.processes[0].state.as_str()),
        (2, "satisfied")
    );
    tick_at(&mut e, 18 * MS);
    assert_eq!(
        e.k.attr(100).policy,
        SchedPolicy::Idle,
        "until its window ends"
    );
    tick_at(&mut e, 22 * MS);
    assert!(is_boost(e.k.attr(100)), "due again in its next window");
    let rt = e.job_info(1).unwrap().rt.unwrap();
    assert_eq!((rt.expected, rt.met, rt.missed), (2, 2, 0));
}

#[test]
fn an_rt_process_that_never_reports_a_frame_misses_every_frame_and_the_miss_metric_counts_them() {
    let mut e = rt_engine("mode = \"off\"");
    launch_rt(&mut e, 1, 100, SPEC);
    for t in (2..=62).step_by(2) {
        tick_at(&mut e, t * MS);
    }
    assert_eq!(
        e.k.attr(100),
        SchedAttr::other(0),
        "no class mode: untouched"
    );
    e.poll(62 * MS, 0.0);
    let rt = e.job_info(1).unwrap().rt.unwrap();
    // Windows [1, 21), [21, 41), [41, 61) ms closed, 2 frames due in each.
    assert_eq!((rt.windows, rt.expected, rt.missed), (3, 6, 6));
    assert_eq!(rt.miss_rate, 1.0);
    assert_eq!(rt.processes[0].sched, "none");
    let text = e.metrics.render();
    for want in [
        "cosched_rt_frames_missed_total{job=\"rt1\",job_id=\"1\"} 6",
        "cosched_rt_frames_expected_total{job=\"rt1\",job_id=\"1\"} 6",
        "cosched_rt_frames_total{job=\"rt1\",job_id=\"1\"} 0",
        "cosched_rt_miss_rate{job=\"rt1\",job_id=\"1\"} 1",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
}

#[test]
fn an_overrunning_rt_process_is_throttled_and_the_other_keeps_its_priority() {
    let mut e = rt_engine("mode = \"ps\"");
    launch_rt(&mut e, 1, 100, SPEC);
    launch_rt(&mut e, 2, 200, SPEC);
    tick_at(&mut e, 2 * MS);
    let before = e.k.attr(200);
    assert!(is_boost(e.k.attr(100)) && is_boost(before));
    // 100 computes past its budget (4.8 ms) without a frame.
    e.k.stats_mut(100).oncpu_ns = 6 * MS;
    e.k.stats_mut(200).oncpu_ns = MS;
    let calls = e.k.calls.len();
    tick_at(&mut e, 8 * MS);
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Idle, "throttled");
    assert_eq!(e.k.attr(200), before, "the other keeps its priority");
    assert!(
        !e.k.calls[calls..]
            .iter()
            .any(|c| matches!(c, crate::kernel::fake::Call::SetAttr(200, _))),
        "nothing was done to it"
    );
    let rt = e.job_info(1).unwrap().rt.unwrap();
    assert_eq!(rt.processes[0].state, "throttled");
    tick_at(&mut e, 22 * MS);
    assert!(
        is_boost(e.k.attr(100)),
        "its next window gives it a new budget"
    );
    assert_eq!(e.job_info(1).unwrap().rt.unwrap().overruns, 1);
}

#[test]
fn in_the_rt_division_rt_tasks_are_boosted_in_deadline_order_and_a_be_boost_is_capped_at_normal() {
    let mut e = rt_engine("");
    launch_rt(&mut e, 1, 100, "rt:10000000:1:1000000");
    launch_rt(&mut e, 2, 200, "rt:20000000:1:1000000");
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(3, "be", &[300], None).unwrap();
    e.set_class_mode(Some(tdm())).unwrap();
    e.division_started(division(Class::RealTime, MS));
    let (a, b) = (e.k.attr(100), e.k.attr(200));
    assert!(is_boost(a) && is_boost(b), "{a:?} {b:?}");
    assert!(
        a.priority > b.priority,
        "earlier deadline first: {a:?} {b:?}"
    );
    // The BE task's policy boosts it: while the RT class runs, Normal.
    e.reg.task_mut(300).unwrap().wanted = Some((Level::Boost { prio: 10 }, Reason::ArrivalBoost));
    e.realize(300, None);
    assert_eq!(e.k.attr(300), SchedAttr::other(0), "capped at normal");
    assert!(
        e.status().classes.starts_with("tdm 2:1 (rt division)"),
        "{}",
        e.status().classes
    );
}

#[test]
fn in_the_be_division_rt_tasks_are_demoted_and_be_tasks_follow_the_local_policy() {
    let mut e = rt_engine("");
    launch_rt(&mut e, 1, 100, SPEC);
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(3, "be", &[300], None).unwrap();
    e.set_class_mode(Some(tdm())).unwrap();
    e.reg.task_mut(300).unwrap().wanted = Some((Level::Boost { prio: 10 }, Reason::ArrivalBoost));
    e.division_started(division(Class::RealTime, MS));
    assert_eq!(e.k.attr(300), SchedAttr::other(0));
    // A BE division that ends (9 ms) before the RT frame is due (10 ms).
    e.division_started(Division {
        end_ns: 9 * MS,
        ..division(Class::BestEffort, 8 * MS)
    });
    assert_eq!(
        e.k.attr(100).policy,
        SchedPolicy::Idle,
        "RT only in idle time"
    );
    let be = e.k.attr(300);
    assert_eq!(
        (be.policy, be.priority),
        (SchedPolicy::Fifo, 10),
        "the policy's boost"
    );
    e.set_class_mode(None).unwrap();
    assert_eq!(
        e.k.attr(100),
        SchedAttr::other(0),
        "no class mode: the policy's"
    );
}

#[test]
fn an_rt_frame_due_before_the_be_division_ends_keeps_its_priority_in_that_division() {
    let mut e = rt_engine("");
    launch_rt(&mut e, 1, 100, SPEC);
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(3, "be", &[300], None).unwrap();
    e.set_class_mode(Some(tdm())).unwrap();
    e.division_started(division(Class::RealTime, MS));
    // The BE division runs 8 to 18 ms; the RT frame is due at 10 ms: it
    // cannot wait for the next RT division.
    e.division_started(division(Class::BestEffort, 8 * MS));
    assert!(is_boost(e.k.attr(100)), "{:?}", e.k.attr(100));
    assert_eq!(e.k.attr(300), SchedAttr::other(0), "BE runs below it");
}

#[test]
fn under_ps_a_be_class_returning_after_a_long_sleep_does_not_take_the_cpu_from_a_due_rt_task_for_long()
 {
    let mut e = rt_engine("mode = \"ps\"\nratio = \"2:1\"");
    // Frames due far ahead: one frame of 1 ms per second.
    launch_rt(&mut e, 1, 100, "rt:1000000000:1:1000000");
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(3, "be", &[300], None).unwrap();
    // The BE task blocks for a second (a voluntary switch-out, no message).
    *e.k.stats_mut(300) = TaskStats {
        switches_in: 1,
        switches_out_voluntary: 1,
        ..TaskStats::default()
    };
    let mut t = 2 * MS;
    while t < 1000 * MS {
        tick_at(&mut e, t);
        t += MS;
    }
    assert!(is_boost(e.k.attr(100)));
    // It wakes: it gets its share from now on, not the second it slept.
    e.k.stats_mut(300).on_cpu = 1;
    let mut held = 0;
    let mut longest = 0;
    let mut run = 0;
    for _ in 0..30 {
        tick_at(&mut e, t);
        t += MS;
        if e.k.attr(100).policy == SchedPolicy::Idle {
            held += 1;
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    assert!(
        (8..=12).contains(&held),
        "BE held RT back {held} of 30 ticks"
    );
    assert_eq!(longest, 1, "one tick at a time");
}

#[test]
fn forgetting_an_rt_job_removes_its_counter_directory_and_every_priority_it_set() {
    let mut e = rt_engine("mode = \"ps\"");
    let dir = launch_rt(&mut e, 1, 100, SPEC);
    fork(&mut e, 100, 101, 1);
    tick_at(&mut e, 2 * MS);
    report(&mut e, &dir, 100, 1);
    assert!(is_boost(e.k.attr(100)) && is_boost(e.k.attr(101)));
    e.release_job(1).unwrap();
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    assert_eq!(e.k.attr(101), SchedAttr::other(0));
    assert!(!e.k.counters.dir_exists(&dir), "the counters went with it");
    assert!(e.rt_readers.is_empty());
    // A job that ends: its directory goes when it finishes.
    let dir = launch_rt(&mut e, 2, 200, SPEC);
    tick_at(&mut e, 4 * MS);
    e.k.exit(200, 5 * MS);
    assert_eq!(e.poll(6 * MS, 0.0), vec![2]);
    assert!(!e.k.counters.dir_exists(&dir));
    e.forget_job(2).unwrap();
    assert!(!e.metrics.render().contains("job_id=\"2\""));
}

#[test]
fn sched_deadline_refused_by_the_kernel_falls_back_to_fifo_with_a_warning() {
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    launch_rt(&mut e, 1, 100, SPEC);
    tick_at(&mut e, 2 * MS);
    let a = e.k.attr(100);
    assert_eq!(a.policy, SchedPolicy::Deadline, "{a:?}");
    // τ plus the 20 % slack; deadline and period d.
    assert_eq!(
        (a.runtime_ns, a.deadline_ns, a.period_ns),
        (2_400_000, 10 * MS, 10 * MS)
    );
    assert_eq!(
        e.job_info(1).unwrap().rt.unwrap().processes[0].sched,
        "deadline"
    );
    e.k.deny_deadline = true;
    launch_rt(&mut e, 2, 200, SPEC);
    tick_at(&mut e, 4 * MS);
    let b = e.k.attr(200);
    assert!(
        is_boost(b) && (21..=39).contains(&b.priority),
        "FIFO instead: {b:?}"
    );
    assert!(e.reg.task(200).unwrap().deadline_refused);
    assert_eq!(
        e.job_info(2).unwrap().rt.unwrap().processes[0].sched,
        "fifo"
    );
    assert_eq!(e.metrics.rt_deadline_refused.get(), 1);
    e.poll(5 * MS, 0.0);
    let text = e.metrics.render();
    assert!(
        text.contains("cosched_rt_tasks{sched=\"deadline\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("cosched_rt_tasks{sched=\"fifo\"} 1"),
        "{text}"
    );
}

#[test]
fn a_held_rt_task_at_sched_deadline_keeps_its_reservation_instead_of_leaving_sched_deadline() {
    // Leaving SCHED_DEADLINE throttled and coming back before the 0-lag
    // time leaves a task throttled for good (Linux 6.18): a hold must not
    // take it out of SCHED_DEADLINE; its reservation bounds it.
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    e.set_edf_probe(Ok(()));
    let dir = launch_rt(&mut e, 1, 100, SPEC);
    tick_at(&mut e, 2 * MS);
    let reserved = e.k.attr(100);
    assert_eq!(reserved.policy, SchedPolicy::Deadline, "{reserved:?}");
    report(&mut e, &dir, 100, 2);
    tick_at(&mut e, 6 * MS);
    let rt = e.job_info(1).unwrap().rt.unwrap();
    assert_eq!(rt.processes[0].state, "satisfied", "held by the overlay");
    assert_eq!(e.k.attr(100), reserved, "still at its reservation");
    e.poll(7 * MS, 0.0);
    assert!(
        e.metrics
            .render()
            .contains("cosched_rt_tasks{sched=\"held\"} 1")
    );
    tick_at(&mut e, 22 * MS);
    assert_eq!(e.k.attr(100), reserved, "due again: the same reservation");
    // A task refused SCHED_DEADLINE runs by FIFO priority and is held as
    // before (SCHED_IDLE).
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    e.k.deny_deadline = true;
    let dir = launch_rt(&mut e, 2, 200, SPEC);
    tick_at(&mut e, 2 * MS);
    assert!(is_boost(e.k.attr(200)), "{:?}", e.k.attr(200));
    report(&mut e, &dir, 200, 2);
    tick_at(&mut e, 6 * MS);
    assert_eq!(e.k.attr(200).policy, SchedPolicy::Idle);
}

#[test]
fn a_node_whose_kernel_refused_the_deadline_probe_runs_edf_by_fifo_and_says_so() {
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    e.set_edf_probe(Err("Operation not permitted (os error 1)".into()));
    launch_rt(&mut e, 1, 100, SPEC);
    tick_at(&mut e, 2 * MS);
    let a = e.k.attr(100);
    // Not even tried: FIFO in the band straight away, no per-task refusal.
    assert!(is_boost(a) && (21..=39).contains(&a.priority), "{a:?}");
    assert_eq!(e.metrics.rt_deadline_refused.get(), 0);
    assert_eq!(
        e.job_info(1).unwrap().rt.unwrap().processes[0].sched,
        "fifo"
    );
    assert!(
        e.status().classes.contains("edf fifo (deadline refused"),
        "{}",
        e.status().classes
    );
    e.poll(3 * MS, 0.0);
    let text = e.metrics.render();
    assert!(
        text.contains("cosched_rt_edf_mechanism{mechanism=\"fifo\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("cosched_rt_edf_mechanism{mechanism=\"deadline\"} 0"),
        "{text}"
    );
}

#[test]
fn a_node_whose_kernel_accepted_the_deadline_probe_reports_deadline_in_force() {
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    e.set_edf_probe(Ok(()));
    launch_rt(&mut e, 1, 100, SPEC);
    tick_at(&mut e, 2 * MS);
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Deadline);
    assert!(
        e.status().classes.ends_with("edf deadline"),
        "{}",
        e.status().classes
    );
    e.poll(3 * MS, 0.0);
    assert!(
        e.metrics
            .render()
            .contains("cosched_rt_edf_mechanism{mechanism=\"deadline\"} 1")
    );
}

#[test]
fn an_rt_boost_and_a_deadline_reservation_are_undone_at_shutdown() {
    let mut e = rt_engine("mode = \"ps\"\nedf = \"deadline\"");
    launch_rt(&mut e, 1, 100, SPEC);
    tick_at(&mut e, 2 * MS);
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Deadline);
    e.k.spawn(200, SchedAttr::other(-2));
    e.k.deny_deadline = true;
    e.reserve_job(2, "fifo", 0, None).unwrap();
    e.set_job_class(2, &parse_class(SPEC).unwrap(), false)
        .unwrap();
    e.manage_process(2, 200).unwrap();
    tick_at(&mut e, 4 * MS);
    assert!(is_boost(e.k.attr(200)));
    let dir = PathBuf::from("/st/rt/1");
    let report = e.shutdown();
    assert_eq!(report.restored, 2);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    assert_eq!(e.k.attr(200), SchedAttr::other(-2));
    assert!(!e.k.counters.dir_exists(&dir));
}

#[test]
fn a_class_no_schedule_can_meet_is_refused_before_anything_changes() {
    let mut e = rt_engine("");
    e.k.spawn(100, SchedAttr::other(0));
    let bad = JobClass::RealTime {
        period_ns: 1_000,
        frames: 1,
        work_ns: 2_000,
    };
    let err = e
        .adopt_with(1, "a", &[100], None, false, &bad)
        .unwrap_err()
        .to_string();
    assert!(err.contains("exceeds the period"), "{err}");
    assert!(e.reg.job(1).is_none() && e.k.tracked.is_empty());
}

#[test]
fn an_adopted_rt_process_reports_where_its_environment_says_and_frames_from_before_do_not_count() {
    let mut e = rt_engine("");
    e.k.spawn(100, SchedAttr::other(0));
    let dir = PathBuf::from("/home/u/rt");
    e.k.rt_dir_env.insert(100, dir.clone());
    e.k.uids.insert(100, 1000);
    let counter = record(100, 0, 50, 0);
    e.k.counters.write(&dir.join("100.frames"), 1000, &counter);
    e.adopt_with(1, "a", &[100], None, false, &parse_class(SPEC).unwrap())
        .unwrap();
    tick_at(&mut e, 2 * MS);
    let counter = record(100, 0, 53, 0);
    e.k.counters.write(&dir.join("100.frames"), 1000, &counter);
    tick_at(&mut e, 4 * MS);
    assert_eq!(e.job_info(1).unwrap().rt.unwrap().frames, 3);
    // Another user's file under its name is not believed.
    e.k.spawn(200, SchedAttr::other(0));
    e.k.uids.insert(200, 1000);
    let theirs = record(200, 0, 9, 0);
    e.k.counters.write(
        &PathBuf::from(cosched_agent_common::rt_frames::DEFAULT_DIR).join("200.frames"),
        0,
        &theirs,
    );
    e.adopt_with(2, "b", &[200], None, false, &parse_class(SPEC).unwrap())
        .unwrap();
    tick_at(&mut e, 6 * MS);
    let rt = e.job_info(2).unwrap().rt.unwrap();
    assert_eq!(rt.frames, 0);
    let why = rt.processes[0].counter_error.clone().unwrap();
    assert!(why.contains("uid 0"), "{why}");
}

#[test]
fn the_frame_reports_for_the_coordinator_sum_the_jobs_processes() {
    let mut e = rt_engine("");
    let dir = launch_rt(&mut e, 1, 100, SPEC);
    report(&mut e, &dir, 100, 1);
    tick_at(&mut e, 2 * MS);
    report(&mut e, &dir, 100, 4);
    tick_at(&mut e, 4 * MS);
    tick_at(&mut e, 22 * MS);
    let reports = e.rt_frame_reports();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!((r.job, r.frames), (1, 4));
    assert_eq!(
        (r.totals.expected, r.totals.met, r.totals.missed),
        (2, 2, 0)
    );
    assert_eq!(r.work_p95_ns, Some(2 * MS));
}

#[test]
fn the_agent_runs_above_the_rt_band_while_the_class_overlay_gives_rt_tasks_priorities() {
    let mut off = rt_engine("mode = \"off\"");
    launch_rt(&mut off, 1, 100, SPEC);
    assert_eq!(off.k.own_attr.policy, SchedPolicy::Other, "nothing to end");
    let mut e = rt_engine("mode = \"ps\"");
    launch_rt(&mut e, 1, 100, SPEC);
    let own = e.k.own_attr;
    assert_eq!((own.policy, own.priority), (SchedPolicy::Fifo, 50));
    e.k.exit(100, 3 * MS);
    e.poll(4 * MS, 0.0);
    assert_eq!(e.k.own_attr.policy, SchedPolicy::Other, "the RT job ended");
}

#[test]
fn tdm_without_divisions_from_the_coordinator_falls_back_to_its_own_clock_and_says_so_in_metrics() {
    let mut e = rt_engine("");
    launch_rt(&mut e, 1, 100, SPEC);
    e.set_class_mode(Some(ClassMode::Tdm {
        ratio: FairnessRatio::new(2, 1).unwrap(),
        rt_band: None,
        be_under_rt: BeUnderRt::Capped,
        period_ns: 30 * MS,
    }))
    .unwrap();
    e.division_started(division(Class::RealTime, MS));
    tick_at(&mut e, 10 * MS);
    assert_eq!(e.metrics.tdm_fallback_active.get(), 0);
    // No division for more than the grace time (3 × Δ).
    for t in (20..=130).step_by(5) {
        tick_at(&mut e, t * MS);
    }
    assert_eq!(e.metrics.tdm_fallback_active.get(), 1);
    assert_eq!(e.metrics.tdm_fallbacks.get(), 1);
    assert!(
        e.status().classes.contains("local clock"),
        "{}",
        e.status().classes
    );
    // The coordinator's divisions resume.
    e.division_started(division(Class::BestEffort, 131 * MS));
    assert_eq!(e.metrics.tdm_fallback_active.get(), 0);
    assert_eq!(e.metrics.tdm_fallbacks.get(), 1, "entered once");
}

#[test]
fn a_gated_rt_job_gets_a_pending_gate_then_the_instant_its_coordinator_chose() {
    use cosched_agent_common::first_frame::{FirstFrameGate, GateState};
    let mut e = rt_engine("mode = \"ps\"");
    let dir = launch_rt(&mut e, 7, 70, SPEC);
    e.gate_first_frame(7, 600 * MS).unwrap();
    assert_eq!(
        e.k.first_frame_gates.get(&dir),
        Some(&FirstFrameGate::pending(600 * MS))
    );
    assert!(e.open_first_frame(7, 123 * MS).unwrap());
    let gate = e.k.first_frame_gates[&dir];
    assert_eq!(gate.state(), GateState::At(123 * MS));
    assert_eq!(gate.max_wait_ns, 600 * MS, "the bound stays the launch's");
}

#[test]
fn a_first_frame_instant_for_a_job_launched_without_a_gate_is_ignored() {
    let mut e = rt_engine("mode = \"ps\"");
    launch_rt(&mut e, 7, 70, SPEC);
    assert!(!e.open_first_frame(7, 123 * MS).unwrap(), "not gated");
    assert!(!e.open_first_frame(8, 123 * MS).unwrap(), "unknown job");
    assert!(e.k.first_frame_gates.is_empty());
    // A best-effort job has no counter directory to gate.
    e.k.spawn(90, SchedAttr::other(0));
    e.reserve_job(9, "be", 0, None).unwrap();
    assert!(e.gate_first_frame(9, MS).is_err());
    assert!(e.k.first_frame_gates.is_empty());
}
