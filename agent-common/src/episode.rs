//! The spin-episode rules, shared by the eBPF programs (which apply them at
//! every wait, switch-out and receive of a managed task) and the agent
//! (which checks the gap when it reads the counters), so both judge alike.
//!
//! An episode starts at an empty wait (an empty receive, an empty poll, a
//! yield) and ends when the task stops waiting: it receives data, sends,
//! blocks, or has been on CPU longer than the spin gap since its last empty
//! wait (it computes). Time off CPU never counts toward the gap: a spinner
//! preempted between two polls is still waiting when it runs again.
use crate::TaskStats;

/// On-CPU time of `t` since its latest empty wait, as of `now`: the runs
/// that ended since, plus the current run's part (from the wait itself when
/// it was in this run: `spin_last_ns` is cleared at every switch-out).
#[inline(always)]
pub fn oncpu_since_wait(t: &TaskStats, now: u64) -> u64 {
    let from = if t.spin_last_ns != 0 {
        t.spin_last_ns
    } else if t.on_cpu != 0 {
        t.run_start_ns
    } else {
        0
    };
    let running = if from != 0 {
        now.saturating_sub(from)
    } else {
        0
    };
    t.gap_oncpu_ns.saturating_add(running)
}

/// Is `t` in a spin episode at `now` under spin gap `gap_ns`.
#[inline(always)]
pub fn in_spin_episode(t: &TaskStats, now: u64, gap_ns: u64) -> bool {
    t.spin_episode_start_ns != 0 && oncpu_since_wait(t, now) <= gap_ns
}

/// An empty wait at `now`. The episode goes on when the task was on CPU no
/// longer than the gap since its last empty wait (that stretch was spinning);
/// otherwise a new one starts. Returns true when one starts.
#[inline(always)]
pub fn empty_wait(t: &mut TaskStats, now: u64, gap_ns: u64) -> bool {
    let mut starts = true;
    if t.spin_episode_start_ns != 0 {
        let stretch = oncpu_since_wait(t, now);
        if stretch <= gap_ns {
            t.spin_ns += stretch;
            starts = false;
        }
    }
    if starts {
        t.spin_episode_start_ns = now;
        t.spin_episodes += 1;
        t.episode_spin_base_ns = t.spin_ns;
        t.spin_reported = 0;
    }
    t.spin_last_ns = now;
    t.gap_oncpu_ns = 0;
    starts
}

/// On-CPU spin time of the current episode up to its latest empty wait.
#[inline(always)]
pub fn episode_spin_ns(t: &TaskStats) -> u64 {
    if t.spin_episode_start_ns == 0 {
        return 0;
    }
    t.spin_ns.saturating_sub(t.episode_spin_base_ns)
}

/// Right after an empty wait: has the current episode just passed
/// `report_ns` of spin time (0: never), not yet reported? Marks it reported,
/// so each episode is reported once.
#[inline(always)]
pub fn passed_report(t: &mut TaskStats, report_ns: u64) -> bool {
    if report_ns == 0 || t.spin_reported != 0 || episode_spin_ns(t) < report_ns {
        return false;
    }
    t.spin_reported = 1;
    true
}

/// The task leaves the CPU still runnable (preempted, or it yielded): the
/// episode goes on when it runs again, unless it computed past the gap
/// since its last empty wait. Call before the run's end is recorded
/// (`on_cpu`, `run_start_ns` still describe the run ending now). The
/// stretch since the wait is kept, credited as spin only if the episode
/// goes on; the spin clock stops (time off CPU is not spinning).
#[inline(always)]
pub fn preempted(t: &mut TaskStats, now: u64, gap_ns: u64) {
    if t.spin_episode_start_ns == 0 {
        return;
    }
    let stretch = oncpu_since_wait(t, now);
    if stretch > gap_ns {
        clear(t);
    } else {
        t.gap_oncpu_ns = stretch;
        t.spin_last_ns = 0;
    }
}

/// The task stopped waiting at `now` (data arrived, it sent, it blocked or
/// exited): the episode ends, and the stretch since its last empty wait is
/// credited as spin unless it was computation past the gap. Stamps the
/// end (`TaskStats::last_wait_end_ns`) even outside an episode.
#[inline(always)]
pub fn end(t: &mut TaskStats, now: u64, gap_ns: u64) {
    t.last_wait_end_ns = now;
    if t.spin_episode_start_ns != 0 {
        let stretch = oncpu_since_wait(t, now);
        if stretch <= gap_ns {
            t.spin_ns += stretch;
        }
    }
    clear(t);
}

#[inline(always)]
fn clear(t: &mut TaskStats) {
    t.spin_episode_start_ns = 0;
    t.spin_last_ns = 0;
    t.gap_oncpu_ns = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: u64 = 100;

    /// A task that started running at `at`.
    fn running_since(at: u64) -> TaskStats {
        TaskStats {
            on_cpu: 1,
            run_start_ns: at,
            ..TaskStats::default()
        }
    }

    fn switch_out(t: &mut TaskStats, now: u64) {
        preempted(t, now, GAP);
        t.on_cpu = 0;
        t.run_start_ns = 0;
    }

    fn switch_in(t: &mut TaskStats, now: u64) {
        t.on_cpu = 1;
        t.run_start_ns = now;
    }

    #[test]
    fn a_poll_loop_is_one_episode_and_its_time_is_spin() {
        let mut t = running_since(1_000);
        assert!(empty_wait(&mut t, 1_010, GAP));
        for at in [1_030, 1_050, 1_070] {
            assert!(!empty_wait(&mut t, at, GAP), "wait at {at}");
        }
        assert_eq!(t.spin_episode_start_ns, 1_010);
        assert_eq!(t.spin_episodes, 1);
        assert_eq!(t.spin_ns, 60);
        end(&mut t, 1_080, GAP);
        assert_eq!(t.spin_ns, 70, "up to the receive that found data");
        assert!(!in_spin_episode(&t, 1_080, GAP));
    }

    #[test]
    fn a_task_that_waited_once_and_then_computes_is_not_waiting_past_the_gap() {
        let mut t = running_since(1_000);
        empty_wait(&mut t, 1_010, GAP);
        assert!(in_spin_episode(&t, 1_010 + GAP, GAP));
        assert!(!in_spin_episode(&t, 1_011 + GAP, GAP), "computing since");
        // Its next wait starts a new episode, and the computation between
        // the two is not spin time.
        assert!(empty_wait(&mut t, 5_000, GAP));
        assert_eq!((t.spin_episodes, t.spin_ns), (2, 0));
    }

    #[test]
    fn time_off_cpu_does_not_count_toward_the_gap() {
        let mut t = running_since(1_000);
        empty_wait(&mut t, 1_010, GAP);
        switch_out(&mut t, 1_050);
        assert!(in_spin_episode(&t, 900_000, GAP), "preempted mid-episode");
        switch_in(&mut t, 900_000);
        assert!(in_spin_episode(&t, 900_060, GAP), "40 + 60 on CPU");
        assert!(!in_spin_episode(&t, 900_061, GAP));
        assert!(!empty_wait(&mut t, 900_030, GAP), "the same episode");
        assert_eq!(t.spin_ns, 70, "40 before the preemption, 30 after");
    }

    #[test]
    fn only_a_real_end_of_the_wait_is_stamped_not_the_gap() {
        let mut t = running_since(0);
        empty_wait(&mut t, 10, GAP);
        // On CPU past the gap (computing, or a stalled vCPU), then preempted.
        switch_out(&mut t, 10 + GAP + 1);
        assert!(!in_spin_episode(&t, 10 + GAP + 1, GAP));
        assert_eq!(t.last_wait_end_ns, 0, "the gap alone is not a wait end");
        switch_in(&mut t, 500);
        empty_wait(&mut t, 510, GAP);
        end(&mut t, 520, GAP);
        assert_eq!(t.last_wait_end_ns, 520, "data, a send or a block is");
    }

    #[test]
    fn a_preemption_after_computing_past_the_gap_ends_the_episode() {
        let mut t = running_since(1_000);
        empty_wait(&mut t, 1_010, GAP);
        switch_out(&mut t, 2_000);
        assert_eq!(t.spin_episode_start_ns, 0);
        assert_eq!(t.spin_ns, 0, "the computation is not spin");
    }

    #[test]
    fn stretches_across_several_preemptions_add_up() {
        let mut t = running_since(0);
        empty_wait(&mut t, 10, GAP);
        switch_out(&mut t, 60); // 50
        switch_in(&mut t, 1_000);
        switch_out(&mut t, 1_040); // 90
        assert!(in_spin_episode(&t, 5_000, GAP));
        switch_in(&mut t, 5_000);
        switch_out(&mut t, 5_011); // 101: past the gap
        assert!(!in_spin_episode(&t, 6_000, GAP));
    }

    #[test]
    fn a_yield_loop_that_is_switched_out_at_every_yield_stays_one_episode() {
        let mut t = running_since(0);
        let mut now = 10;
        for _ in 0..5 {
            empty_wait(&mut t, now, GAP);
            switch_out(&mut t, now + 1);
            now += 1_000;
            switch_in(&mut t, now);
            now += 5;
        }
        assert_eq!(t.spin_episodes, 1);
        assert!(in_spin_episode(&t, now, GAP));
    }

    #[test]
    fn a_task_adopted_while_running_is_judged_from_its_wait() {
        // Tracked mid-run: no switch-in seen yet, on_cpu still 0.
        let mut t = TaskStats::default();
        empty_wait(&mut t, 1_000, GAP);
        assert!(in_spin_episode(&t, 1_000 + GAP, GAP));
        assert!(!in_spin_episode(&t, 1_001 + GAP, GAP));
    }
    #[test]
    fn a_long_spin_is_reported_once_when_its_episode_passes_the_threshold() {
        let mut t = running_since(0);
        empty_wait(&mut t, 10, GAP);
        // Earlier episodes' spin does not count toward this one.
        t.spin_ns = 5_000;
        t.episode_spin_base_ns = 5_000;
        let mut reports = 0;
        for at in (60..=400).step_by(50) {
            empty_wait(&mut t, at, GAP);
            reports += u32::from(passed_report(&mut t, 200));
            if at < 210 {
                assert_eq!(reports, 0, "{at}: only {} spun", episode_spin_ns(&t));
            }
        }
        assert_eq!(reports, 1, "once per episode");
        assert!(!passed_report(&mut t, 0), "0: never");
    }

    #[test]
    fn a_new_episode_is_reported_again_after_its_own_threshold() {
        let mut t = running_since(0);
        empty_wait(&mut t, 10, GAP);
        empty_wait(&mut t, 90, GAP);
        assert!(passed_report(&mut t, 50));
        end(&mut t, 100, GAP); // the message came
        empty_wait(&mut t, 1_000, GAP);
        assert!(
            !passed_report(&mut t, 50),
            "nothing spun in the new one yet"
        );
        empty_wait(&mut t, 1_040, GAP);
        assert!(!passed_report(&mut t, 50));
        empty_wait(&mut t, 1_060, GAP);
        assert!(passed_report(&mut t, 50));
    }
}
