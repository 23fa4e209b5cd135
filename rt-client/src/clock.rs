//! The two clocks a frame needs.

/// CLOCK_MONOTONIC in ns: a vDSO read, no system call (the clock the
/// agent's eBPF timestamps use).
#[inline]
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC)
}

/// CPU time of the whole process (every thread, user + system), ns. A
/// system call on Linux: the counter samples it at most once per
/// `CPU_SAMPLE_INTERVAL_NS` of frames.
pub fn process_cpu_ns() -> u64 {
    read(libc::CLOCK_PROCESS_CPUTIME_ID)
}

#[inline]
fn read(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec. Both clocks exist on
    // every Linux kernel; on a failure `now` stays zero, which only makes
    // one timestamp wrong, never the application crash.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_move_forward() {
        let (mono, cpu) = (monotonic_ns(), process_cpu_ns());
        let mut spin = 0u64;
        while process_cpu_ns() < cpu + 1_000_000 {
            spin = std::hint::black_box(spin.wrapping_add(1));
        }
        assert!(monotonic_ns() > mono);
    }
}
