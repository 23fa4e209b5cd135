//! The coordinator's TOML configuration: typed, documented defaults, unknown
//! keys rejected, validated before use. The `[classes]` table (the BE/RT
//! policies) is in [`classes`].

mod classes;

pub use classes::{AdmissionKind, ClassesConfig, parse_ratio};

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use cosched_policy::global::{ColumnAllocation, PairingConfig, QueuePolicy};
use cosched_proto::{range, wire::SharedSecret};
use serde::Deserialize;

use crate::{limits::Limits, policy::GlobalPolicy};

/// Shortest slice accepted: below it the switch cost and skew dominate.
pub const MIN_SLICE_MS: u64 = 10;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The cluster's nodes, in column order: an agent registers under one of
    /// these names (its `node`). Required, 1..=1024 distinct names.
    pub nodes: Vec<String>,
    /// Where agents connect (wire protocol over TCP). Default 0.0.0.0:7400.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// The CLI's admin socket (JSON lines, mode 0600).
    /// Default /run/cosched/coordinator.sock.
    #[serde(default = "default_admin_socket")]
    pub admin_socket: PathBuf,
    /// Also serve the user socket next to the admin socket
    /// (`coordinator-user.sock`, mode 0666): any local user may attach the
    /// jobs they launch themselves, detach or cancel their own and read the
    /// views there (checked with the socket's peer credentials), for a
    /// Slurm SrunProlog or `cosched attach` run as the job's user.
    /// Default true.
    #[serde(default = "yes")]
    pub user_socket: bool,
    /// Prometheus endpoint (`GET /metrics`). Default 127.0.0.1:9465.
    #[serde(default = "default_metrics_listen")]
    pub metrics_listen: SocketAddr,
    /// The shared secret (`hex:...`, `base64:...`); or use `secret_file`.
    #[serde(default)]
    pub secret: Option<SharedSecret>,
    /// A file holding the shared secret in the same format.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Global policy: `fcfs`, `gang` (default), `paired-gang`, `fcs`, and
    /// the BE/RT policies `one-level-gang`, `2dcs-tdm`, `2dcs-ps` (see
    /// `[classes]`). Switchable at run time with `cosched policy set`.
    #[serde(default)]
    pub policy: GlobalPolicy,
    /// Maximum multiprogramming level: rows of the matrix (fcfs always uses
    /// one). Default 4.
    #[serde(default = "default_max_rows")]
    pub max_rows: usize,
    /// Time slice in ms (>= 10). Default 100.
    #[serde(default = "default_slice_ms")]
    pub slice_ms: u64,
    /// How far ahead of a switch agents are told, in µs; 0 = min(slice/2,
    /// 5 ms). Default 0.
    #[serde(default)]
    pub switch_lead_us: u64,
    /// Announce gang slices ahead as one `SliceSchedule` per node (protocol
    /// 1.5 agents switch by their own timer; re-announced only when what a
    /// node runs, or its clock estimate, changes). `false`: a `SwitchSlice`
    /// per slice to every agent. Default true.
    #[serde(default = "default_schedule_ahead")]
    pub schedule_ahead: bool,
    /// Announce paired gang's slices ahead too (with `schedule_ahead`): each
    /// node gets its slices to the end of the next round as planned from
    /// the current predictions, and a new schedule from the first slice a
    /// prediction (or a job) changes. Scheduled agents send their quanta's
    /// utilisation with their switch reports, one in ~100 ms, so the
    /// predictor learns a quantum up to 100 ms later than with a
    /// `SwitchSlice` per slice. Default false (paired gang's MPI cells were
    /// measured with per-slice switches).
    #[serde(default)]
    pub paired_schedule_ahead: bool,
    /// Announce 1GS's slots ahead too (with `schedule_ahead`): each node
    /// gets its slots to the end of the next round of 1GS's rows as the
    /// rotor would run them if nothing changed, and a new schedule from the
    /// first slot an arrival, departure or replication change alters. A
    /// stall of the coordinator's CPU then no longer makes every node
    /// switch late. Default false.
    #[serde(default = "default_one_gs_schedule_ahead")]
    pub one_gs_schedule_ahead: bool,
    /// A node's schedule is re-announced whenever its clock estimate moves
    /// until the offset is known to within this many µs (half the round
    /// trip of its best heartbeat), then only when it moves by more than
    /// 100 µs. Default 250.
    #[serde(default = "default_schedule_max_uncertainty_us")]
    pub schedule_max_uncertainty_us: u64,
    /// Column allocation: `first-fit` (default) or `buddy`.
    #[serde(default = "default_allocation", with = "allocation_name")]
    pub allocation: ColumnAllocation,
    /// Queue: `strict-fcfs` (default) or `backfill`.
    #[serde(default = "default_queue", with = "queue_name")]
    pub queue: QueuePolicy,
    /// Heartbeat period, both ways, in ms. Default 500.
    #[serde(default = "default_heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// A peer silent for this long is gone, in ms. Default 3000.
    #[serde(default = "default_heartbeat_timeout_ms")]
    pub heartbeat_timeout_ms: u64,
    /// State file (matrix and jobs), rewritten atomically after every change.
    /// Default /var/lib/cosched/coordinator-state.json.
    #[serde(default = "default_state_file")]
    pub state_file: PathBuf,
    /// First TCP port handed to jobs for their ranks' peer addresses.
    /// Default 20000.
    #[serde(default = "default_job_port_base")]
    pub job_port_base: u16,
    /// Number of job ports (one per running job). Default 1000.
    #[serde(default = "default_job_port_count")]
    pub job_port_count: u16,
    /// Finished jobs kept for `cosched jobs --all`. Default 100.
    #[serde(default = "default_finished_retention")]
    pub finished_retention: usize,
    /// SCHED_FIFO priority of the coordinator's event loop, 1..=99; 0 = time
    /// shared. Default 40: above the real-time boosts agents give jobs (DCS
    /// 10, FCS 20; agents keep boosts below their own priority, 50), so a
    /// coordinator on a node with boosted jobs still announces switches on
    /// time (see `priority.rs`).
    #[serde(default = "default_realtime_priority")]
    pub realtime_priority: u32,
    /// Paired gang settings (Paired Gang Scheduling defaults: margin 1 %, band 20 %).
    #[serde(default)]
    pub paired: PairingConfig,
    /// Caps and time-outs of the wire port, the admin socket and the metrics
    /// endpoint (`[limits.agents]`, `[limits.admin]`, `[limits.metrics]`).
    #[serde(default)]
    pub limits: Limits,
    /// The BE/RT policies: fairness ratio, TDM period, costs, admission
    /// (`[classes]`; see [`ClassesConfig`]).
    #[serde(default)]
    pub classes: ClassesConfig,
}

fn default_listen() -> SocketAddr {
    ([0, 0, 0, 0], 7400).into()
}
fn yes() -> bool {
    true
}
fn default_admin_socket() -> PathBuf {
    "/run/cosched/coordinator.sock".into()
}
fn default_metrics_listen() -> SocketAddr {
    ([127, 0, 0, 1], 9465).into()
}
fn default_schedule_ahead() -> bool {
    true
}
fn default_one_gs_schedule_ahead() -> bool {
    false
}
fn default_schedule_max_uncertainty_us() -> u64 {
    cosched_policy::global::ScheduleClockBounds::default().max_uncertainty_ns / 1000
}

fn default_max_rows() -> usize {
    cosched_policy::global::DEFAULT_MAX_ROWS
}
fn default_realtime_priority() -> u32 {
    40
}
fn default_slice_ms() -> u64 {
    100
}
fn default_allocation() -> ColumnAllocation {
    ColumnAllocation::FirstFit
}
fn default_queue() -> QueuePolicy {
    QueuePolicy::StrictFcfs
}
fn default_heartbeat_interval_ms() -> u64 {
    500
}
fn default_heartbeat_timeout_ms() -> u64 {
    3000
}
fn default_state_file() -> PathBuf {
    "/var/lib/cosched/coordinator-state.json".into()
}
fn default_job_port_base() -> u16 {
    20000
}
fn default_job_port_count() -> u16 {
    1000
}
fn default_finished_retention() -> usize {
    100
}

/// `first-fit` / `buddy` in the config (the policy crate's serde names are
/// snake_case; configs use kebab-case like every other value).
mod allocation_name {
    use cosched_policy::global::ColumnAllocation;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ColumnAllocation, D::Error> {
        match String::deserialize(d)?.as_str() {
            "first-fit" => Ok(ColumnAllocation::FirstFit),
            "buddy" => Ok(ColumnAllocation::Buddy),
            other => Err(serde::de::Error::custom(format!(
                "unknown allocation {other:?} (known: first-fit, buddy)"
            ))),
        }
    }
}

mod queue_name {
    use cosched_policy::global::QueuePolicy;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<QueuePolicy, D::Error> {
        match String::deserialize(d)?.as_str() {
            "strict-fcfs" => Ok(QueuePolicy::StrictFcfs),
            "backfill" => Ok(QueuePolicy::Backfill),
            other => Err(serde::de::Error::custom(format!(
                "unknown queue {other:?} (known: strict-fcfs, backfill)"
            ))),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid config: {0}")]
    Invalid(String),
}

impl Config {
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|error| ConfigError::Parse {
            path: origin.to_string(),
            message: error.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |message: String| Err(ConfigError::Invalid(message));
        if self.nodes.is_empty() || self.nodes.len() > 1024 {
            return bad(format!(
                "nodes: {} names; 1..=1024 needed",
                self.nodes.len()
            ));
        }
        for (index, name) in self.nodes.iter().enumerate() {
            if name.is_empty() || name.len() > 64 {
                return bad(format!("nodes[{index}]: a name must be 1..=64 characters"));
            }
            if self.nodes[..index].contains(name) {
                return bad(format!("nodes: {name:?} appears twice"));
            }
        }
        match (&self.secret, &self.secret_file) {
            (None, None) => return bad("set `secret` or `secret_file`".into()),
            (Some(_), Some(_)) => return bad("set only one of `secret` and `secret_file`".into()),
            _ => {}
        }
        let invalid = ConfigError::Invalid;
        range::check("max_rows", self.max_rows, 1..=64).map_err(invalid)?;
        range::check("realtime_priority", self.realtime_priority, 0..=99).map_err(invalid)?;
        range::check("slice_ms", self.slice_ms, MIN_SLICE_MS..=60_000).map_err(invalid)?;
        if self.switch_lead_us != 0 && self.switch_lead_us * 2 > self.slice_ms * 1000 {
            return bad(format!(
                "switch_lead_us {} exceeds half a slice",
                self.switch_lead_us
            ));
        }
        range::check(
            "heartbeat_interval_ms",
            self.heartbeat_interval_ms,
            10..=60_000,
        )
        .map_err(invalid)?;
        if self.heartbeat_timeout_ms < 2 * self.heartbeat_interval_ms {
            return bad(format!(
                "heartbeat_timeout_ms {} must be at least twice heartbeat_interval_ms",
                self.heartbeat_timeout_ms
            ));
        }
        if self.job_port_base == 0 || self.job_port_count == 0 {
            return bad("job_port_base and job_port_count must be positive".into());
        }
        if u32::from(self.job_port_base) + u32::from(self.job_port_count) > 65536 {
            return bad("job ports run past 65535".into());
        }
        let paired = &self.paired;
        if !(0.0..100.0).contains(&paired.margin_percent)
            || !(0.0..=100.0).contains(&paired.homogeneity_band_percent)
        {
            return bad(
                "paired: margin_percent in 0..100, homogeneity_band_percent in 0..=100".into(),
            );
        }
        self.limits.validate().map_err(ConfigError::Invalid)?;
        self.classes
            .validate(
                self.nodes.len(),
                self.slice_ms,
                self.switch_lead().as_micros() as u64,
            )
            .map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// The secret, from the config or its file.
    pub fn load_secret(&self) -> Result<SharedSecret, ConfigError> {
        if let Some(secret) = &self.secret {
            return Ok(secret.clone());
        }
        let path = self.secret_file.as_ref().expect("validated: one is set");
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        SharedSecret::parse(&text)
            .map_err(|error| ConfigError::Invalid(format!("{}: {error}", path.display())))
    }

    pub fn slice(&self) -> Duration {
        Duration::from_millis(self.slice_ms)
    }

    /// How far ahead of a switch agents are told: `switch_lead_us`, or
    /// min(slice / 2, 5 ms).
    pub fn switch_lead(&self) -> Duration {
        if self.switch_lead_us != 0 {
            Duration::from_micros(self.switch_lead_us)
        } else {
            (self.slice() / 2).min(Duration::from_millis(5))
        }
    }

    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.heartbeat_interval_ms)
    }

    pub fn heartbeat_timeout(&self) -> Duration {
        Duration::from_millis(self.heartbeat_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "hex:000102030405060708090a0b0c0d0e0f";

    fn minimal() -> String {
        format!("nodes = [\"n0\", \"n1\"]\nsecret = \"{SECRET}\"\n")
    }

    #[test]
    fn minimal_config_gets_documented_defaults() {
        let config = Config::parse(&minimal(), "t").unwrap();
        assert_eq!(config.policy, GlobalPolicy::Gang);
        assert_eq!(config.max_rows, 4);
        assert_eq!(config.slice_ms, 100);
        assert_eq!(config.listen, "0.0.0.0:7400".parse().unwrap());
        assert_eq!(config.metrics_listen, "127.0.0.1:9465".parse().unwrap());
        assert_eq!(config.allocation, ColumnAllocation::FirstFit);
        assert_eq!(config.queue, QueuePolicy::StrictFcfs);
        assert_eq!(config.heartbeat_interval_ms, 500);
        assert_eq!(config.heartbeat_timeout_ms, 3000);
        assert_eq!(config.switch_lead(), Duration::from_millis(5));
        assert_eq!(config.paired, PairingConfig::default());
        assert_eq!(config.realtime_priority, 40);
        assert_eq!(config.limits, Limits::default());
        assert_eq!(config.classes, ClassesConfig::default());
    }

    #[test]
    fn the_classes_table_is_validated_with_its_keys_named() {
        let text = format!(
            "{}policy = \"2dcs-tdm\"\n[classes]\nratio = \"3:1\"\nadmission = \"none\"\n",
            minimal()
        );
        let config = Config::parse(&text, "t").unwrap();
        assert_eq!(config.policy, GlobalPolicy::TwoDcsTdm);
        assert_eq!(config.classes.ratio_text(), "3:1");
        assert_eq!(config.classes.admission, AdmissionKind::None);
        let text = format!("{}[classes]\nrt_max_wait_ms = 0\n", minimal());
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(
            error.to_string().contains("classes.rt_max_wait_ms 0"),
            "{error}"
        );
        // A lead too long for the divisions (10 ms of BE per 30 ms period).
        let text = format!(
            "{}slice_ms = 20\nswitch_lead_us = 6000\n[classes]\ntdm_period_ms = 30\n",
            minimal()
        );
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(
            error.to_string().contains("shortest TDM division"),
            "{error}"
        );
    }

    #[test]
    fn limits_are_validated_with_their_table_named() {
        let text = format!("{}[limits.agents]\nhandshake_timeout_ms = 10\n", minimal());
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("limits.agents.handshake_timeout_ms 10"),
            "{error}"
        );
        let text = format!("{}[limits.metrics]\nmax_connections = 2\n", minimal());
        assert_eq!(
            Config::parse(&text, "t")
                .unwrap()
                .limits
                .metrics
                .max_connections,
            2
        );
    }

    #[test]
    fn realtime_priority_past_99_is_rejected() {
        let text = format!(
            "{}realtime_priority = 100
",
            minimal()
        );
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(
            error.to_string().contains("realtime_priority 100"),
            "{error}"
        );
        let text = format!(
            "{}realtime_priority = 0
",
            minimal()
        );
        assert_eq!(Config::parse(&text, "t").unwrap().realtime_priority, 0);
    }

    #[test]
    fn short_slices_lead_by_half_a_slice() {
        let config = Config::parse(&format!("{}slice_ms = 10\n", minimal()), "t").unwrap();
        assert_eq!(config.switch_lead(), Duration::from_millis(5));
        let text = format!("{}slice_ms = 10\nswitch_lead_us = 2000\n", minimal());
        let config = Config::parse(&text, "t").unwrap();
        assert_eq!(config.switch_lead(), Duration::from_millis(2));
    }

    #[test]
    fn slices_below_ten_ms_are_rejected() {
        let error = Config::parse(&format!("{}slice_ms = 5\n", minimal()), "t").unwrap_err();
        assert!(error.to_string().contains("slice_ms 5"), "{error}");
    }

    #[test]
    fn unknown_keys_and_values_are_rejected_by_name() {
        let error = Config::parse(&format!("{}bogus = 1\n", minimal()), "t").unwrap_err();
        assert!(error.to_string().contains("bogus"), "{error}");
        let text = format!("{}allocation = \"best-fit\"\n", minimal());
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(error.to_string().contains("first-fit"), "{error}");
        let text = format!("{}policy = \"lottery\"\n", minimal());
        assert!(Config::parse(&text, "t").is_err());
    }

    #[test]
    fn a_secret_is_required_exactly_once() {
        let error = Config::parse("nodes = [\"n0\"]", "t").unwrap_err();
        assert!(error.to_string().contains("secret"), "{error}");
        let text = format!("{}secret_file = \"/x\"\n", minimal());
        assert!(Config::parse(&text, "t").is_err());
        let error = Config::parse("nodes = [\"n0\"]\nsecret = \"hex:00\"", "t").unwrap_err();
        assert!(error.to_string().contains("16"), "{error}");
    }

    #[test]
    fn duplicate_node_names_are_rejected() {
        let text = format!("nodes = [\"a\", \"a\"]\nsecret = \"{SECRET}\"");
        let error = Config::parse(&text, "t").unwrap_err();
        assert!(error.to_string().contains("twice"), "{error}");
    }

    #[test]
    fn heartbeat_timeout_must_cover_two_intervals() {
        let text = format!(
            "{}heartbeat_interval_ms = 500\nheartbeat_timeout_ms = 600\n",
            minimal()
        );
        assert!(Config::parse(&text, "t").is_err());
    }
}
