//! `cluster status`: the recorded cluster with live agent state, as a table
//! for people or JSON for scripts.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::{Cluster, CoordinatorNode, Node, PrometheusNode, STATE_DIR, cgroups, network};

/// The cluster as it is now.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Whether cluster.json exists.
    pub up: bool,
    pub policy: Option<String>,
    pub nodes: Vec<NodeStatus>,
    /// The coordinator, when the cluster has one.
    pub coordinator: Option<CoordinatorStatus>,
    /// The Prometheus, when the cluster has one.
    pub prometheus: Option<PrometheusStatus>,
    /// Namespaces, links, cgroups or state a cluster left behind without a
    /// cluster.json (a crashed run); `cluster down` removes them.
    pub leftovers: Vec<String>,
}

/// A node with its live state.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    #[serde(flatten)]
    pub node: Node,
    pub agent_alive: bool,
    pub metrics_url: String,
}

/// The coordinator with its live state.
#[derive(Debug, Clone, Serialize)]
pub struct CoordinatorStatus {
    #[serde(flatten)]
    pub coordinator: CoordinatorNode,
    pub alive: bool,
}

/// The Prometheus with its live state.
#[derive(Debug, Clone, Serialize)]
pub struct PrometheusStatus {
    #[serde(flatten)]
    pub prometheus: PrometheusNode,
    pub alive: bool,
    pub url: String,
}

/// Reads cluster.json and checks the agents.
pub fn status() -> Result<Status> {
    let Some(cluster) = Cluster::try_load()? else {
        return Ok(Status {
            up: false,
            policy: None,
            nodes: Vec::new(),
            coordinator: None,
            prometheus: None,
            leftovers: leftovers()?,
        });
    };
    let nodes = cluster
        .nodes
        .iter()
        .map(|node| NodeStatus {
            agent_alive: node.agent_alive(),
            metrics_url: node.metrics_url(),
            node: node.clone(),
        })
        .collect();
    Ok(Status {
        up: true,
        policy: Some(cluster.policy),
        nodes,
        coordinator: cluster.coordinator.map(|c| CoordinatorStatus {
            alive: c.alive(),
            coordinator: c,
        }),
        prometheus: cluster.prometheus.map(|p| PrometheusStatus {
            alive: p.alive(),
            url: p.url(),
            prometheus: p,
        }),
        leftovers: Vec::new(),
    })
}

/// Everything named like a cluster's that exists now. The cgroup root itself
/// does not count: other tools may keep their own cgroups below it.
pub(super) fn leftovers() -> Result<Vec<String>> {
    let mut found: Vec<String> = network::leftover_namespaces()?
        .into_iter()
        .map(|netns| format!("namespace {netns}"))
        .collect();
    found.extend(
        network::leftover_links()?
            .into_iter()
            .map(|link| format!("link {link}")),
    );
    found.extend(
        cgroups::leftover_node_cgroups()?
            .into_iter()
            .map(|cgroup| format!("cgroup {}", cgroup.display())),
    );
    found.extend(
        cgroups::leftover_v1_node_cgroups()?
            .into_iter()
            .map(|cgroup| format!("cgroup {}", cgroup.display())),
    );
    found.extend(
        super::cpusets::leftovers()
            .into_iter()
            .map(|dir| format!("cpuset {}", dir.display())),
    );
    found.extend(
        cgroups::favordynmods_mounts()
            .into_iter()
            .map(|dir| format!("mount {}", dir.display())),
    );
    if Path::new(STATE_DIR).exists() {
        found.push(format!("state directory {STATE_DIR}"));
    }
    Ok(found)
}

impl Status {
    /// A human-readable table (one line per node) with a heading line.
    pub fn table(&self) -> String {
        if !self.up {
            let mut text = String::from("no cluster is up\n");
            if !self.leftovers.is_empty() {
                text.push_str(&format!(
                    "leftovers of an earlier cluster: {}\nremove them with `cargo xtask cluster down`\n",
                    self.leftovers.join(", ")
                ));
            }
            return text;
        }
        let alive = self.nodes.iter().filter(|node| node.agent_alive).count();
        let mut rows = vec![
            [
                "NODE",
                "NETNS",
                "ADDRESS",
                "CPU",
                "AGENT",
                "METRICS",
                "CONTROL SOCKET",
            ]
            .map(String::from),
        ];
        for status in &self.nodes {
            let node = &status.node;
            let agent = match (node.agent_pid, status.agent_alive) {
                (Some(pid), true) => format!("{pid} running"),
                (Some(pid), false) => format!("{pid} DEAD"),
                (None, _) => "not started".to_owned(),
            };
            rows.push([
                node.name.clone(),
                node.netns.clone(),
                node.address.to_string(),
                node.cpu.to_string(),
                agent,
                status.metrics_url.clone(),
                node.control_socket.display().to_string(),
            ]);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
            .collect();
        let mut text = format!(
            "cluster: {} nodes, policy {}, {alive}/{} agents running\n",
            self.nodes.len(),
            self.policy.as_deref().unwrap_or("?"),
            self.nodes.len()
        );
        if let Some(c) = &self.coordinator {
            let pid = c.coordinator.pid.map_or("-".into(), |p| p.to_string());
            text.push_str(&format!(
                "coordinator: pid {pid} {}, started as {} with {} ms slices, agents {}, listen {}, metrics http://{}/metrics, admin socket {}\n",
                if c.alive { "running" } else { "DEAD" },
                c.coordinator.policy,
                c.coordinator.slice_ms,
                if c.coordinator.stop_inactive { "stop other jobs" } else { "demote other jobs" },
                c.coordinator.listen,
                c.coordinator.metrics_addr,
                c.coordinator.admin_socket.display(),
            ));
        }
        if let Some(p) = &self.prometheus {
            let pid = p.prometheus.pid.map_or("-".into(), |p| p.to_string());
            text.push_str(&format!(
                "prometheus: {} pid {pid} {}, config {}, log {}\n",
                p.url,
                if p.alive { "running" } else { "DEAD" },
                p.prometheus.config_path.display(),
                p.prometheus.log_file.display(),
            ));
        }
        for row in rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:width$}"))
                .collect();
            text.push_str(cells.join("  ").trim_end());
            text.push('\n');
        }
        text
    }
}
