//! The agent's `[coordinator]` config table. Absent: a standalone agent.

use std::{
    fmt,
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use cosched_proto::wire::SharedSecret;
use serde::{Deserialize, Serialize};

/// Secret text from the config: parsed when the link starts, never printed
/// (`Debug` and `Serialize` redact it).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct SecretText(String);

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretText(<redacted>)")
    }
}

impl Serialize for SecretText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorConfig {
    /// The coordinator's agent listener, `host:port` (required).
    pub address: String,
    /// The cluster's shared secret (`hex:...` / `base64:...`), or use
    /// `secret_file`. Exactly one is required.
    #[serde(default)]
    pub secret: Option<SecretText>,
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Heartbeat period in ms (10..=60000). Default 500.
    #[serde(default = "default_heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// The coordinator is gone after this long without a message, in ms
    /// (at least twice the interval): the agent leaves gang mode and runs
    /// its local policy alone until it rejoins. Default 3000.
    #[serde(default = "default_heartbeat_timeout_ms")]
    pub heartbeat_timeout_ms: u64,
    /// First and longest pause between connection attempts, in ms.
    /// Defaults 200 and 2000.
    #[serde(default = "default_reconnect_min_ms")]
    pub reconnect_min_ms: u64,
    #[serde(default = "default_reconnect_max_ms")]
    pub reconnect_max_ms: u64,
    /// The address job ranks on this node are reached at. Default: the local
    /// address of the connection to the coordinator.
    #[serde(default)]
    pub advertise_ip: Option<IpAddr>,
    /// Outside their slot, SIGSTOP other jobs' tasks instead of demoting them
    /// to SCHED_IDLE. Default false.
    #[serde(default)]
    pub stop_inactive: bool,
    /// How often the frame counts of the coordinator's real-time jobs
    /// running here are sent (`FrameReport`), in ms (10..=60000); also once
    /// when such a job ends here. Default 500.
    #[serde(default = "default_frame_report_interval_ms")]
    pub frame_report_interval_ms: u64,
}

fn default_heartbeat_interval_ms() -> u64 {
    500
}
fn default_heartbeat_timeout_ms() -> u64 {
    3000
}
fn default_frame_report_interval_ms() -> u64 {
    500
}
fn default_reconnect_min_ms() -> u64 {
    200
}
fn default_reconnect_max_ms() -> u64 {
    2000
}

impl CoordinatorConfig {
    /// Checks everything but the secret file's content (read at start).
    pub fn validate(&self) -> Result<(), String> {
        if self.address.is_empty() || !self.address.contains(':') {
            return Err(format!(
                "coordinator.address {:?} must be host:port",
                self.address
            ));
        }
        match (&self.secret, &self.secret_file) {
            (None, None) => return Err("coordinator: set `secret` or `secret_file`".into()),
            (Some(_), Some(_)) => {
                return Err("coordinator: set only one of `secret` and `secret_file`".into());
            }
            (Some(SecretText(text)), None) => {
                SharedSecret::parse(text)
                    .map_err(|error| format!("coordinator.secret: {error}"))?;
            }
            (None, Some(_)) => {}
        }
        if !(10..=60_000).contains(&self.heartbeat_interval_ms) {
            return Err(format!(
                "coordinator.heartbeat_interval_ms {} out of range 10..=60000",
                self.heartbeat_interval_ms
            ));
        }
        if self.heartbeat_timeout_ms < 2 * self.heartbeat_interval_ms {
            return Err(format!(
                "coordinator.heartbeat_timeout_ms {} must be at least twice the interval",
                self.heartbeat_timeout_ms
            ));
        }
        cosched_proto::range::check(
            "coordinator.frame_report_interval_ms",
            self.frame_report_interval_ms,
            10..=60_000,
        )?;
        if self.reconnect_min_ms == 0 || self.reconnect_max_ms < self.reconnect_min_ms {
            return Err("coordinator: need 0 < reconnect_min_ms <= reconnect_max_ms".into());
        }
        Ok(())
    }

    /// The secret, from the config or its file.
    pub fn load_secret(&self) -> Result<SharedSecret, String> {
        match (&self.secret, &self.secret_file) {
            (Some(SecretText(text)), _) => {
                SharedSecret::parse(text).map_err(|error| format!("coordinator.secret: {error}"))
            }
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|error| format!("reading {}: {error}", path.display()))?;
                SharedSecret::parse(&text).map_err(|error| format!("{}: {error}", path.display()))
            }
            (None, None) => Err("coordinator: no secret configured".into()),
        }
    }

    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.heartbeat_interval_ms)
    }

    pub fn heartbeat_timeout(&self) -> Duration {
        Duration::from_millis(self.heartbeat_timeout_ms)
    }

    /// Resolves `address` (a name may need DNS).
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        use std::net::ToSocketAddrs as _;
        self.address.to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} resolves to nothing", self.address),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CoordinatorConfig, String> {
        let config: CoordinatorConfig = toml::from_str(text).map_err(|error| error.to_string())?;
        config.validate().map(|()| config)
    }

    const SECRET: &str = "secret = \"hex:000102030405060708090a0b0c0d0e0f\"";

    #[test]
    fn defaults_are_documented_values() {
        let config = parse(&format!("address = \"10.0.0.1:7400\"\n{SECRET}")).unwrap();
        assert_eq!(config.heartbeat_interval_ms, 500);
        assert_eq!(config.heartbeat_timeout_ms, 3000);
        assert!(!config.stop_inactive);
        assert_eq!(config.frame_report_interval_ms, 500);
        assert!(config.load_secret().is_ok());
    }

    #[test]
    fn secrets_are_required_valid_and_never_printed() {
        let error = parse("address = \"a:1\"").unwrap_err();
        assert!(error.contains("secret"), "{error}");
        let error = parse("address = \"a:1\"\nsecret = \"hex:0011\"").unwrap_err();
        assert!(error.contains("16"), "{error}");
        let config = parse(&format!("address = \"a:1\"\n{SECRET}")).unwrap();
        assert!(!format!("{config:?}").contains("000102"));
        assert!(!serde_json::to_string(&config).unwrap().contains("000102"));
    }

    #[test]
    fn bad_address_and_timeouts_are_rejected() {
        assert!(parse(&format!("address = \"nohost\"\n{SECRET}")).is_err());
        let text = format!("address = \"a:1\"\n{SECRET}\nheartbeat_timeout_ms = 600");
        assert!(parse(&text).unwrap_err().contains("twice"));
        let text = format!("address = \"a:1\"\n{SECRET}\nframe_report_interval_ms = 0");
        assert!(
            parse(&text)
                .unwrap_err()
                .contains("frame_report_interval_ms")
        );
    }
}
