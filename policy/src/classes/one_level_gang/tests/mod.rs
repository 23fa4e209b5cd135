//! Scenario and property tests of 1GS.

mod admission;
mod between_events;
mod figure_2;
mod invariants;
mod rotation;
mod scenarios;
mod snapshot;
mod support;
