//! The agent's TOML configuration: typed, with documented defaults, unknown
//! keys rejected, validated before use. A reload goes through [`Config::load`]
//! and [`Config::check_reload`]; when either fails the running config stays.
use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use cosched_policy::local::{
    DcsParams, FairnessParams, FcsParams, LocalPolicyConfig, PeriodicBoostParams, PolicyKind,
    SpinBlockParams, SpinYieldParams,
};
use cosched_proto::range;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Name of this node in the cluster (required).
    pub node: String,
    /// CPUs of this node: launched job processes are pinned to them, the agent
    /// watches them, and (with `pin_self`) runs on them. Empty = all CPUs.
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Local policy: `local` (no intervention: plain Linux, the default),
    /// `dcs`, `sb`, `sy`, `pb`, `pb-sb`, `dcs-sb`, `fcs`. Switchable by reload.
    #[serde(default)]
    pub policy: PolicyKind,
    /// SCHED_FIFO priority of the agent itself while a policy other than
    /// `local` runs, so it reacts to arrivals at once even on a busy CPU; must
    /// be above every boost priority. 0 = leave the agent's own attributes
    /// alone. Default 50.
    #[serde(default = "default_agent_priority")]
    pub agent_priority: u32,
    /// Period of the policy's observation tick (counter snapshot, spin
    /// thresholds, periodic boost), in µs (100..=100000). Default 1000.
    #[serde(default = "default_policy_tick_us")]
    pub policy_tick_us: u64,
    /// Parameters of each policy (documented defaults in cosched-policy).
    #[serde(default)]
    pub dcs: DcsParams,
    #[serde(default)]
    pub sb: SpinBlockParams,
    #[serde(default)]
    pub sy: SpinYieldParams,
    #[serde(default)]
    pub pb: PeriodicBoostParams,
    #[serde(default)]
    pub fcs: FcsParams,
    #[serde(default)]
    pub fairness: FairnessParams,
    /// Prometheus endpoint (`GET /metrics`). Default 127.0.0.1:9464.
    #[serde(default = "default_metrics_listen")]
    pub metrics_listen: SocketAddr,
    /// Control socket (JSON lines, mode 0600). Default /run/cosched/agent.sock.
    #[serde(default = "default_control_socket")]
    pub control_socket: PathBuf,
    /// Also serve the user socket next to the control socket
    /// (`agent-user.sock`, mode 0666): any local user may join and leave
    /// its OWN processes there (checked with the socket's peer
    /// credentials), for a Slurm TaskProlog or a launch prefix that runs
    /// as the job's user. Default true.
    #[serde(default = "yes")]
    pub user_socket: bool,
    /// Restore journal, job logs and job registry. Default /var/lib/cosched.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// cgroup v2 directory under which the agent makes one cgroup per launched
    /// job (used to kill a whole job). None: no cgroups.
    #[serde(default)]
    pub cgroup_root: Option<PathBuf>,
    /// Demote by cgroup: a directory of a cgroup-v1 hierarchy with the cpu
    /// controller (e.g. `/sys/fs/cgroup/cpu/cosched/n0`). The agent makes
    /// `<dir>/active` and `<dir>/idle` (`cpu.idle = 1`) at start; while gang
    /// slices demote other jobs (`coordinator.stop_inactive = false`) every
    /// managed task is in `active` and every demoted one (the overlay's, a
    /// local policy's demote and background levels) in `idle`, instead of
    /// SCHED_IDLE plus autogroup nice 19, which leaks CPU across autogroups.
    /// Outside such slices tasks stay in their own cgroups. None (the
    /// default): no cgroup moves. Cannot change at run time.
    #[serde(default)]
    pub demote_cpu_cgroup: Option<PathBuf>,
    /// Pin the agent itself to `cpus` (it then competes with the jobs like a
    /// real node daemon, and its cost shows on the node). Default true.
    #[serde(default = "yes")]
    pub pin_self: bool,
    /// Most jobs tracked at once (bounds metric label cardinality). Default 64.
    #[serde(default = "default_max_jobs")]
    pub max_jobs: u32,
    /// Finished jobs kept for `jobs`/`wait` and metrics until forgotten. Default 32.
    #[serde(default = "default_finished_retention")]
    pub finished_retention: u32,
    /// Seconds a rank the coordinator told this agent to expect (an
    /// attached job) waits for its first process to join; then the rank
    /// ends, reported like a rank whose processes exited, so a job whose
    /// launcher died before starting this node's part (srun killed with
    /// SIGKILL, whose epilog never runs; a Slurm step on fewer nodes than
    /// its allocation) does not hold its matrix row forever. 0: wait
    /// forever. Default 120.
    #[serde(default = "default_expect_timeout_s")]
    pub expect_timeout_s: u64,
    #[serde(default)]
    pub ebpf: EbpfConfig,
    /// How waiting is recognised (`[detect]`). Switchable by reload.
    #[serde(default)]
    pub detect: DetectConfig,
    /// Caps and time-outs of the control socket and the metrics endpoint
    /// (`[limits.control]`, `[limits.metrics]`). Cannot change at run time.
    #[serde(default)]
    pub limits: crate::limits::Limits,
    /// The coordinator to join (gang slices, jobs). Absent: a standalone
    /// agent. Cannot change at run time.
    #[serde(default)]
    pub coordinator: Option<crate::coord::CoordinatorConfig>,
    /// Best-effort and real-time jobs together (`[classes]`). Switchable by
    /// reload.
    #[serde(default)]
    pub classes: crate::classes::ClassesConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EbpfConfig {
    /// How often the agent reads the task counters and drains batched events,
    /// in ms (1..=10000). Default 100.
    #[serde(default = "default_poll_ms")]
    pub poll_interval_ms: u64,
    /// Wake the agent once this many bytes of events are queued (0 = a quarter
    /// of the ring). Default 0.
    #[serde(default)]
    pub wake_batch_bytes: u32,
}

impl Default for EbpfConfig {
    fn default() -> Self {
        Self {
            poll_interval_ms: default_poll_ms(),
            wake_batch_bytes: 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectConfig {
    /// The spin gap, µs (1..=100000): a task is waiting from an empty wait
    /// (an empty receive, an empty poll, a yield) until it receives, sends,
    /// blocks, or has been on CPU this long since its last empty wait (it
    /// computes). It must exceed the period of a real wait loop, or a
    /// spinner looks like it stops waiting between two polls, and stay far
    /// below the computation between waits. The default and the
    /// measurements behind it are in docs/waiting.md.
    #[serde(default = "default_spin_gap_us")]
    pub spin_gap_us: u64,
}

impl Default for DetectConfig {
    fn default() -> Self {
        Self {
            spin_gap_us: default_spin_gap_us(),
        }
    }
}

fn default_spin_gap_us() -> u64 {
    cosched_agent_common::DEFAULT_SPIN_GAP_NS / 1000
}

fn default_agent_priority() -> u32 {
    50
}
fn default_policy_tick_us() -> u64 {
    1000
}
fn default_metrics_listen() -> SocketAddr {
    ([127, 0, 0, 1], 9464).into()
}
fn default_control_socket() -> PathBuf {
    "/run/cosched/agent.sock".into()
}
fn default_state_dir() -> PathBuf {
    "/var/lib/cosched".into()
}
fn yes() -> bool {
    true
}
fn default_max_jobs() -> u32 {
    64
}
fn default_expect_timeout_s() -> u64 {
    120
}
fn default_finished_retention() -> u32 {
    32
}
fn default_poll_ms() -> u64 {
    100
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid config: {0}")]
    Invalid(String),
    #[error("{0} cannot change at run time (restart the agent to change it)")]
    Immutable(&'static str),
}

impl Config {
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let c: Self = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.to_string(),
            message: e.to_string(),
        })?;
        c.validate()?;
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.node.is_empty() || self.node.len() > 64 {
            return bad("node must be 1..=64 characters".into());
        }
        self.local_policy()
            .validate()
            .map_err(|e| ConfigError::Invalid(format!("policy parameters: {e}")))?;
        // The guardian runs above the agent, so that the agent's tasks are
        // put back even when the agent itself is starved.
        if self.agent_priority >= crate::guardian::PRIORITY {
            return bad(format!(
                "agent_priority {} out of range 0..={} (the guardian runs at {})",
                self.agent_priority,
                crate::guardian::PRIORITY - 1,
                crate::guardian::PRIORITY
            ));
        }
        let top_boost = [
            self.dcs.boost_prio,
            self.sb.wake_boost_prio,
            self.pb.boost_prio,
            self.fcs.top_prio,
        ]
        .into_iter()
        .max()
        .unwrap_or(0) as u32;
        if self.agent_priority != 0 && self.agent_priority <= top_boost {
            return bad(format!(
                "agent_priority {} must be above every boost priority (highest is {top_boost})",
                self.agent_priority
            ));
        }
        self.classes.validate().map_err(ConfigError::Invalid)?;
        let ceiling = match self.agent_priority {
            0 => crate::guardian::PRIORITY,
            p => p,
        };
        crate::classes::config::check_band(
            self.classes.band().map_err(ConfigError::Invalid)?,
            top_boost.min(99) as u8,
            ceiling,
        )
        .map_err(|e| ConfigError::Invalid(format!("classes.rt_band: {e}")))?;
        range::check("policy_tick_us", self.policy_tick_us, 100..=100_000)
            .map_err(ConfigError::Invalid)?;
        if let Some(c) = self
            .cpus
            .iter()
            .find(|&&c| c >= cosched_agent_common::MAX_CPUS)
        {
            return bad(format!("cpu {c} out of range"));
        }
        range::check(
            "ebpf.poll_interval_ms",
            self.ebpf.poll_interval_ms,
            1..=10_000,
        )
        .map_err(ConfigError::Invalid)?;
        range::check("detect.spin_gap_us", self.detect.spin_gap_us, 1..=100_000)
            .map_err(ConfigError::Invalid)?;
        if self.max_jobs == 0 {
            return bad("max_jobs must be at least 1".into());
        }
        if let Some(dir) = &self.demote_cpu_cgroup {
            crate::cpu_group::check_dir_syntax(dir).map_err(ConfigError::Invalid)?;
        }
        if let Some(coordinator) = &self.coordinator {
            coordinator.validate().map_err(ConfigError::Invalid)?;
        }
        self.limits.validate().map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// A reload may change the policy and tunables, not the agent's identity or
    /// the endpoints it already serves.
    pub fn check_reload(&self, new: &Self) -> Result<(), ConfigError> {
        let immutable: [(&'static str, bool); 11] = [
            ("node", self.node != new.node),
            // The agent pinned itself to its CPUs at start and the tasks it
            // manages were checked against them.
            ("cpus", self.cpus != new.cpus),
            ("metrics_listen", self.metrics_listen != new.metrics_listen),
            ("control_socket", self.control_socket != new.control_socket),
            ("user_socket", self.user_socket != new.user_socket),
            ("state_dir", self.state_dir != new.state_dir),
            ("cgroup_root", self.cgroup_root != new.cgroup_root),
            // Tasks sit in the old directory's cgroups; moving them all at
            // run time is not worth a second code path.
            (
                "demote_cpu_cgroup",
                self.demote_cpu_cgroup != new.demote_cpu_cgroup,
            ),
            ("pin_self", self.pin_self != new.pin_self),
            ("coordinator", self.coordinator != new.coordinator),
            ("limits", self.limits != new.limits),
        ];
        match immutable.into_iter().find(|(_, changed)| *changed) {
            Some((field, _)) => Err(ConfigError::Immutable(field)),
            None => Ok(()),
        }
    }

    /// Checks the config against the machine the agent runs on: every CPU
    /// in `cpus` must be online (`online`: how many CPUs are, numbered from 0).
    pub fn check_machine(&self, online: u32) -> Result<(), ConfigError> {
        match self.cpus.iter().find(|&&c| c >= online) {
            Some(c) => Err(ConfigError::Invalid(format!(
                "cpus: CPU {c} does not exist on this machine (CPUs 0..={})",
                online.saturating_sub(1)
            ))),
            None => Ok(()),
        }
    }

    /// The policy part of the config, as the policy crate takes it.
    pub fn local_policy(&self) -> LocalPolicyConfig {
        LocalPolicyConfig {
            kind: self.policy,
            dcs: self.dcs.clone(),
            sb: self.sb.clone(),
            sy: self.sy.clone(),
            pb: self.pb.clone(),
            fcs: self.fcs.clone(),
            fairness: self.fairness.clone(),
        }
    }

    /// The node's CPUs, `cpus` or every online CPU.
    pub fn node_cpus(&self, online: u32) -> Vec<u32> {
        if self.cpus.is_empty() {
            (0..online).collect()
        } else {
            self.cpus.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_must_exist_on_the_machine_and_cannot_change_by_reload() {
        let c = Config::parse("node = \"n0\"\ncpus = [200]", "t").unwrap();
        let e = c.check_machine(2).unwrap_err();
        assert!(e.to_string().contains("CPU 200 does not exist"), "{e}");
        let ok = Config::parse("node = \"n0\"\ncpus = [1]", "t").unwrap();
        assert!(ok.check_machine(2).is_ok());
        let moved = Config::parse("node = \"n0\"\ncpus = [0]", "t").unwrap();
        assert!(matches!(
            ok.check_reload(&moved),
            Err(ConfigError::Immutable("cpus"))
        ));
    }

    #[test]
    fn minimal_config_gets_documented_defaults() {
        let c = Config::parse("node = \"n0\"", "t").unwrap();
        assert_eq!(c.policy, PolicyKind::Local);
        assert_eq!(c.agent_priority, 50);
        assert_eq!(c.metrics_listen, "127.0.0.1:9464".parse().unwrap());
        assert_eq!(c.ebpf.poll_interval_ms, 100);
        assert!(c.pin_self);
        assert!(c.cpus.is_empty());
        assert_eq!(c.node_cpus(2), vec![0, 1]);
        assert_eq!(c.demote_cpu_cgroup, None);
    }

    #[test]
    fn demote_cpu_cgroup_is_checked_and_fixed_at_start() {
        let plain = Config::parse("node = \"n0\"", "t").unwrap();
        let cg = Config::parse(
            "node = \"n0\"\ndemote_cpu_cgroup = \"/sys/fs/cgroup/cpu/cosched/n0\"",
            "t",
        )
        .unwrap();
        assert_eq!(
            cg.demote_cpu_cgroup.as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpu/cosched/n0"))
        );
        for bad in ["cpu/n0", "/sys/fs/cgroup/cpu/../n0", "/"] {
            let e = Config::parse(
                &format!("node = \"n0\"\ndemote_cpu_cgroup = \"{bad}\""),
                "t",
            )
            .unwrap_err();
            assert!(e.to_string().contains("demote_cpu_cgroup"), "{bad}: {e}");
        }
        let e = plain.check_reload(&cg).unwrap_err();
        assert!(matches!(e, ConfigError::Immutable("demote_cpu_cgroup")));
        assert!(e.to_string().contains("restart"), "{e}");
        assert!(cg.check_reload(&plain).is_err());
        cg.check_reload(&cg.clone()).unwrap();
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name() {
        let e = Config::parse("node = \"n0\"\nbogus = 1", "t").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = Config::parse("node = \"n0\"\n[ebpf]\npoll = 1", "t").unwrap_err();
        assert!(e.to_string().contains("poll"), "{e}");
    }

    #[test]
    fn agent_priority_at_the_guardians_is_rejected() {
        let e = Config::parse("node = \"n0\"\nagent_priority = 99", "t").unwrap_err();
        assert!(e.to_string().contains("guardian runs at 99"), "{e}");
        Config::parse("node = \"n0\"\nagent_priority = 98", "t").unwrap();
    }

    #[test]
    fn spin_gap_has_a_default_a_range_and_can_change_by_reload() {
        let c = Config::parse("node = \"n0\"", "t").unwrap();
        assert_eq!(
            c.detect.spin_gap_us * 1000,
            cosched_agent_common::DEFAULT_SPIN_GAP_NS
        );
        let set = Config::parse("node = \"n0\"\n[detect]\nspin_gap_us = 50", "t").unwrap();
        assert_eq!(set.detect.spin_gap_us, 50);
        assert!(c.check_reload(&set).is_ok());
        for bad in ["0", "100001"] {
            let e = Config::parse(
                &format!("node = \"n0\"\n[detect]\nspin_gap_us = {bad}"),
                "t",
            )
            .unwrap_err();
            assert!(e.to_string().contains("detect.spin_gap_us"), "{e}");
        }
    }

    #[test]
    fn classes_have_defaults_are_checked_against_boosts_and_the_agent_and_reload() {
        let c = Config::parse("node = \"n0\"", "t").unwrap();
        assert_eq!(c.classes, crate::classes::ClassesConfig::default());
        let ps = Config::parse(
            "node = \"n0\"\n[classes]\nmode = \"ps\"\nratio = \"3:1\"\nrt_band = [30, 45]\nedf = \"deadline\"\nbudget_slack_percent = 5\nps_sleeper_credit_us = 100",
            "t",
        )
        .unwrap();
        assert_eq!(ps.classes.mode, crate::classes::LocalClassMode::Ps);
        c.check_reload(&ps).unwrap();
        for (extra, want) in [
            (
                "agent_priority = 30\n[classes]\nrt_band = [21, 39]",
                "below the agent",
            ),
            (
                "[pb]\nboost_prio = 25\n[classes]\nrt_band = [21, 39]",
                "above every",
            ),
            ("[classes]\nratio = \"1:0\"", "classes.ratio"),
            ("[classes]\nmode = \"tdm\"", "mode"),
            ("[classes]\nbogus = 1", "bogus"),
        ] {
            let e = Config::parse(&format!("node = \"n0\"\n{extra}"), "t").unwrap_err();
            assert!(e.to_string().contains(want), "{extra}: {e}");
        }
    }

    #[test]
    fn missing_node_is_rejected() {
        assert!(Config::parse("policy = \"local\"", "t").is_err());
    }

    #[test]
    fn unknown_policy_is_rejected_listing_known_ones() {
        let e = Config::parse("node = \"n0\"\npolicy = \"magic\"", "t").unwrap_err();
        assert!(
            e.to_string().contains("magic") && e.to_string().contains("local"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_poll_interval_is_rejected() {
        let e = Config::parse("node = \"n0\"\n[ebpf]\npoll_interval_ms = 0", "t").unwrap_err();
        assert!(e.to_string().contains("poll_interval_ms"), "{e}");
    }

    #[test]
    fn coordinator_table_is_optional_checked_and_fixed_at_start() {
        let standalone = Config::parse("node = \"n0\"", "t").unwrap();
        assert!(standalone.coordinator.is_none());
        let joined = Config::parse(
            "node = \"n0\"\n[coordinator]\naddress = \"10.0.0.1:7400\"\nsecret = \"hex:000102030405060708090a0b0c0d0e0f\"",
            "t",
        )
        .unwrap();
        assert_eq!(
            joined.coordinator.as_ref().unwrap().heartbeat_timeout_ms,
            3000
        );
        assert!(matches!(
            standalone.check_reload(&joined),
            Err(ConfigError::Immutable("coordinator"))
        ));
        let e = Config::parse("node = \"n0\"\n[coordinator]\naddress = \"x:1\"", "t").unwrap_err();
        assert!(e.to_string().contains("secret"), "{e}");
        let e = Config::parse("node = \"n0\"\n[coordinator]\naddres = \"x:1\"", "t").unwrap_err();
        assert!(e.to_string().contains("addres"), "{e}");
    }

    #[test]
    fn reload_may_change_policy_tunables_but_not_identity() {
        let a = Config::parse("node = \"n0\"", "t").unwrap();
        let b = Config::parse("node = \"n0\"\n[ebpf]\npoll_interval_ms = 10", "t").unwrap();
        a.check_reload(&b).unwrap();
        let c = Config::parse("node = \"n1\"", "t").unwrap();
        assert!(matches!(
            a.check_reload(&c),
            Err(ConfigError::Immutable("node"))
        ));
        let d = Config::parse("node = \"n0\"\nmetrics_listen = \"0.0.0.0:1\"", "t").unwrap();
        assert!(matches!(
            a.check_reload(&d),
            Err(ConfigError::Immutable("metrics_listen"))
        ));
    }
}
