//! The fairness ratio x:y between the RT and BE classes.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A job's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    RealTime,
    BestEffort,
}

impl Class {
    /// The other class.
    pub fn other(self) -> Self {
        match self {
            Self::RealTime => Self::BestEffort,
            Self::BestEffort => Self::RealTime,
        }
    }
}

/// x:y, the share of the cluster's time the RT and BE classes get when both
/// have work (the administrator's choice). When one class has nothing to run
/// the other may use all of it; the ratio only binds under contention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairnessRatio {
    /// x: the RT class's part.
    pub rt: u32,
    /// y: the BE class's part.
    pub be: u32,
}

/// Why a ratio is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RatioError {
    #[error(
        "fairness ratio {rt}:{be}: both parts must be at least 1 (a class with no share would starve)"
    )]
    ZeroPart { rt: u32, be: u32 },
}

impl Default for FairnessRatio {
    /// 2:1, the paper's example.
    fn default() -> Self {
        Self { rt: 2, be: 1 }
    }
}

impl FairnessRatio {
    /// A ratio, checked.
    pub fn new(rt: u32, be: u32) -> Result<Self, RatioError> {
        let ratio = Self { rt, be };
        ratio.validate()?;
        Ok(ratio)
    }

    pub fn validate(&self) -> Result<(), RatioError> {
        if self.rt == 0 || self.be == 0 {
            return Err(RatioError::ZeroPart {
                rt: self.rt,
                be: self.be,
            });
        }
        Ok(())
    }

    /// This class's part (x or y).
    pub fn part(&self, class: Class) -> u32 {
        match class {
            Class::RealTime => self.rt,
            Class::BestEffort => self.be,
        }
    }

    /// x + y.
    pub fn total(&self) -> u64 {
        u64::from(self.rt) + u64::from(self.be)
    }

    /// `amount · part / (x + y)`, rounded down (exact integer arithmetic, so
    /// the two classes' shares of an amount never add up to more than it).
    pub fn share_of(&self, class: Class, amount: u64) -> u64 {
        let total = self.total();
        if total == 0 {
            return 0;
        }
        ((u128::from(amount) * u128::from(self.part(class))) / u128::from(total)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_to_one_gives_rt_two_thirds_and_the_shares_never_exceed_the_whole() {
        let ratio = FairnessRatio::new(2, 1).unwrap();
        assert_eq!(ratio.share_of(Class::RealTime, 300), 200);
        assert_eq!(ratio.share_of(Class::BestEffort, 300), 100);
        for amount in [0, 1, 2, 7, 1_000_001] {
            let sum =
                ratio.share_of(Class::RealTime, amount) + ratio.share_of(Class::BestEffort, amount);
            assert!(sum <= amount && amount - sum <= 1, "{amount}: {sum}");
        }
    }

    #[test]
    fn a_class_with_no_part_is_refused() {
        assert_eq!(
            FairnessRatio::new(0, 1),
            Err(RatioError::ZeroPart { rt: 0, be: 1 })
        );
        assert_eq!(
            FairnessRatio::new(3, 0),
            Err(RatioError::ZeroPart { rt: 3, be: 0 })
        );
    }

    #[test]
    fn the_other_class_of_the_other_class_is_itself() {
        for class in [Class::RealTime, Class::BestEffort] {
            assert_eq!(class.other().other(), class);
            assert_ne!(class.other(), class);
        }
    }
}
