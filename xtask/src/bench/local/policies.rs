//! Switching every agent of the cluster to another local policy between
//! runs: rewrite the `policy` line of its config, ask it to reload, and check
//! that it accepted and now runs that policy (an agent that keeps its old
//! config after a rejected reload would otherwise make every later number a
//! measurement of the wrong policy).
//!
//! A policy may be given as a variant, `name:key=value+key=value`, e.g.
//! `dcs:dcs.boost_computing=true`: the policy `name` with those keys of the
//! agent config set (dotted paths, TOML values), so that two settings of one
//! policy are measured side by side in the same run.
use std::{fs, time::Duration};

use anyhow::{Context as _, bail};
use cosched_proto::control::{Client, Reply, Request};

use crate::cluster::{Cluster, Node};

/// The local policies, `local` (plain Linux) first: the baseline others are
/// compared with.
pub const ALL: [&str; 8] = ["local", "dcs", "sb", "sy", "pb", "pb-sb", "dcs-sb", "fcs"];

/// The plain-Linux baseline policy.
pub const BASELINE: &str = "local";

/// A policy to measure: its name and config keys to set (a variant).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    pub name: String,
    pub overrides: Vec<(Vec<String>, toml::Value)>,
}

impl PolicySpec {
    /// Parses `name` or `name:key=value+key=value`.
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
        if !ALL.contains(&name) {
            bail!(
                "unknown policy {name:?} in {spec:?} (known: {})",
                ALL.join(", ")
            );
        }
        let mut overrides = Vec::new();
        for assignment in rest.split('+').filter(|a| !a.is_empty()) {
            let Some((key, value)) = assignment.split_once('=') else {
                bail!("{spec:?}: {assignment:?} is not key=value");
            };
            let path: Vec<String> = key.trim().split('.').map(str::to_string).collect();
            if path.iter().any(String::is_empty) || path == ["policy"] {
                bail!("{spec:?}: bad key {key:?}");
            }
            let doc: toml::Table = toml::from_str(&format!("v = {}", value.trim()))
                .with_context(|| format!("{spec:?}: {value:?} is not a TOML value"))?;
            overrides.push((path, doc["v"].clone()));
        }
        Ok(Self {
            name: name.to_string(),
            overrides,
        })
    }

    /// `config` running this policy, with the variant's keys set.
    pub fn apply(&self, config: &str) -> anyhow::Result<String> {
        let with_name = with_policy(config, &self.name);
        if self.overrides.is_empty() {
            return Ok(with_name);
        }
        let mut doc: toml::Table =
            toml::from_str(&with_name).context("parsing the agent config")?;
        for (path, value) in &self.overrides {
            let (last, tables) = path.split_last().expect("non-empty path");
            let mut table = &mut doc;
            for t in tables {
                table = table
                    .entry(t.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                    .as_table_mut()
                    .with_context(|| format!("{t:?} is not a table in the agent config"))?;
            }
            table.insert(last.clone(), value.clone());
        }
        Ok(toml::to_string(&doc)?)
    }
}

/// Rejects specs that are not local policies or variants of one, listing
/// the known ones.
pub fn validate(policies: &[String]) -> anyhow::Result<()> {
    for p in policies {
        PolicySpec::parse(p)?;
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
    let spec = PolicySpec::parse(policy)?;
    let path = &node.config_path;
    // The variant's keys are set on the cluster's original config, so one
    // variant's settings never leak into the next policy measured.
    let original = path.with_extension("toml.orig");
    if !original.exists() {
        fs::copy(path, &original).with_context(|| format!("keeping {}", original.display()))?;
    }
    let old =
        fs::read_to_string(&original).with_context(|| format!("reading {}", original.display()))?;
    // Written next to it and renamed: the agent's file watcher never sees
    // half a config.
    let temporary = path.with_extension("toml.bench-tmp");
    fs::write(&temporary, spec.apply(&old)?)
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
        Reply::Status { status } if status.policy == spec.name => Ok(()),
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
    fn variant_sets_dotted_keys_on_top_of_the_policy() {
        let spec = PolicySpec::parse("dcs:dcs.boost_computing=true+policy_tick_us=500").unwrap();
        assert_eq!(spec.name, "dcs");
        let c: toml::Table = toml::from_str(&spec.apply(GENERATED).unwrap()).unwrap();
        assert_eq!(c["policy"].as_str(), Some("dcs"));
        assert_eq!(c["dcs"]["boost_computing"].as_bool(), Some(true));
        assert_eq!(c["policy_tick_us"].as_integer(), Some(500));
        assert_eq!(c["ebpf"]["poll_interval_ms"].as_integer(), Some(100));
    }

    #[test]
    fn bad_variants_are_rejected_with_the_reason() {
        for bad in [
            "dcs:boost",
            "dcs:a..b=1",
            "dcs:x=not toml",
            "gang:x=1",
            "dcs:policy=1",
        ] {
            assert!(PolicySpec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(PolicySpec::parse("sb").unwrap().overrides, vec![]);
    }

    #[test]
    fn validate_lists_known_policies() {
        assert!(validate(&["dcs".into(), "local".into()]).is_ok());
        let e = validate(&["gang".into()]).unwrap_err().to_string();
        assert!(e.contains("gang") && e.contains("pb-sb"), "{e}");
    }
}
