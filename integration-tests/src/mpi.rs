//! Real MPI jobs in tests: a small cluster network like `cargo xtask
//! cluster up` builds (a bridge in the root namespace, where the MPI
//! launcher runs, and two node namespaces whose interface is `eth0`, node i
//! on CPU i, each with a cgroup for its jobs), and the launch, rank finding
//! and adoption of xtask's MPI harness (`xtask::mpi`): the same code
//! `cargo xtask cluster mpirun` and `bench mpi` run.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use xtask::mpi::{
    Library, build, handoff,
    job::MpiJob,
    launch::{JobLaunch, MpiNode, Nodes},
};

use crate::{
    agent::TestAgent,
    netns::{NodePair, ip},
};

/// Two nodes on a bridge, removed on drop (after the MPI jobs' cgroups).
pub struct MpiCluster {
    /// The namespaces (deleted when this drops), for [`TestAgent`]s.
    pub pair: NodePair,
    pub nodes: Nodes,
    bridge: String,
    cgroup_root: PathBuf,
    dir: tempfile::TempDir,
}

impl MpiCluster {
    /// Nodes 10.204.`subnet`.10 and .11, the bridge .1.
    pub fn new(subnet: u8) -> Self {
        let tag = crate::unique("csmp");
        let bridge = format!("{tag}b");
        let gateway = format!("10.204.{subnet}.1");
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("{gateway}/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        let cgroup_root = Path::new("/sys/fs/cgroup/unified").join(&tag);
        let mut names = Vec::new();
        let mut nodes = Vec::new();
        for i in 0..2 {
            let ns = format!("{tag}n{i}");
            let (outer, inner) = (format!("{tag}v{i}"), format!("{tag}p{i}"));
            let address = format!("10.204.{subnet}.{}", 10 + i);
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ]);
            ip(&["link", "set", &outer, "master", &bridge]);
            ip(&["link", "set", &outer, "up"]);
            ip(&["link", "set", &inner, "netns", &ns]);
            ip(&["-n", &ns, "link", "set", &inner, "name", "eth0"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{address}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            let cgroup = cgroup_root.join(format!("n{i}"));
            std::fs::create_dir_all(&cgroup).expect("creating the node's cgroup");
            nodes.push(MpiNode {
                name: format!("n{i}"),
                address: address.parse().unwrap(),
                netns: ns.clone(),
                cpu: i % crate::proc::online_cpus() as usize,
                cgroup,
                // The agents start later; the tests adopt by pid.
                agent_socket: None,
            });
            names.push((ns, address));
        }
        let [(ns0, a0), (ns1, a1)] = <[(String, String); 2]>::try_from(names).unwrap();
        Self {
            pair: NodePair {
                ns: [ns0, ns1],
                addr: [a0, a1],
            },
            nodes: Nodes {
                nodes,
                subnet: format!("10.204.{subnet}.0/24"),
                launcher_iface: bridge.clone(),
                node_iface: "eth0".into(),
            },
            bridge,
            cgroup_root,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Starts `program` (built for `lib`) with one rank per node as MPI
    /// job `job`, and hands its ranks to `agents` as job `job_id`
    /// (through [`handoff::adopt_ranks`]). Returns the job and the ranks
    /// adopted on each node.
    pub fn launch_adopted(
        &self,
        lib: Library,
        job: &str,
        program: &str,
        args: &[String],
        agents: [&TestAgent; 2],
        job_id: u32,
    ) -> (MpiJob, Vec<Vec<u32>>) {
        let script = self.dir.path().join("launch-agent.sh");
        if !script.exists() {
            self.nodes.write_launch_agent(&script).unwrap();
        }
        let workdir = self.dir.path().join(job);
        std::fs::create_dir_all(&workdir).unwrap();
        let launch = JobLaunch {
            lib,
            nodes: &self.nodes,
            launch_agent: &script,
            ranks_per_node: 1,
            job,
            yield_when_idle: false,
            program,
            args,
            workdir: &workdir,
            attach: None,
        };
        let mut mpi = MpiJob::start(&launch).expect("starting the MPI launcher");
        let sockets = [agents[0].socket.clone(), agents[1].socket.clone()];
        let ranks = handoff::adopt_ranks(&mut mpi, &sockets, job_id, job)
            .unwrap_or_else(|e| panic!("adopting the ranks of {job}: {e:#}"));
        (mpi, ranks)
    }
}

impl Drop for MpiCluster {
    fn drop(&mut self) {
        for n in &self.nodes.nodes {
            let _ = std::fs::remove_dir(&n.cgroup);
        }
        let _ = std::fs::remove_dir(&self.cgroup_root);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
    }
}

/// Our ping-pong built for `lib` (into `<target>/mpi/<lib>`, as xtask
/// builds it).
pub fn pingpong(lib: Library) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = build::ensure(
        &build::source_dir(&root),
        lib,
        &build::out_dir(&target, lib),
    )
    .unwrap_or_else(|e| panic!("building the MPI ping-pong: {e:#} (run `cargo xtask setup`)"));
    dir.join("pingpong").display().to_string()
}
