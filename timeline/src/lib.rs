//! Timelines of what the scheduler did: per node, which job's process held
//! each CPU over time (and when it spun), the agent's actions on its tasks
//! and the coordinator's slice switches, from the recordings agents return
//! for a `timeline` request ([`cosched_proto::timeline::NodeTimeline`]),
//! drawn as SVG with the nodes one above the other on a common clock.
//!
//! [`model`] turns records into intervals, [`svg`] lays them out and
//! writes the SVG, [`summary`] says it in text, [`clock`] moves separate
//! machines' recordings onto the coordinator's clock: all pure. [`record`] is the
//! one part that talks to agents (their control sockets).
pub mod clock;
pub mod model;
pub mod record;
pub mod summary;
pub mod svg;

pub use svg::render;
