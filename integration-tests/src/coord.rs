//! A real `cosched-coordinator` for a test, inside node 0's network
//! namespace of a [`NodePair`] (listening on that node's address), plus the
//! `cosched` CLI to drive it and the agent config table that joins it.
use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use cosched_proto::control::{Reply, Request};
use serde_json::Value;

use crate::{agent::metric_sum, netns::NodePair};

/// The cluster secret the tests use.
pub const SECRET: &str = "hex:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// Path of a coordinator-side binary, with a clear message when missing.
pub fn coord_bin(name: &str) -> PathBuf {
    let path = crate::bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} not found: build the release binaries (`cargo build --release -p cosched-coordinator -p cosched`) or set COSCHED_BIN_DIR",
        path.display()
    );
    path
}

pub struct CoordOpts<'a> {
    pub policy: &'a str,
    pub slice_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
    /// Extra TOML appended to the generated config.
    pub extra: &'a str,
}

impl Default for CoordOpts<'_> {
    fn default() -> Self {
        Self {
            policy: "gang",
            slice_ms: 50,
            heartbeat_interval_ms: 100,
            heartbeat_timeout_ms: 600,
            extra: "",
        }
    }
}

pub struct TestCoordinator {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub socket: PathBuf,
    /// `address:port` agents connect to.
    pub listen: String,
    pub metrics_port: u16,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
    netns: String,
}

impl TestCoordinator {
    /// Starts a coordinator for the pair's two nodes `n0` and `n1`.
    pub fn start(nodes: &NodePair, opts: CoordOpts<'_>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::free_port();
        let metrics_port = crate::free_port();
        let listen = format!("{}:{port}", nodes.addr[0]);
        let socket = dir.path().join("coordinator.sock");
        let config_path = dir.path().join("coordinator.toml");
        let text = format!(
            "nodes = [\"n0\", \"n1\"]\nlisten = \"{listen}\"\nadmin_socket = \"{}\"\nmetrics_listen = \"127.0.0.1:{metrics_port}\"\nsecret = \"{SECRET}\"\nstate_file = \"{}\"\npolicy = \"{}\"\nslice_ms = {}\nheartbeat_interval_ms = {}\nheartbeat_timeout_ms = {}\n{}\n",
            socket.display(),
            dir.path().join("state.json").display(),
            opts.policy,
            opts.slice_ms,
            opts.heartbeat_interval_ms,
            opts.heartbeat_timeout_ms,
            opts.extra,
        );
        std::fs::write(&config_path, text).unwrap();
        let mut coordinator = Self {
            child: None,
            dir,
            config_path,
            socket,
            listen,
            metrics_port,
            heartbeat_interval_ms: opts.heartbeat_interval_ms,
            heartbeat_timeout_ms: opts.heartbeat_timeout_ms,
            netns: nodes.ns[0].clone(),
        };
        coordinator.spawn();
        coordinator
    }

    /// (Re)starts the process with the same config and state file.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("coordinator.log"))
            .unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns))
            .arg("--")
            .arg(coord_bin("cosched-coordinator"))
            .arg("--config")
            .arg(&self.config_path)
            .env("COSCHED_LOG", "info,cosched_coordinator=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting cosched-coordinator");
        self.child = Some(child);
        let started = Instant::now();
        while self.cli(&["status"]).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "coordinator exited during start-up ({status}):\n{}",
                    self.log()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "coordinator did not come up:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("coordinator.log")).unwrap_or_default()
    }

    /// The `[coordinator]` table an agent needs to join.
    pub fn agent_table(&self, extra: &str) -> String {
        format!(
            "[coordinator]\naddress = \"{}\"\nsecret = \"{SECRET}\"\nheartbeat_interval_ms = {}\nheartbeat_timeout_ms = {}\nreconnect_min_ms = 50\nreconnect_max_ms = 200\n{extra}\n",
            self.listen, self.heartbeat_interval_ms, self.heartbeat_timeout_ms
        )
    }

    /// Runs `cosched --json ARGS`; the JSON answer, or stderr on failure.
    pub fn cli(&self, args: &[&str]) -> Result<Value, String> {
        let output = Command::new(coord_bin("cosched"))
            .arg("--socket")
            .arg(&self.socket)
            .arg("--json")
            .args(args)
            .output()
            .expect("running cosched");
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        serde_json::from_slice(&output.stdout)
            .map_err(|error| format!("cosched printed no JSON ({error}): {output:?}"))
    }

    /// Like [`Self::cli`], panicking with the log on failure.
    pub fn call(&self, args: &[&str]) -> Value {
        self.cli(args)
            .unwrap_or_else(|error| panic!("cosched {args:?}: {error}\n{}", self.log()))
    }

    /// Submits a `nodes`-rank `cosched-synth` job; returns its id.
    pub fn submit_synth(&self, name: &str, nodes: usize, synth_args: &[&str]) -> u32 {
        let synth = crate::bin("cosched-synth").display().to_string();
        let nodes = nodes.to_string();
        let mut args = vec!["submit", "--name", name, "--nodes", &nodes, "--", &synth];
        args.extend_from_slice(synth_args);
        let reply = self.call(&args);
        reply["submitted"]["job"]["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("no job id in {reply}")) as u32
    }

    /// Submits a `nodes`-rank `cosched-synth` job of class `class` (`be`,
    /// `rt:...`): its id, or the CLI's error.
    pub fn try_submit_synth(
        &self,
        name: &str,
        nodes: usize,
        class: &str,
        synth_args: &[&str],
    ) -> Result<u32, String> {
        let synth = crate::bin("cosched-synth").display().to_string();
        let nodes = nodes.to_string();
        let mut args = vec![
            "submit", "--name", name, "--nodes", &nodes, "--class", class, "--", &synth,
        ];
        args.extend_from_slice(synth_args);
        let reply = self.cli(&args)?;
        reply["submitted"]["job"]["id"]
            .as_u64()
            .map(|id| id as u32)
            .ok_or_else(|| format!("no job id in {reply}"))
    }

    /// The job's view (active or recently finished).
    pub fn job(&self, id: u32) -> Value {
        self.call(&["job", &id.to_string()])["job"]["job"].clone()
    }

    /// Polls `check` on the job until it holds or `timeout` passes.
    pub fn wait_job(&self, id: u32, timeout: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let job = self.job(id);
            if check(&job) {
                return job;
            }
            assert!(
                started.elapsed() < timeout,
                "job {id} did not reach the expected state within {timeout:?}: {job:#}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The coordinator's Prometheus text.
    pub fn metrics(&self) -> String {
        let output = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.netns))
            .args(["--", "curl", "-sf"])
            .arg(format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn metric(&self, name: &str, filters: &[&str]) -> f64 {
        metric_sum(&self.metrics(), name, filters)
    }

    /// SIGKILL: no chance to write anything more.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: plain syscall.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let started = Instant::now();
            while child.try_wait().unwrap().is_none() {
                if started.elapsed() > Duration::from_secs(10) {
                    let _ = child.kill();
                    panic!("coordinator ignored SIGTERM:\n{}", self.log());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for TestCoordinator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `check` until it holds or `timeout` passes; panics with `what`.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `job["state"]` as text.
pub fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap_or("?")
}

/// Two nodes (`n0` on CPU 0, `n1` on CPU 1), one agent each joined to a
/// coordinator running in `n0`'s namespace. Fields drop in order: agents,
/// coordinator, then the namespaces.
pub struct TestCluster {
    pub agents: Vec<crate::agent::TestAgent>,
    pub coordinator: TestCoordinator,
    pub nodes: NodePair,
}

impl TestCluster {
    /// Gang slices of 50 ms whose agents stop the jobs outside their slot
    /// (demotion to SCHED_IDLE does not cross the autogroups the launched
    /// jobs' sessions get), so a test sees ranks stopped and run.
    pub fn gang_stopping(subnet: u8) -> Self {
        let opts = CoordOpts {
            policy: "gang",
            slice_ms: 50,
            ..CoordOpts::default()
        };
        Self::start(subnet, opts, "stop_inactive = true")
    }

    /// `agent_extra` goes into each agent's `[coordinator]` table.
    pub fn start(subnet: u8, opts: CoordOpts<'_>, agent_extra: &str) -> Self {
        Self::start_with(subnet, opts, |_| String::new(), agent_extra)
    }

    /// Like [`Self::start`]; `agent_config(i)` adds top-level keys to node
    /// `i`'s agent config (e.g. its `cgroup_root`).
    pub fn start_with(
        subnet: u8,
        opts: CoordOpts<'_>,
        agent_config: impl Fn(usize) -> String,
        agent_extra: &str,
    ) -> Self {
        let nodes = NodePair::new(subnet);
        let coordinator = TestCoordinator::start(&nodes, opts);
        let table = coordinator.agent_table(agent_extra);
        let agents = (0..2)
            .map(|index| {
                let extra = format!("{}\n{table}", agent_config(index));
                crate::agent::TestAgent::start(crate::agent::AgentOpts {
                    node: ["n0", "n1"][index],
                    cpus: vec![index as u32],
                    netns: Some((&nodes, index)),
                    extra: &extra,
                })
            })
            .collect();
        let cluster = Self {
            agents,
            coordinator,
            nodes,
        };
        cluster.wait_connected(Duration::from_secs(10));
        cluster
    }

    /// Waits until both nodes are registered with the coordinator.
    pub fn wait_connected(&self, timeout: Duration) {
        let started = Instant::now();
        loop {
            let nodes = self.coordinator.call(&["nodes"]);
            let up = nodes["nodes"]["nodes"]
                .as_array()
                .is_some_and(|nodes| nodes.iter().all(|node| node["connected"] == true));
            if up {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "agents did not register: {nodes:#}\ncoordinator:\n{}\nagent 0:\n{}\nagent 1:\n{}",
                self.coordinator.log(),
                self.agents[0].log(),
                self.agents[1].log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The coordinator's view of node `index` (`cosched nodes`).
    pub fn node_view(&self, index: usize) -> Value {
        self.coordinator.call(&["nodes"])["nodes"]["nodes"][index].clone()
    }

    /// Waits until the coordinator sees node `index` as `connected`.
    pub fn wait_node(&self, index: usize, connected: bool, timeout: Duration) {
        wait_until(
            &format!("n{index} connected = {connected}"),
            timeout,
            || self.node_view(index)["connected"] == connected,
        );
    }

    /// The processes of job `id`'s rank on each node, as its agent reports
    /// them.
    pub fn rank_processes(&self, id: u32) -> [Vec<crate::proc::Process>; 2] {
        [0, 1].map(|index| {
            let Ok(Reply::Jobs { jobs }) = self.agents[index].call(Request::Jobs) else {
                panic!("agent n{index}: jobs");
            };
            let rank = jobs
                .into_iter()
                .find(|job| job.job_id == id)
                .unwrap_or_else(|| panic!("n{index} runs no rank of job {id}"));
            let processes: Vec<crate::proc::Process> = rank
                .pids
                .iter()
                .filter_map(|&pid| crate::proc::Process::of(pid))
                .collect();
            assert!(!processes.is_empty(), "{rank:?}");
            processes
        })
    }

    /// Everything the processes logged, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "coordinator:\n{}\nagent n0:\n{}\nagent n1:\n{}",
            self.coordinator.log(),
            self.agents[0].log(),
            self.agents[1].log()
        )
    }
}

/// Serialises the tests of one binary that measure timing (they share the
/// machine's two CPUs): hold the guard for the whole test.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
