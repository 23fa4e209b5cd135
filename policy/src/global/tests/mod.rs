//! Scenario and invariant tests of the global algorithms.

mod clock_scenarios;
mod invariants;
mod matrix_scenarios;
mod paired_scenarios;
mod slice_scenarios;
mod support;
