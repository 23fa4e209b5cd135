//! The `[classes]` table: how the BE/RT policies (`one-level-gang`,
//! `2dcs-tdm`, `2dcs-ps`) share the cluster between best-effort and
//! real-time jobs, and how they admit RT jobs. Read whatever the policy, so a
//! switch to one of them at run time finds its settings checked.

use cosched_policy::{
    classes::{
        AdmissionRule, DivisionClock, DivisionCost, FairnessRatio, OneLevelGangConfig,
        ProbabilisticParams, RtLoadModel, StatisticalParams, one_level_gang::MAX_ONE_GS_ROWS,
    },
    global::QueuePolicy,
};
use cosched_proto::{range, wire::ClassSettings};
use serde::{Deserialize, Serialize};

use super::MIN_SLICE_MS;
use crate::policy::GlobalPolicy;

/// Which admission rule RT jobs pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionKind {
    /// Every RT job is admitted (1GS: it holds one row, like a BE job).
    None,
    /// The paper's rules (§4.4): 1GS gives an RT job the r rows its frames
    /// need; 2DCS-TDM and 2DCS-PS test the declared work per window.
    #[default]
    Deterministic,
    /// 2DCS-TDM and 2DCS-PS: the work agents measured against a utilization
    /// bound. 1GS has only its deterministic rule and uses it.
    Statistical,
    /// 2DCS-TDM and 2DCS-PS: the measured mean and deviation of the work
    /// against the RT share, at a target overload probability. 1GS uses its
    /// deterministic rule.
    Probabilistic,
}

impl AdmissionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Deterministic => "deterministic",
            Self::Statistical => "statistical",
            Self::Probabilistic => "probabilistic",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassesConfig {
    /// x:y, the RT and BE classes' shares of the cluster when both have
    /// work. Default "2:1".
    #[serde(default, with = "ratio_text")]
    pub ratio: FairnessRatio,
    /// Δ of 2DCS-TDM: one RT division and one BE division, in ms. Default 150.
    #[serde(default = "default_tdm_period_ms")]
    pub tdm_period_ms: u64,
    /// σ: what one global switch costs (a TDM division switch, a 1GS row
    /// switch), in µs; admission counts it. Default 0.
    #[serde(default)]
    pub division_switch_cost_us: u64,
    /// Waking a blocked RT process, counted once per frame by 2DCS
    /// admission, in µs. Default 0.
    #[serde(default)]
    pub unblock_cost_us: u64,
    /// One context switch, counted once per frame by 2DCS admission, in µs.
    /// Default 0.
    #[serde(default)]
    pub context_switch_cost_us: u64,
    /// `none`, `deterministic` (default) or `statistical`.
    #[serde(default)]
    pub admission: AdmissionKind,
    /// Statistical admission: utilization bound per node, percent of one
    /// CPU before the RT share is taken (over 100 overbooks). Default 100.
    #[serde(default = "default_statistical_bound_percent")]
    pub statistical_bound_percent: u64,
    /// Statistical and probabilistic admission: frames a measurement must
    /// cover before it replaces the declared work. Default 100.
    #[serde(default = "default_statistical_min_frames")]
    pub statistical_min_frames: u64,
    /// Probabilistic admission: the target probability that a node's RT
    /// load exceeds the RT share, parts per million. Default 10000 (1 %).
    #[serde(default = "default_probabilistic_overload_ppm")]
    pub probabilistic_overload_ppm: u32,
    /// Probabilistic admission: measured processes needed before what they
    /// use of their declarations estimates a process not measured yet.
    /// Default 3.
    #[serde(default = "default_probabilistic_min_population")]
    pub probabilistic_min_population: usize,
    /// w of 1GS: how long an RT job may wait for its rows before it is
    /// evicted, in ms. Default 30000.
    #[serde(default = "default_rt_max_wait_ms")]
    pub rt_max_wait_ms: u64,
    /// M of 1GS: rows of its matrix, split x:y between the classes. Default 3.
    #[serde(default = "default_one_gs_rows")]
    pub one_gs_rows: usize,
}

fn default_tdm_period_ms() -> u64 {
    150
}
fn default_statistical_bound_percent() -> u64 {
    100
}
fn default_statistical_min_frames() -> u64 {
    StatisticalParams::default().min_frames
}
fn default_probabilistic_overload_ppm() -> u32 {
    ProbabilisticParams::default().overload_ppm
}
fn default_probabilistic_min_population() -> usize {
    ProbabilisticParams::default().min_population
}
fn default_rt_max_wait_ms() -> u64 {
    30_000
}
fn default_one_gs_rows() -> usize {
    3
}

impl Default for ClassesConfig {
    fn default() -> Self {
        Self {
            ratio: FairnessRatio::default(),
            tdm_period_ms: default_tdm_period_ms(),
            division_switch_cost_us: 0,
            unblock_cost_us: 0,
            context_switch_cost_us: 0,
            admission: AdmissionKind::default(),
            statistical_bound_percent: default_statistical_bound_percent(),
            statistical_min_frames: default_statistical_min_frames(),
            probabilistic_overload_ppm: default_probabilistic_overload_ppm(),
            probabilistic_min_population: default_probabilistic_min_population(),
            rt_max_wait_ms: default_rt_max_wait_ms(),
            one_gs_rows: default_one_gs_rows(),
        }
    }
}

/// "x:y" in the config, both parts positive.
mod ratio_text {
    use cosched_policy::classes::FairnessRatio;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FairnessRatio, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_ratio(&text).map_err(serde::de::Error::custom)
    }

    pub fn serialize<S: Serializer>(ratio: &FairnessRatio, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}:{}", ratio.rt, ratio.be))
    }
}

/// `x:y` → the ratio, checked.
pub fn parse_ratio(text: &str) -> Result<FairnessRatio, String> {
    let usage = || format!("ratio {text:?}: write it x:y, e.g. \"2:1\"");
    let (rt, be) = text.split_once(':').ok_or_else(usage)?;
    let part = |part: &str| part.trim().parse::<u32>().map_err(|_| usage());
    FairnessRatio::new(part(rt)?, part(be)?).map_err(|error| error.to_string())
}

impl ClassesConfig {
    /// Checks every key; `slice_ms` and `switch_lead_us` are the top-level
    /// settings the divisions and the 1GS quantum must agree with. Messages
    /// name the key (`classes.KEY`).
    pub fn validate(&self, nodes: usize, slice_ms: u64, switch_lead_us: u64) -> Result<(), String> {
        let key = |name: &str| format!("classes.{name}");
        range::check(&key("ratio rt part"), self.ratio.rt, 1..=1000)?;
        range::check(&key("ratio be part"), self.ratio.be, 1..=1000)?;
        range::check(&key("tdm_period_ms"), self.tdm_period_ms, 20..=60_000)?;
        let clock = self
            .division_clock(0)
            .map_err(|error| format!("classes: {error}"))?;
        let shortest_ns = clock.rt_len_ns().min(clock.be_len_ns());
        if shortest_ns < MIN_SLICE_MS * 1_000_000 {
            return Err(format!(
                "classes.tdm_period_ms {} split {}:{} gives a division of {:.1} ms; each needs at least {MIN_SLICE_MS} ms",
                self.tdm_period_ms,
                self.ratio.rt,
                self.ratio.be,
                shortest_ns as f64 / 1e6
            ));
        }
        if switch_lead_us * 1000 * 2 > shortest_ns {
            return Err(format!(
                "switch_lead_us {switch_lead_us} exceeds half the shortest TDM division ({:.1} ms)",
                shortest_ns as f64 / 1e6
            ));
        }
        let cost_ns = self.division_switch_cost_us * 1000;
        if cost_ns * 2 > slice_ms * 1_000_000 || cost_ns * 2 > shortest_ns {
            return Err(format!(
                "classes.division_switch_cost_us {} exceeds half a slice ({slice_ms} ms) or half the shortest TDM division ({:.1} ms)",
                self.division_switch_cost_us,
                shortest_ns as f64 / 1e6
            ));
        }
        range::check(&key("unblock_cost_us"), self.unblock_cost_us, 0..=100_000)?;
        range::check(
            &key("context_switch_cost_us"),
            self.context_switch_cost_us,
            0..=100_000,
        )?;
        range::check(
            &key("statistical_bound_percent"),
            self.statistical_bound_percent,
            1..=1000,
        )?;
        range::check(
            &key("statistical_min_frames"),
            self.statistical_min_frames,
            1..=1_000_000_000,
        )?;
        range::check(
            &key("probabilistic_overload_ppm"),
            self.probabilistic_overload_ppm,
            1..=500_000,
        )?;
        range::check(
            &key("probabilistic_min_population"),
            self.probabilistic_min_population,
            1..=100_000,
        )?;
        range::check(&key("rt_max_wait_ms"), self.rt_max_wait_ms, 1..=86_400_000)?;
        range::check(&key("one_gs_rows"), self.one_gs_rows, 2..=MAX_ONE_GS_ROWS)?;
        self.one_gs_config(nodes.max(1), slice_ms * 1_000_000, QueuePolicy::StrictFcfs)
            .validate()
            .map_err(|error| format!("classes: {error}"))
    }

    /// The rule RT jobs pass under 2DCS-TDM and 2DCS-PS.
    pub fn rule(&self) -> AdmissionRule {
        match self.admission {
            AdmissionKind::None => AdmissionRule::None,
            AdmissionKind::Deterministic => AdmissionRule::Deterministic,
            AdmissionKind::Statistical => AdmissionRule::Statistical(StatisticalParams {
                bound_ppm: self.statistical_bound_percent * 10_000,
                min_frames: self.statistical_min_frames,
            }),
            AdmissionKind::Probabilistic => AdmissionRule::Probabilistic(ProbabilisticParams {
                overload_ppm: self.probabilistic_overload_ppm,
                min_frames: self.statistical_min_frames,
                min_population: self.probabilistic_min_population,
            }),
        }
    }

    /// What 2DCS admission counts under `policy`: the division switches only
    /// under 2DCS-TDM.
    pub fn load_model(&self, policy: GlobalPolicy) -> RtLoadModel {
        RtLoadModel {
            ratio: self.ratio,
            division: (policy == GlobalPolicy::TwoDcsTdm).then(|| DivisionCost {
                period_ns: self.tdm_period_ns(),
                switch_ns: self.division_switch_cost_us * 1000,
            }),
            unblock_ns: self.unblock_cost_us * 1000,
            context_switch_ns: self.context_switch_cost_us * 1000,
        }
    }

    pub fn tdm_period_ns(&self) -> u64 {
        self.tdm_period_ms * 1_000_000
    }

    /// The TDM division clock whose first RT division starts at `epoch_ns`.
    pub fn division_clock(
        &self,
        epoch_ns: u64,
    ) -> Result<DivisionClock, cosched_policy::classes::DivisionError> {
        DivisionClock::new(self.tdm_period_ns(), self.ratio, epoch_ns)
    }

    /// 1GS over `nodes` nodes: a slot is one slice, of which σ goes to the
    /// row switch and the rest (Q) runs jobs.
    pub fn one_gs_config(
        &self,
        nodes: usize,
        slice_ns: u64,
        queue: QueuePolicy,
    ) -> OneLevelGangConfig {
        let switch_cost_ns = self.division_switch_cost_us * 1000;
        OneLevelGangConfig {
            nodes,
            rows: self.one_gs_rows,
            ratio: self.ratio,
            quantum_ns: slice_ns.saturating_sub(switch_cost_ns),
            switch_cost_ns,
            admission_control: self.admission != AdmissionKind::None,
            queue,
        }
    }

    pub fn max_wait_ns(&self) -> u64 {
        self.rt_max_wait_ms * 1_000_000
    }

    /// What agents are told under a BE/RT policy.
    pub fn wire_settings(&self) -> ClassSettings {
        ClassSettings {
            ratio_rt: self.ratio.rt,
            ratio_be: self.ratio.be,
            tdm_period_ns: self.tdm_period_ns(),
        }
    }

    /// "2:1".
    pub fn ratio_text(&self) -> String {
        format!("{}:{}", self.ratio.rt, self.ratio.be)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClassesConfig, String> {
        let config: ClassesConfig = toml::from_str(text).map_err(|error| error.to_string())?;
        config.validate(4, 100, 5_000)?;
        Ok(config)
    }

    #[test]
    fn an_empty_table_gets_the_documented_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config, ClassesConfig::default());
        assert_eq!(config.ratio_text(), "2:1");
        assert_eq!(config.tdm_period_ms, 150);
        assert_eq!(config.admission, AdmissionKind::Deterministic);
        assert_eq!(config.rule(), AdmissionRule::Deterministic);
        assert_eq!(config.one_gs_rows, 3);
        assert_eq!(config.rt_max_wait_ms, 30_000);
        let one_gs = config.one_gs_config(4, 100_000_000, QueuePolicy::Backfill);
        assert_eq!(one_gs.split().rt_rows, 2);
        assert!(one_gs.admission_control);
    }

    #[test]
    fn ratios_are_x_colon_y_with_both_parts_positive() {
        assert_eq!(parse("ratio = \"3:1\"").unwrap().ratio.rt, 3);
        let error = parse("ratio = \"2:0\"").unwrap_err();
        assert!(error.contains("at least 1"), "{error}");
        let error = parse("ratio = \"two to one\"").unwrap_err();
        assert!(error.contains("x:y"), "{error}");
    }

    #[test]
    fn a_division_shorter_than_the_shortest_slice_is_refused_naming_the_key() {
        let error = parse("tdm_period_ms = 24\nratio = \"2:1\"").unwrap_err();
        assert!(error.contains("classes.tdm_period_ms 24"), "{error}");
        let error = parse("tdm_period_ms = 10").unwrap_err();
        assert!(
            error.contains("classes.tdm_period_ms 10 out of range"),
            "{error}"
        );
    }

    #[test]
    fn a_switch_cost_past_half_a_slot_is_refused() {
        let error = parse("division_switch_cost_us = 50001").unwrap_err();
        assert!(error.contains("classes.division_switch_cost_us"), "{error}");
        let config = parse("division_switch_cost_us = 2000").unwrap();
        let one_gs = config.one_gs_config(2, 100_000_000, QueuePolicy::Backfill);
        assert_eq!(one_gs.quantum_ns + one_gs.switch_cost_ns, 100_000_000);
    }

    #[test]
    fn statistical_admission_takes_its_bound_and_frames() {
        let config =
            parse("admission = \"statistical\"\nstatistical_bound_percent = 120\nstatistical_min_frames = 7")
                .unwrap();
        assert_eq!(
            config.rule(),
            AdmissionRule::Statistical(StatisticalParams {
                bound_ppm: 1_200_000,
                min_frames: 7
            })
        );
        assert!(
            parse("admission = \"lottery\"")
                .unwrap_err()
                .contains("deterministic")
        );
        assert!(parse("statistical_bound_percent = 0").is_err());
    }

    #[test]
    fn probabilistic_admission_takes_its_target_population_and_frames() {
        let config = parse(
            "admission = \"probabilistic\"\nprobabilistic_overload_ppm = 1000\nprobabilistic_min_population = 5\nstatistical_min_frames = 7",
        )
        .unwrap();
        assert_eq!(
            config.rule(),
            AdmissionRule::Probabilistic(ProbabilisticParams {
                overload_ppm: 1_000,
                min_frames: 7,
                min_population: 5,
            })
        );
        assert_eq!(
            parse("admission = \"probabilistic\"").unwrap().rule(),
            AdmissionRule::Probabilistic(ProbabilisticParams::default())
        );
        // Above one half the margin would be negative: refused.
        let error = parse("probabilistic_overload_ppm = 500001").unwrap_err();
        assert!(
            error.contains("classes.probabilistic_overload_ppm"),
            "{error}"
        );
        assert!(parse("probabilistic_min_population = 0").is_err());
    }

    #[test]
    fn one_gs_rows_and_waits_are_bounded() {
        assert!(
            parse("one_gs_rows = 1")
                .unwrap_err()
                .contains("classes.one_gs_rows 1")
        );
        assert!(parse("one_gs_rows = 17").is_err());
        assert!(
            parse("rt_max_wait_ms = 0")
                .unwrap_err()
                .contains("rt_max_wait_ms")
        );
        assert!(parse("bogus = 1").unwrap_err().contains("bogus"));
    }

    #[test]
    fn only_2dcs_tdm_counts_the_division_switches() {
        let config = parse("division_switch_cost_us = 100\nunblock_cost_us = 3").unwrap();
        let tdm = config.load_model(GlobalPolicy::TwoDcsTdm);
        assert_eq!(tdm.division.unwrap().switch_ns, 100_000);
        assert_eq!(tdm.unblock_ns, 3_000);
        assert_eq!(config.load_model(GlobalPolicy::TwoDcsPs).division, None);
    }

    #[test]
    fn agents_get_the_ratio_and_the_period() {
        let settings = ClassesConfig::default().wire_settings();
        assert_eq!((settings.ratio_rt, settings.ratio_be), (2, 1));
        assert_eq!(settings.tdm_period_ns, 150_000_000);
    }
}
