//! The local cluster: N nodes on one machine, each a network namespace with a
//! veth address on a shared bridge, one CPU and its own agent (SPEC section 3).
//!
//! `up` writes the model to `/run/cosched-cluster/cluster.json`; everything
//! else (status, down, demo, bench, integration tests) reads it back with
//! [`Cluster::load`]. Names are fixed prefixes so that `down` can also find
//! what a crashed run left behind without the file.

mod agent;
pub(crate) mod cgroups;
pub mod coordinator;
mod cpus;
pub mod cpusets;
mod down;
mod network;
mod procfs;
pub mod prometheus;
pub mod slurm;
mod status;
mod up;

use std::{
    ffi::OsStr,
    fs, io,
    net::{Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

pub use agent::AgentCommand;
pub use coordinator::{CoordinatorNode, CoordinatorOptions};
pub use down::{DownReport, down};
pub use prometheus::PrometheusNode;
pub use status::{NodeStatus, Status, status};
pub use up::{UpOptions, up};

/// Where a running cluster keeps its state (configs, sockets, logs, cluster.json).
pub const STATE_DIR: &str = "/run/cosched-cluster";
/// Every node's network namespace is `cosched-<node>`.
pub const NETNS_PREFIX: &str = "cosched-";
/// The Linux bridge in the root namespace joining all nodes.
pub const BRIDGE: &str = "cosched0";
/// Root-namespace side of node i's veth pair: `cosv<i>`.
pub const VETH_PREFIX: &str = "cosv";
/// cgroup v2 directory holding one cgroup per node (`<root>/n<i>`).
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup/unified/cosched";
/// The cgroup-v1 hierarchy with the cpu controller.
pub const V1_CPU_HIERARCHY: &str = "/sys/fs/cgroup/cpu";
/// cgroup-v1 cpu directory holding one directory per node (`<root>/n<i>`),
/// each its agent's `demote_cpu_cgroup` when the agents demote.
pub const CPU_CGROUP_ROOT: &str = "/sys/fs/cgroup/cpu/cosched";
/// Name of the scratch cgroup-v1 hierarchy mounted with `favordynmods`
/// (under the state directory) while a demoting cluster is up.
pub const FAVORDYNMODS_NAME: &str = "cosched-cluster";
/// The bridge's address; also every node's default gateway.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
/// Prefix length of the cluster subnet.
pub const PREFIX_LEN: u8 = 24;
/// Node i's address is 10.201.0.(FIRST_HOST + i).
pub const FIRST_HOST: u8 = 10;
/// Addresses FIRST_HOST..=254 give this many nodes.
pub const MAX_NODES: usize = 255 - FIRST_HOST as usize;
/// Default Prometheus port of the agents (inside each namespace).
pub const DEFAULT_METRICS_PORT: u16 = 9464;

/// A cluster that `up` started, as recorded in cluster.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cluster {
    /// The local policy every agent was configured with.
    pub policy: String,
    pub bridge: String,
    pub gateway: Ipv4Addr,
    pub prefix_len: u8,
    pub state_dir: PathBuf,
    pub nodes: Vec<Node>,
    /// The coordinator, when the cluster was started with one.
    #[serde(default)]
    pub coordinator: Option<CoordinatorNode>,
    /// Slurm on the nodes (`up --slurm`).
    #[serde(default)]
    pub slurm: Option<slurm::Slurm>,
    /// The Prometheus scraping the agents and the coordinator, when the
    /// cluster was started with one (`--prometheus`).
    #[serde(default)]
    pub prometheus: Option<PrometheusNode>,
    /// With `--exclusive-cpusets`: the cpuset hierarchy root's
    /// `cpuset.sched_load_balance` before `up` turned it off (`down` puts it
    /// back). None: the nodes have no cpusets of their own.
    #[serde(default)]
    pub cpuset_balance_was: Option<String>,
}

/// One node: a network namespace, a CPU, an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// `n<index>`.
    pub name: String,
    pub index: usize,
    /// Network namespace name (`ip netns`): `cosched-n<index>`.
    pub netns: String,
    /// Root-namespace end of the veth pair (`cosv<index>`); the other end is
    /// `eth0` inside the namespace.
    pub veth: String,
    /// The node's address on the cluster bridge.
    pub address: Ipv4Addr,
    /// The CPU job processes (and the agent) are pinned to.
    pub cpu: usize,
    /// Where the agent's Prometheus endpoint is reachable from the root namespace.
    pub metrics_addr: SocketAddr,
    /// The agent's control socket (JSON lines; launch/adopt jobs).
    pub control_socket: PathBuf,
    pub config_path: PathBuf,
    pub state_dir: PathBuf,
    /// cgroup v2 directory of the node: the agent and, below it, its jobs.
    pub cgroup: PathBuf,
    /// cgroup-v1 cpu directory the agent demotes in (`demote_cpu_cgroup`);
    /// set by `up` when the agents demote and the kernel allows it.
    #[serde(default)]
    pub demote_cgroup: Option<PathBuf>,
    /// The node's exclusive cgroup-v1 cpuset (its CPU a root domain of its
    /// own, so pinned tasks may use SCHED_DEADLINE); the agent runs in it
    /// and its jobs inherit it. Set by `up --exclusive-cpusets`.
    #[serde(default)]
    pub cpuset: Option<PathBuf>,
    /// The agent's stdout and stderr.
    pub log_file: PathBuf,
    /// Set once the agent is started.
    pub agent_pid: Option<u32>,
    /// The agent's start time (clock ticks after boot, /proc/PID/stat field
    /// 22), so a recycled pid is not mistaken for the agent.
    pub agent_start_ticks: Option<u64>,
}

impl Cluster {
    /// The plan for `nodes` nodes: names, addresses, paths; node i gets
    /// `cpus[i % cpus.len()]` (nodes share CPUs when there are more nodes than CPUs).
    pub fn plan(nodes: usize, cpus: &[usize], policy: &str, metrics_port: u16) -> Result<Self> {
        if nodes == 0 || nodes > MAX_NODES {
            bail!("--nodes must be between 1 and {MAX_NODES}, not {nodes}");
        }
        if cpus.is_empty() {
            bail!("no online CPUs to give to the nodes");
        }
        let state_dir = PathBuf::from(STATE_DIR);
        let nodes = (0..nodes)
            .map(|index| {
                let name = format!("n{index}");
                let node_dir = state_dir.join(&name);
                let address = Ipv4Addr::new(10, 201, 0, FIRST_HOST + index as u8);
                Node {
                    netns: format!("{NETNS_PREFIX}{name}"),
                    veth: format!("{VETH_PREFIX}{index}"),
                    address,
                    cpu: cpus[index % cpus.len()],
                    metrics_addr: SocketAddr::from((address, metrics_port)),
                    control_socket: node_dir.join("agent.sock"),
                    config_path: node_dir.join("agent.toml"),
                    state_dir: node_dir.join("state"),
                    cgroup: Path::new(CGROUP_ROOT).join(&name),
                    demote_cgroup: None,
                    cpuset: None,
                    log_file: node_dir.join("agent.log"),
                    agent_pid: None,
                    agent_start_ticks: None,
                    index,
                    name,
                }
            })
            .collect();
        Ok(Self {
            policy: policy.to_owned(),
            bridge: BRIDGE.to_owned(),
            gateway: GATEWAY,
            prefix_len: PREFIX_LEN,
            state_dir,
            nodes,
            coordinator: None,
            slurm: None,
            prometheus: None,
            cpuset_balance_was: None,
        })
    }

    /// Where the scratch `favordynmods` hierarchy is mounted.
    pub fn favordynmods_dir(&self) -> PathBuf {
        self.state_dir.join("favordynmods")
    }

    /// `/run/cosched-cluster/cluster.json`.
    pub fn manifest_path() -> PathBuf {
        Path::new(STATE_DIR).join("cluster.json")
    }

    /// The running cluster; an error naming `cluster up` when there is none.
    pub fn load() -> Result<Self> {
        Self::try_load()?.with_context(|| {
            format!(
                "no cluster is up ({} does not exist): start one with `cargo xtask cluster up`",
                Self::manifest_path().display()
            )
        })
    }

    /// The running cluster, or `None` when cluster.json does not exist.
    pub fn try_load() -> Result<Option<Self>> {
        Self::load_from(&Self::manifest_path())
    }

    /// Reads a cluster.json; `None` when the file does not exist.
    pub fn load_from(path: &Path) -> Result<Option<Self>> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(error).with_context(|| format!("could not read {}", path.display()));
            }
        };
        let cluster = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid cluster description", path.display()))?;
        Ok(Some(cluster))
    }

    /// Writes cluster.json atomically (a reader never sees half a file).
    pub fn save(&self) -> Result<()> {
        let path = Self::manifest_path();
        let temporary = path.with_extension("json.tmp");
        let json = serde_json::to_string_pretty(self).context("could not serialise the cluster")?;
        fs::create_dir_all(&self.state_dir)
            .with_context(|| format!("could not create {}", self.state_dir.display()))?;
        fs::write(&temporary, json + "\n")
            .with_context(|| format!("could not write {}", temporary.display()))?;
        fs::rename(&temporary, &path)
            .with_context(|| format!("could not move {} into place", temporary.display()))
    }

    /// The node with this name (`n0`, ...).
    pub fn node(&self, name: &str) -> Result<&Node> {
        self.nodes
            .iter()
            .find(|node| node.name == name)
            .with_context(|| {
                let names: Vec<&str> = self.nodes.iter().map(|node| node.name.as_str()).collect();
                format!("no node {name:?} (nodes: {})", names.join(", "))
            })
    }
}

impl Node {
    /// The Prometheus endpoint, reachable from the root namespace.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.metrics_addr)
    }

    /// The bind mount `ip netns` keeps for the namespace, which nsenter enters.
    pub fn netns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }

    /// Whether the agent recorded for this node is still running (and is the
    /// same process, not a recycled pid).
    pub fn agent_alive(&self) -> bool {
        match (self.agent_pid, self.agent_start_ticks) {
            (Some(pid), Some(ticks)) => procfs::is_running(pid, Some(ticks)),
            (Some(pid), None) => procfs::is_running(pid, None),
            _ => false,
        }
    }

    /// A command that runs `program` inside the node: in its network namespace
    /// (only: mounts stay shared, so tracefs and paths look the same) and
    /// pinned to its CPU. Add arguments and spawn it like any `Command`.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("nsenter");
        command
            .arg(format!("--net={}", self.netns_path().display()))
            .args(["taskset", "--cpu-list"])
            .arg(self.cpu.to_string())
            .arg(program);
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_gives_each_node_an_address_a_cpu_and_its_own_paths() {
        let cluster = Cluster::plan(3, &[0, 1], "local", 9464).unwrap();
        let node = &cluster.nodes[2];
        assert_eq!(node.name, "n2");
        assert_eq!(node.netns, "cosched-n2");
        assert_eq!(node.veth, "cosv2");
        assert_eq!(node.address, Ipv4Addr::new(10, 201, 0, 12));
        assert_eq!(node.cpu, 0, "nodes share CPUs round-robin");
        assert_eq!(node.metrics_url(), "http://10.201.0.12:9464/metrics");
        assert_eq!(
            node.control_socket,
            PathBuf::from("/run/cosched-cluster/n2/agent.sock")
        );
        assert_eq!(
            node.cgroup,
            PathBuf::from("/sys/fs/cgroup/unified/cosched/n2")
        );
        assert_eq!(cluster.nodes[1].cpu, 1);
    }

    #[test]
    fn plan_rejects_impossible_sizes() {
        assert!(Cluster::plan(0, &[0], "local", 9464).is_err());
        assert!(Cluster::plan(MAX_NODES + 1, &[0], "local", 9464).is_err());
        assert!(Cluster::plan(MAX_NODES, &[0], "local", 9464).is_ok());
        assert!(Cluster::plan(1, &[], "local", 9464).is_err());
    }

    #[test]
    fn cluster_json_round_trips() {
        let mut cluster = Cluster::plan(2, &[0, 1], "dcs", 9500).unwrap();
        cluster.nodes[0].agent_pid = Some(42);
        let json = serde_json::to_string(&cluster).unwrap();
        assert_eq!(serde_json::from_str::<Cluster>(&json).unwrap(), cluster);
    }

    #[test]
    fn node_command_enters_the_namespace_pinned() {
        let cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let command = cluster.nodes[1].command("true");
        assert_eq!(
            crate::process::describe(&command),
            "nsenter --net=/run/netns/cosched-n1 taskset --cpu-list 1 true"
        );
    }
}
