//! Builds the configured local policy.

use super::baseline::LocalBaseline;
use super::combined::DynamicCoscheduler;
use super::config::{ConfigError, LocalPolicyConfig};
use super::fcs::FcsPolicy;
use super::policy::{LocalPolicy, PolicyKind};

/// Validates `config` (every section) and builds its `kind` of policy.
pub fn build_policy(config: &LocalPolicyConfig) -> Result<Box<dyn LocalPolicy>, ConfigError> {
    config.validate()?;
    let c = config;
    Ok(match c.kind {
        PolicyKind::Local => Box::new(LocalBaseline),
        PolicyKind::Dcs => Box::new(DynamicCoscheduler::dcs(&c.dcs, &c.fairness)),
        PolicyKind::Sb => Box::new(DynamicCoscheduler::spin_block(&c.sb, &c.fairness)),
        PolicyKind::Sy => Box::new(DynamicCoscheduler::spin_yield(&c.sy, &c.fairness)),
        PolicyKind::Pb => Box::new(DynamicCoscheduler::periodic_boost(&c.pb, &c.fairness)),
        PolicyKind::PbSb => Box::new(DynamicCoscheduler::pb_sb(&c.pb, &c.sb, &c.fairness)),
        PolicyKind::DcsSb => Box::new(DynamicCoscheduler::dcs_sb(&c.dcs, &c.sb, &c.fairness)),
        PolicyKind::Fcs => Box::new(FcsPolicy::new(&c.fcs, &c.fairness)),
    })
}
