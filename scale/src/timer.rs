//! One precise switch timer for all stand-in agents, as the real agent's
//! (`agent/src/coord/timer.rs`): a thread without timer slack that sleeps
//! until the earliest armed instant on CLOCK_MONOTONIC. When an instant
//! comes, every agent due then is stamped first (the instant each of them
//! "switched"), and only then told: the stamps are not spread by the
//! harness's own sends.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{Arc, mpsc},
    time::Duration,
};

use cosched_proto::wire::{monotonic_ns, sleep_until};
use tokio::sync::mpsc::UnboundedSender;

use crate::stats::Stats;

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

#[derive(Clone)]
pub struct SwitchTimer {
    arm: mpsc::Sender<Armed>,
}

impl SwitchTimer {
    /// Starts the thread; `fired[agent]` receives that agent's switches.
    pub fn spawn(fired: Vec<UnboundedSender<Fired>>, stats: Arc<Stats>) -> std::io::Result<Self> {
        let (arm, armed) = mpsc::channel::<Armed>();
        std::thread::Builder::new()
            .name("scale-switch-timer".into())
            .spawn(move || run(armed, fired, stats))?;
        Ok(Self { arm })
    }

    pub fn arm(&self, armed: Armed) {
        let _ = self.arm.send(armed);
    }
}

fn run(armed: mpsc::Receiver<Armed>, fired: Vec<UnboundedSender<Fired>>, stats: Arc<Stats>) {
    // SAFETY: plain prctl on the calling thread; 1 ns slack = no rounding.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let mut heap: BinaryHeap<Reverse<Armed>> = BinaryHeap::new();
    let mut due: Vec<Fired> = Vec::new();
    loop {
        // Take what was armed; wait (at most until the earliest instant)
        // only when nothing is due yet.
        let now = monotonic_ns();
        let wait = heap
            .peek()
            .map(|Reverse(next)| next.at_ns.saturating_sub(now));
        let received = match wait {
            Some(0) => armed.try_recv().map_err(|error| match error {
                mpsc::TryRecvError::Empty => None,
                mpsc::TryRecvError::Disconnected => Some(()),
            }),
            Some(ns) => armed
                .recv_timeout(Duration::from_nanos(ns))
                .map_err(|error| match error {
                    mpsc::RecvTimeoutError::Timeout => None,
                    mpsc::RecvTimeoutError::Disconnected => Some(()),
                }),
            None => armed.recv().map_err(|_| Some(())),
        };
        match received {
            Ok(next) => {
                heap.push(Reverse(next));
                continue;
            }
            Err(Some(())) => return,
            Err(None) => {}
        }
        let now = monotonic_ns();
        if heap.peek().is_some_and(|Reverse(next)| next.at_ns > now) {
            // Woke early (futex timeouts are not absolute): sleep the rest
            // exactly.
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
