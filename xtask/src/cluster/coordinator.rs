//! The cluster's coordinator (optional): `cosched-coordinator` running in node
//! 0's network namespace, listening on that node's address, with every agent
//! joined to it by a `[coordinator]` table in its config. The shared secret is
//! generated per cluster and kept in a file only root can read.
//!
//! The coordinator's slice length is fixed by its config, so [`restart`]
//! starts it again with another one (agents reconnect by themselves); the
//! policy switches at run time with `cosched policy set`, which [`cli`] runs.

use std::{
    fs,
    io::Read as _,
    net::SocketAddr,
    os::unix::fs::OpenOptionsExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::{Cluster, agent::log_tail, procfs};
use crate::process;

/// The coordinator's agent listener port (on node 0's address).
pub const COORDINATOR_PORT: u16 = 7400;
/// The coordinator's Prometheus port (on node 0's address).
pub const COORDINATOR_METRICS_PORT: u16 = 9465;
/// The coordinator binary and the CLI, in the release directory.
pub const COORDINATOR_BINARY: &str = "cosched-coordinator";
pub const CLI_BINARY: &str = "cosched";
/// Heartbeats both ways: often enough for a good clock-offset estimate (the
/// switch skew is measured with it) and a quick fallback when it goes away.
const HEARTBEAT_INTERVAL_MS: u64 = 100;
const HEARTBEAT_TIMEOUT_MS: u64 = 1000;
/// How long `stop` waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long one CLI call may wait for the coordinator's answer.
const CLI_TIMEOUT_S: u64 = 10;

/// What to start: the global policy, the slice, and how agents enforce it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorOptions {
    /// `fcfs`, `gang`, `paired-gang` or `fcs`.
    pub policy: String,
    /// Time slice in ms (the coordinator accepts 10 and more).
    pub slice_ms: u64,
    /// Agents stop (SIGSTOP) the jobs outside the slice instead of demoting
    /// them to SCHED_IDLE (fixed for the agents' lifetime).
    pub stop_inactive: bool,
    /// Where `cosched-coordinator` and `cosched` are; `None`: the
    /// workspace's release directory.
    pub bin_dir: Option<PathBuf>,
    /// The body of a `[classes]` table (`key = value` lines) for the
    /// policies with classes; `None`: the coordinator's defaults.
    pub classes: Option<String>,
    /// Write `paired_schedule_ahead = true` (paired gang's slices announced
    /// ahead); `false`: the key is not written, the coordinator's default
    /// applies. Fixed by the config, so a bench restarts the coordinator
    /// to change it.
    pub paired_schedule_ahead: bool,
}

impl Default for CoordinatorOptions {
    fn default() -> Self {
        Self {
            policy: "gang".into(),
            slice_ms: 100,
            stop_inactive: true,
            bin_dir: None,
            classes: None,
            paired_schedule_ahead: false,
        }
    }
}

/// The coordinator as recorded in cluster.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinatorNode {
    /// The policy and slice it was started with (the policy may have been
    /// switched since; `cosched status` tells).
    pub policy: String,
    pub slice_ms: u64,
    pub stop_inactive: bool,
    /// Its `[classes]` table's body, if the cluster gave it one.
    #[serde(default)]
    pub classes: Option<String>,
    /// Whether its config says `paired_schedule_ahead = true`.
    #[serde(default)]
    pub paired_schedule_ahead: bool,
    /// Where its binary and the `cosched` CLI are.
    pub bin_dir: PathBuf,
    /// The namespace it runs in (node 0's).
    pub netns: String,
    /// Where agents connect.
    pub listen: SocketAddr,
    /// Its Prometheus endpoint, reachable from the root namespace.
    pub metrics_addr: SocketAddr,
    /// The admin socket the `cosched` CLI talks to.
    pub admin_socket: PathBuf,
    pub config_path: PathBuf,
    pub secret_file: PathBuf,
    pub state_file: PathBuf,
    pub log_file: PathBuf,
    pub pid: Option<u32>,
    pub start_ticks: Option<u64>,
}

impl CoordinatorNode {
    /// The plan for `cluster` (which must have a node 0): paths below the
    /// cluster's state directory, addresses on node 0; binaries from
    /// `options.bin_dir`, else from `release`.
    pub fn plan(cluster: &Cluster, options: &CoordinatorOptions, release: &Path) -> Result<Self> {
        let node = cluster
            .nodes
            .first()
            .context("a coordinator needs at least one node")?;
        let dir = cluster.state_dir.join("coordinator");
        Ok(Self {
            policy: options.policy.clone(),
            slice_ms: options.slice_ms,
            stop_inactive: options.stop_inactive,
            classes: options.classes.clone(),
            paired_schedule_ahead: options.paired_schedule_ahead,
            bin_dir: options
                .bin_dir
                .clone()
                .unwrap_or_else(|| release.to_path_buf()),
            netns: node.netns.clone(),
            listen: SocketAddr::from((node.address, COORDINATOR_PORT)),
            metrics_addr: SocketAddr::from((node.address, COORDINATOR_METRICS_PORT)),
            admin_socket: dir.join("coordinator.sock"),
            config_path: dir.join("coordinator.toml"),
            secret_file: dir.join("secret"),
            state_file: dir.join("state.json"),
            log_file: dir.join("coordinator.log"),
            pid: None,
            start_ticks: None,
        })
    }

    pub fn alive(&self) -> bool {
        self.pid
            .is_some_and(|pid| procfs::is_running(pid, self.start_ticks))
    }
}

/// The coordinator's TOML config (strings quoted as JSON, valid TOML).
pub fn config_toml(cluster: &Cluster, coordinator: &CoordinatorNode) -> String {
    let quote = |text: &str| serde_json::Value::from(text).to_string();
    let path = |path: &Path| quote(&path.display().to_string());
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| quote(&n.name)).collect();
    let classes = coordinator
        .classes
        .as_ref()
        .map(|body| format!("\n[classes]\n{}\n", body.trim_end()))
        .unwrap_or_default();
    // Written only when on: off leaves the coordinator's default.
    let paired_ahead = if coordinator.paired_schedule_ahead {
        "paired_schedule_ahead = true\n"
    } else {
        ""
    };
    format!(
        "# Generated by `cargo xtask cluster up`.\n\
         nodes = [{nodes}]\n\
         listen = {listen}\n\
         admin_socket = {admin}\n\
         metrics_listen = {metrics}\n\
         secret_file = {secret}\n\
         state_file = {state}\n\
         policy = {policy}\n\
         slice_ms = {slice}\n\
         heartbeat_interval_ms = {HEARTBEAT_INTERVAL_MS}\n\
         heartbeat_timeout_ms = {HEARTBEAT_TIMEOUT_MS}\n\
         {paired_ahead}{classes}",
        nodes = nodes.join(", "),
        listen = quote(&coordinator.listen.to_string()),
        admin = path(&coordinator.admin_socket),
        metrics = quote(&coordinator.metrics_addr.to_string()),
        secret = path(&coordinator.secret_file),
        state = path(&coordinator.state_file),
        policy = quote(&coordinator.policy),
        slice = coordinator.slice_ms,
    )
}

/// The `[coordinator]` table that joins an agent to it.
pub fn agent_table(coordinator: &CoordinatorNode) -> String {
    let quote = |text: &str| serde_json::Value::from(text).to_string();
    format!(
        "\n[coordinator]\n\
         address = {address}\n\
         secret_file = {secret}\n\
         heartbeat_interval_ms = {HEARTBEAT_INTERVAL_MS}\n\
         heartbeat_timeout_ms = {HEARTBEAT_TIMEOUT_MS}\n\
         reconnect_min_ms = 50\n\
         reconnect_max_ms = 500\n\
         stop_inactive = {stop}\n",
        address = quote(&coordinator.listen.to_string()),
        secret = quote(&coordinator.secret_file.display().to_string()),
        stop = coordinator.stop_inactive,
    )
}

/// Writes the secret (once per cluster, mode 0600) and the config.
pub fn write_files(cluster: &Cluster, coordinator: &CoordinatorNode) -> Result<()> {
    let dir = coordinator
        .config_path
        .parent()
        .context("config path has no directory")?;
    fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    if !coordinator.secret_file.exists() {
        let mut bytes = [0u8; 32];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading /dev/urandom for the cluster secret")?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&coordinator.secret_file)
            .with_context(|| format!("could not create {}", coordinator.secret_file.display()))?;
        std::io::Write::write_all(&mut file, format!("hex:{hex}\n").as_bytes())?;
    }
    fs::write(&coordinator.config_path, config_toml(cluster, coordinator))
        .with_context(|| format!("could not write {}", coordinator.config_path.display()))
}

/// Starts the coordinator inside node 0's namespace (not pinned: on a real
/// cluster it has a machine of its own; here it takes little CPU) and waits
/// until its admin socket answers. A state file of an earlier start is
/// removed: every start is a fresh matrix.
pub fn spawn(coordinator: &mut CoordinatorNode, timeout: Duration) -> Result<Child> {
    let binary = coordinator.bin_dir.join(COORDINATOR_BINARY);
    if !binary.is_file() {
        bail!("{} is missing: build the workspace", binary.display());
    }
    match fs::remove_file(&coordinator.state_file) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error)
                .with_context(|| format!("could not remove {}", coordinator.state_file.display()));
        }
    }
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&coordinator.log_file)
        .with_context(|| format!("could not open {}", coordinator.log_file.display()))?;
    let mut command = Command::new("nsenter");
    command
        .arg(format!("--net=/run/netns/{}", coordinator.netns))
        .arg("--")
        .arg(&binary)
        .arg("--config")
        .arg(&coordinator.config_path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Its own process group: a terminal's Ctrl-C is for the bench, which
    // then stops the coordinator itself.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start `{}`", process::describe(&command)))?;
    coordinator.pid = Some(child.id());
    coordinator.start_ticks = procfs::stat(child.id()).map(|s| s.start_ticks);
    let deadline = Instant::now() + timeout;
    loop {
        if coordinator.admin_socket.exists() && cli(coordinator, &["status"]).is_ok() {
            return Ok(child);
        }
        if let Some(status) = child.try_wait().context("polling the coordinator")? {
            bail!(
                "the coordinator exited during start-up ({status}){}",
                log_tail(&coordinator.log_file)
            );
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            bail!(
                "the coordinator did not answer on {} within {} s{}",
                coordinator.admin_socket.display(),
                timeout.as_secs_f32(),
                log_tail(&coordinator.log_file)
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM and wait (SIGKILL after a grace period). Nothing to do when it
/// is not running.
pub fn stop(coordinator: &CoordinatorNode) -> Result<()> {
    let Some(pid) = coordinator.pid.filter(|_| coordinator.alive()) else {
        return Ok(());
    };
    procfs::signal(pid, "TERM")?;
    if !procfs::wait_for_exit(&[pid], STOP_GRACE).is_empty() {
        procfs::signal(pid, "KILL")?;
        if !procfs::wait_for_exit(&[pid], STOP_GRACE).is_empty() {
            bail!("the coordinator (pid {pid}) survived SIGKILL");
        }
    }
    Ok(())
}

/// Stops the cluster's coordinator and starts it again with `options` (a
/// fresh matrix; the binaries stay where they were unless `options` says
/// otherwise); waits until every agent has joined it. The new pid goes to
/// cluster.json.
pub fn restart(
    cluster: &mut Cluster,
    options: &CoordinatorOptions,
    timeout: Duration,
) -> Result<()> {
    let mut coordinator = cluster
        .coordinator
        .clone()
        .context("the cluster was started without a coordinator (`cluster up --coordinator`)")?;
    if options.stop_inactive != coordinator.stop_inactive {
        bail!(
            "the agents enforce slices with stop_inactive = {}; changing it needs a new cluster",
            coordinator.stop_inactive
        );
    }
    stop(&coordinator)?;
    coordinator.policy = options.policy.clone();
    coordinator.slice_ms = options.slice_ms;
    coordinator.classes = options.classes.clone();
    coordinator.paired_schedule_ahead = options.paired_schedule_ahead;
    if let Some(dir) = &options.bin_dir {
        coordinator.bin_dir = dir.clone();
    }
    coordinator.pid = None;
    write_files(cluster, &coordinator)?;
    let child = spawn(&mut coordinator, timeout);
    cluster.coordinator = Some(coordinator);
    cluster.save()?;
    // The child handle is dropped: the process keeps running (it is found
    // again by pid), like the agents.
    drop(child?);
    wait_for_nodes(cluster, timeout)
}

/// Runs `cosched --json ARGS` against the coordinator; its JSON answer, or
/// an error quoting what it printed.
pub fn cli(coordinator: &CoordinatorNode, args: &[&str]) -> Result<serde_json::Value> {
    let mut command = Command::new(coordinator.bin_dir.join(CLI_BINARY));
    command
        .arg("--socket")
        .arg(&coordinator.admin_socket)
        .arg("--timeout")
        .arg(CLI_TIMEOUT_S.to_string())
        .arg("--json")
        .args(args);
    let text = process::capture(&mut command)?;
    serde_json::from_str(text.trim())
        .with_context(|| format!("`{}` printed no JSON: {text}", process::describe(&command)))
}

/// Waits until every node of the cluster is connected to the coordinator.
pub fn wait_for_nodes(cluster: &Cluster, timeout: Duration) -> Result<()> {
    let coordinator = cluster
        .coordinator
        .as_ref()
        .context("the cluster has no coordinator")?;
    let deadline = Instant::now() + timeout;
    loop {
        let reply = cli(coordinator, &["nodes"]);
        let connected = reply.as_ref().ok().map(connected_nodes).unwrap_or_default();
        if connected.len() == cluster.nodes.len() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "agents did not join the coordinator within {} s (connected: {:?}; last answer: {}); see {} and the agents' logs",
                timeout.as_secs_f32(),
                connected,
                match &reply {
                    Ok(v) => v.to_string(),
                    Err(e) => format!("{e:#}"),
                },
                coordinator.log_file.display()
            );
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Names of the connected nodes in a `cosched --json nodes` answer.
pub fn connected_nodes(reply: &serde_json::Value) -> Vec<String> {
    reply["nodes"]["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter(|n| n["connected"] == true)
                .filter_map(|n| n["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned() -> (Cluster, CoordinatorNode) {
        let cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let options = CoordinatorOptions {
            policy: "paired-gang".into(),
            slice_ms: 10,
            stop_inactive: true,
            bin_dir: None,
            classes: None,
            paired_schedule_ahead: false,
        };
        let coordinator = CoordinatorNode::plan(&cluster, &options, Path::new("/r")).unwrap();
        (cluster, coordinator)
    }

    #[test]
    fn runs_on_node_zero_with_paths_in_the_state_dir() {
        let (_, c) = planned();
        assert_eq!(c.netns, "cosched-n0");
        assert_eq!(c.listen.to_string(), "10.201.0.10:7400");
        assert_eq!(c.metrics_addr.to_string(), "10.201.0.10:9465");
        assert_eq!(
            c.bin_dir,
            PathBuf::from("/r"),
            "the release directory by default"
        );
        assert_eq!(
            c.admin_socket,
            PathBuf::from("/run/cosched-cluster/coordinator/coordinator.sock")
        );
    }

    #[test]
    fn config_names_every_node_the_policy_and_the_slice() {
        let (cluster, c) = planned();
        let text = config_toml(&cluster, &c);
        for line in [
            "nodes = [\"n0\", \"n1\"]",
            "listen = \"10.201.0.10:7400\"",
            "policy = \"paired-gang\"",
            "slice_ms = 10",
            "secret_file = \"/run/cosched-cluster/coordinator/secret\"",
            "state_file = \"/run/cosched-cluster/coordinator/state.json\"",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    #[test]
    fn paired_schedule_ahead_is_written_only_when_asked_for() {
        let (cluster, mut c) = planned();
        assert!(
            !config_toml(&cluster, &c).contains("paired_schedule_ahead"),
            "off leaves the coordinator's default"
        );
        c.paired_schedule_ahead = true;
        c.classes = Some("ratio = \"2:1\"\n".into());
        let text = config_toml(&cluster, &c);
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(
            parsed["paired_schedule_ahead"].as_bool(),
            Some(true),
            "a top-level key, before [classes]:\n{text}"
        );
    }

    #[test]
    fn a_classes_table_goes_last_when_given() {
        let (cluster, mut c) = planned();
        assert!(!config_toml(&cluster, &c).contains("[classes]"));
        c.classes = Some("ratio = \"2:1\"\nadmission = \"none\"\n".into());
        let text = config_toml(&cluster, &c);
        assert!(
            text.ends_with("\n[classes]\nratio = \"2:1\"\nadmission = \"none\"\n"),
            "{text}"
        );
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["classes"]["admission"].as_str(), Some("none"));
    }

    #[test]
    fn agent_table_joins_with_the_secret_file_and_enforcement() {
        let (_, c) = planned();
        let table = agent_table(&c);
        assert!(table.starts_with("\n[coordinator]\n"), "{table}");
        assert!(table.contains("address = \"10.201.0.10:7400\"\n"));
        assert!(table.contains("stop_inactive = true\n"));
        assert!(table.contains("secret_file = \"/run/cosched-cluster/coordinator/secret\"\n"));
    }

    #[test]
    fn connected_nodes_reads_the_cli_answer() {
        let reply = serde_json::json!({"nodes": {"nodes": [
            {"name": "n0", "connected": true},
            {"name": "n1", "connected": false}
        ]}});
        assert_eq!(connected_nodes(&reply), ["n0"]);
        assert!(connected_nodes(&serde_json::json!({})).is_empty());
    }
}
