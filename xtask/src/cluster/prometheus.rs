//! The cluster's Prometheus (`cluster up --prometheus`): Debian's
//! `prometheus` in the root namespace, which reaches every node's agent and
//! the coordinator over the cluster bridge, with its generated config, the
//! repository's rules (`configs/prometheus/cosched.rules.yml`) and its data
//! below the cluster's state directory, listening on 127.0.0.1 (port 9090,
//! or a free one when 9090 is taken).

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::{Cluster, agent::log_tail, procfs};
use crate::{monitoring, process};

/// The port tried first (Prometheus's usual one).
pub const PREFERRED_PORT: u16 = 9090;
/// The cluster's scrape and rule-evaluation interval.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(2);
/// How long `stop` waits after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The Prometheus as recorded in cluster.json.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrometheusNode {
    /// Where its web UI and API answer (root namespace).
    pub listen: SocketAddr,
    pub config_path: PathBuf,
    pub rules_path: PathBuf,
    pub data_dir: PathBuf,
    pub log_file: PathBuf,
    pub pid: Option<u32>,
    pub start_ticks: Option<u64>,
}

impl PrometheusNode {
    /// Paths below the cluster's state directory and a free port.
    pub fn plan(cluster: &Cluster) -> Result<Self> {
        let dir = cluster.state_dir.join("prometheus");
        Ok(Self {
            listen: free_listen_address()?,
            config_path: dir.join("prometheus.yml"),
            rules_path: dir.join(monitoring::RULES_FILE),
            data_dir: dir.join("data"),
            log_file: dir.join("prometheus.log"),
            pid: None,
            start_ticks: None,
        })
    }

    /// The web UI.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    pub fn alive(&self) -> bool {
        self.pid
            .is_some_and(|pid| procfs::is_running(pid, self.start_ticks))
    }
}

/// 127.0.0.1:9090 when free, else a port the kernel picks.
fn free_listen_address() -> Result<SocketAddr> {
    let preferred = SocketAddr::from((Ipv4Addr::LOCALHOST, PREFERRED_PORT));
    if TcpListener::bind(preferred).is_ok() {
        return Ok(preferred);
    }
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("could not find a free port for Prometheus")?;
    Ok(listener.local_addr()?)
}

/// Every agent (on its node's address) and the coordinator, if any.
pub fn targets(cluster: &Cluster) -> Vec<monitoring::Target> {
    let mut targets: Vec<monitoring::Target> = cluster
        .nodes
        .iter()
        .map(|node| monitoring::Target::agent(&node.name, node.metrics_addr))
        .collect();
    if let Some(coordinator) = &cluster.coordinator {
        targets.push(monitoring::Target::coordinator(coordinator.metrics_addr));
    }
    targets
}

/// Writes the config and a copy of the rules, starts Prometheus in its own
/// process group and waits until it is ready.
pub fn start(cluster: &Cluster, prometheus: &mut PrometheusNode, rules: &Path) -> Result<()> {
    let dir = prometheus
        .config_path
        .parent()
        .context("config path has no directory")?;
    fs::create_dir_all(&prometheus.data_dir)
        .with_context(|| format!("could not create {}", prometheus.data_dir.display()))?;
    fs::copy(rules, &prometheus.rules_path)
        .with_context(|| format!("could not copy {}", rules.display()))?;
    let config = monitoring::config(
        &targets(cluster),
        SCRAPE_INTERVAL,
        std::slice::from_ref(&prometheus.rules_path),
    );
    fs::write(&prometheus.config_path, config)
        .with_context(|| format!("could not write {}", prometheus.config_path.display()))?;
    let config_check = monitoring::promtool(
        dir,
        &[
            "check",
            "config",
            &prometheus.config_path.display().to_string(),
        ],
    );
    config_check.context("the generated Prometheus config does not pass promtool")?;
    let log = fs::File::create(&prometheus.log_file)
        .with_context(|| format!("could not create {}", prometheus.log_file.display()))?;
    let mut command = Command::new("prometheus");
    command
        .args(monitoring::server_args(
            &prometheus.config_path,
            &prometheus.data_dir,
            prometheus.listen,
        ))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start `{}`", process::describe(&command)))?;
    prometheus.pid = Some(child.id());
    prometheus.start_ticks = procfs::stat(child.id()).map(|s| s.start_ticks);
    if let Err(error) = monitoring::wait_ready(prometheus.listen, Duration::from_secs(30)) {
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "Prometheus exited during start-up ({status}){}",
                log_tail(&prometheus.log_file)
            );
        }
        return Err(error.context(format!(
            "Prometheus did not start{}",
            log_tail(&prometheus.log_file)
        )));
    }
    Ok(())
}

/// SIGTERM and wait (SIGKILL after a grace period). Nothing to do when it
/// is not running.
pub fn stop(prometheus: &PrometheusNode) -> Result<()> {
    let Some(pid) = prometheus.pid.filter(|_| prometheus.alive()) else {
        return Ok(());
    };
    procfs::signal(pid, "TERM")?;
    if !procfs::wait_for_exit(&[pid], STOP_GRACE).is_empty() {
        procfs::signal(pid, "KILL")?;
        if !procfs::wait_for_exit(&[pid], STOP_GRACE).is_empty() {
            bail!("Prometheus (pid {pid}) survived SIGKILL");
        }
    }
    Ok(())
}

/// Prometheus processes running with a config below the cluster's state
/// directory (what a crashed `up` or a lost cluster.json leaves behind).
pub fn strays() -> Result<Vec<u32>> {
    let marker = format!("--config.file={}/", super::STATE_DIR);
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc")
        .context("could not list /proc")?
        .flatten()
    {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if is_cluster_prometheus(&cmdline, &marker) && procfs::is_running(pid, None) {
            found.push(pid);
        }
    }
    Ok(found)
}

/// Whether a NUL-separated command line runs `prometheus` with an argument
/// starting with `marker`.
fn is_cluster_prometheus(cmdline: &[u8], marker: &str) -> bool {
    let mut args = cmdline
        .split(|&b| b == 0)
        .map(|arg| String::from_utf8_lossy(arg));
    let program = args.next().unwrap_or_default();
    Path::new(program.as_ref()).file_name() == Some("prometheus".as_ref())
        && args.any(|arg| arg.starts_with(marker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{CoordinatorNode, CoordinatorOptions};

    #[test]
    fn scrapes_every_agent_on_its_node_address_and_the_coordinator() {
        let mut cluster = Cluster::plan(2, &[0, 1], "dcs", 9464).unwrap();
        let options = CoordinatorOptions::default();
        cluster.coordinator =
            Some(CoordinatorNode::plan(&cluster, &options, "/r".as_ref()).unwrap());
        let targets: Vec<(&str, String, Option<String>)> = targets(&cluster)
            .into_iter()
            .map(|t| (t.job, t.address, t.node))
            .collect();
        assert_eq!(
            targets,
            [
                (
                    "cosched-agent",
                    "10.201.0.10:9464".into(),
                    Some("n0".into())
                ),
                (
                    "cosched-agent",
                    "10.201.0.11:9464".into(),
                    Some("n1".into())
                ),
                ("cosched-coordinator", "10.201.0.10:9465".into(), None),
            ]
        );
    }

    #[test]
    fn a_leftover_is_a_prometheus_with_the_cluster_config() {
        let marker = "--config.file=/run/cosched-cluster/";
        let ours = b"prometheus\0--config.file=/run/cosched-cluster/prometheus/prometheus.yml\0--web.listen-address=127.0.0.1:9090\0";
        assert!(is_cluster_prometheus(ours, marker));
        let system = b"/usr/bin/prometheus\0--config.file=/etc/prometheus/prometheus.yml\0";
        assert!(!is_cluster_prometheus(system, marker));
        let other = b"less\0--config.file=/run/cosched-cluster/prometheus/prometheus.yml\0";
        assert!(!is_cluster_prometheus(other, marker));
    }

    #[test]
    fn lives_in_the_state_directory_on_localhost() {
        let cluster = Cluster::plan(1, &[0], "local", 9464).unwrap();
        let prometheus = PrometheusNode::plan(&cluster).unwrap();
        assert_eq!(
            prometheus.config_path,
            PathBuf::from("/run/cosched-cluster/prometheus/prometheus.yml")
        );
        assert_eq!(
            prometheus.data_dir,
            PathBuf::from("/run/cosched-cluster/prometheus/data")
        );
        assert!(prometheus.listen.ip().is_loopback());
        assert_eq!(prometheus.url(), format!("http://{}", prometheus.listen));
    }
}
