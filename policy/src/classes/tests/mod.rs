//! Scenario and invariant tests of the BE/RT class algorithms.

mod frames_scenarios;
mod support;
