//! `cluster up`: network, cgroups, configs and agents for N nodes.

use std::{
    env, fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use super::{
    AgentCommand, CPU_CGROUP_ROOT, Cluster, CoordinatorNode, CoordinatorOptions,
    DEFAULT_METRICS_PORT, PrometheusNode, agent, cgroups, coordinator, cpus, cpusets, down,
    network, procfs, prometheus, status,
};
use crate::{
    cargo_build::{self, Profile},
    monitoring,
    progress::say,
    setup,
    workspace::Workspace,
};

/// The agent binary that `up` starts unless told otherwise.
const AGENT_BINARY: &str = "cosched-agent";

/// How to bring a cluster up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub nodes: usize,
    /// The agents' local policy (`local`, `dcs`, ...).
    pub policy: String,
    /// The port each agent serves metrics on inside its namespace.
    pub metrics_port: u16,
    /// `None`: the release agent binary, built if missing.
    pub agent: Option<AgentCommand>,
    /// Build the workspace even when the agent binary exists.
    pub rebuild: bool,
    /// How long an agent may take to create its control socket.
    pub startup_timeout: Duration,
    /// Start a coordinator in node 0's namespace and join every agent to it.
    pub coordinator: Option<CoordinatorOptions>,
    /// Also run Slurm on the nodes (installs it when missing).
    pub slurm: bool,
    /// Start a Prometheus (Debian's package, installed when missing) that
    /// scrapes every agent and the coordinator.
    pub prometheus: bool,
    /// Give every node an exclusive cgroup-v1 cpuset (its CPU its own root
    /// domain) so that pinned tasks may use SCHED_DEADLINE; see
    /// `cluster::cpusets`. Nodes must not share CPUs.
    pub exclusive_cpusets: bool,
}

impl Default for UpOptions {
    fn default() -> Self {
        Self {
            nodes: 2,
            policy: "local".to_owned(),
            metrics_port: DEFAULT_METRICS_PORT,
            agent: None,
            rebuild: false,
            startup_timeout: Duration::from_secs(30),
            coordinator: None,
            slurm: false,
            prometheus: false,
            exclusive_cpusets: false,
        }
    }
}

/// Starts a cluster and records it in cluster.json. On failure whatever was
/// created is removed again (the error quotes the failing agent's log).
pub fn up(workspace: &Workspace, options: &UpOptions) -> Result<Cluster> {
    refuse_if_up()?;
    let agent = agent_command(workspace, options)?;
    let mut cluster = Cluster::plan(
        options.nodes,
        &cpus::online()?,
        &options.policy,
        options.metrics_port,
    )?;
    if options.exclusive_cpusets {
        cpusets::ensure_hierarchy().context("--exclusive-cpusets")?;
        let cpus: Vec<usize> = cluster.nodes.iter().map(|node| node.cpu).collect();
        cpusets::check_distinct(&cpus)?;
        cluster.cpuset_balance_was = Some(cpusets::root_balance()?);
        for node in &mut cluster.nodes {
            node.cpuset = Some(cpusets::node_dir(&node.name));
        }
    }
    if options.prometheus {
        monitoring::ensure_installed()?;
        cluster.prometheus = Some(PrometheusNode::plan(&cluster)?);
    }
    let rules = monitoring::rules_dir(workspace.root()).join(monitoring::RULES_FILE);
    if let Some(coordinator) = &options.coordinator {
        if !matches!(agent, AgentCommand::Binary(_)) {
            bail!("a coordinator needs the real agent, not a stand-in command");
        }
        let release = workspace.profile_dir("release")?;
        cluster.coordinator = Some(CoordinatorNode::plan(&cluster, coordinator, &release)?);
    }
    let started = start(&mut cluster, &agent, options.startup_timeout, &rules).and_then(|()| {
        if options.slurm {
            super::slurm::start(&mut cluster, options.startup_timeout)
        } else {
            Ok(())
        }
    });
    if let Err(error) = started {
        match keep_logs(&cluster) {
            Ok(dir) => say(
                "up",
                format!(
                    "failed; agent logs kept in {}; removing what was created",
                    dir.display()
                ),
            ),
            Err(copy) => say(
                "up",
                format!("failed; could not keep the agent logs: {copy:#}"),
            ),
        }
        if let Err(cleanup) = down::down() {
            say("up", format!("cleanup failed too: {cleanup:#}"));
        }
        return Err(error);
    }
    say(
        "up",
        format!(
            "{} nodes ready; `cargo xtask cluster status` shows them, `cargo xtask cluster down` stops them",
            cluster.nodes.len()
        ),
    );
    Ok(cluster)
}

/// Copies the agents' logs out of the state directory, which the cleanup
/// after a failed start removes.
fn keep_logs(cluster: &Cluster) -> Result<PathBuf> {
    let dir = env::temp_dir().join("cosched-cluster-failed-logs");
    fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    for node in cluster.nodes.iter().filter(|node| node.log_file.exists()) {
        let kept = dir.join(format!("{}.log", node.name));
        fs::copy(&node.log_file, &kept)
            .with_context(|| format!("could not copy {}", node.log_file.display()))?;
    }
    Ok(dir)
}

fn refuse_if_up() -> Result<()> {
    let existing = Cluster::try_load()
        .context("a cluster.json exists but cannot be read: run `cargo xtask cluster down`")?;
    if let Some(existing) = existing {
        bail!(
            "a cluster of {} nodes is already up (see `cargo xtask cluster status`): \
             stop it first with `cargo xtask cluster down`",
            existing.nodes.len()
        );
    }
    let leftovers = status::leftovers()?;
    if !leftovers.is_empty() {
        bail!(
            "an earlier cluster left {} behind: remove it with `cargo xtask cluster down`",
            leftovers.join(", ")
        );
    }
    Ok(())
}

/// The agent to run, building the workspace first when the binary is missing.
fn agent_command(workspace: &Workspace, options: &UpOptions) -> Result<AgentCommand> {
    if let Some(agent) = &options.agent {
        setup::host()?;
        return Ok(agent.clone());
    }
    let binary = workspace.profile_dir("release")?.join(AGENT_BINARY);
    if options.rebuild || !binary.is_file() {
        if !binary.is_file() {
            say("up", format!("{} is missing; building", binary.display()));
        }
        let tools = setup::all(workspace)?;
        cargo_build::build_binaries(workspace, &tools, Profile::Release)
            .context("could not build the agent for the cluster")?;
        if !binary.is_file() {
            bail!("the build did not produce {}", binary.display());
        }
    } else {
        setup::host()?;
    }
    Ok(AgentCommand::Binary(binary))
}

/// When the agents demote other jobs outside their slot (a coordinator with
/// `stop_inactive = false`), they demote by cgroup: each node gets a
/// cgroup-v1 cpu directory as its agent's `demote_cpu_cgroup`, and the
/// scratch `favordynmods` hierarchy is mounted so moves are fast. Without
/// a demoting coordinator nothing changes: a demotion cgroup would also
/// move the local policies' demoted tasks on every message and split the
/// real-time runtime between the nodes.
fn demote_cgroups(cluster: &mut Cluster) -> Result<()> {
    let demoting = cluster
        .coordinator
        .as_ref()
        .is_some_and(|coordinator| !coordinator.stop_inactive);
    if !demoting {
        return Ok(());
    }
    if let Some(reason) = cgroups::v1_cpu_unavailable() {
        say(
            "up",
            format!("agents demote with SCHED_IDLE and autogroup nice 19, not by cgroup: {reason}"),
        );
        return Ok(());
    }
    let dirs: Vec<PathBuf> = cluster
        .nodes
        .iter()
        .map(|node| Path::new(CPU_CGROUP_ROOT).join(&node.name))
        .collect();
    // Recorded first, so `down` removes them even if the next steps fail.
    for (node, dir) in cluster.nodes.iter_mut().zip(&dirs) {
        node.demote_cgroup = Some(dir.clone());
    }
    cluster.save()?;
    if let Some(note) = cgroups::create_v1(&dirs)? {
        say("up", note);
    }
    let fdm = cluster.favordynmods_dir();
    match cgroups::mount_favordynmods(&fdm) {
        Ok(()) => say(
            "up",
            format!(
                "demotion cgroups {CPU_CGROUP_ROOT}/n<i>/{{active,idle}}; favordynmods hierarchy at {}",
                fdm.display()
            ),
        ),
        Err(error) => say(
            "up",
            format!(
                "demotion cgroups {CPU_CGROUP_ROOT}/n<i>/{{active,idle}}, but moves stay slow: {error:#}"
            ),
        ),
    }
    Ok(())
}

fn start(
    cluster: &mut Cluster,
    agent: &AgentCommand,
    timeout: Duration,
    rules: &Path,
) -> Result<()> {
    for node in &cluster.nodes {
        let dir = node.config_path.parent().unwrap_or(&cluster.state_dir);
        fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    }
    // Saved before anything is created, so `down` finds all of it after a crash.
    cluster.save()?;

    network::create_bridge(cluster)?;
    say(
        "up",
        format!(
            "bridge {} {}/{}",
            cluster.bridge, cluster.gateway, cluster.prefix_len
        ),
    );
    demote_cgroups(cluster)?;
    if cluster.cpuset_balance_was.is_some() {
        let nodes: Vec<(String, usize)> = cluster
            .nodes
            .iter()
            .map(|node| (node.name.clone(), node.cpu))
            .collect();
        // cluster.json already records the root's old balancing for `down`.
        cpusets::create(&nodes)?;
        say(
            "up",
            format!(
                "exclusive cpusets {}/n<i> (one root domain per node: SCHED_DEADLINE for pinned tasks);                  {}/cpuset.sched_load_balance = 0 until `down`",
                cpusets::CPUSET_ROOT,
                cpusets::CPUSET_HIERARCHY
            ),
        );
    }
    for node in &cluster.nodes {
        network::create_node(cluster, node)?;
        cgroups::create(&node.cgroup)?;
        say(
            "up",
            format!(
                "{}: netns {}, {}/{} (veth {}), cpu {}, cgroup {}",
                node.name,
                node.netns,
                node.address,
                cluster.prefix_len,
                node.veth,
                node.cpu,
                node.cgroup.display()
            ),
        );
    }

    if let Some(mut planned) = cluster.coordinator.take() {
        coordinator::write_files(cluster, &planned)?;
        let spawned = coordinator::spawn(&mut planned, timeout);
        let started = format!(
            "coordinator ({} policy, {} ms slices) on {}",
            planned.policy, planned.slice_ms, planned.listen
        );
        cluster.coordinator = Some(planned);
        cluster.save()?;
        say("up", format!("{started}: pid {}", spawned?.id()));
    }
    for node in &cluster.nodes {
        agent::write_config(cluster, node)?;
    }

    let mut children = Vec::new();
    for index in 0..cluster.nodes.len() {
        let child = agent::spawn(&cluster.nodes[index], agent)?;
        let node = &mut cluster.nodes[index];
        node.agent_pid = Some(child.id());
        node.agent_start_ticks = procfs::stat(child.id()).map(|stat| stat.start_ticks);
        cluster.save()?;
        children.push(child);
    }
    for (node, child) in cluster.nodes.iter().zip(&mut children) {
        agent::wait_until_ready(node, child, timeout)?;
        say(
            "up",
            format!(
                "{}: agent pid {} ready (log {})",
                node.name,
                child.id(),
                node.log_file.display()
            ),
        );
    }
    if cluster.coordinator.is_some() {
        coordinator::wait_for_nodes(cluster, timeout)?;
        say("up", "every agent joined the coordinator");
    }
    if let Some(mut planned) = cluster.prometheus.take() {
        let started = prometheus::start(cluster, &mut planned, rules);
        cluster.prometheus = Some(planned);
        cluster.save()?;
        started?;
        let planned = cluster.prometheus.as_ref().expect("just set");
        say(
            "up",
            format!(
                "Prometheus {} (pid {}) scraping {} target(s) every {} s, rules {}; data {}",
                planned.url(),
                planned.pid.unwrap_or_default(),
                prometheus::targets(cluster).len(),
                prometheus::SCRAPE_INTERVAL.as_secs(),
                planned.rules_path.display(),
                planned.data_dir.display()
            ),
        );
    }
    Ok(())
}
