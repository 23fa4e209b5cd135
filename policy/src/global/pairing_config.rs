//! Paired gang settings (Paired Gang Scheduling §2.4-2.6).

use serde::{Deserialize, Serialize};

/// Settings of paired gang scheduling, with the paper's values as defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairingConfig {
    /// Safety margin m of the pairing condition x + y + m < 100 % (§2.4:
    /// "we used m = 1%").
    #[serde(default = "default_margin_percent")]
    pub margin_percent: f64,
    /// Slot homogeneity band M (§2.5: "we have used M = 20%"): a job whose
    /// utilisation is not below min(slot) + M is moved out of its slot, and an
    /// alternate must fall within M of the slot it joins (§2.6).
    #[serde(default = "default_homogeneity_band_percent")]
    pub homogeneity_band_percent: f64,
    /// Move jobs out of heterogeneous rows at the start of each round.
    #[serde(default = "default_homogenize_rows")]
    pub homogenize_rows: bool,
}

fn default_margin_percent() -> f64 {
    1.0
}

fn default_homogeneity_band_percent() -> f64 {
    20.0
}

fn default_homogenize_rows() -> bool {
    true
}

impl Default for PairingConfig {
    fn default() -> Self {
        Self {
            margin_percent: default_margin_percent(),
            homogeneity_band_percent: default_homogeneity_band_percent(),
            homogenize_rows: default_homogenize_rows(),
        }
    }
}
