//! One `cosched-agent` on this machine, outside any cluster, for the
//! benches that measure the agent itself (eBPF overhead, idle cost): its
//! config, control socket and state in a directory of the bench's.
use std::{
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use cosched_proto::control::{Client, Reply, Request};

pub struct SoloAgent {
    child: Child,
    socket: PathBuf,
    metrics_port: u16,
}

impl SoloAgent {
    /// Starts `bin` with policy `policy`, its files in `dir`; returns once
    /// its control socket answers.
    pub fn start(bin: &Path, dir: &Path, policy: &str) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let socket = dir.join("agent.sock");
        let config = dir.join("agent.toml");
        std::fs::write(
            &config,
            format!(
                "node = \"bench\"\npolicy = \"{policy}\"\nmetrics_listen = \"127.0.0.1:{port}\"\ncontrol_socket = \"{}\"\nstate_dir = \"{}\"\npin_self = false\n",
                socket.display(),
                dir.join("state").display()
            ),
        )?;
        let _ = std::fs::remove_file(&socket);
        let log = dir.join("agent.log");
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let t0 = Instant::now();
        while Client::connect(&socket).is_err() {
            if t0.elapsed() > Duration::from_secs(15) {
                bail!(
                    "agent did not start; log: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self {
            child,
            socket,
            metrics_port: port,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Makes the processes `pids` job `job_id` of the agent.
    pub fn adopt(&self, job_id: u32, name: &str, pids: Vec<u32>) -> anyhow::Result<()> {
        let reply = Client::connect(&self.socket)?
            .call(
                &Request::Adopt {
                    job_id,
                    name: name.into(),
                    pids,
                    sched: None,
                    move_to_node: false,
                    class: cosched_proto::wire::JobClass::BestEffort,
                },
                Duration::from_secs(10),
            )
            .with_context(|| format!("adopting {name}"))?;
        match reply {
            Reply::Adopted { .. } => Ok(()),
            other => bail!("adopting {name}: unexpected reply {other:?}"),
        }
    }

    /// Records a timeline of `duration_ms` (blocks until it ends).
    pub fn timeline(
        &self,
        duration_ms: u64,
        max_events: u32,
    ) -> anyhow::Result<cosched_proto::timeline::NodeTimeline> {
        let reply = Client::connect(&self.socket)?.call(
            &Request::Timeline {
                duration_ms,
                max_events: Some(max_events),
            },
            Duration::from_millis(duration_ms) + Duration::from_secs(10),
        )?;
        match reply {
            Reply::Timeline { timeline } => Ok(timeline),
            other => bail!("timeline: unexpected reply {other:?}"),
        }
    }

    /// The agent's Prometheus text.
    pub fn metrics(&self) -> anyhow::Result<String> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.metrics_port))?;
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    }

    /// SIGTERM and wait.
    pub fn stop(mut self) {
        // SAFETY: plain syscall.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}
