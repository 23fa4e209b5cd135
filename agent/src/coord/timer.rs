//! A precise switch timer. tokio's timers tick in milliseconds, far too
//! coarse for slices of 10 ms switched in step across nodes; this thread
//! sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` and no timer
//! slack, then wakes the main loop through a channel.

use std::sync::mpsc;

use cosched_proto::wire::sleep_until;
use tokio::sync::mpsc::UnboundedSender;

/// Arms absolute CLOCK_MONOTONIC deadlines; each fires its token.
pub struct SwitchTimer {
    deadlines: mpsc::Sender<(u64, u64)>,
}

impl SwitchTimer {
    /// Starts the timer thread. `fifo_priority` > 0 runs it SCHED_FIFO so a
    /// busy CPU does not delay its wake-up.
    pub fn spawn(fired: UnboundedSender<u64>, fifo_priority: u32) -> std::io::Result<Self> {
        let (deadlines, pending) = mpsc::channel::<(u64, u64)>();
        std::thread::Builder::new()
            .name("switch-timer".into())
            .spawn(move || {
                prepare_thread(fifo_priority);
                // Deadlines arrive in increasing order (slices follow each
                // other), so they are served first come, first served.
                while let Ok((at_ns, token)) = pending.recv() {
                    sleep_until(at_ns);
                    if fired.send(token).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self { deadlines })
    }

    /// Fires `token` at `at_ns` (CLOCK_MONOTONIC), or at once if it passed.
    pub fn arm(&self, at_ns: u64, token: u64) {
        let _ = self.deadlines.send((at_ns, token));
    }
}

fn prepare_thread(fifo_priority: u32) {
    // SAFETY: plain prctl on the calling thread; 1 ns slack = no rounding.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if fifo_priority > 0 {
        use crate::kernel::{SchedAttr, SchedPolicy, linux::sched_setattr};
        // tid 0 = the calling thread.
        let attr = SchedAttr::with_policy(SchedPolicy::Fifo, 0, fifo_priority);
        if let Err(e) = sched_setattr(0, &attr) {
            tracing::warn!("switch timer stays SCHED_OTHER: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::monotonic_ns;

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
}
