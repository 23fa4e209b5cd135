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
//!   (see `run`). Outside these columns the coordinator idles in `fcfs`;
//! - `paired-gang-ahead`: paired gang with `paired_schedule_ahead = true`
//!   in the coordinator's config (its slices announced to the agents as a
//!   schedule ahead, as gang's are). The key is fixed by the config, so the
//!   coordinator is restarted with it for this column and without it for
//!   the next `gang` / `paired-gang` one (`matrix`); so the key's A/B runs
//!   in one invocation, interleaved like every other column. Not in the
//!   default set: it is a variant of paired gang (like the local
//!   policies' `name:key=value` variants), measured when named.
use crate::{bench::local::policies, mpi::Library};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// A local policy of the agents (`local` = plain Linux), or a variant
    /// (`name:key=value`).
    Policy(String),
    /// Plain Linux with the library's yield mode.
    Yield,
    /// A coordinator policy (`gang`, `paired-gang`) at a slice length;
    /// `paired_ahead`: with `paired_schedule_ahead = true` in the
    /// coordinator's config (`paired-gang-ahead`).
    Coordinator {
        policy: &'static str,
        slice_ms: u64,
        paired_ahead: bool,
    },
}

/// The column of paired gang with its slices announced ahead.
pub const PAIRED_GANG_AHEAD: &str = "paired-gang-ahead";

impl Column {
    /// Parses a column name: `yield`, `gang`, `paired-gang`,
    /// `paired-gang-ahead`, or a local policy (variant).
    pub fn parse(name: &str, slice_ms: u64) -> anyhow::Result<Self> {
        let coordinator = |policy, paired_ahead| Column::Coordinator {
            policy,
            slice_ms,
            paired_ahead,
        };
        Ok(match name {
            "yield" => Column::Yield,
            "gang" => coordinator("gang", false),
            "paired-gang" => coordinator("paired-gang", false),
            PAIRED_GANG_AHEAD => coordinator("paired-gang", true),
            other => {
                policies::PolicySpec::parse(other)?;
                Column::Policy(other.to_string())
            }
        })
    }

    /// Every column of the default set, in the table's order (without
    /// `paired-gang-ahead`, see the module's doc).
    pub fn all(slice_ms: u64) -> Vec<Self> {
        let mut all = vec![Column::Policy(policies::BASELINE.into()), Column::Yield];
        all.extend(
            policies::ALL
                .iter()
                .filter(|p| **p != policies::BASELINE)
                .map(|p| Column::Policy(p.to_string())),
        );
        for policy in ["gang", "paired-gang"] {
            all.push(Column::Coordinator {
                policy,
                slice_ms,
                paired_ahead: false,
            });
        }
        all
    }

    /// The name `--columns` takes (`parse` reads it back).
    pub fn name(&self) -> String {
        match self {
            Column::Policy(p) => p.clone(),
            Column::Yield => "yield".into(),
            Column::Coordinator {
                paired_ahead: true, ..
            } => PAIRED_GANG_AHEAD.into(),
            Column::Coordinator { policy, .. } => policy.to_string(),
        }
    }

    /// The name in tables and JSON (coordinator columns with their slice).
    pub fn label(&self) -> String {
        match self {
            Column::Coordinator { slice_ms, .. } => format!("{}@{slice_ms}ms", self.name()),
            other => other.name(),
        }
    }

    /// What the coordinator's config must say for this column:
    /// `Some(true)` writes `paired_schedule_ahead = true`, `Some(false)`
    /// leaves the key out (the coordinator's default); `None`: the column
    /// does not use the coordinator, any config will do.
    pub fn paired_schedule_ahead(&self) -> Option<bool> {
        match self {
            Column::Coordinator { paired_ahead, .. } => Some(*paired_ahead),
            _ => None,
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

    #[test]
    fn paired_gang_ahead_is_paired_gang_with_the_key_and_its_own_label() {
        let ahead = Column::parse("paired-gang-ahead", 10).unwrap();
        assert_eq!(ahead.label(), "paired-gang-ahead@10ms");
        assert_eq!(ahead.name(), "paired-gang-ahead");
        assert_eq!(ahead.agent_policy(), "local");
        assert!(matches!(
            ahead,
            Column::Coordinator {
                policy: "paired-gang",
                ..
            }
        ));
        assert_eq!(ahead.paired_schedule_ahead(), Some(true));
        assert!(ahead.not_runnable(Library::Mpich).is_none());
        assert!(!ahead.is_local_policy());
    }

    #[test]
    fn only_paired_gang_ahead_asks_for_the_key() {
        for name in ["gang", "paired-gang"] {
            let c = Column::parse(name, 10).unwrap();
            assert_eq!(c.paired_schedule_ahead(), Some(false), "{name}");
        }
        for name in ["local", "yield", "dcs", "fcs"] {
            let c = Column::parse(name, 10).unwrap();
            assert_eq!(c.paired_schedule_ahead(), None, "{name}");
        }
    }

    #[test]
    fn every_name_parses_back_to_its_column() {
        let mut all = Column::all(10);
        all.push(Column::parse("paired-gang-ahead", 10).unwrap());
        for c in all {
            assert_eq!(Column::parse(&c.name(), 10).unwrap(), c);
        }
    }
}
