//! Best-effort and real-time jobs together (protocol 1.3): the class
//! settings an agent needs under the BE/RT policies (`ClassSettings`), and
//! 2DCS-TDM's division switches (`SwitchDivision` / `DivisionSwitched`).
//!
//! Under `one-level-gang` the coordinator drives ordinary `SwitchSlice`s;
//! under `2dcs-tdm` it announces every division of the time-division clock
//! ahead of time, in the agent's clock, as it announces slices; under
//! `2dcs-ps` nothing is broadcast and each agent shares its CPUs between the
//! classes in the ratio `ClassSettings` gives.

use serde::{Deserialize, Serialize};

use super::kind::MessageKind;
use super::payload::Payload;

/// Coordinator → agent, right after `SetPolicy` names a BE/RT policy
/// (`one-level-gang`, `2dcs-tdm`, `2dcs-ps`) and again whenever the
/// settings change: the fairness ratio x:y between the classes and Δ, the
/// period the TDM divisions repeat with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSettings {
    /// x: the real-time class's part.
    pub ratio_rt: u32,
    /// y: the best-effort class's part.
    pub ratio_be: u32,
    /// Δ: one RT division and one BE division, in ns (2DCS-TDM; the other
    /// policies carry it for display only).
    pub tdm_period_ns: u64,
}

impl Payload for ClassSettings {
    const KIND: MessageKind = MessageKind::ClassSettings;

    fn check(&self) -> Result<(), String> {
        if self.ratio_rt == 0 || self.ratio_be == 0 {
            return Err(format!(
                "ratio {}:{} has a zero part",
                self.ratio_rt, self.ratio_be
            ));
        }
        if self.tdm_period_ns == 0 {
            return Err("zero TDM period".into());
        }
        Ok(())
    }
}

/// Which class a division belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DivisionClass {
    RealTime,
    BestEffort,
}

impl DivisionClass {
    /// `real-time` / `best-effort`, as on the wire (also a metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RealTime => "real-time",
            Self::BestEffort => "best-effort",
        }
    }
}

/// Coordinator → agent (2DCS-TDM): from `apply_at_ns` to `ends_at_ns` the
/// cluster belongs to `class` (both instants in the agent's clock, converted
/// with the heartbeat offset estimate). Always strict: an agent applies a
/// late one at once and reports the instant it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchDivision {
    /// The coordinator's epoch (as in `SwitchSlice`): divisions of an older
    /// epoch are stale.
    pub epoch: u64,
    /// Division counter within the epoch.
    pub division: u64,
    pub class: DivisionClass,
    pub apply_at_ns: u64,
    /// When the next division starts (its own `SwitchDivision` follows);
    /// an agent that hears nothing by then keeps this one.
    pub ends_at_ns: u64,
}

impl Payload for SwitchDivision {
    const KIND: MessageKind = MessageKind::SwitchDivision;

    fn check(&self) -> Result<(), String> {
        if self.ends_at_ns <= self.apply_at_ns {
            return Err(format!(
                "division {} ends at {} ns, not after it starts at {} ns",
                self.division, self.ends_at_ns, self.apply_at_ns
            ));
        }
        Ok(())
    }
}

/// Agent → coordinator: the division switch happened, at `switched_at_ns`
/// in the agent's clock (for the division switch skew).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DivisionSwitched {
    pub epoch: u64,
    pub division: u64,
    pub switched_at_ns: u64,
}

impl Payload for DivisionSwitched {
    const KIND: MessageKind = MessageKind::DivisionSwitched;
}
