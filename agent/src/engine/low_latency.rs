//! Holding the CPUs out of halting idle states while RT jobs run (see
//! `crate::low_latency` for why and for the decision).
use cosched_proto::control::JobState;

use super::Engine;
use crate::{kernel::Kernel, low_latency::wants_low_latency};

impl<K: Kernel> Engine<K> {
    /// Takes or releases the CPU latency request as the node's RT jobs and
    /// the config ask. Called wherever the agent's own priority is
    /// reconsidered (a job reserved, classified, ended; a mode or config
    /// change). A refusal is logged once per change of mind, not retried
    /// until the answer changes: the agent works without it, with the
    /// halting CPUs' slower wake-ups.
    pub(super) fn update_low_latency(&mut self) {
        let running_rt = self
            .reg
            .jobs()
            .filter(|j| j.rt.is_some() && j.state == JobState::Running)
            .count();
        let want = wants_low_latency(self.cfg.classes.low_latency_idle, running_rt);
        self.set_low_latency(want);
    }

    /// Releases the request (shutdown; the kernel would at exit anyway).
    pub(super) fn release_low_latency(&mut self) {
        self.set_low_latency(false);
    }

    fn set_low_latency(&mut self, want: bool) {
        if self.low_latency_wanted == Some(want) {
            return;
        }
        let was = self.low_latency_wanted.replace(want);
        match self.k.hold_low_latency(want) {
            Ok(()) => {
                self.metrics.low_latency_held.set(i64::from(want));
                if want {
                    tracing::info!(
                        "RT jobs run here: idle CPUs poll instead of halting (CPU latency request 0 µs)"
                    );
                } else if was == Some(true) {
                    tracing::info!("no RT job runs here: CPU latency request released");
                }
            }
            Err(e) => {
                self.metrics.low_latency_held.set(0);
                tracing::warn!(
                    "cannot hold a CPU latency request of 0 µs ({e}); RT wake-ups may wait for a halted CPU"
                );
            }
        }
    }
}
