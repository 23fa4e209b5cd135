//! What a policy knows about each task and CPU, kept up to date from events and
//! corrected by snapshots.
//!
//! Spin time is measured as *on-CPU* time since the spin episode started: a
//! spinner that has been preempted wastes no CPU, so only the time it actually
//! burns counts towards a spin threshold (the Scheduler Testbed report §2.2: ICS spins "some time",
//! then blocks to relinquish the CPU; the cost being bounded is CPU time).

use super::event::{CpuSnapshot, SwitchOut, TaskSnapshot};
use super::ids::TaskId;
use std::collections::BTreeMap;

/// One spin (busy-wait) episode: from the first empty receive to data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpinEpisode {
    /// When the task started waiting.
    pub since: u64,
    /// When the first message of the episode arrived (ends the *wait*; the
    /// rest until the receive is scheduling delay).
    pub first_arrival: Option<u64>,
    /// `since` is the true start (not first seen through an arrival's flag),
    /// so the episode measures a wait.
    start_known: bool,
    /// Spin CPU time accumulated over earlier runs since `clock_from`.
    cpu_ns: u64,
    /// Spin time counts from here (moved forward when the clock is reset).
    clock_from: u64,
}

/// The observed state of one managed task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Observed {
    pub on_cpu: bool,
    /// The CPU it runs on, or last ran on.
    pub cpu: Option<u32>,
    /// Its last switch-out was a preemption: it is still runnable.
    pub preempted: bool,
    /// A message arrived after its last successful receive.
    pub pending_message: bool,
    /// The current spin episode, if it is waiting for a message.
    pub spin: Option<SpinEpisode>,
    /// On CPU since (meaningful while `on_cpu`).
    run_start: u64,
}

impl Observed {
    /// Runnable: on CPU, preempted, or has a message to process.
    pub fn runnable(&self) -> bool {
        self.on_cpu || self.preempted || self.pending_message
    }

    /// Waiting for a message that has not arrived: spinning with nothing to do.
    pub fn waiting_idle(&self) -> bool {
        self.spin.is_some() && !self.pending_message
    }

    /// Computing: runnable and not in a spin episode.
    pub fn computing(&self) -> bool {
        self.runnable() && self.spin.is_none()
    }

    pub fn message_arrived(&mut self, at: u64, on_cpu: bool, spinning: bool) {
        if on_cpu && !self.on_cpu {
            self.on_cpu = true;
            self.run_start = at;
        } else if !on_cpu && self.on_cpu {
            self.switched_out(at, SwitchOut::Preempted);
        }
        if spinning && self.spin.is_none() {
            self.start_spin(at);
            if let Some(episode) = self.spin.as_mut() {
                episode.start_known = false;
            }
        }
        if let Some(episode) = self.spin.as_mut() {
            episode.first_arrival.get_or_insert(at);
        }
        self.pending_message = true;
    }

    pub fn switched_in(&mut self, cpu: u32, at: u64) {
        self.on_cpu = true;
        self.cpu = Some(cpu);
        self.run_start = at;
        self.preempted = false;
    }

    pub fn switched_out(&mut self, at: u64, how: SwitchOut) {
        if self.on_cpu {
            let run_start = self.run_start;
            if let Some(episode) = self.spin.as_mut() {
                episode.cpu_ns += at.saturating_sub(run_start.max(episode.clock_from));
            }
        }
        self.on_cpu = false;
        self.preempted = how == SwitchOut::Preempted;
    }

    pub fn spin_started(&mut self, at: u64) {
        if self.spin.is_none() {
            self.start_spin(at);
        }
        self.pending_message = false;
    }

    /// Ends the spin episode; returns the message wait time it measured.
    pub fn data_received(&mut self, at: u64) -> Option<u64> {
        self.pending_message = false;
        let episode = self.spin.take().filter(|e| e.start_known)?;
        Some(
            episode
                .first_arrival
                .unwrap_or(at)
                .saturating_sub(episode.since),
        )
    }

    /// On-CPU time spent spinning in the current episode, as of `now`.
    pub fn spin_cpu_ns(&self, now: u64) -> u64 {
        let Some(episode) = self.spin else { return 0 };
        let running = if self.on_cpu {
            now.saturating_sub(self.run_start.max(episode.clock_from))
        } else {
            0
        };
        episode.cpu_ns + running
    }

    /// When an idle, on-CPU spinner reaches `threshold` of spin CPU time.
    pub fn spin_deadline(&self, threshold: u64) -> Option<u64> {
        self.spin_deadline_by(|| threshold)
    }

    /// [`Self::spin_deadline`] with a threshold computed only when the task
    /// is spinning on a CPU now: the policy's threshold may look at every
    /// other task (MPL-aware blocking counts a CPU's competitors), and at
    /// most one task per CPU spins at a time, so asking only those keeps a
    /// pass over a node's tasks linear.
    pub fn spin_deadline_by(&self, threshold: impl FnOnce() -> u64) -> Option<u64> {
        let episode = self.spin?;
        if !self.on_cpu || self.pending_message {
            return None;
        }
        let counting_since = self.run_start.max(episode.clock_from);
        Some(counting_since.saturating_add(threshold().saturating_sub(episode.cpu_ns)))
    }

    /// Restarts the spin clock: the task gets a full threshold again.
    pub fn reset_spin_clock(&mut self, now: u64) {
        if let Some(episode) = self.spin.as_mut() {
            episode.cpu_ns = 0;
            episode.clock_from = now;
        }
    }

    /// Adopts a snapshot as the truth. Returns true when it shows a pending
    /// message the events had not reported (a lost arrival).
    pub fn reconcile(&mut self, snap: &TaskSnapshot, now: u64) -> bool {
        if snap.on_cpu && !self.on_cpu {
            self.on_cpu = true;
            self.run_start = now;
        } else if !snap.on_cpu {
            let how = if snap.preempted {
                SwitchOut::Preempted
            } else {
                SwitchOut::Voluntary
            };
            self.switched_out(now, how);
        }
        match (snap.spinning_since, self.spin) {
            (Some(since), None) => self.start_spin_counting_from(since, now),
            (Some(since), Some(episode)) if episode.since != since => {
                self.start_spin_counting_from(since, now)
            }
            (None, Some(_)) => self.spin = None,
            _ => {}
        }
        let newly_pending = snap.pending_message && !self.pending_message;
        self.pending_message = snap.pending_message;
        if newly_pending && let Some(episode) = self.spin.as_mut() {
            // The counters carry the arrival's kernel time: the wait measured
            // for spin-time learning ends there, not at this (later) look.
            let at = if (episode.since..=now).contains(&snap.last_arrival_ns) {
                snap.last_arrival_ns
            } else {
                now
            };
            episode.first_arrival.get_or_insert(at);
        }
        newly_pending
    }

    fn start_spin(&mut self, at: u64) {
        self.start_spin_counting_from(at, at);
    }

    fn start_spin_counting_from(&mut self, since: u64, clock_from: u64) {
        self.spin = Some(SpinEpisode {
            since,
            first_arrival: None,
            start_known: true,
            cpu_ns: 0,
            clock_from,
        });
    }
}

/// Which managed task each CPU runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuOccupancy {
    running: BTreeMap<u32, TaskId>,
}

impl CpuOccupancy {
    /// Records `task` on `cpu`; returns the task it displaced there, if any
    /// (its switch-out event was lost or is still in flight).
    pub fn switched_in(&mut self, task: TaskId, cpu: u32) -> Option<TaskId> {
        self.remove(task);
        self.running
            .insert(cpu, task)
            .filter(|&previous| previous != task)
    }

    pub fn remove(&mut self, task: TaskId) {
        self.running.retain(|_, running| *running != task);
    }

    pub fn replace(&mut self, cpus: &[CpuSnapshot]) {
        self.running = cpus
            .iter()
            .filter_map(|c| c.running.map(|t| (c.cpu, t)))
            .collect();
    }

    /// `(cpu, task)` pairs in CPU order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, TaskId)> + '_ {
        self.running.iter().map(|(&cpu, &task)| (cpu, task))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_time_counts_only_on_cpu() {
        let mut obs = Observed::default();
        obs.switched_in(0, 0);
        obs.spin_started(100);
        assert_eq!(obs.spin_cpu_ns(300), 200);
        obs.switched_out(300, SwitchOut::Preempted);
        assert_eq!(obs.spin_cpu_ns(1_000), 200);
        obs.switched_in(0, 1_000);
        assert_eq!(obs.spin_cpu_ns(1_050), 250);
        assert_eq!(obs.spin_deadline(400), Some(1_200));
        obs.reset_spin_clock(1_100);
        assert_eq!(obs.spin_cpu_ns(1_150), 50);
    }

    #[test]
    fn a_spinner_off_its_cpu_has_no_spin_deadline_and_its_threshold_is_not_asked() {
        let mut obs = Observed::default();
        obs.switched_in(0, 0);
        obs.spin_started(100);
        obs.switched_out(300, SwitchOut::Preempted);
        let asked = std::cell::Cell::new(false);
        let deadline = obs.spin_deadline_by(|| {
            asked.set(true);
            400
        });
        assert_eq!(deadline, None);
        assert!(!asked.get(), "a task off its CPU must not cost a threshold");
        obs.switched_in(0, 1_000);
        assert_eq!(obs.spin_deadline_by(|| 400), Some(1_200));
    }

    #[test]
    fn wait_ends_at_first_arrival() {
        let mut obs = Observed::default();
        obs.switched_in(0, 0);
        obs.spin_started(1_000);
        obs.message_arrived(1_500, false, true);
        assert!(obs.runnable());
        assert!(!obs.waiting_idle());
        assert_eq!(obs.data_received(4_000), Some(500));
        assert!(obs.spin.is_none());
    }

    #[test]
    fn displaced_task_is_reported() {
        let mut cpus = CpuOccupancy::default();
        assert_eq!(cpus.switched_in(TaskId(1), 0), None);
        assert_eq!(cpus.switched_in(TaskId(2), 0), Some(TaskId(1)));
        assert_eq!(cpus.switched_in(TaskId(2), 1), None);
        assert_eq!(cpus.iter().collect::<Vec<_>>(), vec![(1, TaskId(2))]);
    }
}
