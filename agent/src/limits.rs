//! Caps and time-outs of the agent's local endpoints: the `[limits.control]`
//! and `[limits.metrics]` tables of its config. Fixed at start (a reload
//! that changes them is refused).
use cosched_metrics_http::HttpLimits;
use cosched_proto::jsonl::LineLimits;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// The control socket (defaults: 32 connections, 1 MiB lines, 60 s idle).
    #[serde(default)]
    pub control: LineLimits,
    /// The metrics endpoint (defaults: 64 connections, 10 s idle).
    #[serde(default)]
    pub metrics: HttpLimits,
}

impl Limits {
    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        self.control
            .validate()
            .map_err(|error| format!("limits.control.{error}"))?;
        self.metrics
            .validate()
            .map_err(|error| format!("limits.metrics.{error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_default_and_errors_name_the_key() {
        let limits: Limits = toml::from_str("[control]\nmax_connections = 4\n").unwrap();
        assert_eq!(limits.control.max_connections, 4);
        assert_eq!(limits.metrics, HttpLimits::default());
        let limits: Limits = toml::from_str("[metrics]\nidle_timeout_ms = 1\n").unwrap();
        assert_eq!(
            limits.validate().unwrap_err(),
            "limits.metrics.idle_timeout_ms 1 out of range 100..=600000"
        );
        assert!(toml::from_str::<Limits>("[control]\nmax_lines = 4\n").is_err());
    }

    #[test]
    fn the_config_checks_them_and_a_reload_may_not_change_them() {
        use crate::config::{Config, ConfigError};
        let base = "node = \"n0\"\n";
        let running = Config::parse(base, "t").unwrap();
        assert_eq!(running.limits, Limits::default());
        let error = Config::parse(
            &format!("{base}[limits.control]\nmax_connections = 0\n"),
            "t",
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("limits.control.max_connections"),
            "{error}"
        );
        let new = Config::parse(
            &format!("{base}[limits.metrics]\nmax_connections = 8\n"),
            "t",
        )
        .unwrap();
        assert!(matches!(
            running.check_reload(&new),
            Err(ConfigError::Immutable("limits"))
        ));
    }
}
