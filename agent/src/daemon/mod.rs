//! The async edge of the agent: sockets, timers, signals, child processes and
//! the config watcher, all feeding one [`Engine`] owned by the main loop.
//!
//! - this file: start-up, the event loop and shutdown;
//! - [`handlers`]: what each request, reaped process and coordinator action
//!   does (unit-tested against the fake kernel).
mod handlers;
#[cfg(test)]
mod tests;
use std::{
    os::fd::{AsRawFd, RawFd},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
    sync::mpsc,
    time::Instant,
};

pub use handlers::{Daemon, Internal};

use crate::{
    config::Config,
    control,
    coord::{CoordNode, CoordReceivers},
    ebpf::Probes,
    engine::Engine,
    kernel::{Kernel, linux::Linux},
    restore::RestoreLedger,
};

/// CLOCK_MONOTONIC in ns (the wire's and the eBPF programs' clock).
pub use cosched_proto::wire::monotonic_ns;

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

pub fn journal_path(cfg: &Config) -> PathBuf {
    cfg.state_dir.join("restore.json")
}

/// How often the daemon polls the engine with nothing running: it only
/// exports metrics then (a job that starts is adopted or launched by a
/// request, which polls at once). A few wake-ups a second, and metrics no
/// older than a scrape interval would notice.
const IDLE_POLL: Duration = Duration::from_millis(250);

/// How often a recording's records are taken from the timeline ring while
/// it runs (the ring holds 16384 records: 1.6 million switches a second).
const RECORDING_DRAIN: Duration = Duration::from_millis(10);

/// The poll interval for the engine's state now.
fn poll_interval<K: Kernel>(d: &Daemon<K>) -> Duration {
    let configured = Duration::from_millis(d.engine.cfg().ebpf.poll_interval_ms);
    if d.engine.task_count() == 0 && !d.has_waiters() && !d.engine.has_running_jobs() {
        configured.max(IDLE_POLL)
    } else {
        configured
    }
}

/// Runs the agent until SIGTERM/SIGINT; restores every task on the way out.
pub async fn run(config_path: PathBuf, cfg: Config) -> anyhow::Result<()> {
    cfg.check_machine(online_cpus())
        .context("checking the config against this machine")?;
    std::fs::create_dir_all(&cfg.state_dir)
        .with_context(|| format!("creating state dir {}", cfg.state_dir.display()))?;
    let demote_cgroups = crate::cpu_group::start(cfg.demote_cpu_cgroup.as_deref())?;
    // Nothing is tracked yet: the engine writes the policy's wake-up
    // settings when it starts (the one place that decides them).
    let probes = Probes::load(cosched_agent_common::Settings::default())?;
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
    let guardian = crate::guardian::spawn(&journal_path(&cfg))?;
    let mut engine = Engine::new(
        kernel,
        cfg,
        ledger,
        &config_path.display().to_string(),
        online_cpus(),
    );
    engine.set_guardian(guardian.pid());
    // Which EDF mechanism `edf = "deadline"` gets here, asked once.
    let probe_cpus = engine.cfg().cpus.clone();
    engine.set_edf_probe(
        crate::kernel::deadline_probe::deadline_accepted(&probe_cpus).map_err(|e| e.to_string()),
    );

    if let Some(prepared) = &demote_cgroups {
        crate::cpu_group::export(engine.metrics().registry(), prepared);
    }
    let cfg = engine.cfg().clone();
    let metrics_listener = tokio::net::TcpListener::bind(cfg.metrics_listen)
        .await
        .with_context(|| format!("binding metrics endpoint {}", cfg.metrics_listen))?;
    let control_listener = control::bind(&cfg.control_socket)?;
    tokio::spawn(cosched_metrics_http::serve(
        metrics_listener,
        engine.metrics().registry().clone(),
        "cosched-agent: see /metrics\n",
        cfg.limits.metrics,
    ));
    let (calls_tx, mut calls) = mpsc::channel::<control::Call>(64);
    tokio::spawn(control::serve(
        control_listener,
        calls_tx,
        cfg.limits.control,
    ));
    let user_socket = cfg
        .user_socket
        .then(|| cosched_proto::jsonl::user_socket_path(&cfg.control_socket));
    let (user_tx, mut user_calls) = mpsc::channel::<control::UserCall>(64);
    if let Some(path) = &user_socket {
        let listener = control::bind_user(path)?;
        tokio::spawn(control::serve_user(listener, user_tx, cfg.limits.control));
    }

    let (internal_tx, mut internal) = mpsc::channel::<Internal>(256);
    let _watcher = watch_config(&config_path, internal_tx.clone())
        .inspect_err(|e| tracing::warn!("config file watching disabled: {e:#}"))
        .ok();

    let ring_fd = engine
        .kernel()
        .event_fd()
        .context("the eBPF programs have no event ring")?;
    // SAFETY: the ring buffer fd stays open as long as the engine (which owns
    // the probes) lives, which outlives this AsyncFd; it is only read through aya.
    let events_fd =
        unsafe { AsyncFd::register_with_interest(Fd(ring_fd), tokio::io::Interest::READABLE) }
            .map_err(|e| anyhow::anyhow!("registering the event ring buffer: {e}"))?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sighup = signal(SignalKind::hangup())?;

    let mut d = Daemon::new(engine, config_path, internal_tx);
    let (mut link_rx, switch_fd) = match cfg.coordinator.clone() {
        Some(coordinator) => {
            let (node, receivers) = CoordNode::start(
                &cfg,
                &coordinator,
                d.engine.node_cpus(),
                d.engine.metrics().registry(),
                d.engine.kernel().autogroup_enabled(),
            )
            .context("starting the coordinator link")?;
            tracing::info!(coordinator = %coordinator.address, "joining the coordinator");
            d.coord = Some(node);
            let CoordReceivers { link, switch_fd } = receivers;
            // SAFETY: the timerfd belongs to the node's timer, which lives
            // in `d` until the loop below ends; it is read only by the timer.
            let switch_fd = unsafe {
                AsyncFd::register_with_interest(Fd(switch_fd), tokio::io::Interest::READABLE)
            }
            .map_err(|e| anyhow::anyhow!("registering the switch timer: {e}"))?;
            (Some(link), Some(switch_fd))
        }
        None => (None, None),
    };
    // Metrics exist from the first scrape on.
    d.poll();
    let mut poll_every = poll_interval(&d);
    let mut next_poll = Instant::now() + poll_every;
    // 1GS: periodic work waits for the end of an RT job's rows (bounded).
    let mut quiet = cosched_policy::local::QuietRows::default();
    let mut hold: Option<u64> = None;
    tracing::info!(
        node = %cfg.node,
        policy = %d.engine.running_policy(),
        cpus = ?d.engine.node_cpus(),
        metrics = %cfg.metrics_listen,
        control = %cfg.control_socket.display(),
        "cosched agent running"
    );

    loop {
        let held = |t: u64| hold.map_or(t, |h| t.max(h));
        let at = |t: u64| Instant::now() + Duration::from_nanos(t.saturating_sub(monotonic_ns()));
        let policy_deadline = d.engine.next_policy_tick().map(|t| at(held(t)));
        let poll_at = match hold {
            Some(h) => next_poll.max(at(h)),
            None => next_poll,
        };
        // While a recording runs, its records are taken every
        // RECORDING_DRAIN (its ring holds far more than that many
        // switches) and it ends at its deadline.
        let record_deadline = d.engine.recording_deadline().map(|t| {
            let due = Instant::now() + Duration::from_nanos(t.saturating_sub(monotonic_ns()));
            let due = due.min(Instant::now() + RECORDING_DRAIN);
            match hold {
                Some(h) => due.max(at(h)),
                None => due,
            }
        });
        let record_timer = async move {
            match record_deadline {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let policy_timer = async move {
            match policy_deadline {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        // The branches only say what woke the loop; the ring is read once
        // per pass, below, before any of it is handled.
        let woke = tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = sighup.recv() => Wake::Reload,
            Some((req, reply)) = calls.recv() => Wake::Request(req, reply),
            Some((req, peer, reply)) = user_calls.recv() => Wake::UserRequest(req, peer, reply),
            Some(msg) = internal.recv() => Wake::Internal(msg),
            guard = events_fd.readable() => {
                // Cleared before the drain below: records that come after
                // it make the ring readable again.
                guard?.clear_ready();
                d.engine.metrics().event_wakeups.inc();
                Wake::Ring
            }
            _ = policy_timer => Wake::PolicyTick,
            _ = record_timer => Wake::Record,
            () = switch_due(switch_fd.as_ref()) => Wake::Switch,
            Some(event) = recv_opt(&mut link_rx) => Wake::Link(event),
            _ = tokio::time::sleep_until(poll_at) => Wake::Poll,
        };
        // A due slice switch is acted on first: the incoming job's
        // SIGCONT must not wait for the records below. A task forked since
        // the last pass is then realised when its record is taken, under
        // the new slice.
        if let Wake::Switch = woke {
            d.on_switch_timer();
        }
        // Records queued without a wakeup (forks, exits, batches) and
        // records that came while the last pass ran are taken now, whatever
        // woke the loop. Reading an empty ring costs no system call.
        d.engine.drain_events();
        let polled = matches!(woke, Wake::Poll);
        match woke {
            Wake::Reload => d.reload(),
            Wake::Request(req, reply) => d.handle(req, reply),
            Wake::UserRequest(req, peer, reply) => d.handle_user(req, peer, reply),
            Wake::Internal(msg) => d.on_internal(msg),
            // Acted on before the drain.
            Wake::Switch => {}
            Wake::Link(event) => d.on_link_event(event),
            Wake::Poll => d.poll(),
            Wake::Ring | Wake::PolicyTick | Wake::Record => {}
        }
        // While an RT job's 1GS row runs (every process of it past its
        // start-up), ticks, polls (metrics, reports, the journal's flush)
        // and a recording's drain wait for the row's end, at most
        // `QuietRows`' bound: the agent runs above the job's processes.
        hold = quiet.hold_until(monotonic_ns(), d.engine.in_rt_row());
        // A tick already due runs now, whichever branch woke the loop: under
        // a stream of eBPF wakeups the timer branch, re-armed on every pass,
        // would otherwise keep losing to them.
        if hold.is_none()
            && d.engine
                .next_policy_tick()
                .is_some_and(|due| due <= monotonic_ns())
        {
            d.engine.policy_tick();
            // The RT tick may have found a new RT job's processes ready for
            // their first frame: 1GS holds the job to its start row until
            // the coordinator hears it, so it goes now, not at the next poll.
            d.report_ready_frames();
        }
        if hold.is_none() {
            d.on_recording();
        }
        let want = poll_interval(&d);
        if polled || want < poll_every {
            next_poll = Instant::now() + want;
        }
        poll_every = want;
    }

    tracing::info!("shutting down: restoring every task the agent changed");
    let r = d.engine.shutdown();
    if !r.failed.is_empty() {
        tracing::error!(failed = ?r.failed, "some tasks could not be restored");
    }
    crate::cpu_group::finish(cfg.demote_cpu_cgroup.as_deref());
    tracing::info!(restored = r.restored, gone = r.gone, "shutdown complete");
    let _ = std::fs::remove_file(&cfg.control_socket);
    if let Some(path) = &user_socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// What woke the event loop.
enum Wake {
    Reload,
    Request(
        cosched_proto::control::Request,
        tokio::sync::oneshot::Sender<cosched_proto::control::Response>,
    ),
    /// From the user socket, with the caller's peer credentials.
    UserRequest(
        cosched_proto::control::Request,
        cosched_proto::jsonl::Peer,
        tokio::sync::oneshot::Sender<cosched_proto::control::Response>,
    ),
    Internal(Internal),
    Ring,
    PolicyTick,
    Record,
    Switch,
    Link(crate::coord::link::LinkEvent),
    Poll,
}

/// Waits until the switch timer's fd is readable (forever without a
/// coordinator); its readiness is cleared here, the timer reads the fd.
async fn switch_due(fd: Option<&AsyncFd<Fd>>) {
    match fd {
        Some(fd) => match fd.readable().await {
            Ok(mut guard) => guard.clear_ready(),
            // Never with a registered timerfd; do not spin on it.
            Err(e) => {
                tracing::error!("switch timer: {e}");
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// The next item of an optional channel; never, without one.
async fn recv_opt<T>(receiver: &mut Option<mpsc::UnboundedReceiver<T>>) -> Option<T> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => std::future::pending().await,
    }
}

/// Watches the config file's directory (editors replace files by rename) and
/// reports each completed write or rename of the file. The watch is read on
/// the event loop, not by a thread of its own: a SCHED_OTHER watcher thread
/// starved behind boosted jobs, and kept a SIGKILLed agent alive (and its
/// tasks boosted) until real-time throttling let it run.
fn watch_config(
    path: &Path,
    tx: mpsc::Sender<Internal>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use inotify::{EventMask, Inotify, WatchMask};
    let path = std::fs::canonicalize(path)?;
    let dir = path.parent().context("config has no parent directory")?;
    let name = path
        .file_name()
        .context("config has no file name")?
        .to_os_string();
    let inotify = Inotify::init()?;
    inotify
        .watches()
        .add(dir, WatchMask::CLOSE_WRITE | WatchMask::MOVED_TO)?;
    // SAFETY: the inotify instance owns its fd, which stays open (and the
    // same) for as long as the AsyncFd that owns the instance.
    let mut watch =
        unsafe { AsyncFd::register_with_interest(inotify, tokio::io::Interest::READABLE) }?;
    Ok(tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            let Ok(mut ready) = watch.readable_mut().await else {
                return;
            };
            match ready.get_inner_mut().read_events(&mut buf) {
                Ok(mut events) => {
                    if events.any(|ev| {
                        ev.name == Some(name.as_os_str()) || ev.mask.contains(EventMask::Q_OVERFLOW)
                    }) {
                        let _ = tx.try_send(Internal::ConfigChanged);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => ready.clear_ready(),
                Err(e) => {
                    tracing::warn!("config file watching stopped: {e}");
                    return;
                }
            }
        }
    }))
}
