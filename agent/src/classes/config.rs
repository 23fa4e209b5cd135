//! The `[classes]` table: how best-effort (BE) and real-time (RT) jobs share
//! the node when no coordinator decides it, and how RT tasks are realised.
use std::path::PathBuf;

use cosched_policy::classes::{BudgetParams, FairnessRatio, PriorityBand, PsParams};
use serde::{Deserialize, Serialize};

use crate::low_latency::LowLatencyIdle;

/// The node's own class mode (a coordinator's 2DCS-TDM overrides it while
/// it is connected).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocalClassMode {
    /// No class scheduling: RT jobs' frames are counted, every task follows
    /// the local policy.
    #[default]
    Off,
    /// 2DCS-PS: the node picks the class by virtual time at every tick.
    Ps,
}

/// How an RT task with frames due runs while its class runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdfKind {
    /// A SCHED_FIFO priority in `rt_band`, earliest deadline highest.
    #[default]
    Fifo,
    /// SCHED_DEADLINE (runtime τ plus the budget slack, deadline and
    /// period d); a task the kernel refuses it to runs at its FIFO priority.
    Deadline,
}

impl EdfKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EdfKind::Fifo => "fifo",
            EdfKind::Deadline => "deadline",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassesConfig {
    /// `off` (default) or `ps`. 2DCS-TDM comes only from a coordinator.
    #[serde(default)]
    pub mode: LocalClassMode,
    /// x:y, the RT and BE classes' shares under contention. Default `2:1`.
    #[serde(default = "default_ratio")]
    pub ratio: String,
    /// SCHED_FIFO priorities `[lo, hi]` for RT tasks by EDF: above every
    /// local policy's boost, below the agent's own priority. Default
    /// `[21, 39]` (also below the coordinator's default 40, which may share
    /// the machine).
    #[serde(default = "default_band")]
    pub rt_band: [u8; 2],
    /// `fifo` (default) or `deadline`.
    #[serde(default)]
    pub edf: EdfKind,
    /// An RT process may use b·τ plus this percentage of CPU per window
    /// before it is throttled until the window ends (0..=1000). Default 20.
    #[serde(default = "default_slack")]
    pub budget_slack_percent: u32,
    /// 2DCS-PS: how far (µs of virtual time) a class coming back from
    /// having nothing ready may stay behind the other (0..=10000000).
    /// Default 0: it takes the other class's virtual time.
    #[serde(default)]
    pub ps_sleeper_credit_us: u64,
    /// Where the agent makes the frame-counter directory of each RT job it
    /// launches (`<counter_dir>/<job_id>`, named to the job by
    /// `COSCHED_RT_DIR`). Default `<state_dir>/rt`; a tmpfs such as
    /// `/run/cosched/rt` spares the counters' pages any writeback.
    #[serde(default)]
    pub counter_dir: Option<PathBuf>,
    /// `rt-jobs` (default): while a real-time job runs on the node the
    /// agent holds a CPU latency request of 0 µs (`/dev/cpu_dma_latency`),
    /// so idle CPUs poll instead of halting and a rank's wake-up needs no
    /// interrupt; released when the last RT job ends, and by the kernel
    /// when the agent exits or crashes. `off`: never (see
    /// `crate::low_latency`).
    #[serde(default)]
    pub low_latency_idle: LowLatencyIdle,
}

fn default_ratio() -> String {
    "2:1".into()
}
fn default_band() -> [u8; 2] {
    [21, 39]
}
fn default_slack() -> u32 {
    20
}

impl Default for ClassesConfig {
    fn default() -> Self {
        Self {
            mode: LocalClassMode::default(),
            ratio: default_ratio(),
            rt_band: default_band(),
            edf: EdfKind::default(),
            budget_slack_percent: default_slack(),
            ps_sleeper_credit_us: 0,
            counter_dir: None,
            low_latency_idle: LowLatencyIdle::default(),
        }
    }
}

impl ClassesConfig {
    /// Checks everything but what depends on the rest of the config (see
    /// [`Self::check_band`]).
    pub fn validate(&self) -> Result<(), String> {
        self.fairness_ratio()?;
        self.band()?;
        cosched_proto::range::check(
            "classes.budget_slack_percent",
            self.budget_slack_percent,
            0..=1000,
        )?;
        cosched_proto::range::check(
            "classes.ps_sleeper_credit_us",
            self.ps_sleeper_credit_us,
            0..=10_000_000,
        )?;
        if let Some(dir) = &self.counter_dir
            && !dir.is_absolute()
        {
            return Err(format!(
                "classes.counter_dir {}: must be an absolute path",
                dir.display()
            ));
        }
        Ok(())
    }

    /// `x:y`, both parts at least 1.
    pub fn fairness_ratio(&self) -> Result<FairnessRatio, String> {
        let bad = || {
            format!(
                "classes.ratio {:?}: use x:y with whole numbers of at least 1, e.g. \"2:1\"",
                self.ratio
            )
        };
        let (x, y) = self.ratio.split_once(':').ok_or_else(bad)?;
        let part = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
        FairnessRatio::new(part(x)?, part(y)?).map_err(|e| format!("classes.ratio: {e}"))
    }

    pub fn band(&self) -> Result<PriorityBand, String> {
        let [lo, hi] = self.rt_band;
        PriorityBand::new(lo, hi).map_err(|e| format!("classes.rt_band: {e}"))
    }

    pub fn budget(&self) -> BudgetParams {
        BudgetParams {
            slack_percent: self.budget_slack_percent,
        }
    }

    /// 2DCS-PS parameters (the sleeper credit in ns of virtual time).
    pub fn ps_params(&self) -> Result<PsParams, String> {
        Ok(PsParams {
            ratio: self.fairness_ratio()?,
            sleeper_credit: self.ps_sleeper_credit_us.saturating_mul(1000),
        })
    }
}

/// A band fits this agent when every boost of a local policy is below it
/// (a BE boost must never outrank an RT task) and it is below the agent's
/// own priority (`ceiling`: the agent, or the guardian without one), so the
/// agent can always end what it gave.
pub fn check_band(band: PriorityBand, top_be_boost: u8, ceiling: u32) -> Result<(), String> {
    if band.lo() <= top_be_boost {
        return Err(format!(
            "RT priority band {}..={} must be above every local policy's boost priority (highest is {top_be_boost})",
            band.lo(),
            band.hi()
        ));
    }
    if u32::from(band.hi()) >= ceiling {
        return Err(format!(
            "RT priority band {}..={} must be below the agent's own priority ({ceiling})",
            band.lo(),
            band.hi()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_off_two_to_one_fifo_in_a_band_between_boosts_and_the_agent() {
        let c = ClassesConfig::default();
        c.validate().unwrap();
        assert_eq!(c.mode, LocalClassMode::Off);
        assert_eq!(
            c.fairness_ratio().unwrap(),
            FairnessRatio::new(2, 1).unwrap()
        );
        assert_eq!((c.band().unwrap().lo(), c.band().unwrap().hi()), (21, 39));
        assert_eq!(c.low_latency_idle, LowLatencyIdle::RtJobs);
        check_band(c.band().unwrap(), 20, 50).unwrap();
    }

    #[test]
    fn bad_ratios_bands_and_slack_are_named() {
        for (ratio, band, slack, want) in [
            ("2", [21, 39], 0, "classes.ratio"),
            ("0:1", [21, 39], 0, "classes.ratio"),
            ("a:b", [21, 39], 0, "classes.ratio"),
            ("2:1", [40, 30], 0, "classes.rt_band"),
            ("2:1", [0, 30], 0, "classes.rt_band"),
            ("2:1", [21, 39], 1001, "budget_slack_percent"),
        ] {
            let c = ClassesConfig {
                ratio: ratio.into(),
                rt_band: band,
                budget_slack_percent: slack,
                ..ClassesConfig::default()
            };
            let e = c.validate().unwrap_err();
            assert!(e.contains(want), "{ratio} {band:?} {slack}: {e}");
        }
    }

    #[test]
    fn a_band_must_clear_the_boosts_and_stay_under_the_agent() {
        let band = PriorityBand::new(10, 30).unwrap();
        assert!(check_band(band, 10, 50).unwrap_err().contains("boost"));
        assert!(check_band(band, 9, 30).unwrap_err().contains("agent"));
        check_band(band, 9, 31).unwrap();
    }
}
