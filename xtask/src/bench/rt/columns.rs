//! The columns of `bench rt` and the admission settings they run under.
//!
//! - `1gs`, `2dcs-tdm`, `2dcs-ps`: the coordinator's policies with classes;
//!   jobs are submitted with `cosched submit --class`, admission is the
//!   coordinator's `[classes] admission`.
//! - `fifo`: plain Linux, RT ranks at SCHED_FIFO (launched through the
//!   agents with a static `fifo` request), BE ranks at SCHED_OTHER. With
//!   admission the bench applies the 2DCS deterministic rule itself (the
//!   same pure `AdmissionRule` the coordinator uses, on a ledger of its own).
//! - `deadline`: plain Linux, every RT rank at SCHED_DEADLINE (runtime τ +
//!   20 %, deadline = period = d), BE ranks at SCHED_OTHER. Its admission is
//!   the kernel's own test (Σ runtime/period within the root domain's RT
//!   bandwidth); it cannot be switched off without a machine-wide sysctl, so
//!   without admission a refused rank runs at SCHED_FIFO instead (as the
//!   agent's `edf = "deadline"` does) and with admission the job is
//!   rejected.

/// How the nodes run the jobs.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Column {
    /// One-level gang scheduling (the coordinator's `one-level-gang`).
    #[value(name = "1gs")]
    #[serde(rename = "1gs")]
    OneGs,
    /// 2DCS with time divisions (`2dcs-tdm`).
    #[value(name = "2dcs-tdm")]
    #[serde(rename = "2dcs-tdm")]
    Tdm,
    /// 2DCS-TDM with the agents' `[classes] edf = "deadline"`: EDF inside
    /// the RT division by the kernel's SCHED_DEADLINE where the kernel
    /// accepts it (nodes with exclusive cpusets: `--exclusive-cpusets`),
    /// else the agents fall back to `2dcs-tdm`'s FIFO priorities and say
    /// so. Not in the default set.
    #[value(name = "2dcs-tdm-deadline")]
    #[serde(rename = "2dcs-tdm-deadline")]
    TdmDeadline,
    /// 2DCS with proportional share (`2dcs-ps`).
    #[value(name = "2dcs-ps")]
    #[serde(rename = "2dcs-ps")]
    Ps,
    /// Plain Linux, RT ranks at SCHED_FIFO.
    Fifo,
    /// Plain Linux, RT ranks at SCHED_DEADLINE.
    Deadline,
}

impl Column {
    pub const ALL: [Column; 5] = [
        Column::OneGs,
        Column::Tdm,
        Column::Ps,
        Column::Fifo,
        Column::Deadline,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Column::OneGs => "1gs",
            Column::Tdm => "2dcs-tdm",
            Column::TdmDeadline => "2dcs-tdm-deadline",
            Column::Ps => "2dcs-ps",
            Column::Fifo => "fifo",
            Column::Deadline => "deadline",
        }
    }

    /// The coordinator's policy (`None`: the bench launches the jobs on
    /// the agents itself and the coordinator idles).
    pub fn coordinator_policy(self) -> Option<&'static str> {
        match self {
            Column::OneGs => Some("one-level-gang"),
            Column::Tdm | Column::TdmDeadline => Some("2dcs-tdm"),
            Column::Ps => Some("2dcs-ps"),
            Column::Fifo | Column::Deadline => None,
        }
    }

    /// The agents' local policy during this column: PB-SB for the BE class
    /// of the 2DCS policies (the paper's §4.2–4.3), plain Linux otherwise
    /// (1GS decides only which row runs, as gang does).
    pub fn agent_policy(self) -> &'static str {
        match self {
            Column::Tdm | Column::Ps => "pb-sb",
            Column::TdmDeadline => "pb-sb:classes.edf=\"deadline\"",
            _ => "local",
        }
    }

    /// Whether the column can run under `admission`.
    pub fn supports(self, admission: Admission) -> bool {
        match admission {
            Admission::None | Admission::Deterministic => true,
            // 1GS has only its deterministic rule; the kernel only its own.
            Admission::Statistical | Admission::Probabilistic => {
                matches!(self, Column::Tdm | Column::TdmDeadline | Column::Ps)
            }
        }
    }
}

/// Admission control of RT jobs.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Admission {
    /// Everything is admitted.
    None,
    /// 1GS: r rows per cycle; 2DCS and `fifo`: the paper's window rule;
    /// `deadline`: the kernel's bandwidth test.
    Deterministic,
    /// 2DCS: measured work against a utilization bound.
    Statistical,
    /// 2DCS: measured mean and deviation against the RT share at a target
    /// overload probability (1 %).
    Probabilistic,
}

impl Admission {
    pub fn label(self) -> &'static str {
        match self {
            Admission::None => "none",
            Admission::Deterministic => "deterministic",
            Admission::Statistical => "statistical",
            Admission::Probabilistic => "probabilistic",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tdm_with_deadline_edf_is_tdm_with_the_agents_edf_set_to_deadline() {
        use crate::bench::local::policies::PolicySpec;
        let c = Column::TdmDeadline;
        assert!(!Column::ALL.contains(&c), "opt-in, not a default column");
        assert_eq!(c.coordinator_policy(), Column::Tdm.coordinator_policy());
        let spec = PolicySpec::parse(c.agent_policy()).unwrap();
        assert_eq!(spec.name, Column::Tdm.agent_policy());
        let config = spec.apply("policy = \"local\"\n").unwrap();
        let doc: toml::Table = toml::from_str(&config).unwrap();
        assert_eq!(doc["classes"]["edf"].as_str(), Some("deadline"), "{config}");
        assert_eq!(c.label(), "2dcs-tdm-deadline");
    }

    #[test]
    fn names_match_the_command_line_and_the_coordinator() {
        use clap::ValueEnum as _;
        let names: Vec<String> = Column::ALL
            .iter()
            .map(|c| c.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["1gs", "2dcs-tdm", "2dcs-ps", "fifo", "deadline"]);
        let labels: Vec<&str> = Column::ALL.iter().map(|c| c.label()).collect();
        assert_eq!(labels, names);
        assert_eq!(Column::OneGs.coordinator_policy(), Some("one-level-gang"));
        assert_eq!(Column::Deadline.coordinator_policy(), None);
        assert_eq!(
            serde_json::to_value(Column::OneGs).unwrap(),
            serde_json::json!("1gs")
        );
    }

    #[test]
    fn statistical_admission_only_where_a_rule_exists() {
        for measured in [Admission::Statistical, Admission::Probabilistic] {
            assert!(Column::Tdm.supports(measured));
            assert!(Column::Ps.supports(measured));
        }
        for c in [Column::OneGs, Column::Fifo, Column::Deadline] {
            assert!(!c.supports(Admission::Statistical), "{c:?}");
            assert!(!c.supports(Admission::Probabilistic), "{c:?}");
            assert!(c.supports(Admission::None) && c.supports(Admission::Deterministic));
        }
        assert_eq!(Column::Tdm.agent_policy(), "pb-sb");
        assert_eq!(Column::OneGs.agent_policy(), "local");
    }
}
