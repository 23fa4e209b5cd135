//! A precise switch timer. tokio's timers tick in milliseconds, far too
//! coarse for slices of 10 ms switched in step across nodes; this thread
//! sleeps with `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` and no timer
//! slack, then wakes the main loop through a channel.

use std::{
    collections::VecDeque,
    sync::{Arc, Condvar, Mutex},
};

use cosched_proto::wire::sleep_until;
use tokio::sync::mpsc::UnboundedSender;

/// Deadlines armed and not yet taken by the timer thread. A mutex and a
/// condition variable, not `std::sync::mpsc`: that channel's receiver
/// spin-waits (yielding) for a sender it interrupted mid-push, and this
/// SCHED_FIFO thread interrupting a lower-priority sender on the same CPU
/// (the agent's priority changed by a reload, a thread the agent does not
/// raise) would spin until RT throttling stops it, 0.95 s (measured with
/// the stand-in agents' timer, which had the same shape). A mutex's waiter
/// sleeps instead.
#[derive(Default)]
struct Pending {
    deadlines: Mutex<Deadlines>,
    armed: Condvar,
}

#[derive(Default)]
struct Deadlines {
    queue: VecDeque<(u64, u64)>,
    /// The agent dropped its timer: the thread ends.
    closed: bool,
}

/// Arms absolute CLOCK_MONOTONIC deadlines; each fires its token.
pub struct SwitchTimer {
    pending: Arc<Pending>,
}

impl SwitchTimer {
    /// Starts the timer thread. `fifo_priority` > 0 runs it SCHED_FIFO so a
    /// busy CPU does not delay its wake-up.
    pub fn spawn(fired: UnboundedSender<u64>, fifo_priority: u32) -> std::io::Result<Self> {
        let pending = Arc::new(Pending::default());
        let taken = pending.clone();
        std::thread::Builder::new()
            .name("switch-timer".into())
            .spawn(move || {
                prepare_thread(fifo_priority);
                // Deadlines arrive in increasing order (slices follow each
                // other), so they are served first come, first served.
                while let Some((at_ns, token)) = taken.next() {
                    sleep_until(at_ns);
                    if fired.send(token).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self { pending })
    }

    /// Fires `token` at `at_ns` (CLOCK_MONOTONIC), or at once if it passed.
    pub fn arm(&self, at_ns: u64, token: u64) {
        let mut d = self.pending.lock();
        d.queue.push_back((at_ns, token));
        drop(d);
        self.pending.armed.notify_one();
    }
}

impl Drop for SwitchTimer {
    fn drop(&mut self) {
        self.pending.lock().closed = true;
        self.pending.armed.notify_one();
    }
}

impl Pending {
    /// The deadlines; a panic elsewhere while holding the lock leaves a
    /// queue that is still whole (pushes and pops only), so it is used.
    fn lock(&self) -> std::sync::MutexGuard<'_, Deadlines> {
        self.deadlines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (asleep) for the next armed deadline; `None` once closed.
    fn next(&self) -> Option<(u64, u64)> {
        let mut d = self.lock();
        loop {
            if let Some(next) = d.queue.pop_front() {
                return Some(next);
            }
            if d.closed {
                return None;
            }
            d = self.armed.wait(d).unwrap_or_else(|e| e.into_inner());
        }
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
    fn armed_deadlines_fire_their_tokens_in_order_and_dropping_ends_the_thread() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let timer = SwitchTimer::spawn(tx, 0).unwrap();
        let now = monotonic_ns();
        timer.arm(now + 2_000_000, 1);
        timer.arm(now + 1_000_000, 2);
        timer.arm(now.saturating_sub(1), 3);
        let got: Vec<u64> = (0..3).map(|_| rx.blocking_recv().unwrap()).collect();
        // First come, first served (deadlines come in increasing order).
        assert_eq!(got, [1, 2, 3]);
        assert!(monotonic_ns() >= now + 2_000_000);
        drop(timer);
        // The thread ended: its sender is gone.
        assert_eq!(rx.blocking_recv(), None);
    }

    #[test]
    fn past_deadlines_return_at_once() {
        let start = monotonic_ns();
        sleep_until(start.saturating_sub(1_000_000));
        assert!(monotonic_ns() - start < 50_000_000);
    }
}
