//! The cluster network: a bridge in the root namespace and, per node, a
//! namespace joined to it by a veth pair. Node processes talk over this
//! network (never shared memory) so messages cross the socket receive path
//! the agent's eBPF programs watch.

use std::process::Command;

use anyhow::{Context as _, Result};

use super::{BRIDGE, Cluster, NETNS_PREFIX, Node, VETH_PREFIX};
use crate::process;

/// Runs `ip <args>`.
fn ip(args: &[&str]) -> Result<String> {
    process::capture(Command::new("ip").args(args))
}

/// Creates the bridge with the gateway address and brings it up.
pub fn create_bridge(cluster: &Cluster) -> Result<()> {
    let gateway = format!("{}/{}", cluster.gateway, cluster.prefix_len);
    ip(&["link", "add", &cluster.bridge, "type", "bridge"])
        .with_context(|| format!("could not create bridge {}", cluster.bridge))?;
    ip(&["addr", "add", &gateway, "dev", &cluster.bridge])?;
    ip(&["link", "set", &cluster.bridge, "up"])?;
    Ok(())
}

/// Creates the node's namespace and veth pair: `eth0` inside with the node's
/// address and a default route via the bridge, `lo` up.
pub fn create_node(cluster: &Cluster, node: &Node) -> Result<()> {
    let ns = node.netns.as_str();
    let address = format!("{}/{}", node.address, cluster.prefix_len);
    let gateway = cluster.gateway.to_string();
    ip(&["netns", "add", ns]).with_context(|| format!("could not create namespace {ns}"))?;
    // The peer is created directly inside the namespace, so its name cannot
    // clash with the root namespace's own eth0.
    ip(&[
        "link", "add", &node.veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
    ])
    .with_context(|| format!("could not create veth pair {} for {}", node.veth, node.name))?;
    ip(&["link", "set", &node.veth, "master", &cluster.bridge])?;
    ip(&["link", "set", &node.veth, "up"])?;
    ip(&["-n", ns, "addr", "add", &address, "dev", "eth0"])?;
    ip(&["-n", ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    ip(&["-n", ns, "route", "add", "default", "via", &gateway])?;
    Ok(())
}

/// Network namespaces named like a node's (`cosched-*`), from `ip netns list`.
pub fn leftover_namespaces() -> Result<Vec<String>> {
    let listing = ip(&["netns", "list"])?;
    Ok(parse_netns_list(&listing))
}

/// Links named like the cluster's (the bridge and `cosv*`), from `ip link`.
pub fn leftover_links() -> Result<Vec<String>> {
    let listing = ip(&["-o", "link", "show"])?;
    Ok(parse_link_names(&listing)
        .into_iter()
        .filter(|name| name == BRIDGE || is_node_veth(name))
        .collect())
}

/// Pids of the processes in a namespace (`ip netns pids`).
pub fn namespace_pids(netns: &str) -> Result<Vec<u32>> {
    let listing = ip(&["netns", "pids", netns])?;
    Ok(listing
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect())
}

pub fn delete_link(name: &str) -> Result<()> {
    ip(&["link", "del", name]).map(drop)
}

pub fn delete_namespace(name: &str) -> Result<()> {
    ip(&["netns", "del", name]).map(drop)
}

fn is_node_veth(name: &str) -> bool {
    name.strip_prefix(VETH_PREFIX)
        .is_some_and(|index| !index.is_empty() && index.chars().all(|c| c.is_ascii_digit()))
}

/// `cosched-n0 (id: 0)` lines -> names with our prefix.
fn parse_netns_list(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(NETNS_PREFIX))
        .map(str::to_owned)
        .collect()
}

/// `5: cosv0@if2: <BROADCAST,...> ...` lines -> `cosv0`.
fn parse_link_names(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .map(|name| name.trim_end_matches(':'))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_our_namespaces() {
        let listing = "cosched-n1 (id: 1)\nother\ncosched-n0\n";
        assert_eq!(parse_netns_list(listing), ["cosched-n1", "cosched-n0"]);
    }

    #[test]
    fn reads_link_names_without_peer_suffix() {
        let listing = "1: lo: <LOOPBACK,UP> mtu 65536\n\
                       7: cosv0@if2: <BROADCAST> mtu 1500 master cosched0\n\
                       6: cosched0: <BROADCAST> mtu 1500\n";
        assert_eq!(parse_link_names(listing), ["lo", "cosv0", "cosched0"]);
        assert!(is_node_veth("cosv12"));
        assert!(!is_node_veth("cosv"));
        assert!(!is_node_veth("cosvx"));
    }
}
