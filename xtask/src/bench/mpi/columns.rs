//! The columns of `bench mpi`: how the nodes treat the jobs.
//!
//! - `local`: plain Linux (agents under the `local` policy, ranks adopted);
//! - `yield`: plain Linux with the library's own yield mode (OpenMPI's
//!   `mpi_yield_when_idle 1`; MPICH's ch4 device has none, so the column
//!   is marked not runnable for it);
//! - every local policy (agents switched by config reload, as `bench
//!   local` does), ranks adopted into the agents;
//! - `gang`, `paired-gang`: the coordinator's time slices at `--slice-ms`
//!   (agents on plain Linux, the coordinator switched to the policy); every
//!   job is launched under `cosched attach` and its node daemons join it
//!   (see `run`). Outside these columns the coordinator idles in `fcfs`.
use crate::{bench::local::policies, mpi::Library};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// A local policy of the agents (`local` = plain Linux), or a variant
    /// (`name:key=value`).
    Policy(String),
    /// Plain Linux with the library's yield mode.
    Yield,
    /// A coordinator policy (`gang`, `paired-gang`) at a slice length.
    Coordinator { policy: &'static str, slice_ms: u64 },
}

impl Column {
    /// Parses a column name: `yield`, `gang`, `paired-gang`, or a local
    /// policy (variant).
    pub fn parse(name: &str, slice_ms: u64) -> anyhow::Result<Self> {
        Ok(match name {
            "yield" => Column::Yield,
            "gang" => Column::Coordinator {
                policy: "gang",
                slice_ms,
            },
            "paired-gang" => Column::Coordinator {
                policy: "paired-gang",
                slice_ms,
            },
            other => {
                policies::PolicySpec::parse(other)?;
                Column::Policy(other.to_string())
            }
        })
    }

    /// Every column, in the table's order.
    pub fn all(slice_ms: u64) -> Vec<Self> {
        let mut all = vec![Column::Policy(policies::BASELINE.into()), Column::Yield];
        all.extend(
            policies::ALL
                .iter()
                .filter(|p| **p != policies::BASELINE)
                .map(|p| Column::Policy(p.to_string())),
        );
        for policy in ["gang", "paired-gang"] {
            all.push(Column::Coordinator { policy, slice_ms });
        }
        all
    }

    pub fn label(&self) -> String {
        match self {
            Column::Policy(p) => p.clone(),
            Column::Yield => "yield".into(),
            Column::Coordinator { policy, slice_ms } => format!("{policy}@{slice_ms}ms"),
        }
    }

    /// The agents' policy during this column.
    pub fn agent_policy(&self) -> &str {
        match self {
            Column::Policy(p) => p,
            _ => policies::BASELINE,
        }
    }

    /// Why this column cannot be measured for `lib`, if it cannot.
    pub fn not_runnable(&self, lib: Library) -> Option<String> {
        match self {
            Column::Yield if !lib.has_yield_mode() => Some(format!(
                "{} has no yield mode (ch4 polls with epoll_wait(…, 0); \
                 MPIR_CVAR_POLLS_BEFORE_YIELD is ch3's)",
                lib.as_str()
            )),
            _ => None,
        }
    }

    pub fn is_local_policy(&self) -> bool {
        matches!(self, Column::Policy(p) if p != policies::BASELINE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_once_and_the_unrunnable_ones_say_why() {
        let all = Column::all(10);
        let labels: Vec<String> = all.iter().map(Column::label).collect();
        assert_eq!(
            labels,
            [
                "local",
                "yield",
                "dcs",
                "sb",
                "sy",
                "pb",
                "pb-sb",
                "dcs-sb",
                "fcs",
                "gang@10ms",
                "paired-gang@10ms"
            ]
        );
        assert!(Column::Yield.not_runnable(Library::Openmpi).is_none());
        assert!(Column::Yield.not_runnable(Library::Mpich).is_some());
        assert!(all[9].not_runnable(Library::Mpich).is_none());
        assert_eq!(Column::Yield.agent_policy(), "local");
        assert_eq!(Column::parse("dcs", 10).unwrap().agent_policy(), "dcs");
        assert!(Column::parse("nope", 10).is_err());
        assert!(Column::parse("dcs", 10).unwrap().is_local_policy());
        assert!(!Column::parse("local", 10).unwrap().is_local_policy());
    }
}
