//! Frame accounting: windows, misses, deadlines and budgets of RT processes.

use super::support::ms;
use crate::classes::{
    BudgetParams, FrameReading, FrameState, JobFrames, ProcessFrames, RtSpec, WindowReport,
};
use crate::local::TaskId;

/// d = 10 ms, b = 4 (Γ = 40 ms), τ = 2 ms (budget 8 ms per window).
fn spec() -> RtSpec {
    RtSpec::new(ms(10), 4, ms(2)).unwrap()
}

fn process(start_ns: u64) -> ProcessFrames {
    ProcessFrames::new(
        spec(),
        start_ns,
        FrameReading::default(),
        BudgetParams::default(),
    )
}

fn reading(frames: u64, cpu_ms: u64) -> FrameReading {
    FrameReading {
        frames,
        cpu_ns: ms(cpu_ms),
    }
}

#[test]
fn a_process_that_never_reports_a_frame_misses_every_frame() {
    let mut p = process(0);
    assert_eq!(p.tick(ms(39)), vec![]);
    let first = p.tick(ms(40));
    assert_eq!(
        first,
        vec![WindowReport {
            window: 0,
            windows: 1,
            start_ns: 0,
            end_ns: ms(40),
            frames_done: 0,
            met: 0,
            missed: 4,
            cpu_ns: 0,
            overran: false,
        }]
    );
    assert_eq!(first[0].miss_rate_ppm(), 1_000_000);
    // The counter is read but never moves.
    assert_eq!(p.observe(ms(41), reading(0, 0)), vec![]);
    // Nine more windows pass unread: one merged report.
    let rest = p.tick(ms(400));
    assert_eq!(rest.len(), 1);
    assert_eq!((rest[0].window, rest[0].windows), (1, 9));
    assert_eq!((rest[0].met, rest[0].missed), (0, 36));
    assert_eq!(rest[0].end_ns, ms(400));
    let totals = p.totals();
    assert_eq!(
        (totals.windows, totals.expected, totals.met, totals.missed),
        (10, 40, 0, 40)
    );
    assert_eq!(totals.miss_rate_ppm(), 1_000_000);
    // Still due: its next frame is the first of window 10.
    assert_eq!(
        p.state(),
        FrameState::Due {
            deadline_ns: ms(410)
        }
    );
}

#[test]
fn a_window_short_of_frames_misses_the_shortfall() {
    let mut p = process(0);
    p.observe(ms(30), reading(3, 6));
    let closed = p.tick(ms(40));
    assert_eq!((closed[0].met, closed[0].missed), (3, 1));
    assert_eq!(closed[0].miss_rate_ppm(), 250_000);
}

#[test]
fn the_next_deadline_follows_the_frames_done_and_b_frames_satisfy_until_the_window_ends() {
    let mut p = process(0);
    assert_eq!(
        p.state(),
        FrameState::Due {
            deadline_ns: ms(10)
        }
    );
    p.observe(ms(5), reading(1, 1));
    assert_eq!(
        p.state(),
        FrameState::Due {
            deadline_ns: ms(20)
        }
    );
    // The counter jumps by three: all count.
    p.observe(ms(12), reading(4, 5));
    assert_eq!(
        p.state(),
        FrameState::Satisfied {
            until_ns: ms(40),
            next_deadline_ns: ms(50)
        }
    );
    assert_eq!(p.tick(ms(40))[0].missed, 0);
    assert_eq!(
        p.state(),
        FrameState::Due {
            deadline_ns: ms(50)
        }
    );
}

#[test]
fn a_late_reading_credits_the_window_that_ended_first() {
    let mut p = process(0);
    p.observe(ms(35), reading(3, 6));
    // Read 5 ms after the window ended: two more frames, one of which must
    // have completed the first window for all the process knows.
    let closed = p.observe(ms(45), reading(5, 10));
    assert_eq!(closed.len(), 1);
    assert_eq!((closed[0].frames_done, closed[0].missed), (4, 0));
    assert_eq!(closed[0].cpu_ns, ms(8));
    assert!(!closed[0].overran);
    // The rest goes to the open window.
    assert_eq!(p.frames_in_window(), 1);
    assert_eq!(p.cpu_in_window_ns(), ms(2));
}

#[test]
fn frames_done_ahead_count_in_their_window_only() {
    let mut p = process(0);
    p.observe(ms(30), reading(6, 8));
    let closed = p.tick(ms(40));
    assert_eq!(
        (closed[0].frames_done, closed[0].met, closed[0].missed),
        (6, 4, 0)
    );
    assert_eq!(p.frames_in_window(), 0);
    assert_eq!(p.tick(ms(80))[0].missed, 4);
}

#[test]
fn windows_are_aligned_to_the_jobs_start() {
    let mut p = process(ms(5));
    assert_eq!(
        p.state(),
        FrameState::Due {
            deadline_ns: ms(15)
        }
    );
    assert_eq!(p.next_wakeup_ns(), ms(45));
    assert!(p.tick(ms(44)).is_empty());
    assert_eq!(p.tick(ms(45))[0].start_ns, ms(5));
}

#[test]
fn increments_credit_like_the_counters_they_come_from() {
    let (mut by_counter, mut by_increment) = (process(0), process(0));
    let mut reports = (Vec::new(), Vec::new());
    for (t, frames, cpu) in [(5, 1, 2), (30, 3, 7), (45, 6, 12), (130, 7, 13)] {
        reports
            .0
            .extend(by_counter.observe(ms(t), reading(frames, cpu)));
    }
    for (t, frames, cpu) in [(5, 1, 2), (30, 2, 5), (45, 3, 5), (130, 1, 1)] {
        reports
            .1
            .extend(by_increment.credit(ms(t), frames, ms(cpu)));
    }
    assert_eq!(reports.0, reports.1);
    assert_eq!(by_counter.totals(), by_increment.totals());
    assert_eq!(by_counter.state(), by_increment.state());
}

#[test]
fn a_counter_that_goes_back_credits_nothing() {
    let mut p = process(0);
    p.observe(ms(5), reading(3, 3));
    p.observe(ms(6), reading(1, 1));
    assert_eq!(p.frames_in_window(), 3);
    p.observe(ms(7), reading(2, 2));
    assert_eq!(p.frames_in_window(), 4);
}

#[test]
fn an_overrunning_rt_process_is_throttled_until_its_next_window_while_the_other_keeps_its_deadline()
{
    let (hog, steady) = (TaskId(1), TaskId(2));
    let mut job = JobFrames::new();
    job.add(hog, process(0));
    job.add(steady, process(0));
    job.observe(hog, ms(15), reading(1, 9)).unwrap();
    job.observe(steady, ms(15), reading(1, 2)).unwrap();
    assert_eq!(
        job.process(hog).unwrap().state(),
        FrameState::Throttled { until_ns: ms(40) }
    );
    assert_eq!(
        job.process(steady).unwrap().state(),
        FrameState::Due {
            deadline_ns: ms(20)
        }
    );
    // Frames done while throttled do not lift it: the budget is spent.
    job.observe(hog, ms(30), reading(4, 9)).unwrap();
    assert_eq!(
        job.process(hog).unwrap().state(),
        FrameState::Throttled { until_ns: ms(40) }
    );
    let closed = job.tick(ms(40));
    assert_eq!(closed.len(), 2);
    assert!(closed.iter().any(|(t, r)| *t == hog && r.overran));
    assert!(closed.iter().any(|(t, r)| *t == steady && !r.overran));
    assert_eq!(
        job.process(hog).unwrap().state(),
        FrameState::Due {
            deadline_ns: ms(50)
        }
    );
    assert_eq!(job.totals().overruns, 1);
}

#[test]
fn the_budget_slack_lets_a_process_run_a_little_over_its_declared_work() {
    let slack = BudgetParams { slack_percent: 25 };
    let mut p = ProcessFrames::new(spec(), 0, FrameReading::default(), slack);
    assert_eq!(p.budget_ns(), ms(10));
    p.observe(ms(20), reading(2, 10));
    assert!(matches!(p.state(), FrameState::Due { .. }));
    p.observe(ms(21), reading(2, 11));
    assert!(matches!(p.state(), FrameState::Throttled { .. }));
}

#[test]
fn job_totals_sum_every_process_and_keep_removed_ones() {
    let mut job = JobFrames::new();
    job.add(TaskId(1), process(0));
    job.add(TaskId(2), process(0));
    job.observe(TaskId(1), ms(30), reading(4, 8)).unwrap();
    job.observe(TaskId(2), ms(30), reading(2, 4)).unwrap();
    job.tick(ms(40));
    let totals = job.totals();
    assert_eq!((totals.expected, totals.met, totals.missed), (8, 6, 2));
    assert_eq!(totals.miss_rate_ppm(), 250_000);
    job.remove(TaskId(2));
    assert_eq!(job.totals(), totals);
    assert_eq!(job.next_wakeup_ns(), Some(ms(80)));
    assert!(job.observe(TaskId(2), ms(50), reading(3, 5)).is_none());
    assert!(job.credit(TaskId(2), ms(50), 1, 1).is_none());
    assert_eq!(
        job.credit(TaskId(1), ms(85), 1, 1).map(|r| r.len()),
        Some(1)
    );
}
