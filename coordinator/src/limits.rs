//! Caps and time-outs of the coordinator's endpoints: the `[limits.agents]`,
//! `[limits.admin]` and `[limits.metrics]` tables of its config.
use std::time::Duration;

use cosched_metrics_http::HttpLimits;
use cosched_proto::jsonl::LineLimits;
use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The wire port agents connect to.
    #[serde(default)]
    pub agents: AgentLimits,
    /// The CLI's admin socket (defaults: 32 connections, 1 MiB lines, 60 s idle).
    #[serde(default)]
    pub admin: LineLimits,
    /// The metrics endpoint (defaults: 64 connections, 10 s idle).
    #[serde(default)]
    pub metrics: HttpLimits,
}

/// How long, and how many, connections to the wire port may stay
/// unauthenticated (see `net::gate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentLimits {
    /// Time from connecting to a completed handshake and `Register`, in ms;
    /// a connection that takes longer is closed and counted
    /// (`reason="handshake_timeout"` or `"register_timeout"`). An agent
    /// needs about two round trips. Default 1000.
    #[serde(default = "default_handshake_timeout_ms")]
    pub handshake_timeout_ms: u64,
    /// Unauthenticated connections from one address; one more evicts the
    /// address's oldest. Default 8.
    #[serde(default = "default_unauthenticated_per_address")]
    pub unauthenticated_per_address: usize,
    /// Unauthenticated connections from all addresses; one more evicts the
    /// oldest. Default 256.
    #[serde(default = "default_unauthenticated")]
    pub unauthenticated: usize,
}

fn default_handshake_timeout_ms() -> u64 {
    1000
}
fn default_unauthenticated_per_address() -> usize {
    8
}
fn default_unauthenticated() -> usize {
    256
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            handshake_timeout_ms: default_handshake_timeout_ms(),
            unauthenticated_per_address: default_unauthenticated_per_address(),
            unauthenticated: default_unauthenticated(),
        }
    }
}

impl AgentLimits {
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    fn validate(&self) -> Result<(), String> {
        if !(100..=60_000).contains(&self.handshake_timeout_ms) {
            return Err(format!(
                "handshake_timeout_ms {} out of range 100..=60000",
                self.handshake_timeout_ms
            ));
        }
        if !(1..=65_536).contains(&self.unauthenticated) {
            return Err(format!(
                "unauthenticated {} out of range 1..=65536",
                self.unauthenticated
            ));
        }
        if !(1..=self.unauthenticated).contains(&self.unauthenticated_per_address) {
            return Err(format!(
                "unauthenticated_per_address {} out of range 1..=unauthenticated ({})",
                self.unauthenticated_per_address, self.unauthenticated
            ));
        }
        Ok(())
    }
}

impl Limits {
    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        fn prefixed(table: &'static str) -> impl Fn(String) -> String {
            move |error| format!("limits.{table}.{error}")
        }
        self.agents.validate().map_err(prefixed("agents"))?;
        self.admin.validate().map_err(prefixed("admin"))?;
        self.metrics.validate().map_err(prefixed("metrics"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_errors_name_the_key() {
        Limits::default().validate().unwrap();
        let limits: Limits =
            toml::from_str("[agents]\nunauthenticated = 4\nunauthenticated_per_address = 5\n")
                .unwrap();
        let error = limits.validate().unwrap_err();
        assert!(
            error.starts_with("limits.agents.unauthenticated_per_address 5"),
            "{error}"
        );
        let limits: Limits = toml::from_str("[admin]\nidle_timeout_ms = 5\n").unwrap();
        assert!(
            limits
                .validate()
                .unwrap_err()
                .starts_with("limits.admin.idle_timeout_ms")
        );
        assert!(toml::from_str::<Limits>("[agents]\nhandshake_ms = 5\n").is_err());
    }
}
