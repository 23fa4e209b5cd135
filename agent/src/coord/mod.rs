//! The agent's link to the coordinator (optional: without a `[coordinator]`
//! config table the agent is standalone).
//!
//! - [`config`]: the `[coordinator]` table.
//! - [`link`]: the connection task (handshake, `Register`, heartbeats both
//!   ways, reconnects), counting refused frames by reason.
//! - [`node`]: the node's side of the protocol between link and engine.
//! - [`switch`], [`classes`], [`quantum`], [`exits`], [`spec`],
//!   [`deadlines`]: its pure decisions (when and how to apply a slice or a
//!   division, what the BE/RT policies ask of the class overlay, frame
//!   reports, per-quantum utilisation, exit reporting, `LaunchJob` to job
//!   spec, which armed switch is due).
//! - [`timer`]: the precise switch timer (a timerfd on the event loop).
//! - [`metrics`]: the link's Prometheus metrics.
//!
//! Conventions shared with the coordinator: after `Register` the agent sends
//! its inventory of running coordinator jobs as a `UtilReport` whose entries
//! carry the quantum [`node::INVENTORY_QUANTUM`] (possibly empty); then rank
//! exits it has not reported yet. `SetPolicy` names the global policy
//! (`fcfs`, `gang`, `paired-gang`, `fcs`, `one-level-gang`, `2dcs-tdm`,
//! `2dcs-ps`) or a local one; under the last three `ClassSettings` follows.
//! A `SwitchSlice` without rows ends gang mode.
pub mod classes;
pub mod config;
pub mod deadlines;
pub mod exits;
pub mod link;
pub mod metrics;
pub mod node;
pub mod quantum;
pub mod spec;
pub mod switch;
pub mod timer;

#[cfg(test)]
mod tests;

pub use config::CoordinatorConfig;
pub use node::{Action, CoordNode, CoordReceivers};

use cosched_proto::timeline::SliceNumber;

use crate::{engine::Engine, kernel::Kernel};

/// Carries out, in order, the node side's actions that are for the engine
/// (gang overlay, slots, journal, switch reports, class overlay, divisions)
/// and returns the others (launches, cancels, policy changes) for the
/// daemon.
pub fn apply_to_engine<K: Kernel>(
    node: &mut CoordNode,
    engine: &mut Engine<K>,
    actions: Vec<Action>,
) -> Vec<Action> {
    let mut rest = Vec::new();
    for action in actions {
        match action {
            Action::SetGang(gang) => engine.set_gang(gang),
            Action::SlotStarted { owner, until_ns } => engine.slot_started(owner, until_ns),
            Action::PrepareToStop => engine.prepare_to_stop(),
            Action::Switched(switch) => {
                engine.slice_switched(SliceNumber {
                    epoch: switch.epoch,
                    slice: switch.slice,
                });
                node.switched(engine, &switch);
            }
            Action::SetClasses(order) => {
                if let Err(error) = engine.set_coordinator_classes(order) {
                    node.refused(format!("class mode {order:?} refused: {error}"));
                }
            }
            Action::DivisionStarted(division) => {
                engine.division_started(classes::division(&division));
                node.division_switched(&division);
            }
            Action::FirstFrame { job, at_ns } => match engine.open_first_frame(job, at_ns) {
                Ok(true) => tracing::info!(job, at_ns, "first frame gated"),
                Ok(false) => tracing::debug!(job, "a first-frame instant for a job without a gate"),
                Err(e) => tracing::warn!(job, "cannot publish the first-frame instant: {e}"),
            },
            other => rest.push(other),
        }
    }
    rest
}
