//! Scenario and property tests of the local policies.

mod boost_default_scenarios;
mod config_tests;
mod dcs_scenarios;
mod fairness_scenarios;
mod fcs_scenarios;
mod harness;
mod invariants;
mod pb_scenarios;
mod sb_mpl_scenarios;
mod spin_scenarios;
