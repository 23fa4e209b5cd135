//! Scenario and invariant tests of the BE/RT class algorithms.

mod accounting_invariants;
mod admission_scenarios;
mod allocation_scenarios;
mod division_fallback_scenarios;
mod edf_scenarios;
mod frames_scenarios;
mod invariants;
mod probabilistic_scenarios;
mod ps_scenarios;
mod support;
mod tdm_scenarios;
