//! A real `cosched-agent` process for a test: its own config, state dir and
//! control socket in a temporary directory, optionally inside a node's
//! network namespace. Stopped with SIGTERM on drop.
use std::{
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use cosched_proto::{
    control::{Client, JobInfo, Reply, Request},
    job::JobSpec,
};

use crate::netns::NodePair;

pub struct TestAgent {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub socket: PathBuf,
    pub metrics_port: u16,
    netns: Option<String>,
    /// Command the agent runs under (e.g. `setpriv …`), before `nsenter`'s.
    prefix: Vec<String>,
}

/// Options for [`TestAgent::start`].
pub struct AgentOpts<'a> {
    pub node: &'a str,
    pub cpus: Vec<u32>,
    /// Run inside node `i` of this pair.
    pub netns: Option<(&'a NodePair, usize)>,
    /// Extra TOML appended to the generated config.
    pub extra: &'a str,
}

impl Default for AgentOpts<'_> {
    fn default() -> Self {
        Self {
            node: "t",
            cpus: vec![],
            netns: None,
            extra: "",
        }
    }
}

/// The agent's config. Agents run unpinned unless `extra` sets `pin_self`.
/// `metrics_listen` is `host:port`.
pub fn config_text(
    node: &str,
    cpus: &[u32],
    dir: &Path,
    metrics_listen: &str,
    extra: &str,
) -> String {
    let pin = if extra.contains("pin_self") {
        ""
    } else {
        "pin_self = false\n"
    };
    format!(
        "node = \"{node}\"\ncpus = {cpus:?}\nmetrics_listen = \"{metrics_listen}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\n{pin}{extra}\n",
        dir.join("agent.sock").display(),
        dir.join("state").display(),
    )
}

impl TestAgent {
    pub fn start(opts: AgentOpts<'_>) -> Self {
        Self::start_under(opts, &[])
    }

    /// Starts the agent as `prefix… cosched-agent …` (e.g. under `setpriv`
    /// with a unit's capability set).
    pub fn start_under(opts: AgentOpts<'_>, prefix: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = crate::free_port();
        let config_path = dir.path().join("agent.toml");
        // Inside a node's namespace the endpoint listens on every address of
        // the node, so the other node (and a Prometheus there) can scrape it.
        let host = if opts.netns.is_some() {
            "0.0.0.0"
        } else {
            "127.0.0.1"
        };
        let listen = format!("{host}:{port}");
        std::fs::write(
            &config_path,
            config_text(opts.node, &opts.cpus, dir.path(), &listen, opts.extra),
        )
        .unwrap();
        let socket = dir.path().join("agent.sock");
        let mut agent = Self {
            child: None,
            dir,
            config_path,
            socket,
            metrics_port: port,
            netns: opts.netns.map(|(p, i)| p.ns[i].clone()),
            prefix: prefix.iter().map(|arg| arg.to_string()).collect(),
        };
        agent.spawn();
        agent
    }

    /// (Re)starts the agent process with the same config and state.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("agent.log"))
            .unwrap();
        let mut argv: Vec<std::ffi::OsString> = self.prefix.iter().map(Into::into).collect();
        if let Some(ns) = &self.netns {
            argv.extend([
                "nsenter".into(),
                format!("--net=/run/netns/{ns}").into(),
                "--".into(),
            ]);
        }
        argv.push(crate::bin("cosched-agent").into());
        // The agent inherits the test's environment: `COSCHED_LOG` (its
        // tracing filter, e.g. `cosched_agent=debug`) makes a failing
        // test's agent logs show the policy's decisions.
        let mut cmd = std::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.arg("--config")
            .arg(&self.config_path)
            .stdout(Stdio::null())
            .stderr(log);
        let _ = std::fs::remove_file(&self.socket);
        self.child = Some(cmd.spawn().expect("starting cosched-agent"));
        let t0 = Instant::now();
        while Client::connect(&self.socket).is_err() {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("agent exited during start-up ({st}):\n{}", self.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "agent did not come up:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("agent running").id()
    }

    pub fn call(&self, req: Request) -> Result<Reply, String> {
        let mut c = Client::connect(&self.socket).map_err(|e| e.to_string())?;
        c.call(&req, Duration::from_secs(120))
            .map_err(|e| e.to_string())
    }

    pub fn launch(&self, spec: JobSpec) -> u32 {
        match self.call(Request::Launch { spec }) {
            Ok(Reply::Launched { pid, .. }) => pid,
            other => panic!("launch failed: {other:?}\n{}", self.log()),
        }
    }

    pub fn wait(&self, job_id: u32, timeout: Duration) -> JobInfo {
        match self.call(Request::Wait {
            job_id,
            timeout_ms: timeout.as_millis() as u64,
        }) {
            Ok(Reply::Job { job }) => job,
            other => panic!("wait for job {job_id} failed: {other:?}\n{}", self.log()),
        }
    }

    /// The agent's Prometheus text.
    pub fn metrics(&self) -> String {
        match &self.netns {
            None => http_get(self.metrics_port),
            Some(ns) => {
                let out = std::process::Command::new("nsenter")
                    .arg(format!("--net=/run/netns/{ns}"))
                    .args(["--", "curl", "-sf"])
                    .arg(format!("http://127.0.0.1:{}/metrics", self.metrics_port))
                    .output()
                    .expect("curl");
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
        }
    }

    /// Sum of a metric's samples whose line contains every `filters` string.
    pub fn metric(&self, name: &str, filters: &[&str]) -> f64 {
        metric_sum(&self.metrics(), name, filters)
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain syscall.
        unsafe { libc::kill(self.pid() as i32, sig) };
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        // SAFETY: plain syscall.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st.code();
            }
            if t0.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                panic!("agent did not stop within 15 s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: the agent gets no chance to clean up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
    }
}

pub fn http_get(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

pub fn metric_sum(text: &str, name: &str, filters: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
