//! Per-task spin time learned from observed message waits (competitive
//! spinning).
//!
//! ClusterSchedSim §5.2: if the spin ("busy-wait") threshold is too short, tasks block
//! and need an interrupt and a wake-up for messages that would have come
//! shortly; if too long, CPU is wasted. The Scheduler Testbed report §2.4.3: FCS "collects
//! communication statistics for each process", which "allows the scheduler to
//! determine a competitive spinning time on a per-process basis" (the idea of
//! Karlin et al., ClusterSchedSim ref. 20).
//!
//! Rule implemented: keep the last `history` waits `w` of the task (from spin
//! start to the message's arrival). Spinning for `v` then blocking costs
//! `w` when `w <= v`, and `v + B` otherwise, where `B` (`block_cost_us`) is the
//! price of a block: the wake-up interrupt, two context switches and the lost
//! turn. Choose the `v` that minimises the total cost over the remembered waits
//! (the optimum is always 0 or one of the waits), add `margin_percent` so the
//! next wait of the same size still fits, and clamp to `[min_us, max_us]`.
//! Why this rule: it covers exactly the part of the wait distribution that is
//! cheaper to spin through than to block for. Short, regular waits (a partner
//! that is coscheduled) are covered entirely; long waits (a partner that is
//! descheduled) are not worth spinning for and give the minimum; a mixture
//! spins through the short mode only. It tracks change because old waits leave
//! the history.

use super::config::ConfigError;
use super::ids::us_to_ns;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How spin times are learned (`[policy.sb.learning]`, `[policy.sy.learning]`,
/// `[policy.fcs.learning]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpinLearningParams {
    /// Lower bound of a learned spin time, µs. Default 50.
    pub min_us: u64,
    /// Upper bound of a learned spin time, µs. Default 5000 (a little over one
    /// 4 ms CFS tick at HZ=250: spinning longer never pays on one CPU).
    pub max_us: u64,
    /// Cost B of blocking and being woken again, µs. Default 500: the BE/RT coscheduling paper's
    /// parameters put a context switch at 200 µs and an interrupt at 50 µs,
    /// and a block costs two switches and an interrupt (~450 µs).
    pub block_cost_us: u64,
    /// Waits remembered per task. Default 64.
    pub history: u32,
    /// Waits needed before the learned time replaces the fixed threshold.
    /// Default 8.
    pub min_samples: u32,
    /// Added to the best spin time so that a wait of the same size still fits,
    /// percent. Default 10.
    pub margin_percent: u32,
}

impl Default for SpinLearningParams {
    fn default() -> Self {
        Self {
            min_us: 50,
            max_us: 5_000,
            block_cost_us: 500,
            history: 64,
            min_samples: 8,
            margin_percent: 10,
        }
    }
}

impl SpinLearningParams {
    /// Checks the bounds; `section` names the enclosing table (e.g. `sb`).
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let field = |name: &str| format!("{section}.learning.{name}");
        ConfigError::require_positive(&field("min_us"), self.min_us)?;
        ConfigError::require_ordered(&field("min_us"), self.min_us, &field("max_us"), self.max_us)?;
        ConfigError::require_range(&field("history"), self.history.into(), 1, 4_096)?;
        ConfigError::require_range(
            &field("min_samples"),
            self.min_samples.into(),
            1,
            self.history.into(),
        )?;
        ConfigError::require_range(
            &field("margin_percent"),
            self.margin_percent.into(),
            0,
            1_000,
        )
    }
}

/// The spin-time choice of [the module docs](self) for a set of waits (ns):
/// the spin time minimising total cost, before margin and clamping.
pub fn cost_minimising_spin(waits: &[u64], block_cost_ns: u64) -> u64 {
    let mut sorted = waits.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as u128;
    let block = u128::from(block_cost_ns);
    // v = 0: every positive wait blocks.
    let zero_waits = sorted.iter().take_while(|&&w| w == 0).count() as u128;
    let mut best = (block * (n - zero_waits), 0u64);
    let mut covered_sum: u128 = 0;
    for (i, &w) in sorted.iter().enumerate() {
        covered_sum += u128::from(w);
        if sorted.get(i + 1) == Some(&w) {
            continue; // evaluate a tie group once, at its last member
        }
        let blocked = n - (i as u128 + 1);
        let cost = covered_sum + blocked * (u128::from(w) + block);
        if cost < best.0 {
            best = (cost, w);
        }
    }
    best.1
}

/// A task's spin time: a fixed threshold, or one learned from its waits.
#[derive(Debug, Clone)]
pub(crate) struct SpinTime {
    fixed_ns: u64,
    learner: Option<Learner>,
    adapter: Option<Adapter>,
}

/// A fixed threshold that adapts to how the task's blocks turned out
/// ([`SpinTime::observe_block`]): doubled after a block its message
/// followed sooner than a block costs, halved back after one that the
/// doubled spin would not have spared either. Stays within
/// `[fixed, max]`.
#[derive(Debug, Clone)]
struct Adapter {
    current_ns: u64,
    max_ns: u64,
    block_cost_ns: u64,
}

#[derive(Debug, Clone)]
struct Learner {
    waits: VecDeque<u64>,
    history: usize,
    min_samples: usize,
    block_cost_ns: u64,
    margin_percent: u64,
    min_ns: u64,
    max_ns: u64,
    learned_ns: Option<u64>,
}

impl SpinTime {
    /// A fixed spin time.
    pub fn fixed(threshold_ns: u64) -> Self {
        Self {
            fixed_ns: threshold_ns,
            learner: None,
            adapter: None,
        }
    }

    /// A fixed spin time `threshold_ns` that adapts, up to `max_ns`, to how
    /// the task's blocks turn out ([`Self::observe_block`]); a block costs
    /// `block_cost_ns`.
    pub fn adaptive(threshold_ns: u64, max_ns: u64, block_cost_ns: u64) -> Self {
        Self {
            fixed_ns: threshold_ns,
            learner: None,
            adapter: Some(Adapter {
                current_ns: threshold_ns.max(1),
                max_ns: max_ns.max(threshold_ns).max(1),
                block_cost_ns,
            }),
        }
    }

    /// A learned spin time, `fallback_ns` until enough waits are seen.
    pub fn learned(fallback_ns: u64, params: &SpinLearningParams) -> Self {
        Self {
            fixed_ns: fallback_ns,
            learner: Some(Learner {
                waits: VecDeque::new(),
                history: params.history.max(1) as usize,
                min_samples: params.min_samples.max(1) as usize,
                block_cost_ns: us_to_ns(params.block_cost_us),
                margin_percent: params.margin_percent.into(),
                min_ns: us_to_ns(params.min_us).max(1),
                max_ns: us_to_ns(params.max_us).max(1),
                learned_ns: None,
            }),
            adapter: None,
        }
    }

    /// The spin time to use now.
    pub fn current_ns(&self) -> u64 {
        if let Some(adapter) = &self.adapter {
            return adapter.current_ns;
        }
        self.learner
            .as_ref()
            .and_then(|l| l.learned_ns)
            .unwrap_or(self.fixed_ns)
            .max(1)
    }

    /// A block of the task ended by its message `remaining_ns` after the
    /// block (the rest of the wait the block was for). The competitive rule
    /// behind the threshold blocks because the rest of a wait that has
    /// lasted the threshold is expected to outlast a block's cost; when it
    /// did not (`remaining_ns` < the cost) spinning on would have been
    /// cheaper, and the threshold doubles. When the rest of the wait was at
    /// least as long as the threshold itself, a doubled spin would not have
    /// caught it either, and the threshold halves (never below the
    /// configured one). Only for an adaptive spin time.
    pub fn observe_block(&mut self, remaining_ns: u64) {
        let Some(adapter) = self.adapter.as_mut() else {
            return;
        };
        if remaining_ns < adapter.block_cost_ns {
            adapter.current_ns = adapter.current_ns.saturating_mul(2).min(adapter.max_ns);
        } else if remaining_ns >= adapter.current_ns {
            adapter.current_ns = (adapter.current_ns / 2).max(self.fixed_ns).max(1);
        }
    }

    /// Records one observed message wait.
    pub fn observe_wait(&mut self, wait_ns: u64) {
        let Some(learner) = self.learner.as_mut() else {
            return;
        };
        if learner.waits.len() == learner.history {
            learner.waits.pop_front();
        }
        learner.waits.push_back(wait_ns);
        if learner.waits.len() >= learner.min_samples {
            let waits: Vec<u64> = learner.waits.iter().copied().collect();
            let best = cost_minimising_spin(&waits, learner.block_cost_ns);
            let with_margin = u128::from(best) * u128::from(100 + learner.margin_percent) / 100;
            let clamped = with_margin.clamp(learner.min_ns.into(), learner.max_ns.into());
            learner.learned_ns = Some(clamped as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_regular_waits_are_covered() {
        assert_eq!(cost_minimising_spin(&[90, 100, 95, 100], 500), 100);
    }

    #[test]
    fn long_waits_are_not_worth_spinning_for() {
        assert_eq!(cost_minimising_spin(&[20_000, 30_000, 25_000], 500), 0);
    }

    #[test]
    fn bimodal_waits_cover_only_the_short_mode() {
        let mut waits = vec![50; 8];
        waits.extend([20_000, 20_000]);
        assert_eq!(cost_minimising_spin(&waits, 500), 50);
    }

    #[test]
    fn falls_back_to_fixed_until_enough_samples() {
        let params = SpinLearningParams {
            min_samples: 3,
            ..Default::default()
        };
        let mut spin = SpinTime::learned(500_000, &params);
        spin.observe_wait(100_000);
        spin.observe_wait(100_000);
        assert_eq!(spin.current_ns(), 500_000);
        spin.observe_wait(100_000);
        assert_eq!(spin.current_ns(), 110_000);
    }
}
