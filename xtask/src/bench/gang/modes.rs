//! The columns of `bench gang`: how the nodes are scheduled.
//!
//! - `local`: plain Linux (agents under the `local` policy, the coordinator
//!   idle in `fcfs`, jobs launched by the bench through the agents);
//! - `best-local`: the best local policy of `bench local` (`pb` unless
//!   `--local-policy` says otherwise), launched the same way;
//! - `gang`, `paired-gang`, `fcs`: the coordinator's policies at each
//!   `--slice-ms`, jobs submitted to the coordinator. The agents' own policy
//!   stays `local` (gang and paired gang decide only which jobs may run; the
//!   kernel schedules those) except under `fcs`, where the coordinator
//!   switches them to the local FCS policy;
//! - `paired-gang-ahead`: paired gang with `paired_schedule_ahead = true`
//!   in the coordinator's config (its slices announced ahead as a
//!   schedule, as gang's are); the coordinator is restarted with the key
//!   for this mode and without it for the others (`cells`), so the key's
//!   A/B runs in one invocation. Not in the default set (`Mode::ALL`): a
//!   variant of paired gang, measured when named.
use crate::bench::local::policies::BASELINE;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Mode {
    /// Plain Linux.
    Local,
    /// The best local policy (`--local-policy`).
    BestLocal,
    /// Strict gang scheduling: one matrix row per slice.
    Gang,
    /// Paired gang scheduling (Paired Gang Scheduling): a light row runs with a heavy one.
    PairedGang,
    /// Paired gang with its slices announced ahead (`paired_schedule_ahead`).
    PairedGangAhead,
    /// Flexible coscheduling: gang slots, local FCS classes inside them.
    Fcs,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Local,
        Mode::BestLocal,
        Mode::Gang,
        Mode::PairedGang,
        Mode::Fcs,
    ];

    /// The coordinator's policy for this mode (`None`: no slices, the bench
    /// launches the jobs itself and the coordinator idles in `fcfs`).
    pub fn coordinator_policy(self) -> Option<&'static str> {
        match self {
            Mode::Local | Mode::BestLocal => None,
            Mode::Gang => Some("gang"),
            Mode::PairedGang | Mode::PairedGangAhead => Some("paired-gang"),
            Mode::Fcs => Some("fcs"),
        }
    }

    /// Whether the coordinator's config says `paired_schedule_ahead = true`
    /// during this mode (otherwise the key is left out: its default).
    pub fn paired_schedule_ahead(self) -> bool {
        self == Mode::PairedGangAhead
    }

    /// The policy in the agents' config file during this mode.
    pub fn agent_config_policy(self, best_local: &str) -> &str {
        match self {
            Mode::BestLocal => best_local,
            _ => BASELINE,
        }
    }

    /// The local policy the agents run during this mode (what their status
    /// reports once the coordinator's policy arrived).
    pub fn agent_running_policy(self, best_local: &str) -> &str {
        match self {
            Mode::Fcs => "fcs",
            other => other.agent_config_policy(best_local),
        }
    }

    /// The row's `policy`: the local policy's or the coordinator's name.
    pub fn label(self, best_local: &str) -> String {
        match self {
            Mode::Local => BASELINE.into(),
            Mode::BestLocal => best_local.into(),
            Mode::PairedGangAhead => "paired-gang-ahead".into(),
            other => other.coordinator_policy().unwrap_or_default().into(),
        }
    }

    /// Whether the mode's rows depend on the slice length.
    pub fn sliced(self) -> bool {
        self.coordinator_policy().is_some()
    }
}

pub use crate::bench::coordinator::IDLE_COORDINATOR_POLICY;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_modes_have_no_slices_and_keep_the_coordinator_idle() {
        assert_eq!(Mode::Local.coordinator_policy(), None);
        assert_eq!(Mode::BestLocal.coordinator_policy(), None);
        assert!(!Mode::BestLocal.sliced());
        assert!(Mode::Fcs.sliced());
        assert_eq!(Mode::PairedGang.coordinator_policy(), Some("paired-gang"));
    }

    #[test]
    fn labels_and_agent_policies() {
        assert_eq!(Mode::Local.label("pb"), "local");
        assert_eq!(Mode::BestLocal.label("pb-sb"), "pb-sb");
        assert_eq!(Mode::Gang.label("pb"), "gang");
        assert_eq!(Mode::BestLocal.agent_config_policy("dcs"), "dcs");
        assert_eq!(Mode::Gang.agent_config_policy("dcs"), "local");
        assert_eq!(Mode::Fcs.agent_config_policy("dcs"), "local");
        assert_eq!(Mode::Fcs.agent_running_policy("dcs"), "fcs");
        assert_eq!(Mode::PairedGang.agent_running_policy("dcs"), "local");
    }

    #[test]
    fn names_match_the_command_line() {
        use clap::ValueEnum as _;
        let names: Vec<String> = Mode::ALL
            .iter()
            .map(|m| m.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["local", "best-local", "gang", "paired-gang", "fcs"]);
        assert_eq!(
            Mode::from_str("paired-gang-ahead", false),
            Ok(Mode::PairedGangAhead)
        );
    }

    #[test]
    fn paired_gang_ahead_is_paired_gang_with_the_key_under_its_own_label() {
        let ahead = Mode::PairedGangAhead;
        assert_eq!(ahead.coordinator_policy(), Some("paired-gang"));
        assert_eq!(ahead.label("dcs"), "paired-gang-ahead");
        assert_eq!(ahead.agent_running_policy("dcs"), "local");
        assert!(ahead.sliced());
        assert!(ahead.paired_schedule_ahead());
        for other in Mode::ALL {
            assert!(!other.paired_schedule_ahead(), "{other:?}");
        }
    }
}
