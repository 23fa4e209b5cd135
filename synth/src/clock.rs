//! Clocks and the CPU-time busy loop.
//!
//! Compute is measured in CPU time of the calling thread, not wall time: a
//! rank that is descheduled mid-computation has not computed, which is
//! exactly the loss coscheduling tries to avoid and must stay visible.

use std::hint::black_box;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Arithmetic rounds between two clock reads: short enough (well under a
/// microsecond) that the loop overshoots its target by little.
const ROUNDS_PER_CHECK: u32 = 256;

fn read_clock(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec and both clock ids used
    // here exist on every Linux kernel.
    let rc = unsafe { libc::clock_gettime(clock, &mut now) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// CPU time consumed by the calling thread.
pub fn thread_cpu_time() -> Duration {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by the whole process (all threads, user + system).
pub fn process_cpu_time() -> Duration {
    read_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of frame releases and windows
/// (and of the frame counters the agent reads).
pub fn monotonic_ns() -> u64 {
    read_clock(libc::CLOCK_MONOTONIC).as_nanos() as u64
}

static PROCESS_START_NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Notes CLOCK_MONOTONIC now as the process's start (its `main`); later
/// calls change nothing.
pub fn mark_process_start() {
    PROCESS_START_NS.get_or_init(monotonic_ns);
}

/// The instant [`mark_process_start`] noted, if it was called.
pub fn process_start_ns() -> Option<u64> {
    PROCESS_START_NS.get().copied()
}

/// Sleeps until CLOCK_MONOTONIC reads `target_ns` (absolute, so periodic
/// releases do not drift by the time spent between them); returns at once
/// if it has passed.
pub fn sleep_until_monotonic_ns(target_ns: u64) {
    let target = libc::timespec {
        tv_sec: (target_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (target_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; no remainder is needed for an absolute sleep.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &target,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Wall-clock nanoseconds since the Unix epoch (comparable across ranks and hosts).
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Sleeps until wall-clock `target_unix_ns`; returns at once if it has passed.
pub fn sleep_until_unix_ns(target_unix_ns: u64) {
    let now = unix_now_ns();
    if target_unix_ns > now {
        std::thread::sleep(Duration::from_nanos(target_unix_ns - now));
    }
}

/// Does arithmetic until this thread has used `cpu` of CPU time.
///
/// Returns the arithmetic's result so the optimiser cannot drop the work.
pub fn burn_cpu(cpu: Duration) -> u64 {
    if cpu.is_zero() {
        return 0;
    }
    let started = thread_cpu_time();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    loop {
        for _ in 0..ROUNDS_PER_CHECK {
            state = black_box(
                state
                    .wrapping_mul(0x5851_f42d_4c95_7f2d)
                    .wrapping_add(0x1405_7b7e_f767_814f),
            );
        }
        if thread_cpu_time().saturating_sub(started) >= cpu {
            return state;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burn_uses_at_least_the_requested_cpu_time() {
        let target = Duration::from_millis(3);
        let before = thread_cpu_time();
        burn_cpu(target);
        assert!(thread_cpu_time() - before >= target);
    }

    #[test]
    fn sleeping_is_not_computing() {
        let before = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(20));
        // A sleeping thread accrues (almost) no CPU time; wall time passed 20 ms.
        assert!(thread_cpu_time() - before < Duration::from_millis(10));
    }

    #[test]
    fn zero_compute_is_free() {
        assert_eq!(burn_cpu(Duration::ZERO), 0);
    }

    #[test]
    fn unix_clock_is_after_2020() {
        assert!(unix_now_ns() > 1_577_836_800_000_000_000);
    }

    #[test]
    fn sleeping_until_a_monotonic_time_gets_there() {
        let target = monotonic_ns() + 2_000_000;
        sleep_until_monotonic_ns(target);
        assert!(monotonic_ns() >= target);
        sleep_until_monotonic_ns(0);
    }

    #[test]
    fn sleep_until_the_past_returns() {
        let before = unix_now_ns();
        sleep_until_unix_ns(before - 1_000_000_000);
        assert!(unix_now_ns() >= before);
    }
}
