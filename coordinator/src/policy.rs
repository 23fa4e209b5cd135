//! The cluster-wide scheduling policies the coordinator runs.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

/// Which global policy the coordinator runs (SPEC §2, "Global").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobalPolicy {
    /// Space sharing: one matrix row, jobs queue until enough nodes are free.
    Fcfs,
    /// Gang scheduling: one matrix row per slice, alternates fill idle nodes.
    #[default]
    Gang,
    /// Paired gang scheduling (Paired Gang Scheduling): one or two rows per slice.
    PairedGang,
    /// Flexible coscheduling (the Scheduler Testbed report §2.4): gang slots, inside which each
    /// agent's local FCS policy classifies and schedules the processes.
    Fcs,
}

impl GlobalPolicy {
    pub const ALL: [GlobalPolicy; 4] = [Self::Fcfs, Self::Gang, Self::PairedGang, Self::Fcs];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fcfs => "fcfs",
            Self::Gang => "gang",
            Self::PairedGang => "paired-gang",
            Self::Fcs => "fcs",
        }
    }

    /// Whether agents must apply a slice switch even when it arrives late.
    /// Space sharing never changes what runs, so its switches are hints.
    pub fn strict_switches(self) -> bool {
        self != Self::Fcfs
    }

    /// Whether the matrix has a single row (space sharing).
    pub fn is_space_sharing(self) -> bool {
        self == Self::Fcfs
    }
}

impl fmt::Display for GlobalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown policy name; the message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy {0:?} (known: fcfs, gang, paired-gang, fcs)")]
pub struct UnknownPolicy(pub String);

impl FromStr for GlobalPolicy {
    type Err = UnknownPolicy;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|policy| policy.as_str() == text)
            .ok_or_else(|| UnknownPolicy(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_serde() {
        for policy in GlobalPolicy::ALL {
            assert_eq!(policy.as_str().parse::<GlobalPolicy>(), Ok(policy));
            let json = serde_json::to_string(&policy).unwrap();
            assert_eq!(json, format!("\"{policy}\""));
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let error = "round-robin".parse::<GlobalPolicy>().unwrap_err();
        assert!(error.to_string().contains("paired-gang"), "{error}");
    }
}
