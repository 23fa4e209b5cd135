//! The async edge of the agent: sockets, timers, signals, child processes and
//! the config watcher, all feeding one [`Engine`] owned by the main loop.
use std::{
    os::fd::{AsRawFd, RawFd},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use cosched_agent_common::{Settings, offcpu_arrival};
use cosched_proto::{
    control::{JobState, Reply, Request, Response},
    job::{JobId, JobSpec},
};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    sync::{mpsc, oneshot},
    time::Instant,
};

use crate::{
    config::Config,
    control,
    coord::{self, CoordNode, CoordReceivers},
    ebpf::Probes,
    engine::Engine,
    kernel::linux::Linux,
    launch,
    restore::RestoreLedger,
};

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system) of the agent process, seconds.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn online_cpus() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() as u32)
        .max(
            // available_parallelism honours our own affinity; count all CPUs.
            // SAFETY: plain sysconf.
            unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as u32,
        )
}

/// Pins the calling thread (and threads created after) to `cpus`.
pub fn pin_to(cpus: &[u32]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: index checked by the config validation (< MAX_CPUS <= 1024).
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: valid set.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

struct Fd(RawFd);
impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

enum Internal {
    Reaped {
        job: JobId,
        pid: u32,
        code: Option<i32>,
        signal: Option<i32>,
    },
    ConfigChanged,
}

struct Waiter {
    job: JobId,
    deadline: Instant,
    reply: oneshot::Sender<Response>,
}

struct Daemon {
    engine: Engine<Linux>,
    config_path: PathBuf,
    internal: mpsc::Sender<Internal>,
    waiters: Vec<Waiter>,
    /// The link to the coordinator, when configured.
    coord: Option<CoordNode>,
    /// The local policy of the config file (the coordinator may override it
    /// while connected).
    file_policy: cosched_policy::local::PolicyKind,
}

pub fn journal_path(cfg: &Config) -> PathBuf {
    cfg.state_dir.join("restore.json")
}

fn settings_for(cfg: &Config) -> Settings {
    Settings {
        wake_on_offcpu_arrival: match (
            cfg.policy.reacts_to_offcpu_arrivals(),
            cfg.dcs.boost_computing,
        ) {
            (false, _) => offcpu_arrival::OFF,
            (true, false) => offcpu_arrival::WAITING,
            (true, true) => offcpu_arrival::READY,
        },
        wake_on_spin_start: 0,
        wake_batch_bytes: cfg.ebpf.wake_batch_bytes,
        reserved: 0,
    }
}

/// Runs the agent's own thread at SCHED_FIFO `priority` while a policy acts
/// or gang slices are enforced (so it preempts the jobs to react and to
/// switch on time), back to SCHED_OTHER otherwise. Reset on fork, so the
/// processes the agent launches never inherit it.
fn set_own_priority(cfg: &Config, gang: bool) {
    use crate::kernel::{SchedAttr, SchedPolicy, sched_attr::FLAG_RESET_ON_FORK};
    let active = cfg.policy != cosched_policy::local::PolicyKind::Local || gang;
    let mut attr = if active && cfg.agent_priority > 0 {
        SchedAttr::with_policy(SchedPolicy::Fifo, 0, cfg.agent_priority)
    } else {
        SchedAttr::other(0)
    };
    attr.flags = FLAG_RESET_ON_FORK;
    // tid 0 = the calling thread, which runs the whole event loop.
    if let Err(e) = crate::kernel::linux::sched_setattr(0, &attr) {
        tracing::warn!("cannot set the agent's own priority: {e}");
    }
}

/// Runs the agent until SIGTERM/SIGINT; restores every task on the way out.
pub async fn run(config_path: PathBuf, cfg: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("creating state dir {}", cfg.state_dir.display()))?;
    let demote_cgroups = crate::cpu_group::start(cfg.demote_cpu_cgroup.as_deref())?;
    let probes = Probes::load(settings_for(&cfg))?;
    let mut kernel = Linux::new(probes);

    // A previous agent that crashed or was killed left its journal behind:
    // put those tasks back before anything else.
    let mut ledger = RestoreLedger::load(&journal_path(&cfg))?;
    if !ledger.is_empty() {
        let r = ledger.restore_all(&mut kernel);
        tracing::warn!(
            restored = r.restored,
            gone = r.gone,
            failed = r.failed.len(),
            "restored tasks left changed by a previous agent"
        );
    }
    // From here on the agent may change tasks: start the guardian that undoes
    // those changes if the agent dies without doing it itself.
    let _guardian = crate::guardian::spawn(&journal_path(&cfg))?;
    let engine = Engine::new(
        kernel,
        cfg,
        ledger,
        &config_path.display().to_string(),
        online_cpus(),
    );

    if let Some(prepared) = &demote_cgroups {
        crate::cpu_group::export(engine.metrics.registry(), prepared);
    }
    let cfg = &engine.cfg;
    let metrics_listener = tokio::net::TcpListener::bind(cfg.metrics_listen)
        .await
        .with_context(|| format!("binding metrics endpoint {}", cfg.metrics_listen))?;
    let control_listener = control::bind(&cfg.control_socket)?;
    let control_path = cfg.control_socket.clone();
    tokio::spawn(cosched_metrics_http::serve(
        metrics_listener,
        engine.metrics.registry().clone(),
        "cosched-agent: see /metrics\n",
        cfg.limits.metrics,
    ));
    let (calls_tx, mut calls) = mpsc::channel::<control::Call>(64);
    tokio::spawn(control::serve(
        control_listener,
        calls_tx,
        cfg.limits.control,
    ));

    let (internal_tx, mut internal) = mpsc::channel::<Internal>(256);
    let _watcher = watch_config(&config_path, internal_tx.clone())
        .inspect_err(|e| tracing::warn!("config file watching disabled: {e:#}"))
        .ok();

    // SAFETY: the ring buffer fd stays open as long as the engine (which owns
    // the probes) lives, which outlives this AsyncFd; it is only read through aya.
    let events_fd = unsafe {
        AsyncFd::register_with_interest(
            Fd(engine.k.probes().events_fd()),
            tokio::io::Interest::READABLE,
        )
    }
    .map_err(|e| anyhow::anyhow!("registering the event ring buffer: {e}"))?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sighup = signal(SignalKind::hangup())?;

    let file_policy = engine.cfg.policy;
    let mut d = Daemon {
        engine,
        config_path,
        internal: internal_tx,
        waiters: Vec::new(),
        coord: None,
        file_policy,
    };
    let (mut link_rx, mut switch_rx) = match d.engine.cfg.coordinator.clone() {
        Some(coordinator) => {
            let (node, receivers) = CoordNode::start(
                &d.engine.cfg,
                &coordinator,
                d.engine.node_cpus(),
                d.engine.metrics.registry(),
            )
            .context("starting the coordinator link")?;
            tracing::info!(coordinator = %coordinator.address, "joining the coordinator");
            d.coord = Some(node);
            let CoordReceivers { link, switches } = receivers;
            (Some(link), Some(switches))
        }
        None => (None, None),
    };
    set_own_priority(&d.engine.cfg, false);
    let mut poll_every = Duration::from_millis(d.engine.cfg.ebpf.poll_interval_ms);
    let mut ticker = tokio::time::interval(poll_every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tracing::info!(
        node = %d.engine.cfg.node,
        policy = %d.engine.cfg.policy,
        cpus = ?d.engine.node_cpus(),
        metrics = %d.engine.cfg.metrics_listen,
        control = %control_path.display(),
        "cosched agent running"
    );

    loop {
        let policy_deadline = d
            .engine
            .next_policy_tick()
            .map(|t| Instant::now() + Duration::from_nanos(t.saturating_sub(monotonic_ns())));
        let policy_timer = async move {
            match policy_deadline {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = sighup.recv() => d.reload(),
            Some((req, reply)) = calls.recv() => d.handle(req, reply),
            Some(msg) = internal.recv() => match msg {
                Internal::Reaped { job, pid, code, signal } => {
                    tracing::info!(job, pid, ?code, ?signal, "job process exited");
                    d.engine.process_reaped(pid, code, signal);
                    d.poll();
                }
                Internal::ConfigChanged => d.reload(),
            },
            guard = events_fd.readable() => {
                let mut guard = guard?;
                d.engine.metrics.event_wakeups.inc();
                d.engine.handle_events(monotonic_ns());
                // Records that come after this point are taken by the drain
                // at the end of the loop, after the readiness is cleared.
                guard.clear_ready();
            }
            _ = policy_timer => d.engine.policy_tick(),
            Some(token) = recv_opt(&mut switch_rx) => d.on_switch_due(token),
            Some(event) = recv_opt(&mut link_rx) => d.on_link_event(event),
            _ = ticker.tick() => {
                d.poll();
                let want = Duration::from_millis(d.engine.cfg.ebpf.poll_interval_ms);
                if want != poll_every {
                    poll_every = want;
                    ticker = tokio::time::interval(poll_every);
                    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                }
            }
        }
        // Whatever woke the loop, the ring is read once more before it
        // sleeps: records queued without a wakeup (forks, exits, batches)
        // and records that came while a branch ran, after the readiness was
        // last cleared, are taken now rather than at the next tick. Reading
        // an empty ring costs no system call.
        d.engine.handle_events(monotonic_ns());
        // A tick already due runs now, whichever branch woke the loop: under
        // a stream of eBPF wakeups (one every ~80 µs with FCS) the timer
        // branch was re-armed on every pass and lost to them for 20–30 ms at
        // a time (measured: 34–48 ticks more than 20 ms late in one bench
        // cell of FCS, none with this check).
        if d.engine
            .next_policy_tick()
            .is_some_and(|due| due <= monotonic_ns())
        {
            d.engine.policy_tick();
        }
    }

    tracing::info!("shutting down: restoring every task the agent changed");
    let r = d.engine.shutdown();
    if !r.failed.is_empty() {
        tracing::error!(failed = ?r.failed, "some tasks could not be restored");
    }
    crate::cpu_group::finish(d.engine.cfg.demote_cpu_cgroup.as_deref());
    tracing::info!(restored = r.restored, gone = r.gone, "shutdown complete");
    let _ = std::fs::remove_file(&control_path);
    Ok(())
}

/// The next item of an optional channel; never, without one.
async fn recv_opt<T>(receiver: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// Watches the config file's directory (editors replace files by rename) and
/// reports changes to the file.
fn watch_config(
    path: &Path,
    tx: mpsc::Sender<Internal>,
) -> anyhow::Result<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher as _};
    let path = std::fs::canonicalize(path)?;
    let dir = path
        .parent()
        .context("config has no parent directory")?
        .to_path_buf();
    let name = path.file_name().map(|n| n.to_os_string());
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && (ev.kind.is_modify() || ev.kind.is_create())
            && ev
                .paths
                .iter()
                .any(|p| p.file_name().map(|n| n.to_os_string()) == name)
        {
            let _ = tx.try_send(Internal::ConfigChanged);
        }
    })?;
    w.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(w)
}

impl Daemon {
    fn poll(&mut self) {
        let finished = self.engine.poll(monotonic_ns(), own_cpu_seconds());
        for &job in &finished {
            tracing::info!(job, "job finished");
        }
        if let Some(coord) = &mut self.coord {
            coord.jobs_finished(&self.engine, &finished);
        }
        self.answer_waiters();
    }

    fn reload(&mut self) {
        // Several file events arrive for one save; they all read the same file.
        let new = Config::load(&self.config_path);
        let file_policy = new.as_ref().ok().map(|c| c.policy);
        // The coordinator's policy stays in force while it is connected.
        let override_policy = self.coord.as_ref().and_then(CoordNode::local_policy);
        let new = new.map(|mut c| {
            if let Some(policy) = override_policy {
                c.policy = policy;
            }
            c
        });
        let outcome = self.engine.reload(new);
        if outcome.accepted
            && let Some(policy) = file_policy
        {
            self.file_policy = policy;
        }
        self.after_policy_change(outcome.accepted);
    }

    /// Applies what a policy change needs beyond the engine: the eBPF
    /// settings and the agent's own priority.
    fn after_policy_change(&mut self, accepted: bool) {
        let gang = self.coord.as_ref().is_some_and(CoordNode::gang_active);
        set_own_priority(&self.engine.cfg, gang);
        if accepted
            && let Err(e) = self
                .engine
                .k
                .probes_mut()
                .set_settings(settings_for(&self.engine.cfg))
        {
            tracing::warn!("updating eBPF settings: {e}");
        }
    }

    /// Runs the local policy the coordinator asks for (or the config's).
    fn apply_coordinator_policy(&mut self) {
        let wanted = self
            .coord
            .as_ref()
            .and_then(CoordNode::local_policy)
            .unwrap_or(self.file_policy);
        if wanted == self.engine.cfg.policy {
            self.after_policy_change(false);
            return;
        }
        let mut cfg = self.engine.cfg.clone();
        cfg.policy = wanted;
        let outcome = self.engine.reload(Ok(cfg));
        tracing::info!(policy = %wanted, accepted = outcome.accepted, "local policy set for the coordinator");
        self.after_policy_change(outcome.accepted);
    }

    fn on_link_event(&mut self, event: coord::link::LinkEvent) {
        let Some(coord) = &mut self.coord else {
            return;
        };
        let actions = coord.on_link_event(&mut self.engine, event);
        self.run_coordinator_actions(actions);
    }

    fn on_switch_due(&mut self, token: u64) {
        if let Some(coord) = &mut self.coord {
            coord.on_switch_due(&mut self.engine, token);
        }
    }

    fn run_coordinator_actions(&mut self, actions: Vec<coord::Action>) {
        for action in actions {
            match action {
                coord::Action::Launch(spec) => {
                    let (job, rank) = (spec.job_id, spec.rank);
                    // A finished job of the same id (a coordinator that lost
                    // its state numbers jobs afresh) gives way to the new one.
                    if self
                        .engine
                        .reg
                        .job(job)
                        .is_some_and(|j| j.state != JobState::Running)
                    {
                        let _ = self.engine.forget_job(job);
                    }
                    let result = self.launch(*spec).map(|_| ()).map_err(|e| format!("{e:#}"));
                    if let Err(reason) = &result {
                        tracing::warn!(job, rank, %reason, "coordinator launch failed");
                    }
                    if let Some(coord) = &mut self.coord {
                        coord.launched(job, rank, result);
                    }
                }
                coord::Action::Cancel(job) => {
                    self.kill(job);
                }
                coord::Action::PolicyChanged => self.apply_coordinator_policy(),
            }
        }
    }

    /// Kills a job's processes (its cgroup when there is one).
    fn kill(&mut self, job_id: JobId) -> bool {
        let Some(j) = self.engine.reg.job(job_id) else {
            return false;
        };
        let cg = self
            .engine
            .cfg
            .cgroup_root
            .as_ref()
            .map(|r| r.join(format!("job-{}-r{}", j.id, j.rank)));
        launch::kill_job(cg.as_deref(), &j.pids);
        true
    }

    fn answer_waiters(&mut self) {
        let now = Instant::now();
        let mut keep = Vec::new();
        for w in self.waiters.drain(..) {
            let job = self.engine.reg.job(w.job);
            let done = job.is_none_or(|j| j.state != JobState::Running);
            if done || now >= w.deadline || w.reply.is_closed() {
                let resp = match job {
                    None => Response::Error(format!("unknown job {}", w.job)),
                    Some(j) if done => Response::Ok(Reply::Job {
                        job: self.engine.reg.info(j),
                    }),
                    Some(_) => Response::Error(format!("timed out waiting for job {}", w.job)),
                };
                let _ = w.reply.send(resp);
            } else {
                keep.push(w);
            }
        }
        self.waiters = keep;
    }

    fn handle(&mut self, req: Request, reply: oneshot::Sender<Response>) {
        let resp = match req {
            Request::Launch { spec } => self.launch(spec).map_or_else(
                |e| Response::Error(format!("{e:#}")),
                |(job_id, pid)| Response::Ok(Reply::Launched { job_id, pid }),
            ),
            Request::Adopt {
                job_id,
                name,
                pids,
                sched,
            } => match self.engine.adopt(job_id, &name, &pids, sched) {
                Ok(tasks) => Response::Ok(Reply::Adopted { job_id, tasks }),
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Jobs => Response::Ok(Reply::Jobs {
                jobs: self
                    .engine
                    .reg
                    .jobs()
                    .map(|j| self.engine.reg.info(j))
                    .collect(),
            }),
            Request::Wait { job_id, timeout_ms } => {
                if self.engine.reg.job(job_id).is_none() {
                    Response::Error(format!("unknown job {job_id}"))
                } else {
                    self.waiters.push(Waiter {
                        job: job_id,
                        deadline: Instant::now() + Duration::from_millis(timeout_ms),
                        reply,
                    });
                    self.poll();
                    return;
                }
            }
            Request::Cancel { job_id } => {
                if self.kill(job_id) {
                    Response::Ok(Reply::Done)
                } else {
                    Response::Error(format!("unknown job {job_id}"))
                }
            }
            Request::Forget { job_id } => {
                let rank = self.engine.reg.job(job_id).map(|j| j.rank);
                match self.engine.forget_job(job_id) {
                    Ok(()) => {
                        if let (Some(root), Some(rank)) = (&self.engine.cfg.cgroup_root, rank) {
                            launch::remove_cgroup(&root.join(format!("job-{job_id}-r{rank}")));
                        }
                        Response::Ok(Reply::Done)
                    }
                    Err(e) => Response::Error(e.to_string()),
                }
            }
            Request::Status => Response::Ok(Reply::Status {
                status: self.engine.status(),
            }),
            Request::Reload => {
                self.reload();
                match self.engine.status().last_reload {
                    Some(outcome) => Response::Ok(Reply::Reloaded { outcome }),
                    None => Response::Error("no reload happened".into()),
                }
            }
        };
        let _ = reply.send(resp);
    }

    fn launch(&mut self, spec: JobSpec) -> anyhow::Result<(JobId, u32)> {
        spec.validate()
            .map_err(|e| anyhow::anyhow!("invalid job spec: {e}"))?;
        self.engine
            .reserve_job(spec.job_id, &spec.name, spec.rank, spec.sched)?;
        match self.start_gated(&spec) {
            Ok(pid) => Ok((spec.job_id, pid)),
            Err(e) => {
                self.engine.unreserve_job(spec.job_id);
                Err(e)
            }
        }
    }

    fn start_gated(&mut self, spec: &JobSpec) -> anyhow::Result<u32> {
        let cfg = &self.engine.cfg;
        let mut g = launch::spawn_gated(
            spec,
            &cfg.node,
            &self.engine.node_cpus(),
            &cfg.state_dir.join("jobs"),
        )?;
        let cgroup = cfg
            .cgroup_root
            .as_ref()
            .map(|r| launch::job_cgroup(r, spec));
        let setup = (|| {
            if let Some(cg) = &cgroup {
                launch::enter_cgroup(cg, g.pid)?;
            }
            self.engine.manage_process(spec.job_id, g.pid)?;
            self.engine.mark_launched(g.pid);
            anyhow::Ok(())
        })();
        if let Err(e) = setup {
            launch::kill_job(cgroup.as_deref(), &[g.pid]);
            return Err(e);
        }
        if let Some(j) = self.engine.reg.job_mut(spec.job_id) {
            j.stdout = Some(g.stdout.display().to_string());
            j.stderr = Some(g.stderr.display().to_string());
        }
        g.release().context("releasing the job's gate")?;
        let (pid, job, tx) = (g.pid, spec.job_id, self.internal.clone());
        let mut child = g.child;
        tokio::spawn(async move {
            use std::os::unix::process::ExitStatusExt as _;
            let (code, signal) = match child.wait().await {
                Ok(st) => (st.code(), st.signal()),
                Err(_) => (None, None),
            };
            let _ = tx
                .send(Internal::Reaped {
                    job,
                    pid,
                    code,
                    signal,
                })
                .await;
        });
        tracing::info!(job = spec.job_id, rank = spec.rank, pid, command = %spec.command, "launched");
        Ok(pid)
    }
}
