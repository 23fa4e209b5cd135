//! Timelines of what the scheduler did: per node, which job's process held
//! each CPU over time (and when it spun), the agent's actions on its tasks
//! and the coordinator's slice switches, from the recordings agents return
//! for a `timeline` request ([`cosched_proto::timeline::NodeTimeline`]),
//! drawn as SVG with the nodes one above the other on a common clock.
//!
//! Pure: [`model`] turns records into intervals, [`svg`] lays them out and
//! writes the SVG. Nothing here talks to an agent.
pub mod model;
pub mod svg;

pub use svg::render;
