//! Scenario and invariant tests of the BE/RT class algorithms.

mod edf_scenarios;
mod frames_scenarios;
mod support;
