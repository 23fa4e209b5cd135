//! Launching a real MPI job across namespace nodes with the library's own
//! launcher, run in the root namespace (a launcher inside a node's
//! namespace would treat that node as local and start its ranks itself,
//! outside the node's CPU and cgroup).
//!
//! The launchers reach the nodes the way they reach a cluster's hosts:
//! through a remote shell. [`Nodes::write_launch_agent`] writes a script
//! that stands in for ssh, called as `SCRIPT [ssh options] HOST COMMAND...`:
//! it maps the host (a node's address) to the node, moves itself into the
//! job's cgroup below the node's (so the job's processes can be found and
//! cleaned up, and count as the cluster's CPU time), enters the node's
//! network namespace and pins itself to the node's CPU, then runs the
//! command (OpenMPI's `orted`, MPICH's `hydra_pmi_proxy`), which starts the
//! ranks. It also points `COSCHED_AGENT_SOCKET` at the node's agent, so a
//! `cosched join` in the command talks to that node's agent.
//!
//! A job can be launched through the cluster's coordinator ([`Attach`]):
//! the launcher then runs under `cosched attach`, which registers the job
//! and sets the variables that start each node's daemon under `cosched join
//! --job J --daemon`. OpenMPI takes that from `OMPI_MCA_orte_launch_agent`;
//! hydra has no such setting, so for MPICH the launch agent itself puts
//! `$COSCHED_JOIN_DAEMON` in front of the command (see docs/launchers.md).
//!
//! Settings beyond the libraries' defaults, each needed to make one machine
//! behave like a cluster (see docs/benchmarks.md):
//! - OpenMPI: `--mca routed direct` (hosts given as addresses), `btl
//!   tcp,self` and `btl/oob_tcp_if_include` the node subnet (no shared
//!   memory between "nodes"), `--bind-to none` (each orted would bind its
//!   first rank to core 0; the launch agent pins instead), `rtc ^hwloc`
//!   (orted sometimes crashes in hwloc's shared-memory topology set-up).
//! - MPICH: `-iface` the root namespace's interface on the node subnet (the
//!   proxies connect back to it), and UCX restricted to TCP on the node
//!   interface (`UCX_TLS=self,tcp`, `UCX_NET_DEVICES`): by default UCX sees
//!   one machine and moves messages through shared memory.
use std::{
    net::Ipv4Addr,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use super::Library;
use crate::cluster::Cluster;

/// Environment variable naming the job's cgroup (below each node's) for the
/// launch agent.
pub const JOB_CGROUP_ENV: &str = "COSCHED_MPI_JOB_CGROUP";
/// Prefix of a job's cgroup name below a node's cgroup.
pub const JOB_CGROUP_PREFIX: &str = "mpi-";
/// Environment variable that makes the launch agent run the command under
/// `$COSCHED_JOIN_DAEMON` (hydra's proxies of an attached job).
pub const PREFIX_JOIN_DAEMON_ENV: &str = "COSCHED_MPI_PREFIX_JOIN_DAEMON";

/// One node as the launchers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpiNode {
    pub name: String,
    pub address: Ipv4Addr,
    /// Network namespace (`ip netns` name).
    pub netns: String,
    pub cpu: usize,
    /// The node's cgroup v2 directory; jobs get `mpi-<job>` below it.
    pub cgroup: PathBuf,
    /// The node agent's control socket (`COSCHED_AGENT_SOCKET` of what the
    /// launch agent runs there), if the node has an agent.
    pub agent_socket: Option<PathBuf>,
}

impl MpiNode {
    /// The cgroup of `job` on this node.
    pub fn job_cgroup(&self, job: &str) -> PathBuf {
        self.cgroup.join(format!("{JOB_CGROUP_PREFIX}{job}"))
    }
}

/// The nodes and the network between them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    pub nodes: Vec<MpiNode>,
    /// The nodes' subnet, `a.b.c.d/len` (OpenMPI's `*_if_include`).
    pub subnet: String,
    /// The root namespace's interface on that subnet (MPICH's `-iface`).
    pub launcher_iface: String,
    /// The nodes' interface name inside their namespaces (UCX's device).
    pub node_iface: String,
}

impl Nodes {
    /// The nodes of a cluster started by `cluster up`.
    pub fn of_cluster(cluster: &Cluster) -> Self {
        let o = cluster.gateway.octets();
        Self {
            nodes: cluster
                .nodes
                .iter()
                .map(|n| MpiNode {
                    name: n.name.clone(),
                    address: n.address,
                    netns: n.netns.clone(),
                    cpu: n.cpu,
                    cgroup: n.cgroup.clone(),
                    agent_socket: Some(n.control_socket.clone()),
                })
                .collect(),
            subnet: format!("{}.{}.{}.0/{}", o[0], o[1], o[2], cluster.prefix_len),
            launcher_iface: cluster.bridge.clone(),
            // `cluster up` names the namespace end of every veth eth0.
            node_iface: "eth0".into(),
        }
    }

    /// The launch agent script (see the module doc).
    pub fn launch_agent(&self) -> String {
        let mut cases = String::new();
        for n in &self.nodes {
            cases.push_str(&format!(
                "    {addr}) netns={ns}; cpu={cpu}; cgroup={cg}; sock={sock} ;;\n",
                addr = n.address,
                ns = shell_quote(&n.netns),
                cpu = n.cpu,
                cg = shell_quote(&n.cgroup.display().to_string()),
                sock = shell_quote(
                    &n.agent_socket
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
            ));
        }
        format!(
            r#"#!/bin/sh
# Generated by cosched's xtask: the remote shell of mpirun/mpiexec for the
# namespace nodes, called as `$0 [ssh options] HOST COMMAND...`.
while [ $# -gt 0 ] && [ "${{1#-}}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
{cases}    *) echo "cosched launch agent: $host is not a node" >&2; exit 255 ;;
esac
if [ -n "${JOB_CGROUP_ENV}" ]; then
    job="$cgroup/${JOB_CGROUP_ENV}"
    mkdir -p "$job" && echo $$ > "$job/cgroup.procs" || exit 255
fi
# `cosched join` on this node talks to this node's agent.
[ -n "$sock" ] && export COSCHED_AGENT_SOCKET="$sock"
cmd="$*"
if [ -n "${PREFIX_JOIN_DAEMON_ENV}" ]; then
    if [ -z "$COSCHED_JOIN_DAEMON" ]; then
        echo "cosched launch agent: no COSCHED_JOIN_DAEMON (not under cosched attach?)" >&2
        exit 255
    fi
    cmd="$COSCHED_JOIN_DAEMON $cmd"
fi
# A session of its own, as an ssh login gives the remote command: with
# autogroup scheduling on, each job's processes then share the CPU as one
# group against other jobs, as they do on a real cluster (one shared session
# would put every job's ranks in one flat run queue instead).
exec setsid --wait nsenter --net=/run/netns/"$netns" taskset --cpu-list "$cpu" sh -c "$cmd"
"#
        )
    }

    /// Writes the launch agent to `path` (executable).
    pub fn write_launch_agent(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.launch_agent())
            .with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))
    }
}

/// Launching through the cluster's coordinator: `cosched attach` around
/// the launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attach {
    /// The `cosched` CLI (its own path is what the nodes run for `join`).
    pub cli: PathBuf,
    /// The coordinator's admin socket.
    pub admin_socket: PathBuf,
}

impl Attach {
    /// `cosched attach --name JOB --nodes N0,N1 -- LAUNCHER...`, keeping the
    /// launcher's environment and working directory.
    fn wrap(&self, launcher: &Command, job: &str, nodes: &Nodes) -> Command {
        let names: Vec<&str> = nodes.nodes.iter().map(|n| n.name.as_str()).collect();
        let mut c = Command::new(&self.cli);
        c.arg("--socket")
            .arg(&self.admin_socket)
            .args(["attach", "--name", job, "--nodes", &names.join(","), "--"])
            .arg(launcher.get_program())
            .args(launcher.get_args());
        if let Some(dir) = launcher.get_current_dir() {
            c.current_dir(dir);
        }
        for (key, value) in launcher.get_envs() {
            match value {
                Some(v) => c.env(key, v),
                None => c.env_remove(key),
            };
        }
        c
    }
}

/// One job to launch.
#[derive(Clone, Debug)]
pub struct JobLaunch<'a> {
    pub lib: Library,
    pub nodes: &'a Nodes,
    /// The script [`Nodes::write_launch_agent`] wrote.
    pub launch_agent: &'a Path,
    /// Ranks on every node (ranks fill the nodes in order).
    pub ranks_per_node: usize,
    /// The job's name: its cgroup on every node is `mpi-<job>`.
    pub job: &'a str,
    /// The library's yield mode (OpenMPI's `mpi_yield_when_idle`); an error
    /// for a library without one.
    pub yield_when_idle: bool,
    pub program: &'a str,
    pub args: &'a [String],
    /// The launcher's (and so the ranks') working directory.
    pub workdir: &'a Path,
    /// Through the coordinator (`cosched attach`), or plain.
    pub attach: Option<&'a Attach>,
}

impl JobLaunch<'_> {
    pub fn ranks(&self) -> usize {
        self.ranks_per_node * self.nodes.nodes.len()
    }

    /// The launcher's command line, ready to spawn.
    pub fn command(&self) -> Result<Command> {
        if self.ranks_per_node == 0 || self.nodes.nodes.is_empty() {
            bail!("an MPI job needs at least one node and one rank per node");
        }
        if self.yield_when_idle && !self.lib.has_yield_mode() {
            bail!(
                "{} has no yield mode (its ch4 device always polls)",
                self.lib.as_str()
            );
        }
        if self.job.is_empty() || self.job.contains(['/', ' ']) {
            bail!("bad MPI job name {:?}", self.job);
        }
        let hosts: Vec<String> = self
            .nodes
            .nodes
            .iter()
            .map(|n| format!("{}:{}", n.address, self.ranks_per_node))
            .collect();
        let mut c = Command::new(self.lib.launcher());
        c.current_dir(self.workdir)
            .env(JOB_CGROUP_ENV, format!("{JOB_CGROUP_PREFIX}{}", self.job));
        let np = self.ranks().to_string();
        match self.lib {
            Library::Openmpi => {
                let subnet = self.nodes.subnet.as_str();
                c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                    .args([
                        "--allow-run-as-root",
                        "-np",
                        &np,
                        "--host",
                        &hosts.join(","),
                    ])
                    .arg("--mca")
                    .arg("plm_rsh_agent")
                    .arg(self.launch_agent)
                    .args(["--mca", "routed", "direct"])
                    .args(["--mca", "btl", "tcp,self"])
                    .args(["--mca", "btl_tcp_if_include", subnet])
                    .args(["--mca", "oob_tcp_if_include", subnet])
                    .args(["--bind-to", "none"])
                    .args(["--mca", "rtc", "^hwloc"]);
                if self.yield_when_idle {
                    c.args(["--mca", "mpi_yield_when_idle", "1"]);
                }
            }
            Library::Mpich => {
                c.args(["-launcher", "ssh", "-launcher-exec"])
                    .arg(self.launch_agent)
                    .args(["-iface", &self.nodes.launcher_iface])
                    .args(["-hosts", &hosts.join(","), "-np", &np])
                    .args(["-genv", "UCX_TLS", "self,tcp"])
                    .args(["-genv", "UCX_NET_DEVICES", &self.nodes.node_iface]);
            }
        }
        c.arg(self.program).args(self.args);
        Ok(match self.attach {
            None => c,
            Some(a) => {
                if self.lib == Library::Mpich {
                    c.env(PREFIX_JOIN_DAEMON_ENV, "1");
                }
                a.wrap(&c, self.job, self.nodes)
            }
        })
    }
}

/// `text` as one single-quoted shell word.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::describe;

    fn nodes() -> Nodes {
        Nodes::of_cluster(&Cluster::plan(2, &[0, 1], "local", 9464).unwrap())
    }

    fn launch<'a>(lib: Library, nodes: &'a Nodes, args: &'a [String]) -> JobLaunch<'a> {
        JobLaunch {
            lib,
            nodes,
            launch_agent: Path::new("/s/agent.sh"),
            ranks_per_node: 1,
            job: "j1",
            yield_when_idle: false,
            program: "/p/pingpong",
            args,
            workdir: Path::new("/w"),
            attach: None,
        }
    }

    #[test]
    fn cluster_nodes_map_to_addresses_namespaces_and_cpus() {
        let n = nodes();
        assert_eq!(n.subnet, "10.201.0.0/24");
        assert_eq!(n.launcher_iface, "cosched0");
        assert_eq!(n.nodes[1].address, Ipv4Addr::new(10, 201, 0, 11));
        assert_eq!(
            n.nodes[1].job_cgroup("j1"),
            PathBuf::from("/sys/fs/cgroup/unified/cosched/n1/mpi-j1")
        );
        let script = n.launch_agent();
        assert!(
            script.contains(
                "10.201.0.11) netns='cosched-n1'; cpu=1; cgroup='/sys/fs/cgroup/unified/cosched/n1'; \
                 sock='/run/cosched-cluster/n1/agent.sock' ;;"
            ),
            "{script}"
        );
        assert!(script.contains("exec setsid --wait nsenter --net=/run/netns/\"$netns\" taskset"));
        assert!(script.contains("export COSCHED_AGENT_SOCKET=\"$sock\""));
        assert!(script.contains("cmd=\"$COSCHED_JOIN_DAEMON $cmd\""));
    }

    #[test]
    fn attached_jobs_run_the_launcher_under_cosched_attach() {
        let n = nodes();
        let attach = Attach {
            cli: "/b/cosched".into(),
            admin_socket: "/c/coordinator.sock".into(),
        };
        let mut l = launch(Library::Openmpi, &n, &[]);
        l.attach = Some(&attach);
        let c = l.command().unwrap();
        assert_eq!(
            describe(&c),
            "/b/cosched --socket /c/coordinator.sock attach --name j1 --nodes n0,n1 -- \
             mpirun.openmpi --allow-run-as-root -np 2 --host 10.201.0.10:1,10.201.0.11:1 \
             --mca plm_rsh_agent /s/agent.sh --mca routed direct --mca btl tcp,self \
             --mca btl_tcp_if_include 10.201.0.0/24 --mca oob_tcp_if_include 10.201.0.0/24 \
             --bind-to none --mca rtc ^hwloc /p/pingpong"
        );
        let env = |c: &Command, key: &str| {
            c.get_envs()
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v)
                .map(|v| v.to_string_lossy().into_owned())
        };
        assert_eq!(c.get_current_dir(), Some(Path::new("/w")));
        assert_eq!(env(&c, JOB_CGROUP_ENV).as_deref(), Some("mpi-j1"));
        // OpenMPI's daemons join through its launch agent setting, which
        // `cosched attach` sets; only hydra's need the launch agent's prefix.
        assert_eq!(env(&c, PREFIX_JOIN_DAEMON_ENV), None);
        let mut l = launch(Library::Mpich, &n, &[]);
        l.attach = Some(&attach);
        let c = l.command().unwrap();
        assert!(describe(&c).contains("attach --name j1 --nodes n0,n1 -- mpiexec.hydra"));
        assert_eq!(env(&c, PREFIX_JOIN_DAEMON_ENV).as_deref(), Some("1"));
    }

    #[test]
    fn openmpi_gets_the_settings_that_make_namespaces_work() {
        let n = nodes();
        let args = vec!["--iters".to_string(), "5".into()];
        let mut l = launch(Library::Openmpi, &n, &args);
        let line = describe(&l.command().unwrap());
        assert_eq!(
            line,
            "mpirun.openmpi --allow-run-as-root -np 2 --host 10.201.0.10:1,10.201.0.11:1 \
             --mca plm_rsh_agent /s/agent.sh --mca routed direct --mca btl tcp,self \
             --mca btl_tcp_if_include 10.201.0.0/24 --mca oob_tcp_if_include 10.201.0.0/24 \
             --bind-to none --mca rtc ^hwloc /p/pingpong --iters 5"
        );
        l.yield_when_idle = true;
        assert!(describe(&l.command().unwrap()).contains("--mca mpi_yield_when_idle 1 /p/"));
    }

    #[test]
    fn mpich_uses_hydra_with_the_agent_and_ucx_over_tcp() {
        let n = nodes();
        let mut l = launch(Library::Mpich, &n, &[]);
        l.ranks_per_node = 2;
        assert_eq!(
            describe(&l.command().unwrap()),
            "mpiexec.hydra -launcher ssh -launcher-exec /s/agent.sh -iface cosched0 \
             -hosts 10.201.0.10:2,10.201.0.11:2 -np 4 -genv UCX_TLS self,tcp \
             -genv UCX_NET_DEVICES eth0 /p/pingpong"
        );
        l.yield_when_idle = true;
        assert!(
            l.command()
                .unwrap_err()
                .to_string()
                .contains("no yield mode")
        );
    }
}
