//! Clock offset from a heartbeat exchange (the four-timestamp method: t1 and
//! t4 on the sender's clock, t2 and t3 on the replier's).

/// CLOCK_MONOTONIC in ns: the clock slice instants on the wire are expressed
/// in, the same on the coordinator and every agent (and the eBPF programs'
/// `bpf_ktime_get_ns`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until `at_ns` on CLOCK_MONOTONIC (absolute, so never early; a
/// signal does not cut it short). The slice switch timer of the scale
/// harness's stand-ins (the agent's waits on a timerfd in its event loop).
pub fn sleep_until(at_ns: u64) {
    let deadline = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; absolute sleep on the monotonic clock.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &deadline,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            return;
        }
    }
}

use super::node::HeartbeatReply;

/// One offset measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Replier's clock minus sender's clock, in nanoseconds: add it to a
    /// sender time to get the replier's time.
    pub offset_ns: i64,
    /// Network round trip, excluding the replier's processing time.
    pub round_trip_ns: u64,
}

impl ClockSample {
    /// The sample from `reply`, received at `t4_ns` on the sender's clock.
    ///
    /// offset = ((t2 − t1) + (t3 − t4)) / 2, round trip = (t4 − t1) − (t3 − t2);
    /// computed in i128, so no input overflows, and saturated into range.
    pub fn from_reply(reply: &HeartbeatReply, t4_ns: u64) -> Self {
        let [t1, t2, t3, t4] = [reply.t1_ns, reply.t2_ns, reply.t3_ns, t4_ns].map(i128::from);
        let offset = ((t2 - t1) + (t3 - t4)) / 2;
        let round_trip = (t4 - t1) - (t3 - t2);
        ClockSample {
            offset_ns: offset.clamp(i64::MIN.into(), i64::MAX.into()) as i64,
            round_trip_ns: round_trip.clamp(0, u64::MAX.into()) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_the_absolute_deadline() {
        let target = monotonic_ns() + 3_000_000;
        sleep_until(target);
        let woke = monotonic_ns();
        assert!(woke >= target, "woke {} ns early", target - woke);
        assert!(woke - target < 50_000_000, "woke {} ns late", woke - target);
    }

    #[test]
    fn past_deadlines_return_at_once() {
        let start = monotonic_ns();
        sleep_until(start.saturating_sub(1_000_000));
        assert!(monotonic_ns() - start < 50_000_000);
    }

    #[test]
    fn symmetric_delay_gives_exact_offset() {
        // Replier is 1000 ns ahead; each way takes 50 ns; replier spends 10 ns.
        let reply = HeartbeatReply {
            seq: 1,
            t1_ns: 10_000,
            t2_ns: 11_050,
            t3_ns: 11_060,
        };
        let sample = ClockSample::from_reply(&reply, 10_110);
        assert_eq!(sample.offset_ns, 1000);
        assert_eq!(sample.round_trip_ns, 100);
    }

    #[test]
    fn extreme_inputs_saturate() {
        let reply = HeartbeatReply {
            seq: 0,
            t1_ns: 0,
            t2_ns: u64::MAX,
            t3_ns: u64::MAX,
        };
        let sample = ClockSample::from_reply(&reply, 0);
        assert_eq!(sample.offset_ns, i64::MAX);
        assert_eq!(sample.round_trip_ns, 0);
    }
}
