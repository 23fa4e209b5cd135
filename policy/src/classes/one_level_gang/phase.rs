//! Why an RT job holding its r rows can still come up short of b frames in
//! a window: the phase between the matrix cycle Ψ and the job's window
//! Γ = b·d.
//!
//! [`FrameGuarantee`](super::FrameGuarantee) checks CPU per cycle: r·Q ≥
//! (Ψ/d)·τ_max. That bounds the backlog, but a program releases a frame
//! every d and cannot run a frame before its release, so the frames
//! released after the job's last row of a window wait for its next row —
//! in the next window. A window counts the frames *finished* in it, so a
//! window ends short by the frames waiting at its end and the next one
//! finishes them without credit (n > b is not a surplus). When Ψ divides Γ
//! every window ends at the same phase of the cycle, the wait at each end is
//! the same and every window after the first finishes exactly b; when it
//! does not (the bench's Ψ = 6 × 10 ms against Γ = 200 ms), the phase
//! drifts by Γ mod Ψ per window and some windows end in a gap: up to
//! [`worst_window_shortfall`] frames short in steady state.
//!
//! [`frames_done_per_window`] is the frame-level model behind this: one
//! process, its rows at fixed offsets in a fixed cycle, frames released
//! every d, run in order.

use super::state::OneLevelGang;
use crate::classes::RtSpec;
use crate::global::{JobId, RowIndex};

/// Where a job's rows run inside one cycle: `[start, end)` offsets in ns,
/// ascending, not overlapping, inside `0..cycle_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowTimeline {
    pub cycle_ns: u64,
    pub runs: Vec<(u64, u64)>,
}

impl RowTimeline {
    /// `rows` slots of `slot_ns` each (ascending slot indices) in a cycle of
    /// `slots_per_cycle` slots.
    pub fn from_slots(slot_ns: u64, slots_per_cycle: u64, rows: &[u64]) -> Self {
        Self {
            cycle_ns: slot_ns * slots_per_cycle,
            runs: rows
                .iter()
                .map(|&row| (row * slot_ns, (row + 1) * slot_ns))
                .collect(),
        }
    }

    /// CPU time in `[from, from + len)`.
    fn supply(&self, mut from: u64, len: u64) -> u64 {
        let end = from + len;
        let mut got = 0;
        while from < end {
            let base = from - from % self.cycle_ns;
            for &(start, stop) in &self.runs {
                let (start, stop) = (base + start, base + stop);
                let lo = start.max(from);
                let hi = stop.min(end);
                if hi > lo {
                    got += hi - lo;
                }
            }
            from = base + self.cycle_ns;
        }
        got
    }

    /// The instant `work` ns of CPU have run from `from` on, and the
    /// instant the first of it ran (or `None` with no runs).
    fn run(&self, from: u64, work: u64) -> Option<(u64, u64)> {
        if self.runs.is_empty() {
            return None;
        }
        let mut left = work;
        let mut base = from - from % self.cycle_ns;
        let mut first = None;
        loop {
            for &(start, stop) in &self.runs {
                let lo = (base + start).max(from);
                let hi = base + stop;
                if hi <= lo {
                    continue;
                }
                first.get_or_insert(lo);
                if hi - lo >= left {
                    return Some((first.expect("set"), lo + left));
                }
                left -= hi - lo;
            }
            base += self.cycle_ns;
        }
    }
}

/// Frames finished in each of `windows` windows Γ = b·d by one process
/// whose frame k is released at `first_release_ns + k·d` and needs
/// `work(k)` ns of CPU, run in order, only inside `timeline`. Windows start
/// when the first frame starts (as the benchmark counts them); a frame
/// finishing exactly at a window's end meets it.
pub fn frames_done_per_window(
    timeline: &RowTimeline,
    spec: &RtSpec,
    first_release_ns: u64,
    windows: usize,
    work: impl Fn(u64) -> u64,
) -> Vec<u32> {
    let window_ns = spec.window_ns();
    let frames = (windows as u64 + 2) * u64::from(spec.frames);
    let mut done = Vec::new();
    let mut free_at = 0;
    let mut window_start = None;
    for k in 0..frames {
        let release = first_release_ns + k * spec.period_ns;
        let Some((started, finished)) = timeline.run(release.max(free_at), work(k).max(1)) else {
            return vec![0; windows];
        };
        window_start.get_or_insert(started);
        done.push(finished);
        free_at = finished;
    }
    let start = window_start.unwrap_or(0);
    (0..windows as u64)
        .map(|w| {
            let (lo, hi) = (start + w * window_ns, start + (w + 1) * window_ns);
            done.iter().filter(|&&at| at > lo && at <= hi).count() as u32
        })
        .collect()
}

/// True when every window of `spec` ends at the same phase of a cycle of
/// `cycle_ns`: Γ is a multiple of Ψ.
pub fn is_phase_locked(spec: &RtSpec, cycle_ns: u64) -> bool {
    cycle_ns > 0 && spec.window_ns().is_multiple_of(cycle_ns)
}

/// The most frames a window can end short in steady state when the phase
/// drifts: the frames released during the longest stretch of the cycle
/// without the job's rows, ⌈gap / d⌉. 0 when phase-locked.
pub fn worst_window_shortfall(spec: &RtSpec, timeline: &RowTimeline) -> u64 {
    if is_phase_locked(spec, timeline.cycle_ns) {
        return 0;
    }
    let supplied = timeline.supply(0, timeline.cycle_ns);
    if supplied == 0 {
        return u64::from(spec.frames);
    }
    // Longest gap, wrapping around the cycle's end.
    let mut gap = 0;
    for (i, &(_, stop)) in timeline.runs.iter().enumerate() {
        let next = timeline
            .runs
            .get(i + 1)
            .map_or(timeline.runs[0].0 + timeline.cycle_ns, |run| run.0);
        gap = gap.max(next - stop);
    }
    gap.div_ceil(spec.period_ns).min(u64::from(spec.frames))
}

/// Frames a job is allowed per window in the start-row search: beyond it
/// the model is not run and the job starts in its first row.
const START_SEARCH_MAX_FRAMES: u32 = 4096;

/// Where in its rows an RT job should start so that its first window is
/// not short.
///
/// A program's windows start with its first frame, and its first frame
/// starts the first time it runs: in one of its rows. Every window ends at
/// that phase of the cycle (Γ a multiple of Ψ), so a window ends short by
/// the frames still waiting there in steady state. Windows after the first
/// carry as many in as they leave out; the first carries nothing in. At the
/// start of the job's first row after its longest gap the wait is the
/// gap's frames, ⌈gap/d⌉ (the measured 1GS misses: all in window 0); a few
/// rows into its run, once its rows have drained what the gap left, it is
/// zero and the first window finishes b frames like the others.
///
/// Returns the index into `timeline.runs` of the first row whose start
/// leaves the first window (and the next two) with b frames for every
/// release from the row's start to the last instant a frame of τ_max still
/// fits in it (the program's own start-up delay), with τ_max per frame;
/// the row with the fewest frames short if none does. `None` without rows.
pub fn start_row(spec: &RtSpec, timeline: &RowTimeline) -> Option<usize> {
    if timeline.runs.is_empty() {
        return None;
    }
    if spec.frames > START_SEARCH_MAX_FRAMES {
        return Some(0);
    }
    let short = |run: &(u64, u64)| -> u64 {
        let (start, stop) = *run;
        let last = stop.saturating_sub(spec.work_ns).max(start);
        let step = ((last - start) / 8).max(1);
        (start..=last)
            .step_by(step as usize)
            .map(|release| {
                let done = frames_done_per_window(timeline, spec, release, 3, |_| spec.work_ns);
                done.iter()
                    .map(|&n| u64::from(spec.frames.saturating_sub(n)))
                    .sum::<u64>()
            })
            .sum()
    };
    timeline
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| (short(run), i))
        .min()
        .map(|(_, i)| i)
}

/// Release instants tried per row by [`first_frame_offset`].
const FIRST_FRAME_STEPS: u64 = 40;

/// Where in run `run` of `timeline` a job's first frame should start, as
/// an offset from the run's start: the middle of the longest stretch of
/// instants in `[start, stop − τ]` from which the frame model gives b frames
/// in each of the first three windows with τ_max per frame. Every window
/// ends at that phase of the cycle, so the middle leaves the most room on
/// both sides: before the window's end for the frames the gap left (a late
/// switch, a slow frame), and before the row's end for the frame released
/// in it. The row's middle less τ/2 when no instant gives b frames; `None`
/// without such a run.
pub fn first_frame_offset(spec: &RtSpec, timeline: &RowTimeline, run: usize) -> Option<u64> {
    let &(start, stop) = timeline.runs.get(run)?;
    let last = stop.saturating_sub(spec.work_ns).max(start);
    let fallback = (stop - start).saturating_sub(spec.work_ns) / 2;
    if spec.frames > START_SEARCH_MAX_FRAMES {
        return Some(fallback);
    }
    let step = ((last - start) / FIRST_FRAME_STEPS).max(1);
    let full = |release: u64| {
        frames_done_per_window(timeline, spec, release, 3, |_| spec.work_ns)
            .iter()
            .all(|&n| n >= spec.frames)
    };
    let mut best: Option<(u64, u64)> = None; // (length, middle)
    let mut stretch: Option<u64> = None; // first good instant of the current stretch
    let mut release = start;
    loop {
        let good = full(release);
        if good {
            stretch.get_or_insert(release);
        }
        let end_here = !good || release >= last;
        if end_here && let Some(from) = stretch.take() {
            let to = if good { release } else { release - step };
            let len = to - from;
            if best.is_none_or(|(best_len, _)| len > best_len) {
                best = Some((len, from + len / 2));
            }
        }
        if release >= last {
            break;
        }
        release = (release + step).min(last);
    }
    Some(best.map_or(fallback, |(_, middle)| middle - start))
}

impl OneLevelGang {
    /// True when `job` is an allocated RT job whose window is a multiple of
    /// the current rotation's cycle (rotation length × slot): its windows
    /// after the first finish b frames whenever its rows pay for them.
    /// `None` for BE, waiting or unknown jobs.
    pub fn runs_in_phase(&self, job: JobId) -> Option<bool> {
        let held = self.allocated.get(&job)?;
        let spec = held.job.rt_spec()?;
        let cycle = self.config.slot_ns() * self.rotation().len() as u64;
        Some(is_phase_locked(spec, cycle))
    }

    /// The row an allocated RT job should first run in ([`start_row`] over
    /// its own rows in the full cycle), under admission control only (the
    /// only case with a cycle that does not change under it). `None` for
    /// BE, waiting or unknown jobs, or without admission control.
    pub fn start_row_of(&self, job: JobId) -> Option<RowIndex> {
        if !self.config.admission_control {
            return None;
        }
        let held = self.allocated.get(&job)?;
        let spec = held.job.rt_spec()?;
        let timeline = self.own_timeline(&held.rows);
        start_row(spec, &timeline).map(|i| held.rows[i])
    }

    /// Where an allocated RT job's first frame should start: its start
    /// row ([`Self::start_row_of`]) and the offset from that row's start
    /// ([`first_frame_offset`]). `None` when it has no start row.
    pub fn first_frame_of(&self, job: JobId) -> Option<(RowIndex, u64)> {
        let row = self.start_row_of(job)?;
        let held = self.allocated.get(&job)?;
        let spec = held.job.rt_spec()?;
        let timeline = self.own_timeline(&held.rows);
        let run = held.rows.iter().position(|&r| r == row)?;
        Some((row, first_frame_offset(spec, &timeline, run)?))
    }

    /// How long the processes of an allocated RT job with a start row
    /// should wait for their first-frame instant at most: its warm-up's
    /// longest run ([`super::WARM_UP_WINDOWS`] windows of cycles) and one
    /// cycle more. `None` when it has no start row (it gets no instant).
    pub fn first_frame_wait_ns(&self, job: JobId) -> Option<u64> {
        self.start_row_of(job)?;
        let spec = self.allocated.get(&job)?.job.rt_spec()?;
        let cycle = self.config.cycle_ns().max(1);
        let windows = (super::WARM_UP_WINDOWS * spec.window_ns()).div_ceil(cycle);
        Some((windows + 2).saturating_mul(cycle))
    }

    /// A job's rows as they run in the full cycle.
    fn own_timeline(&self, rows: &[RowIndex]) -> RowTimeline {
        let slot = self.config.slot_ns();
        RowTimeline {
            cycle_ns: slot * self.rows() as u64,
            runs: rows
                .iter()
                .map(|&row| {
                    let start = row as u64 * slot;
                    (start, start + self.config.quantum_ns)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// The bench's RT job: d = 10 ms, b = 20 (Γ = 200 ms), τ = 2 ms.
    fn bench_job() -> RtSpec {
        RtSpec::new(10 * MS, 20, 2 * MS).expect("valid")
    }

    fn shortfall(done: &[u32], spec: &RtSpec) -> u32 {
        done.iter().map(|&n| spec.frames.saturating_sub(n)).sum()
    }

    #[test]
    fn a_60_ms_cycle_against_a_200_ms_window_misses_frames_in_steady_state() {
        // r = ⌈M·τ/d⌉ = 2 of M = 6 rows of 10 ms: 20 ms of CPU per 60 ms
        // for 12 ms of frames — plenty — yet windows come up short.
        let spec = bench_job();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0, 1]);
        let mut short_after_first = 0;
        for release in (0..60).step_by(5) {
            let done = frames_done_per_window(&timeline, &spec, release * MS, 12, |_| 2 * MS);
            short_after_first += shortfall(&done[1..], &spec);
            assert!(
                done.iter()
                    .all(|&n| u64::from(spec.frames) - u64::from(n.min(20)) <= 4)
            );
        }
        assert!(short_after_first > 0);
        assert!(!is_phase_locked(&spec, timeline.cycle_ns));
        assert_eq!(worst_window_shortfall(&spec, &timeline), 4);
    }

    #[test]
    fn a_cycle_dividing_the_window_finishes_b_frames_in_every_window_after_the_first() {
        let spec = bench_job();
        for slots in [4, 5] {
            // 40 and 50 ms cycles divide 200 ms.
            let timeline = RowTimeline::from_slots(10 * MS, slots, &[0, 1]);
            assert!(is_phase_locked(&spec, timeline.cycle_ns));
            assert_eq!(worst_window_shortfall(&spec, &timeline), 0);
            for release in 0..50 {
                let done = frames_done_per_window(&timeline, &spec, release * MS, 12, |_| 2 * MS);
                assert!(
                    done[1..].iter().all(|&n| n == 20),
                    "{slots} slots, release at {release} ms: {done:?}"
                );
            }
        }
    }

    #[test]
    fn the_first_window_can_end_short_by_the_wait_at_its_end_even_when_phase_locked() {
        let spec = bench_job();
        let timeline = RowTimeline::from_slots(10 * MS, 5, &[0, 1]);
        let short: Vec<u32> = (0..50)
            .map(|release| {
                let done = frames_done_per_window(&timeline, &spec, release * MS, 3, |_| 2 * MS);
                spec.frames.saturating_sub(done[0])
            })
            .collect();
        assert!(short.iter().any(|&s| s > 0));
        assert!(short.iter().all(|&s| s <= 3), "{short:?}");
    }

    #[test]
    fn rows_that_cannot_pay_for_the_frames_miss_even_when_phase_locked() {
        // One 10 ms row per 50 ms: 8 ms of frames due per 10 ms of CPU in
        // 50 ms is fine, τ = 3 ms is not (15 ms due).
        let spec = RtSpec::new(10 * MS, 20, 3 * MS).expect("valid");
        let timeline = RowTimeline::from_slots(10 * MS, 5, &[0]);
        let done = frames_done_per_window(&timeline, &spec, 0, 6, |_| 3 * MS);
        assert!(done[1..].iter().all(|&n| n < 20), "{done:?}");
    }

    /// The bench's RT job since b = 30: Γ = 300 ms, five 60 ms cycles.
    fn bench_job_b30() -> RtSpec {
        RtSpec::new(10 * MS, 30, 2 * MS).expect("valid")
    }

    #[test]
    fn an_admitted_job_starting_at_the_row_after_its_gap_ends_its_first_window_short() {
        // r = 2 of M = 6 rows: its first frame at the start of row 0 means
        // every window ends there, after the 40 ms gap's 4 frames.
        let spec = bench_job_b30();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0, 1]);
        assert!(is_phase_locked(&spec, timeline.cycle_ns));
        let done = frames_done_per_window(&timeline, &spec, 0, 5, |_| 2 * MS);
        assert_eq!(done, [26, 30, 30, 30, 30]);
    }

    #[test]
    fn an_admitted_job_starting_mid_cycle_misses_nothing() {
        // Started in row 1, after row 0 ran the gap's frames: every window,
        // the first too, ends with nothing waiting, whatever the program's
        // start-up delay inside the row.
        let spec = bench_job_b30();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0, 1]);
        assert_eq!(start_row(&spec, &timeline), Some(1));
        for release in 10..=18 {
            let done = frames_done_per_window(&timeline, &spec, release * MS, 5, |_| 2 * MS);
            assert_eq!(done, [30; 5], "first frame at {release} ms");
        }
    }

    #[test]
    fn the_start_row_follows_the_rows_that_drain_the_gap_wherever_they_are() {
        let spec = bench_job_b30();
        // Rows 3 and 4 of 6: the gap wraps over the cycle's end.
        let late = RowTimeline::from_slots(10 * MS, 6, &[3, 4]);
        assert_eq!(start_row(&spec, &late), Some(1));
        // Every row its own: no gap, no wait, the first row will do.
        let all = RowTimeline::from_slots(10 * MS, 6, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(start_row(&spec, &all), Some(0));
        assert_eq!(
            start_row(
                &spec,
                &RowTimeline {
                    cycle_ns: 60 * MS,
                    runs: Vec::new()
                }
            ),
            None
        );
    }

    #[test]
    fn rows_too_spread_to_drain_a_gap_before_the_next_one_can_still_start_short() {
        // Rows 0 and 3: each row starts after a 20 ms gap's 2 frames, so a
        // program whose first frame starts with the row still ends its first
        // window up to 2 frames short, whichever row it starts in (a start
        // a few ms into the row would not). Later windows are full.
        let spec = bench_job_b30();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0, 3]);
        assert_eq!(start_row(&spec, &timeline), Some(0), "a tie: the first");
        for (start, _) in timeline.runs.clone() {
            let done = frames_done_per_window(&timeline, &spec, start, 5, |_| 2 * MS);
            assert_eq!(done, [28, 30, 30, 30, 30]);
            let later = frames_done_per_window(&timeline, &spec, start + 4 * MS, 5, |_| 2 * MS);
            assert_eq!(later, [30; 5]);
        }
    }

    #[test]
    fn the_first_frame_starts_mid_way_through_the_instants_that_keep_every_window_full() {
        // Rows 0 and 1 of 6, started in row 1: any release 0..=8 ms into
        // row 1 gives 30 frames in every window (the gap's 4 frames and row
        // 0's finish by 10 ms into the run, the row's own frame by its end);
        // the middle, 4 ms, leaves 4 ms for a late switch on either side.
        let spec = bench_job_b30();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0, 1]);
        assert_eq!(first_frame_offset(&spec, &timeline, 1), Some(4 * MS));
        let release = timeline.runs[1].0 + 4 * MS;
        assert_eq!(
            frames_done_per_window(&timeline, &spec, release, 5, |_| 2 * MS),
            [30; 5]
        );
        assert_eq!(first_frame_offset(&spec, &timeline, 2), None);
    }

    #[test]
    fn with_no_instant_keeping_every_window_full_the_first_frame_starts_mid_row() {
        // One 10 ms row per 60 ms cannot pay for 6 frames of 2 ms: no
        // release gives 30 frames; the row's middle less τ/2.
        let spec = bench_job_b30();
        let timeline = RowTimeline::from_slots(10 * MS, 6, &[0]);
        assert_eq!(first_frame_offset(&spec, &timeline, 0), Some(4 * MS));
    }
}
