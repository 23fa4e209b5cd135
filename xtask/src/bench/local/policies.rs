//! Switching every agent of the cluster to another local policy between
//! runs: rewrite the `policy` line of its config, ask it to reload, and check
//! that it accepted and now runs that policy (an agent that keeps its old
//! config after a rejected reload would otherwise make every later number a
//! measurement of the wrong policy).
use std::{fs, time::Duration};

use anyhow::{Context as _, bail};
use cosched_proto::control::{Client, Reply, Request};

use crate::cluster::{Cluster, Node};

/// The local policies, `local` (plain Linux) first: the baseline others are
/// compared with.
pub const ALL: [&str; 8] = ["local", "dcs", "sb", "sy", "pb", "pb-sb", "dcs-sb", "fcs"];

/// The plain-Linux baseline policy.
pub const BASELINE: &str = "local";

/// Rejects names that are not local policies, listing the known ones.
pub fn validate(policies: &[String]) -> anyhow::Result<()> {
    for p in policies {
        if !ALL.contains(&p.as_str()) {
            bail!("unknown policy {p:?} (known: {})", ALL.join(", "));
        }
    }
    Ok(())
}

/// `config` with its top-level `policy` set to `policy`. Only the top level
/// (before the first `[table]`) is touched; a config without the key gets
/// one there.
pub fn with_policy(config: &str, policy: &str) -> String {
    let line = format!("policy = {}", serde_json::Value::from(policy));
    let mut out = Vec::new();
    let mut done = false;
    for l in config.lines() {
        let t = l.trim_start();
        let at_table = t.starts_with('[');
        if !done && at_table {
            out.push(line.clone());
            done = true;
        }
        let is_policy_key = t
            .strip_prefix("policy")
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if !done && is_policy_key {
            out.push(line.clone());
            done = true;
        } else {
            out.push(l.to_string());
        }
    }
    if !done {
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// Switches every agent to `policy`; the error names the node and quotes the
/// agent's reason.
pub fn switch_all(cluster: &Cluster, policy: &str) -> anyhow::Result<()> {
    for node in &cluster.nodes {
        switch_node(node, policy).with_context(|| {
            format!("switching the agent of {} to policy {policy:?}", node.name)
        })?;
    }
    Ok(())
}

fn switch_node(node: &Node, policy: &str) -> anyhow::Result<()> {
    let path = &node.config_path;
    let old = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    // Written next to it and renamed: the agent's file watcher never sees
    // half a config.
    let temporary = path.with_extension("toml.bench-tmp");
    fs::write(&temporary, with_policy(&old, policy))
        .with_context(|| format!("writing {}", temporary.display()))?;
    fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))?;
    let mut client = Client::connect(&node.control_socket)?;
    let timeout = Duration::from_secs(30);
    match client.call(&Request::Reload, timeout)? {
        Reply::Reloaded { outcome } if outcome.accepted => {}
        Reply::Reloaded { outcome } => bail!("the agent refused: {}", outcome.message),
        other => bail!("unexpected reply to reload: {other:?}"),
    }
    match client.call(&Request::Status, timeout)? {
        Reply::Status { status } if status.policy == policy => Ok(()),
        Reply::Status { status } => bail!(
            "the agent accepted the config but runs policy {:?}",
            status.policy
        ),
        other => bail!("unexpected reply to status: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENERATED: &str = "# comment\nnode = \"n0\"\npolicy = \"local\"\ncontrol_socket = \"/x\"\n\n[ebpf]\npoll_interval_ms = 100\n";

    #[test]
    fn replaces_the_top_level_policy_line_only() {
        let c = with_policy(GENERATED, "pb-sb");
        assert_eq!(c, GENERATED.replace("\"local\"", "\"pb-sb\""));
        let with_table_key = format!("{GENERATED}[x]\npolicy = \"keep\"\n");
        assert!(with_policy(&with_table_key, "dcs").ends_with("[x]\npolicy = \"keep\"\n"));
    }

    #[test]
    fn adds_the_key_when_missing() {
        assert_eq!(
            with_policy("node = \"n0\"\n[ebpf]\na = 1\n", "sb"),
            "node = \"n0\"\npolicy = \"sb\"\n[ebpf]\na = 1\n"
        );
        assert_eq!(
            with_policy("node = \"n0\"", "sb"),
            "node = \"n0\"\npolicy = \"sb\"\n"
        );
    }

    #[test]
    fn does_not_mistake_similar_keys() {
        let c = with_policy("policy_file = 1\npolicy=\"local\"\n", "fcs");
        assert_eq!(c, "policy_file = 1\npolicy = \"fcs\"\n");
    }

    #[test]
    fn validate_lists_known_policies() {
        assert!(validate(&["dcs".into(), "local".into()]).is_ok());
        let e = validate(&["gang".into()]).unwrap_err().to_string();
        assert!(e.contains("gang") && e.contains("pb-sb"), "{e}");
    }
}
