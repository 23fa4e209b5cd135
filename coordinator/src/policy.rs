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
    /// One-level gang scheduling of BE and RT jobs (the BE/RT coscheduling
    /// paper §4.1): a matrix of `classes.one_gs_rows` rows split x:y between
    /// the classes, replication into idle cells, r rows per admitted RT job.
    OneLevelGang,
    /// Two-level dynamic coscheduling with rigid time-division multiplexing
    /// (§4.2): the cluster alternates RT and BE divisions of Δ split x:y;
    /// each node schedules its classes itself inside them.
    #[serde(rename = "2dcs-tdm")]
    TwoDcsTdm,
    /// Two-level dynamic coscheduling with proportional share (§4.3): each
    /// node shares its CPUs between the classes x:y by virtual time; nothing
    /// is broadcast.
    #[serde(rename = "2dcs-ps")]
    TwoDcsPs,
}

impl GlobalPolicy {
    pub const ALL: [GlobalPolicy; 7] = [
        Self::Fcfs,
        Self::Gang,
        Self::PairedGang,
        Self::Fcs,
        Self::OneLevelGang,
        Self::TwoDcsTdm,
        Self::TwoDcsPs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fcfs => "fcfs",
            Self::Gang => "gang",
            Self::PairedGang => "paired-gang",
            Self::Fcs => "fcs",
            Self::OneLevelGang => "one-level-gang",
            Self::TwoDcsTdm => "2dcs-tdm",
            Self::TwoDcsPs => "2dcs-ps",
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

    /// Whether the policy tells BE and RT jobs apart (admission, class
    /// shares): the only policies that take RT jobs.
    pub fn has_classes(self) -> bool {
        matches!(self, Self::OneLevelGang | Self::TwoDcsTdm | Self::TwoDcsPs)
    }

    /// Whether jobs hold cells of the Ousterhout matrix (`Core::matrix`)
    /// and rotate through its rows: fcfs, gang, paired gang, fcs.
    pub fn uses_matrix(self) -> bool {
        !self.has_classes()
    }

    /// The names of the policies that take RT jobs, for messages.
    pub const CLASS_POLICIES: &'static str = "one-level-gang, 2dcs-tdm or 2dcs-ps";
}

impl fmt::Display for GlobalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown policy name; the message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown policy {0:?} (known: fcfs, gang, paired-gang, fcs, one-level-gang, 2dcs-tdm, 2dcs-ps)"
)]
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
        for policy in GlobalPolicy::ALL {
            assert!(error.to_string().contains(policy.as_str()), "{error}");
        }
    }

    #[test]
    fn only_the_be_rt_policies_have_classes_and_they_use_no_ousterhout_matrix() {
        let classes: Vec<&str> = GlobalPolicy::ALL
            .into_iter()
            .filter(|policy| policy.has_classes())
            .map(GlobalPolicy::as_str)
            .collect();
        assert_eq!(classes, ["one-level-gang", "2dcs-tdm", "2dcs-ps"]);
        assert_eq!(classes.join(", "), "one-level-gang, 2dcs-tdm, 2dcs-ps");
        assert!(
            GlobalPolicy::ALL
                .into_iter()
                .all(|policy| policy.uses_matrix() != policy.has_classes())
        );
    }
}
