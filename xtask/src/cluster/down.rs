//! `cluster down`: stops everything a cluster started, also after a crash and
//! also when nothing is up. Leftovers are found by name (namespaces, links,
//! node cgroups, the favordynmods mount), not only from cluster.json, which
//! may be gone or stale.

use std::{collections::BTreeSet, fs, io, path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use serde::Serialize;

use super::{
    BRIDGE, CPU_CGROUP_ROOT, Cluster, STATE_DIR, cgroups, coordinator, cpusets, network, procfs,
    prometheus,
};
use crate::progress::say;

/// How long agents get to restore their tasks after SIGTERM.
const AGENT_GRACE: Duration = Duration::from_secs(5);
/// How long killed processes get to disappear.
const KILL_GRACE: Duration = Duration::from_secs(3);

/// What `down` removed.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct DownReport {
    /// The cluster's Prometheus exited (after SIGTERM, or SIGKILL).
    pub prometheus_stopped: bool,
    /// The coordinator exited after SIGTERM (it runs in node 0's namespace,
    /// so one that does not is killed with everything else there).
    pub coordinator_stopped: bool,
    /// Agents that exited after SIGTERM.
    pub agents_stopped: usize,
    /// Processes killed afterwards (agents that did not stop, jobs, anything
    /// left in a node's cgroup or namespace).
    pub processes_killed: usize,
    /// cgroup v2 node cgroups and cgroup-v1 demotion cgroups.
    pub cgroups_removed: usize,
    /// Threads found in the v1 demotion cgroups (their agent did not put
    /// them back) and moved to the hierarchy's root.
    pub threads_moved_out: usize,
    /// The scratch favordynmods hierarchy, unmounted.
    pub unmounted: Vec<String>,
    pub links_deleted: Vec<String>,
    pub namespaces_deleted: Vec<String>,
    pub state_dir_removed: bool,
}

impl DownReport {
    /// True when there was nothing to stop or remove.
    pub fn nothing_done(&self) -> bool {
        *self == Self::default()
    }
}

/// Stops and removes the cluster and anything an earlier one left behind.
pub fn down() -> Result<DownReport> {
    let mut report = DownReport::default();
    let cluster = Cluster::try_load().unwrap_or_else(|error| {
        say(
            "down",
            format!("ignoring an unreadable cluster.json: {error:#}"),
        );
        None
    });
    // First, so it sends nothing more to agents that are being stopped.
    if let Some(c) = cluster.as_ref().and_then(|c| c.coordinator.as_ref())
        && c.alive()
    {
        match coordinator::stop(c) {
            Ok(()) => {
                report.coordinator_stopped = true;
                say("down", "stopped the coordinator");
            }
            Err(error) => say("down", format!("stopping the coordinator: {error:#}")),
        }
    }
    stop_prometheus(cluster.as_ref(), &mut report)?;
    // Before the agents: slurmd ends its steps (the agents then hand back
    // what they changed); slurmctld and munged run outside the nodes.
    if let Some(slurm) = cluster.as_ref().and_then(|c| c.slurm.as_ref()) {
        let stopped = super::slurm::stop(slurm);
        if stopped > 0 {
            report.processes_killed += stopped;
            say("down", format!("stopped {stopped} Slurm daemon(s)"));
        }
    }
    stop_agents(cluster.as_ref(), &mut report)?;
    kill_everything_left(&mut report)?;
    remove_cgroups(&mut report)?;
    remove_demote_cgroups(&mut report)?;
    remove_cpusets(cluster.as_ref(), &mut report)?;
    delete_network(&mut report)?;
    // Before the state directory, where it is mounted.
    unmount_favordynmods(&mut report)?;
    remove_state_dir(&mut report)?;
    if report.nothing_done() {
        say("down", "nothing to do: no cluster is up");
    }
    Ok(report)
}

/// The cluster's Prometheus: the one cluster.json names, or one running
/// with the cluster's config file (found in /proc after a crash).
fn stop_prometheus(cluster: Option<&Cluster>, report: &mut DownReport) -> Result<()> {
    let recorded = cluster.and_then(|c| c.prometheus.as_ref());
    if let Some(p) = recorded.filter(|p| p.alive()) {
        prometheus::stop(p)?;
        report.prometheus_stopped = true;
        say("down", "stopped Prometheus");
    }
    for pid in prometheus::strays()? {
        procfs::signal(pid, "KILL")?;
        if !procfs::wait_for_exit(&[pid], KILL_GRACE).is_empty() {
            bail!("Prometheus (pid {pid}) survived SIGKILL");
        }
        report.prometheus_stopped = true;
        say("down", format!("killed a leftover Prometheus (pid {pid})"));
    }
    Ok(())
}

/// SIGTERM to the agents (from cluster.json, and whatever sits directly in a
/// node cgroup, which is where agents run), then a grace period in which they
/// restore the tasks they changed.
fn stop_agents(cluster: Option<&Cluster>, report: &mut DownReport) -> Result<()> {
    let mut agents = BTreeSet::new();
    for node in cluster
        .map(|cluster| cluster.nodes.as_slice())
        .unwrap_or_default()
    {
        if let Some(pid) = node.agent_pid
            && node.agent_alive()
        {
            agents.insert(pid);
        }
    }
    for cgroup in cgroups::leftover_node_cgroups()? {
        agents.extend(cgroups::direct_members(&cgroup));
    }
    if agents.is_empty() {
        return Ok(());
    }
    let agents: Vec<u32> = agents.into_iter().collect();
    for &pid in &agents {
        procfs::signal(pid, "TERM")?;
    }
    let still_running = procfs::wait_for_exit(&agents, AGENT_GRACE);
    report.agents_stopped = agents.len() - still_running.len();
    say(
        "down",
        format!(
            "stopped {} agent process(es) with SIGTERM",
            report.agents_stopped
        ),
    );
    if !still_running.is_empty() {
        say(
            "down",
            format!(
                "{} agent process(es) did not exit within {} s: killing them",
                still_running.len(),
                AGENT_GRACE.as_secs()
            ),
        );
    }
    Ok(())
}

/// `cgroup.kill` on every node cgroup and SIGKILL to anything else inside a
/// node namespace (commands started with `Node::command` are not in a cgroup).
fn kill_everything_left(report: &mut DownReport) -> Result<()> {
    let node_cgroups = cgroups::leftover_node_cgroups()?;
    let mut victims = BTreeSet::new();
    for cgroup in &node_cgroups {
        collect_members(cgroup, &mut victims);
    }
    for netns in network::leftover_namespaces()? {
        victims.extend(network::namespace_pids(&netns)?);
    }
    if victims.is_empty() {
        return Ok(());
    }
    for cgroup in &node_cgroups {
        cgroups::kill_all(cgroup)?;
    }
    for &pid in &victims {
        procfs::signal(pid, "KILL")?;
    }
    let victims: Vec<u32> = victims.into_iter().collect();
    let survivors = procfs::wait_for_exit(&victims, KILL_GRACE);
    if !survivors.is_empty() {
        bail!("processes {survivors:?} survived SIGKILL; run `cargo xtask cluster down` again");
    }
    for cgroup in &node_cgroups {
        if !cgroups::wait_until_empty(cgroup, KILL_GRACE) {
            bail!(
                "cgroup {} still has processes after cgroup.kill",
                cgroup.display()
            );
        }
    }
    report.processes_killed = victims.len();
    say(
        "down",
        format!("killed {} remaining process(es)", victims.len()),
    );
    Ok(())
}

/// Every pid in a cgroup tree.
fn collect_members(cgroup: &Path, pids: &mut BTreeSet<u32>) {
    pids.extend(cgroups::direct_members(cgroup));
    let Ok(entries) = fs::read_dir(cgroup) else {
        return;
    };
    for entry in entries.filter_map(|entry| entry.ok()) {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            collect_members(&entry.path(), pids);
        }
    }
}

fn remove_cgroups(report: &mut DownReport) -> Result<()> {
    for cgroup in cgroups::leftover_node_cgroups()? {
        report.cgroups_removed += cgroups::remove_tree(&cgroup)?;
    }
    let root_removed = cgroups::remove_root_if_empty();
    if report.cgroups_removed > 0 || root_removed {
        report.cgroups_removed += usize::from(root_removed);
        say(
            "down",
            format!("removed {} cgroup(s)", report.cgroups_removed),
        );
    }
    Ok(())
}

/// The nodes' cgroup-v1 demotion directories (each agent removed its
/// `active` and `idle` when they were empty), with any thread still in them
/// moved to the hierarchy's root first.
fn remove_demote_cgroups(report: &mut DownReport) -> Result<()> {
    let mut removed = 0;
    for dir in cgroups::leftover_v1_node_cgroups()? {
        let (moved, count) = cgroups::empty_and_remove_v1_tree(&dir)?;
        report.threads_moved_out += moved;
        removed += count;
    }
    if cgroups::remove_v1_root_if_empty() {
        removed += 1;
    }
    if report.threads_moved_out > 0 {
        say(
            "down",
            format!(
                "moved {} thread(s) out of the demotion cgroups (their agent did not)",
                report.threads_moved_out
            ),
        );
    }
    if removed > 0 {
        report.cgroups_removed += removed;
        say(
            "down",
            format!("removed {removed} demotion cgroup(s) under {CPU_CGROUP_ROOT}"),
        );
    }
    Ok(())
}

/// The nodes' exclusive cpusets, and the root's load balancing as it was
/// (from cluster.json; the kernel's default when it is gone).
fn remove_cpusets(cluster: Option<&Cluster>, report: &mut DownReport) -> Result<()> {
    let was = cluster.and_then(|c| c.cpuset_balance_was.as_deref());
    let (moved, removed) = cpusets::remove(was)?;
    if removed > 0 {
        report.threads_moved_out += moved;
        report.cgroups_removed += removed;
        say(
            "down",
            format!(
                "removed {removed} cpuset(s) under {}; {}/cpuset.sched_load_balance = {}",
                cpusets::CPUSET_ROOT,
                cpusets::CPUSET_HIERARCHY,
                was.unwrap_or(cpusets::DEFAULT_ROOT_BALANCE)
            ),
        );
    }
    Ok(())
}

fn unmount_favordynmods(report: &mut DownReport) -> Result<()> {
    for dir in cgroups::favordynmods_mounts() {
        cgroups::unmount(&dir)?;
        say(
            "down",
            format!("unmounted the favordynmods hierarchy at {}", dir.display()),
        );
        report.unmounted.push(dir.display().to_string());
    }
    Ok(())
}

/// Veths first (which also removes their peers inside the namespaces), then
/// the bridge, then the namespaces.
fn delete_network(report: &mut DownReport) -> Result<()> {
    let mut links = network::leftover_links()?;
    links.sort_by_key(|name| name == BRIDGE);
    for link in links {
        network::delete_link(&link).with_context(|| format!("could not delete link {link}"))?;
        report.links_deleted.push(link);
    }
    for netns in network::leftover_namespaces()? {
        network::delete_namespace(&netns)
            .with_context(|| format!("could not delete namespace {netns}"))?;
        report.namespaces_deleted.push(netns);
    }
    if !report.links_deleted.is_empty() {
        say(
            "down",
            format!("deleted links {}", report.links_deleted.join(", ")),
        );
    }
    if !report.namespaces_deleted.is_empty() {
        say(
            "down",
            format!(
                "deleted namespaces {}",
                report.namespaces_deleted.join(", ")
            ),
        );
    }
    Ok(())
}

fn remove_state_dir(report: &mut DownReport) -> Result<()> {
    match fs::remove_dir_all(STATE_DIR) {
        Ok(()) => {
            report.state_dir_removed = true;
            say("down", format!("removed {STATE_DIR}"));
            Ok(())
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("could not remove {STATE_DIR}")),
    }
}
