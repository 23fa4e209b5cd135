//! How much of a node an RT process takes, and how much the RT class may use
//! (the quantities of the BE/RT coscheduling paper §4.2 "Allocation" and §4.4
//! for 2DCS-TDM and 2DCS-PS).
//!
//! The paper writes Σ_i, "the sum of the work (τ) of all the RT processes",
//! and compares it with x/(x+y)·Γ_i, a share of a window Γ = b·d, while τ is
//! the work of one frame. Taken literally that compares one frame's work with
//! a whole window and would admit b times too much. We use the conservative
//! reading: a process's load is its work per window, b·τ, and the RT class's
//! capacity over the node's shortest window Γ_i is x/(x+y)·Γ_i. Since every
//! process's own window is at least Γ_i, Σ b_j·τ_j ≤ share·Γ_i implies
//! Σ τ_j/d_j ≤ share, the EDF bound on the RT class's share of the node.
//!
//! The overheads the paper counts (§4.4: "we also include the cost of
//! switching the time division (σ)... the overhead of unblocking the process
//! ... conservatively... apart from the context switch times") are
//! parameters: each frame costs τ plus one unblock and one context switch
//! (counted whether or not the process really blocks), and under 2DCS-TDM
//! each RT division loses σ to the switch that starts it.

use serde::{Deserialize, Serialize};

use super::super::ratio::{Class, FairnessRatio};
use super::super::spec::RtSpec;

/// The division clock's cost, for 2DCS-TDM (none under 2DCS-PS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivisionCost {
    /// Δ.
    pub period_ns: u64,
    /// σ: what a division switch (the global synchronisation) costs.
    pub switch_ns: u64,
}

/// Load and capacity of the RT class on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtLoadModel {
    pub ratio: FairnessRatio,
    /// `Some` under 2DCS-TDM.
    pub division: Option<DivisionCost>,
    /// Waking a blocked process, counted once per frame.
    pub unblock_ns: u64,
    /// One context switch, counted once per frame.
    pub context_switch_ns: u64,
}

impl RtLoadModel {
    /// The paper's bare rule: the ratio, no overheads.
    pub fn bare(ratio: FairnessRatio) -> Self {
        Self {
            ratio,
            division: None,
            unblock_ns: 0,
            context_switch_ns: 0,
        }
    }

    /// CPU one frame costs: τ plus the per-frame overheads.
    pub fn frame_cost_ns(&self, work_ns: u64) -> u64 {
        work_ns
            .saturating_add(self.unblock_ns)
            .saturating_add(self.context_switch_ns)
    }

    /// A process's load per window: b frames at [`Self::frame_cost_ns`].
    pub fn window_load_ns(&self, spec: &RtSpec) -> u64 {
        self.frame_cost_ns(spec.work_ns)
            .saturating_mul(u64::from(spec.frames))
    }

    /// What the RT class may use of a window of `window_ns`: its share,
    /// minus what the division switches take. A window of Γ sees at most
    /// Γ/Δ + 1 RT divisions start, each losing σ, so the capacity is
    /// Γ·(x/(x+y) − σ/Δ) − σ, rounded down as one fraction so it never
    /// shrinks when Γ grows (removing a job can only lengthen a node's
    /// shortest window, and must not make the node look overloaded).
    pub fn capacity_ns(&self, window_ns: u64) -> u64 {
        let Some(cost) = self.division.filter(|cost| cost.period_ns > 0) else {
            return self.ratio.share_of(Class::RealTime, window_ns);
        };
        let total = u128::from(self.ratio.total());
        let period = u128::from(cost.period_ns);
        let rt_part = u128::from(self.ratio.rt) * period;
        let lost = total * u128::from(cost.switch_ns);
        let Some(numerator) = rt_part.checked_sub(lost) else {
            return 0;
        };
        let share = u128::from(window_ns) * numerator / (total * period);
        u64::try_from(share)
            .unwrap_or(u64::MAX)
            .saturating_sub(cost.switch_ns)
    }

    /// A process's share of one CPU, per million, with the per-frame
    /// overheads: (τ + overheads)/d, rounded up.
    pub fn utilization_ppm(&self, period_ns: u64, work_ns: u64) -> u64 {
        if period_ns == 0 {
            return u64::MAX;
        }
        let cost = u128::from(self.frame_cost_ns(work_ns));
        u64::try_from((cost * 1_000_000).div_ceil(u128::from(period_ns))).unwrap_or(u64::MAX)
    }

    /// The RT class's utilization bound on a node, per million: its share of
    /// `bound_ppm`, minus the fraction σ/Δ the division switches take.
    pub fn capacity_ppm(&self, bound_ppm: u64) -> u64 {
        let share = self.ratio.share_of(Class::RealTime, bound_ppm);
        let switches = match self.division {
            Some(cost) if cost.period_ns > 0 => {
                let ppm =
                    (u128::from(cost.switch_ns) * 1_000_000).div_ceil(u128::from(cost.period_ns));
                u64::try_from(ppm).unwrap_or(u64::MAX)
            }
            _ => 0,
        };
        share.saturating_sub(switches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_costs_shrink_the_capacity_which_still_grows_with_the_window() {
        let model = RtLoadModel {
            division: Some(DivisionCost {
                period_ns: 1_000,
                switch_ns: 10,
            }),
            ..RtLoadModel::bare(FairnessRatio::new(2, 1).unwrap())
        };
        // 300·(2/3 − 10/1000) − 10 = 197 − 10.
        assert_eq!(model.capacity_ns(300), 187);
        assert_eq!(model.capacity_ns(3_000), 1_970 - 10);
        let mut last = 0;
        for window in 0..5_000 {
            let capacity = model.capacity_ns(window);
            assert!(capacity >= last, "{window}: {capacity} < {last}");
            last = capacity;
        }
        assert_eq!(model.capacity_ppm(1_000_000), 666_666 - 10_000);
    }

    #[test]
    fn each_frame_pays_one_unblock_and_one_context_switch() {
        let model = RtLoadModel {
            unblock_ns: 3,
            context_switch_ns: 7,
            ..RtLoadModel::bare(FairnessRatio::default())
        };
        let spec = RtSpec::new(1_000, 4, 90).unwrap();
        assert_eq!(model.window_load_ns(&spec), 400);
        assert_eq!(model.utilization_ppm(1_000, 90), 100_000);
    }
}
