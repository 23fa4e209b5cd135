//! The configuration of the local policies, as the agent's TOML embeds it, and
//! its validation errors.
//!
//! ```toml
//! [policy]
//! kind = "pb-sb"
//! [policy.pb]
//! period_us = 1000
//! [policy.sb]
//! spin_threshold_us = 300
//! block_by = "stop"
//! ```
//! Every field has a default, unknown fields are rejected.

use super::dcs::DcsParams;
use super::fairness::FairnessParams;
use super::fcs::FcsParams;
use super::periodic_boost::PeriodicBoostParams;
use super::policy::PolicyKind;
use super::spin_block::{SpinBlockParams, SpinYieldParams};
use serde::{Deserialize, Serialize};

/// Everything the local-policy factory needs: which policy, and the parameters
/// of every policy (so that a reload can switch kinds without losing them).
/// Combinations use their parts' sections: `pb-sb` reads `pb` and `sb`,
/// `dcs-sb` reads `dcs` and `sb`; every boosting policy reads `fairness`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocalPolicyConfig {
    /// The policy to run. Default `local`.
    pub kind: PolicyKind,
    pub dcs: DcsParams,
    pub sb: SpinBlockParams,
    pub sy: SpinYieldParams,
    pub pb: PeriodicBoostParams,
    pub fcs: FcsParams,
    pub fairness: FairnessParams,
}

impl LocalPolicyConfig {
    /// Checks every section (not only the selected policy's), so that a config
    /// that would fail after a later switch of `kind` is refused now.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.dcs.validate()?;
        self.sb.validate()?;
        self.sy.validate()?;
        self.pb.validate()?;
        self.fcs.validate()?;
        self.fairness.validate()
    }

    /// The default configuration of `kind`.
    pub fn for_kind(kind: PolicyKind) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }
}

/// A configuration value the policies cannot work with. `field` is the dotted
/// path below `[policy]`, e.g. `sb.learning.min_us`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field} must be greater than zero")]
    Zero { field: String },
    #[error("{field} = {value} is outside {min}..={max}")]
    OutOfRange {
        field: String,
        value: u64,
        min: u64,
        max: u64,
    },
    #[error("{low_field} ({low}) must not exceed {high_field} ({high})")]
    Inverted {
        low_field: String,
        low: u64,
        high_field: String,
        high: u64,
    },
    #[error("{field} must be a finite number greater than zero, got {value}")]
    NotPositive { field: String, value: f64 },
}

impl ConfigError {
    pub(crate) fn require_positive(field: &str, value: u64) -> Result<(), Self> {
        if value == 0 {
            Err(Self::Zero {
                field: field.to_owned(),
            })
        } else {
            Ok(())
        }
    }

    pub(crate) fn require_range(field: &str, value: u64, min: u64, max: u64) -> Result<(), Self> {
        if (min..=max).contains(&value) {
            Ok(())
        } else {
            Err(Self::OutOfRange {
                field: field.to_owned(),
                value,
                min,
                max,
            })
        }
    }

    pub(crate) fn require_ordered(
        low_field: &str,
        low: u64,
        high_field: &str,
        high: u64,
    ) -> Result<(), Self> {
        if low <= high {
            Ok(())
        } else {
            Err(Self::Inverted {
                low_field: low_field.to_owned(),
                low,
                high_field: high_field.to_owned(),
                high,
            })
        }
    }

    pub(crate) fn require_finite_positive(field: &str, value: f64) -> Result<(), Self> {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(Self::NotPositive {
                field: field.to_owned(),
                value,
            })
        }
    }

    /// A real-time priority usable with SCHED_FIFO/RR.
    pub(crate) fn require_rt_prio(field: &str, prio: u8) -> Result<(), Self> {
        Self::require_range(field, prio.into(), 1, 99)
    }
}
