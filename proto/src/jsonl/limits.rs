//! What a line server lets one client hold: a table of a daemon's config.
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::range;

/// Caps and time-outs of a line server. Every connection holds a file
/// descriptor and a line buffer, so both are bounded, and a client that
/// stops talking gives its slot back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineLimits {
    /// Connections served at once; one more is told so and closed. Default 32.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Longest request line in bytes, newline excluded; a longer one is
    /// answered with an error and its connection closed. Default 1 MiB.
    #[serde(default = "default_max_line_bytes")]
    pub max_line_bytes: usize,
    /// How long a client may take to send its next complete request line
    /// (counted from the connection's start or the previous reply) or to take
    /// a reply, in ms; then it is closed. Waiting for the daemon's answer
    /// (e.g. `wait`) does not count. Default 60000.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
}

fn default_max_connections() -> usize {
    32
}
fn default_max_line_bytes() -> usize {
    1 << 20
}
fn default_idle_timeout_ms() -> u64 {
    60_000
}

impl Default for LineLimits {
    fn default() -> Self {
        LineLimits {
            max_connections: default_max_connections(),
            max_line_bytes: default_max_line_bytes(),
            idle_timeout_ms: default_idle_timeout_ms(),
        }
    }
}

impl LineLimits {
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        range::check("max_connections", self.max_connections, 1..=4096)?;
        range::check("max_line_bytes", self.max_line_bytes, 1024..=(64 << 20))?;
        range::check("idle_timeout_ms", self.idle_timeout_ms, 100..=3_600_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        LineLimits::default().validate().unwrap();
        let zero = LineLimits {
            max_connections: 0,
            ..LineLimits::default()
        };
        assert!(zero.validate().unwrap_err().contains("max_connections"));
        let tiny = LineLimits {
            max_line_bytes: 10,
            ..LineLimits::default()
        };
        assert!(tiny.validate().unwrap_err().contains("max_line_bytes"));
    }

    #[test]
    fn missing_keys_take_defaults_and_unknown_keys_are_refused() {
        let partial: LineLimits = serde_json::from_str(r#"{"max_connections": 4}"#).unwrap();
        assert_eq!(partial.max_connections, 4);
        assert_eq!(partial.max_line_bytes, 1 << 20);
        assert!(serde_json::from_str::<LineLimits>(r#"{"max_conections": 4}"#).is_err());
    }
}
