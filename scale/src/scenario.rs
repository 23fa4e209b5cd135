//! The scale scenario: start the real coordinator binary for N nodes, let N
//! stand-in agents register at once, submit jobs spanning many nodes, watch
//! slice switches and heartbeats for a window, break 100 (or any number of)
//! links at once and watch them come back. Everything measured goes into a
//! [`Report`]; nothing here asserts a time.

use std::{
    collections::BTreeMap,
    io::Write as _,
    net::{SocketAddr, TcpListener},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use cosched_proto::wire::{SharedSecret, monotonic_ns};
use serde::Serialize;
use serde_json::Value;

use crate::{
    ScaleError, admin,
    fleet::Fleet,
    procfs,
    standin::{AgentConfig, node_name},
    stats::{Counters, Percentiles, SwitchView},
};

/// The secret every stand-in and the coordinator share (a test secret).
const SECRET_HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioConfig {
    pub coordinator_bin: PathBuf,
    pub agents: usize,
    pub slice_ms: u64,
    /// The coordinator's `switch_lead_us` (0: its default, min(slice/2, 5 ms)).
    pub switch_lead_us: u64,
    /// The coordinator's `schedule_ahead` (false: a `SwitchSlice` per slice
    /// to every agent, the protocol before 1.5).
    pub schedule_ahead: bool,
    /// The coordinator's global policy (`gang`, `paired-gang`, ...).
    pub policy: String,
    /// The coordinator's `paired_schedule_ahead` (paired gang's slices
    /// announced ahead too); written to its config only when set, so older
    /// coordinators still start.
    pub paired_schedule_ahead: bool,
    /// The coordinator's `one_gs_schedule_ahead` (1GS's slots announced
    /// ahead too; `--policy one-level-gang`), written to its config only
    /// when set, as `paired_schedule_ahead`.
    pub one_gs_schedule_ahead: bool,
    /// Each stand-in reports every job it runs at this CPU utilisation with
    /// its switch reports (`UtilReport`, the slice's quantum), as an agent
    /// does; `None`: no utilisation (paired gang then predicts 100 % and
    /// pairs nothing).
    pub utilisation_percent: Option<f64>,
    pub max_rows: usize,
    /// Jobs submitted, each of `job_nodes` ranks.
    pub jobs: usize,
    pub job_nodes: usize,
    pub heartbeat_interval_ms: u64,
    pub heartbeat_timeout_ms: u64,
    /// As the real agent's defaults (200 ms doubling to 2 s).
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub warmup_s: f64,
    pub window_s: f64,
    /// Links broken at once (0: skip that phase).
    pub drop_agents: usize,
    /// How long each phase may take before the scenario gives up waiting.
    pub phase_timeout_s: f64,
    /// CPUs to pin the coordinator and the stand-ins to.
    pub pin: Option<(usize, usize)>,
    /// The stand-ins' tokio worker threads.
    pub worker_threads: usize,
    /// SCHED_FIFO priority of the stand-ins' switch timer thread (the real
    /// agent's runs at `agent_priority`, 50); 0: SCHED_OTHER.
    pub timer_fifo_priority: u32,
    /// `COSCHED_LOG` of the coordinator.
    pub coordinator_log: String,
    /// Where to copy the coordinator's log when it stops.
    pub keep_log: Option<PathBuf>,
}

impl ScenarioConfig {
    /// A small, quick scenario (the CI smoke test's shape).
    pub fn smoke(coordinator_bin: PathBuf, agents: usize) -> Self {
        Self {
            coordinator_bin,
            agents,
            slice_ms: 20,
            switch_lead_us: 0,
            schedule_ahead: true,
            policy: "gang".into(),
            paired_schedule_ahead: false,
            one_gs_schedule_ahead: false,
            utilisation_percent: None,
            max_rows: 4,
            jobs: 4,
            job_nodes: agents,
            heartbeat_interval_ms: 200,
            heartbeat_timeout_ms: 2000,
            reconnect_min_ms: 200,
            reconnect_max_ms: 2000,
            warmup_s: 0.5,
            window_s: 1.0,
            drop_agents: agents / 5,
            phase_timeout_s: 60.0,
            pin: None,
            worker_threads: 1,
            timer_fifo_priority: 0,
            coordinator_log: "info".into(),
            keep_log: None,
        }
    }
}

/// CPU use over an interval, percent of one CPU.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuUse {
    pub seconds: f64,
    pub coordinator_percent: f64,
    pub harness_percent: f64,
    pub machine_busy_percent: f64,
    /// Busy CPU time neither the coordinator nor the harness used.
    pub outside_percent: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Registration {
    /// From the stand-ins' start until every one got its `SetPolicy`.
    pub all_accepted_s: Option<f64>,
    /// Until the coordinator's status counted them all connected.
    pub coordinator_all_connected_s: Option<f64>,
    /// Per agent, start to accepted, ms.
    pub accepted_ms: Percentiles,
    pub sessions: u64,
    pub connect_failures: u64,
    pub handshake_failures: u64,
    pub cpu: CpuUse,
    /// `cosched_wire_rejected_total` by reason after registration.
    pub wire_rejected: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Submission {
    /// Each submit's round trip (program checks on every node), s.
    pub submit_s: Vec<f64>,
    /// From the first submit until every rank was launched on its agent.
    pub all_launched_s: Option<f64>,
    pub ranks_launched: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Steady {
    pub window_s: f64,
    pub slices_sent: u64,
    /// The coordinator's own `cosched status` skew summary (its clock,
    /// through its offset estimates), µs.
    pub coordinator_skew_us: Value,
    /// The agents' view (one clock: this machine's CLOCK_MONOTONIC).
    pub agents: SwitchView,
    pub switches_applied_late: u64,
    /// Heartbeats in the window: the agents' own, and the coordinator's
    /// the agents answered.
    pub agent_heartbeats_sent: u64,
    pub agent_heartbeat_replies: u64,
    pub coordinator_heartbeats_answered: u64,
    pub cpu: CpuUse,
    /// The coordinator's clock-uncertainty estimates over all nodes, µs.
    pub clock_uncertainty_us: Percentiles,
    /// |estimated offset| over all nodes at the window's end, µs: every
    /// stand-in shares the coordinator's clock, so this is the estimates'
    /// actual error.
    pub clock_offset_error_us: Percentiles,
    /// The estimated offsets themselves (agent minus coordinator), µs:
    /// positive = the agents' receive stamps (t2) run late, negative = the
    /// coordinator's (t4).
    pub clock_offset_us: Percentiles,
    /// `SliceSchedule`s the stand-ins received in the window.
    pub schedules_received: u64,
    /// Whether the stand-ins' switch timer ran SCHED_FIFO.
    pub timer_fifo: bool,
    /// Of `coordinator_heartbeats_answered`, those whose receive stamp
    /// (t2) is the kernel's (`SO_TIMESTAMPNS`).
    pub heartbeats_kernel_stamped: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Memory {
    pub rss_start_kib: u64,
    pub rss_registered_kib: u64,
    pub rss_with_jobs_kib: u64,
    pub rss_peak_kib: u64,
    /// (registered − start) / agents.
    pub per_agent_kib: f64,
    /// (with jobs − start) / agents.
    pub per_agent_with_jobs_kib: f64,
    pub coordinator_fds: usize,
    pub fd_limit: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DropRejoin {
    pub dropped: usize,
    /// From breaking the links until every dropped agent was accepted
    /// again (it waits its reconnect backoff first, as the real agent).
    pub all_accepted_s: Option<f64>,
    /// ... and until every one got a slice naming one of its jobs.
    pub all_active_s: Option<f64>,
    pub accepted_ms: Percentiles,
    pub active_ms: Percentiles,
    pub new_sessions: u64,
    pub connect_failures: u64,
    pub handshake_failures: u64,
    pub errors_from_coordinator: u64,
    /// Coordinator's connection outcomes and rejections during the phase.
    pub connections_delta: BTreeMap<String, f64>,
    pub wire_rejected_delta: BTreeMap<String, f64>,
    /// WARN/ERROR lines the coordinator logged during the phase.
    pub coordinator_warnings: usize,
    pub coordinator_errors: usize,
    pub jobs_before: BTreeMap<String, usize>,
    pub jobs_after: BTreeMap<String, usize>,
    /// Jobs running before that are not running after.
    pub jobs_lost: Vec<u32>,
    pub nodes_connected_after: u64,
    /// Switches while the links came back.
    pub agents: SwitchView,
    pub cpu: CpuUse,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: ScenarioConfig,
    pub cpus: usize,
    pub registration: Registration,
    pub submission: Submission,
    pub steady: Steady,
    pub memory: Memory,
    pub drop_rejoin: Option<DropRejoin>,
    /// Per-agent totals at the end.
    pub agents_with_switches: usize,
    pub agents_with_active_switches: usize,
}

/// The coordinator process and its files.
struct Coordinator {
    child: Child,
    keep_log: Option<PathBuf>,
    dir: tempfile::TempDir,
    socket: PathBuf,
    metrics: SocketAddr,
    listen: SocketAddr,
}

impl Coordinator {
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("coordinator.log")
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.terminate();
        // SAFETY: signalling our own child by its pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Coordinator {
    fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if let Some(path) = self.keep_log.take() {
            let _ = std::fs::copy(self.log_path(), path);
        }
    }
}

fn free_port() -> Result<u16, ScaleError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start_coordinator(config: &ScenarioConfig) -> Result<Coordinator, ScaleError> {
    let dir = tempfile::tempdir()?;
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?)
        .parse()
        .expect("address");
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()?)
        .parse()
        .expect("address");
    let socket = dir.path().join("coordinator.sock");
    let nodes: Vec<String> = (0..config.agents)
        .map(|i| format!("\"{}\"", node_name(i)))
        .collect();
    let text = format!(
        "nodes = [{}]\nlisten = \"{listen}\"\nadmin_socket = \"{}\"\nmetrics_listen = \"{metrics}\"\nsecret = \"hex:{SECRET_HEX}\"\nstate_file = \"{}\"\npolicy = \"{}\"\nslice_ms = {}\nmax_rows = {}\nheartbeat_interval_ms = {}\nheartbeat_timeout_ms = {}\nswitch_lead_us = {}\nschedule_ahead = {}\n",
        nodes.join(", "),
        socket.display(),
        dir.path().join("state.json").display(),
        config.policy,
        config.slice_ms,
        config.max_rows,
        config.heartbeat_interval_ms,
        config.heartbeat_timeout_ms,
        config.switch_lead_us,
        config.schedule_ahead,
    );
    let text = if config.paired_schedule_ahead {
        text + "paired_schedule_ahead = true\n"
    } else {
        text
    };
    let text = if config.one_gs_schedule_ahead {
        text + "one_gs_schedule_ahead = true\n"
    } else {
        text
    };
    let config_path = dir.path().join("coordinator.toml");
    std::fs::write(&config_path, text)?;
    let log = std::fs::File::create(dir.path().join("coordinator.log"))?;
    let mut command = Command::new(&config.coordinator_bin);
    command
        .arg("--config")
        .arg(&config_path)
        .env("COSCHED_LOG", &config.coordinator_log)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if let Some((cpu, _)) = config.pin {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            });
        }
    }
    let child = command.spawn().map_err(|error| {
        ScaleError::Msg(format!(
            "starting {}: {error}",
            config.coordinator_bin.display()
        ))
    })?;
    let coordinator = Coordinator {
        child,
        keep_log: config.keep_log.clone(),
        dir,
        socket,
        metrics,
        listen,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if admin::status(&coordinator.socket).is_ok() {
            return Ok(coordinator);
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(coordinator.log_path()).unwrap_or_default();
            return Err(ScaleError::Msg(format!(
                "the coordinator did not come up:\n{log}"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// CPU counters at one instant.
#[derive(Clone, Copy)]
struct CpuMark {
    at: Instant,
    coordinator: f64,
    harness: f64,
    machine_busy: f64,
}

fn cpu_mark(pid: u32) -> CpuMark {
    CpuMark {
        at: Instant::now(),
        coordinator: procfs::process_cpu_seconds(pid).unwrap_or(0.0),
        harness: procfs::process_cpu_seconds(std::process::id()).unwrap_or(0.0),
        machine_busy: procfs::machine_cpu_seconds().map_or(0.0, |(busy, _)| busy),
    }
}

fn cpu_since(start: CpuMark, pid: u32) -> CpuUse {
    let end = cpu_mark(pid);
    let seconds = end.at.duration_since(start.at).as_secs_f64().max(1e-9);
    let percent = |delta: f64| 100.0 * delta / seconds;
    let coordinator = percent(end.coordinator - start.coordinator);
    let harness = percent(end.harness - start.harness);
    let machine = percent(end.machine_busy - start.machine_busy);
    CpuUse {
        seconds,
        coordinator_percent: coordinator,
        harness_percent: harness,
        machine_busy_percent: machine,
        outside_percent: (machine - coordinator - harness).max(0.0),
    }
}

/// Polls `done` every 10 ms until it holds or `timeout` passes.
fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn states(jobs: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for job in jobs {
        let state = job["state"].as_str().unwrap_or("?").to_string();
        *counts.entry(state).or_insert(0) += 1;
    }
    counts
}

fn labelled(text: &str, name: &str) -> BTreeMap<String, f64> {
    admin::metric_series(text, name).into_iter().collect()
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(label, value)| {
            (
                label.clone(),
                value - before.get(label).copied().unwrap_or(0.0),
            )
        })
        .filter(|(_, value)| *value != 0.0)
        .collect()
}

fn log_levels(path: &Path, from: u64) -> (usize, usize, u64) {
    let text = std::fs::read(path).unwrap_or_default();
    let len = text.len() as u64;
    let tail = String::from_utf8_lossy(&text[(from as usize).min(text.len())..]).to_string();
    let warnings = tail.lines().filter(|line| line.contains(" WARN ")).count();
    let errors = tail.lines().filter(|line| line.contains(" ERROR ")).count();
    (warnings, errors, len)
}

fn ms_since(start_ns: u64, values: impl Iterator<Item = Option<u64>>) -> (Vec<f64>, bool) {
    let mut all = true;
    let ms = values
        .filter_map(|value| {
            all &= value.is_some();
            value.map(|ns| ns.saturating_sub(start_ns) as f64 / 1e6)
        })
        .collect();
    (ms, all)
}

/// Runs the scenario; `progress` gets a line per phase.
pub fn run(config: ScenarioConfig, mut progress: impl FnMut(&str)) -> Result<Report, ScaleError> {
    let fd_limit = procfs::raise_fd_limit(2 * config.agents as u64 + 4096);
    if let Some((_, harness_cpu)) = config.pin {
        procfs::pin_to_cpu(harness_cpu)?;
    }
    let coordinator = start_coordinator(&config)?;
    let pid = coordinator.pid();
    let phase_timeout = Duration::from_secs_f64(config.phase_timeout_s);
    let mut memory = Memory {
        rss_start_kib: procfs::status_kib(pid, "VmRSS").unwrap_or(0),
        fd_limit,
        ..Memory::default()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads.max(1))
        .enable_all()
        .build()?;
    let secret = SharedSecret::parse(&format!("hex:{SECRET_HEX}"))
        .map_err(|error| ScaleError::Msg(error.to_string()))?;
    let agent_config = AgentConfig {
        coordinator: coordinator.listen,
        secret,
        heartbeat_interval: Duration::from_millis(config.heartbeat_interval_ms),
        heartbeat_timeout: Duration::from_millis(config.heartbeat_timeout_ms),
        reconnect_min: Duration::from_millis(config.reconnect_min_ms),
        reconnect_max: Duration::from_millis(config.reconnect_max_ms),
        utilisation: config.utilisation_percent.map(|percent| percent / 100.0),
    };

    // Registration: every stand-in at once.
    progress(&format!("registering {} agents", config.agents));
    let mark = cpu_mark(pid);
    let start_ns = monotonic_ns();
    let started = Instant::now();
    let fleet = Fleet::start(
        &runtime,
        config.agents,
        agent_config,
        config.timer_fifo_priority,
    )?;
    let stats = fleet.stats.clone();
    let all_accepted = wait_for(phase_timeout, || {
        stats.agents().iter().all(|seen| seen.accepted_ns.is_some())
    });
    let mut registration = Registration::default();
    let (accepted, _) = ms_since(start_ns, stats.agents().iter().map(|seen| seen.accepted_ns));
    if all_accepted {
        registration.all_accepted_s = accepted.iter().copied().reduce(f64::max).map(|ms| ms / 1e3);
    }
    registration.accepted_ms = Percentiles::of(&mut accepted.clone());
    let connected = wait_for(phase_timeout, || {
        admin::status(&coordinator.socket)
            .is_ok_and(|status| status["nodes_connected"].as_u64() == Some(config.agents as u64))
    });
    if connected {
        registration.coordinator_all_connected_s = Some(started.elapsed().as_secs_f64());
    }
    registration.cpu = cpu_since(mark, pid);
    registration.sessions = stats
        .agents()
        .iter()
        .map(|seen| u64::from(seen.sessions))
        .sum();
    registration.connect_failures = Counters::get(&stats.counters.connect_failures);
    registration.handshake_failures = Counters::get(&stats.counters.handshake_failures);
    let metrics_text = admin::scrape(coordinator.metrics).unwrap_or_default();
    registration.wire_rejected = labelled(&metrics_text, "cosched_wire_rejected_total");
    memory.rss_registered_kib = procfs::status_kib(pid, "VmRSS").unwrap_or(0);
    progress(&format!(
        "registered: all accepted after {:?} s, coordinator saw all after {:?} s",
        registration.all_accepted_s, registration.coordinator_all_connected_s
    ));
    if !(all_accepted && connected) {
        fleet.stop(&runtime);
        return Err(ScaleError::Msg(format!(
            "not every agent registered within {phase_timeout:?}: {registration:?}"
        )));
    }

    // Jobs spanning many nodes.
    let mut submission = Submission::default();
    let submitted = Instant::now();
    for job in 0..config.jobs {
        let one = Instant::now();
        admin::submit(
            &coordinator.socket,
            &format!("scale{job}"),
            config.job_nodes,
            phase_timeout,
        )?;
        submission.submit_s.push(one.elapsed().as_secs_f64());
    }
    let wanted = (config.jobs * config.job_nodes) as u64;
    let launched = wait_for(phase_timeout, || {
        stats.agents().iter().map(|seen| seen.launches).sum::<u64>() >= wanted
    });
    if launched {
        submission.all_launched_s = Some(submitted.elapsed().as_secs_f64());
    }
    submission.ranks_launched = stats.agents().iter().map(|seen| seen.launches).sum();
    progress(&format!(
        "{} jobs of {} nodes submitted ({:?} s each), all launched after {:?} s",
        config.jobs, config.job_nodes, submission.submit_s, submission.all_launched_s
    ));
    std::thread::sleep(Duration::from_secs_f64(config.warmup_s));
    memory.rss_with_jobs_kib = procfs::status_kib(pid, "VmRSS").unwrap_or(0);

    // Steady slices and heartbeats.
    progress(&format!("measuring {} s of slices", config.window_s));
    let counters = &stats.counters;
    let before = [
        Counters::get(&counters.heartbeats_sent),
        Counters::get(&counters.heartbeat_replies),
        Counters::get(&counters.coordinator_heartbeats_answered),
        Counters::get(&counters.switches_applied_late),
        Counters::get(&counters.schedules),
        Counters::get(&counters.heartbeats_kernel_stamped),
    ];
    let slices_before = admin::status(&coordinator.socket)?["slices"]
        .as_u64()
        .unwrap_or(0);
    stats.start_recording();
    let mark = cpu_mark(pid);
    std::thread::sleep(Duration::from_secs_f64(config.window_s));
    let cpu = cpu_since(mark, pid);
    stats.stop_recording();
    let status = admin::status(&coordinator.socket)?;
    let skew = &status["skew"];
    let nodes = admin::call(
        &coordinator.socket,
        &serde_json::json!({"op": "nodes"}),
        Duration::from_secs(30),
    )?;
    let mut uncertainty: Vec<f64> = nodes["nodes"]["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|node| node["clock_uncertainty_ns"].as_f64())
                .map(|ns| ns / 1e3)
                .collect()
        })
        .unwrap_or_default();
    let mut offsets: Vec<f64> = nodes["nodes"]["nodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|node| node["clock_offset_ns"].as_f64())
                .map(|ns| ns / 1e3)
                .collect()
        })
        .unwrap_or_default();
    let mut offset_error: Vec<f64> = offsets.iter().map(|us| us.abs()).collect();
    let us = |key: &str| skew[key].as_f64().map(|s| s * 1e6);
    let steady = Steady {
        window_s: cpu.seconds,
        slices_sent: status["slices"].as_u64().unwrap_or(0) - slices_before,
        coordinator_skew_us: serde_json::json!({
            "samples": skew["samples"],
            "p50": us("p50_s"),
            "p99": us("p99_s"),
            "max": us("max_s"),
        }),
        agents: stats.switch_view(),
        switches_applied_late: Counters::get(&counters.switches_applied_late) - before[3],
        agent_heartbeats_sent: Counters::get(&counters.heartbeats_sent) - before[0],
        agent_heartbeat_replies: Counters::get(&counters.heartbeat_replies) - before[1],
        coordinator_heartbeats_answered: Counters::get(&counters.coordinator_heartbeats_answered)
            - before[2],
        cpu,
        clock_uncertainty_us: Percentiles::of(&mut uncertainty),
        clock_offset_error_us: Percentiles::of(&mut offset_error),
        clock_offset_us: Percentiles::of(&mut offsets),
        schedules_received: Counters::get(&counters.schedules) - before[4],
        timer_fifo: Counters::get(&counters.timer_fifo) > 0,
        heartbeats_kernel_stamped: Counters::get(&counters.heartbeats_kernel_stamped) - before[5],
    };
    progress(&format!(
        "steady: coordinator skew {}, agents' skew p99 {:.0} µs (told-instant spread p99 {:.0} µs), margin min {:.0} µs, coordinator CPU {:.0} %",
        steady.coordinator_skew_us,
        steady.agents.skew_us.p99,
        steady.agents.instant_spread_us.p99,
        steady.agents.margin_us.min,
        steady.cpu.coordinator_percent
    ));

    // Links broken at once.
    let drop_rejoin = if config.drop_agents > 0 {
        Some(drop_and_rejoin(
            &config,
            &coordinator,
            &fleet,
            phase_timeout,
            &mut progress,
        )?)
    } else {
        None
    };

    memory.rss_peak_kib = procfs::status_kib(pid, "VmHWM").unwrap_or(0);
    memory.coordinator_fds = procfs::open_fds(pid).unwrap_or(0);
    let agents = config.agents.max(1) as f64;
    memory.per_agent_kib =
        (memory.rss_registered_kib as f64 - memory.rss_start_kib as f64) / agents;
    memory.per_agent_with_jobs_kib =
        (memory.rss_with_jobs_kib as f64 - memory.rss_start_kib as f64) / agents;
    let seen = stats.agents();
    let report = Report {
        cpus: procfs::online_cpus(),
        registration,
        submission,
        steady,
        memory,
        drop_rejoin,
        agents_with_switches: seen.iter().filter(|s| s.switches > 0).count(),
        agents_with_active_switches: seen.iter().filter(|s| s.active_switches > 0).count(),
        config,
    };
    fleet.stop(&runtime);
    coordinator.stop();
    Ok(report)
}

fn drop_and_rejoin(
    config: &ScenarioConfig,
    coordinator: &Coordinator,
    fleet: &Fleet,
    phase_timeout: Duration,
    progress: &mut impl FnMut(&str),
) -> Result<DropRejoin, ScaleError> {
    let stats = &fleet.stats;
    let pid = coordinator.pid();
    let count = config.drop_agents.min(fleet.len());
    let step = fleet.len() / count.max(1);
    let dropped: Vec<usize> = (0..count).map(|i| i * step).collect();
    progress(&format!("breaking {count} links at once"));
    let jobs_before = admin::jobs(&coordinator.socket, true)?;
    let running_before: Vec<u32> = jobs_before
        .iter()
        .filter(|job| job["state"] == "running")
        .filter_map(|job| job["id"].as_u64().map(|id| id as u32))
        .collect();
    let text_before = admin::scrape(coordinator.metrics)?;
    let (_, _, log_offset) = log_levels(&coordinator.log_path(), u64::MAX);
    let sessions_before: Vec<u32> = dropped.iter().map(|&a| stats.agent(a).sessions).collect();
    let failures_before = [
        Counters::get(&stats.counters.connect_failures),
        Counters::get(&stats.counters.handshake_failures),
        Counters::get(&stats.counters.errors_from_coordinator),
    ];
    stats.start_recording();
    let mark = cpu_mark(pid);
    let start_ns = monotonic_ns();
    fleet.drop_links(&dropped);
    let back = |all_of: fn(&crate::stats::AgentSeen) -> Option<u64>| {
        dropped
            .iter()
            .zip(&sessions_before)
            .all(|(&agent, &sessions)| {
                let seen = stats.agent(agent);
                seen.sessions > sessions && all_of(&seen).is_some()
            })
    };
    let accepted = wait_for(phase_timeout, || back(|seen| seen.accepted_ns));
    let active = wait_for(phase_timeout, || back(|seen| seen.first_active_switch_ns));
    // Let the slices settle before judging.
    std::thread::sleep(Duration::from_millis(500));
    let cpu = cpu_since(mark, pid);
    stats.stop_recording();
    let seen: Vec<_> = dropped.iter().map(|&agent| stats.agent(agent)).collect();
    let (accepted_ms, _) = ms_since(start_ns, seen.iter().map(|seen| seen.accepted_ns));
    let (active_ms, _) = ms_since(
        start_ns,
        seen.iter().map(|seen| seen.first_active_switch_ns),
    );
    let text_after = admin::scrape(coordinator.metrics)?;
    let (warnings, errors, _) = log_levels(&coordinator.log_path(), log_offset);
    let jobs_after = admin::jobs(&coordinator.socket, true)?;
    let jobs_lost = running_before
        .iter()
        .copied()
        .filter(|id| {
            !jobs_after
                .iter()
                .any(|job| job["id"].as_u64() == Some(u64::from(*id)) && job["state"] == "running")
        })
        .collect();
    let status = admin::status(&coordinator.socket)?;
    let result = DropRejoin {
        dropped: count,
        all_accepted_s: accepted
            .then(|| {
                accepted_ms
                    .iter()
                    .copied()
                    .reduce(f64::max)
                    .map(|ms| ms / 1e3)
            })
            .flatten(),
        all_active_s: active
            .then(|| {
                active_ms
                    .iter()
                    .copied()
                    .reduce(f64::max)
                    .map(|ms| ms / 1e3)
            })
            .flatten(),
        accepted_ms: Percentiles::of(&mut accepted_ms.clone()),
        active_ms: Percentiles::of(&mut active_ms.clone()),
        new_sessions: seen
            .iter()
            .zip(&sessions_before)
            .map(|(seen, before)| u64::from(seen.sessions - before))
            .sum(),
        connect_failures: Counters::get(&stats.counters.connect_failures) - failures_before[0],
        handshake_failures: Counters::get(&stats.counters.handshake_failures) - failures_before[1],
        errors_from_coordinator: Counters::get(&stats.counters.errors_from_coordinator)
            - failures_before[2],
        connections_delta: delta(
            &labelled(&text_after, "cosched_agent_connections_total"),
            &labelled(&text_before, "cosched_agent_connections_total"),
        ),
        wire_rejected_delta: delta(
            &labelled(&text_after, "cosched_wire_rejected_total"),
            &labelled(&text_before, "cosched_wire_rejected_total"),
        ),
        coordinator_warnings: warnings,
        coordinator_errors: errors,
        jobs_before: states(&jobs_before),
        jobs_after: states(&jobs_after),
        jobs_lost,
        nodes_connected_after: status["nodes_connected"].as_u64().unwrap_or(0),
        agents: stats.switch_view(),
        cpu,
    };
    progress(&format!(
        "rejoined: all accepted after {:?} s, all back in slices after {:?} s, jobs after {:?}",
        result.all_accepted_s, result.all_active_s, result.jobs_after
    ));
    Ok(result)
}

/// Writes `report` as pretty JSON to `path`.
pub fn write_report(report: &Report, path: &Path) -> Result<(), ScaleError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::File::create(path)?;
    serde_json::to_writer_pretty(&mut file, report)?;
    file.write_all(b"\n")?;
    Ok(())
}
