//! What the metrics endpoint lets clients hold: a table of a daemon's config.
use std::time::Duration;

use cosched_proto::range;
use serde::{Deserialize, Serialize};

/// Caps and time-outs of the metrics endpoint. Each connection holds a file
/// descriptor of the daemon, which it also needs for its own sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpLimits {
    /// Connections served at once; one more gets `503` and is closed.
    /// Default 64.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, counted from
    /// the connection's start or the previous response (so it also closes
    /// idle keep-alive connections), in ms. Default 10000.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
}

fn default_max_connections() -> usize {
    64
}
fn default_idle_timeout_ms() -> u64 {
    10_000
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: default_max_connections(),
            idle_timeout_ms: default_idle_timeout_ms(),
        }
    }
}

impl HttpLimits {
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }

    /// Checks the ranges; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        range::check("max_connections", self.max_connections, 1..=4096)?;
        range::check("idle_timeout_ms", self.idle_timeout_ms, 100..=600_000)
    }
}
