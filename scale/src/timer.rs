//! One precise switch timer for all stand-in agents, as the real agent's
//! (`agent/src/coord/timer.rs`): a thread without timer slack that sleeps
//! until the earliest armed instant on CLOCK_MONOTONIC. When an instant
//! comes, every agent due then is stamped first (the instant each of them
//! "switched"), and only then told: the stamps are not spread by the
//! harness's own sends.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{Arc, Condvar, Mutex},
    time::Duration,
};

use cosched_proto::wire::{monotonic_ns, sleep_until};
use tokio::sync::mpsc::UnboundedSender;

use crate::stats::{Counters, Stats};

/// A switch an agent applies at `at_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Armed {
    pub at_ns: u64,
    pub agent: usize,
    /// The agent's session it was announced on (a later session drops it).
    pub session: u32,
    pub epoch: u64,
    pub slice: u64,
    /// The agent's schedule it came from (0: a `SwitchSlice`); a later
    /// schedule does not continue an older one's chain.
    pub schedule: u64,
}

/// A switch that happened: sent back to its agent to report.
#[derive(Debug, Clone, Copy)]
pub struct Fired {
    pub armed: Armed,
    pub switched_at_ns: u64,
}

/// Switches armed and not yet taken by the timer thread. A mutex and a
/// condition variable, not `std::sync::mpsc`: a receiver of that channel
/// spin-waits (yielding) for a sender it interrupted mid-push, and a
/// SCHED_FIFO receiver interrupting a SCHED_OTHER sender on the same CPU
/// then spins until RT throttling stops it (0.95 s; measured: switch
/// lateness p99 0.9 s). A mutex's waiter sleeps instead.
#[derive(Default)]
struct Pending {
    queue: Mutex<Queue>,
    changed: Condvar,
}

#[derive(Default)]
struct Queue {
    armed: Vec<Armed>,
    stop: bool,
    /// The timer thread waits on the condition variable until this instant
    /// (0: it is not waiting): only a switch armed before it needs a
    /// wake-up (at 1000 agents, waking the SCHED_FIFO thread for every arm
    /// took the stand-ins' whole CPU).
    waiting_until: u64,
}

#[derive(Clone)]
pub struct SwitchTimer {
    pending: Arc<Pending>,
}

impl SwitchTimer {
    /// Starts the thread; `fired[agent]` receives that agent's switches.
    /// `fifo_priority` > 0 runs it SCHED_FIFO, as the real agent's timer
    /// (`agent_priority`), so the stand-ins' own work on the same CPU does
    /// not delay its wake-ups.
    pub fn spawn(
        fired: Vec<UnboundedSender<Fired>>,
        stats: Arc<Stats>,
        fifo_priority: u32,
    ) -> std::io::Result<Self> {
        let pending = Arc::new(Pending::default());
        let armed = pending.clone();
        std::thread::Builder::new()
            .name("scale-switch-timer".into())
            .spawn(move || {
                if fifo_priority > 0 {
                    match set_fifo(fifo_priority) {
                        Ok(()) => Counters::bump(&stats.counters.timer_fifo),
                        Err(error) => eprintln!("scale: switch timer stays SCHED_OTHER: {error}"),
                    }
                }
                run(armed, fired, stats)
            })?;
        Ok(Self { pending })
    }

    pub fn arm(&self, armed: Armed) {
        let mut queue = self.pending.queue.lock().expect("timer queue");
        queue.armed.push(armed);
        if armed.at_ns < queue.waiting_until {
            self.pending.changed.notify_one();
        }
    }

    /// Ends the timer thread.
    pub fn stop(&self) {
        self.pending.queue.lock().expect("timer queue").stop = true;
        self.pending.changed.notify_one();
    }
}

/// SCHED_FIFO at `priority` for the calling thread.
fn set_fifo(priority: u32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority as libc::c_int,
    };
    // SAFETY: pid 0 = the calling thread; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn run(pending: Arc<Pending>, fired: Vec<UnboundedSender<Fired>>, stats: Arc<Stats>) {
    // SAFETY: plain prctl on the calling thread; 1 ns slack = no rounding.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let mut heap: BinaryHeap<Reverse<Armed>> = BinaryHeap::new();
    let mut due: Vec<Fired> = Vec::new();
    loop {
        // Take what was armed; wait (at most until the earliest instant)
        // only when nothing is due yet.
        {
            let mut queue = pending.queue.lock().expect("timer queue");
            loop {
                queue.waiting_until = 0;
                if queue.stop {
                    return;
                }
                heap.extend(queue.armed.drain(..).map(Reverse));
                let now = monotonic_ns();
                match heap.peek().map(|Reverse(next)| next.at_ns) {
                    // Due, or close: sleep it out exactly below.
                    Some(at) if at < now + 200_000 => break,
                    Some(at) => {
                        queue.waiting_until = at;
                        queue = pending
                            .changed
                            .wait_timeout(queue, Duration::from_nanos(at - now - 100_000))
                            .expect("timer queue")
                            .0;
                    }
                    None => {
                        queue.waiting_until = u64::MAX;
                        queue = pending.changed.wait(queue).expect("timer queue");
                    }
                }
            }
        }
        let now = monotonic_ns();
        if heap.peek().is_some_and(|Reverse(next)| next.at_ns > now) {
            // Sleep the rest exactly (condition variable timeouts are
            // neither absolute nor slack-free).
            let at = heap.peek().map(|Reverse(next)| next.at_ns).unwrap_or(now);
            sleep_until(at);
        }
        let now = monotonic_ns();
        while let Some(Reverse(next)) = heap.peek().copied() {
            if next.at_ns > now {
                break;
            }
            heap.pop();
            due.push(Fired {
                armed: next,
                switched_at_ns: monotonic_ns(),
            });
        }
        for fired_switch in due.drain(..) {
            stats.switched(
                (fired_switch.armed.epoch, fired_switch.armed.slice),
                fired_switch.switched_at_ns,
                fired_switch.armed.at_ns,
            );
            if let Some(agent) = fired.get(fired_switch.armed.agent) {
                let _ = agent.send(fired_switch);
            }
        }
    }
}
