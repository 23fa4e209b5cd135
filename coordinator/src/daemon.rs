//! The coordinator's async edge: the agent listener, the admin socket, the
//! metrics endpoint, the slice (or division) clock, the 1GS eviction timer
//! and SIGHUP (reload of `[classes]`), all feeding one [`Core`] owned by the
//! main loop.

use std::{collections::HashMap, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use cosched_proto::wire::{Message, Role, SessionConfig};
use tokio::{
    signal::unix::{SignalKind, signal},
    sync::{mpsc, oneshot},
    time::Instant,
};

use crate::{
    admin::{
        self,
        protocol::{JobStateView, JobView, Reply, Request, Response},
    },
    clock::{monotonic_ns, unix_ms},
    config::Config,
    core::{Core, CoreConfig, Effect, Submitted},
    metrics::Metrics,
    net::{ConnContext, ConnEvent, Outgoing, PreAuthGate, accept_loop},
    persist::{self, Persister},
};

struct Connection {
    node: usize,
    outbox: mpsc::Sender<Outgoing>,
}

struct Daemon {
    config: Config,
    /// Where the config came from (reread on SIGHUP).
    config_path: PathBuf,
    core: Core,
    metrics: Metrics,
    persister: Persister,
    connections: HashMap<u64, Connection>,
    /// The registered connection of each node.
    node_conn: Vec<Option<u64>>,
    /// Submitters waiting for their program checks, by check id.
    submitters: HashMap<u64, oneshot::Sender<Response>>,
}

/// Builds the core from the state file (or empty) under `config`.
pub fn load_core(config: &Config) -> anyhow::Result<Core> {
    let core_config = CoreConfig::from(config);
    match persist::load(&config.state_file)? {
        Some(state) => {
            let core =
                Core::restore(core_config, state, monotonic_ns()).map_err(anyhow::Error::msg)?;
            tracing::info!(
                state = %config.state_file.display(),
                epoch = core.epoch(),
                jobs = core.jobs_view(false).len(),
                "restored the matrix and jobs; waiting for agents to confirm them"
            );
            Ok(core)
        }
        None => Core::new(core_config).map_err(anyhow::Error::msg),
    }
}

/// Runs the coordinator until SIGTERM/SIGINT; SIGHUP rereads `config_path`
/// and applies its `[classes]` table.
pub async fn run(config: Config, config_path: PathBuf) -> anyhow::Result<()> {
    let secret = config.load_secret()?;
    let core = load_core(&config)?;
    let metrics = Metrics::new();

    let agents = crate::net::bind(config.listen)
        .with_context(|| format!("binding the agent listener {}", config.listen))?;
    let metrics_listener = tokio::net::TcpListener::bind(config.metrics_listen)
        .await
        .with_context(|| format!("binding the metrics endpoint {}", config.metrics_listen))?;
    let admin_listener = admin::server::bind(&config.admin_socket)?;
    tokio::spawn(cosched_metrics_http::serve(
        metrics_listener,
        metrics.registry().clone(),
        "cosched-coordinator: see /metrics\n",
        config.limits.metrics,
    ));
    let (calls_tx, mut calls) = mpsc::channel::<admin::server::Call>(64);
    tokio::spawn(admin::server::serve(
        admin_listener,
        calls_tx,
        config.limits.admin,
    ));
    let user_socket = config
        .user_socket
        .then(|| cosched_proto::jsonl::user_socket_path(&config.admin_socket));
    let (user_tx, mut user_calls) = mpsc::channel::<admin::server::UserCall>(64);
    if let Some(path) = &user_socket {
        let listener = admin::server::bind_user(path)?;
        tokio::spawn(admin::server::serve_user(
            listener,
            user_tx,
            config.limits.admin,
        ));
    }

    let (events_tx, mut events) = mpsc::channel::<ConnEvent>(4096);
    let context = Arc::new(ConnContext {
        session: SessionConfig::new(Role::Coordinator, "coordinator", secret),
        events: events_tx,
        metrics: metrics.clone(),
        heartbeat_interval: config.heartbeat_interval(),
        heartbeat_timeout: config.heartbeat_timeout(),
        handshake_timeout: config.limits.agents.handshake_timeout(),
        gate: std::sync::Mutex::new(PreAuthGate::new(
            config.limits.agents.unauthenticated_per_address,
            config.limits.agents.unauthenticated,
        )),
    });
    tokio::spawn(accept_loop(agents, context));

    let write_errors = metrics.state_write_errors.clone();
    let persister = Persister::start(config.state_file.clone(), move |error| {
        write_errors.inc();
        tracing::error!("{error}");
    });
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut daemon = Daemon {
        node_conn: vec![None; config.nodes.len()],
        config,
        config_path,
        core,
        metrics,
        persister,
        connections: HashMap::new(),
        submitters: HashMap::new(),
    };
    daemon.apply_effects();
    tracing::info!(
        listen = %daemon.config.listen,
        admin = %daemon.config.admin_socket.display(),
        metrics = %daemon.config.metrics_listen,
        policy = %daemon.core.policy(),
        slice_ms = daemon.config.slice_ms,
        nodes = ?daemon.config.nodes,
        "cosched coordinator running"
    );

    let slice_ns = daemon.config.slice().as_nanos() as u64;
    let lead_ns = daemon.config.switch_lead().as_nanos() as u64;
    let mut next_start_ns = monotonic_ns() + slice_ns;
    loop {
        let plan_at = instant_at(next_start_ns.saturating_sub(lead_ns));
        let checks_due = daemon.core.next_check_deadline().map(instant_at);
        let evictions_due = daemon.core.next_eviction_ns().map(instant_at);
        tokio::select! {
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            _ = sighup.recv() => daemon.reload(),
            Some(event) = events.recv() => daemon.on_event(event),
            Some((request, reply)) = calls.recv() => daemon.on_admin(request, reply),
            Some((request, peer, reply)) = user_calls.recv() => {
                daemon.on_user(request, peer.uid, reply);
            }
            () = sleep_until_some(checks_due) => {
                daemon.core.expire_checks(monotonic_ns());
                daemon.apply_effects();
            }
            () = sleep_until_some(evictions_due) => {
                daemon.core.evict_expired(monotonic_ns());
                daemon.apply_effects();
            }
            () = tokio::time::sleep_until(plan_at) => {
                // Fell behind (a stalled loop): see `resume_at`.
                next_start_ns = crate::core::slicing::resume_at(
                    next_start_ns,
                    monotonic_ns(),
                    lead_ns,
                    slice_ns,
                    daemon.core.keeps_slice_grid(),
                );
                next_start_ns = daemon.plan(next_start_ns, slice_ns);
            }
        }
    }

    tracing::info!("shutting down: writing the state");
    let Daemon {
        core,
        persister,
        config,
        ..
    } = daemon;
    persister.save(&core.snapshot());
    persister.finish();
    let _ = std::fs::remove_file(&config.admin_socket);
    if let Some(path) = &user_socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Sleeps until `at`; forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The tokio instant of a CLOCK_MONOTONIC time (both count the same clock).
fn instant_at(monotonic: u64) -> Instant {
    Instant::now() + Duration::from_nanos(monotonic.saturating_sub(monotonic_ns()))
}

impl Daemon {
    /// Plans the switch at `start_ns`; returns when the next one starts.
    fn plan(&mut self, start_ns: u64, slice_ns: u64) -> u64 {
        let sends_slices = self.core.policy().uses_matrix()
            || self.core.policy() == crate::policy::GlobalPolicy::OneLevelGang;
        let planned = self.core.plan(start_ns, slice_ns);
        self.metrics.observe(&planned.observations);
        if sends_slices {
            self.metrics.slices.inc();
        }
        self.apply_effects();
        planned.next_start_ns
    }

    /// SIGHUP: rereads the config. A bad file, or `[classes]` settings that
    /// a running job could not keep its nodes under, change nothing; other
    /// keys only take effect at the next start.
    fn reload(&mut self) {
        let path = self.config_path.display().to_string();
        // The new table must also suit the slices and lead that keep running.
        let loaded = Config::load(&self.config_path)
            .map_err(|error| error.to_string())
            .and_then(|new| {
                new.classes
                    .validate(
                        self.config.nodes.len(),
                        self.config.slice_ms,
                        self.config.switch_lead().as_micros() as u64,
                    )
                    .map_err(|why| {
                        format!("invalid config {path} for the running slices: {why}")
                    })?;
                Ok(new)
            });
        let outcome = match loaded {
            Err(error) => {
                tracing::error!("config reload: {error}; keeping the running config");
                "invalid"
            }
            Ok(new) => {
                let mut rest = new.clone();
                rest.classes = self.config.classes.clone();
                if rest != self.config {
                    tracing::warn!(
                        config = %path,
                        "config reload: only [classes] is applied at run time; the other changes take effect at the next start (switch the policy with `cosched policy set`)"
                    );
                }
                if new.classes == self.config.classes {
                    "unchanged"
                } else {
                    match self.core.set_classes(new.classes.clone(), monotonic_ns()) {
                        Ok(()) => {
                            tracing::info!(config = %path, "config reload: [classes] applied");
                            self.config.classes = new.classes;
                            "applied"
                        }
                        Err(why) => {
                            tracing::error!(
                                config = %path,
                                "config reload: [classes] refused, keeping the running settings: {why}"
                            );
                            "refused"
                        }
                    }
                }
            }
        };
        self.metrics
            .config_reloads
            .with_label_values(&[outcome])
            .inc();
        self.apply_effects();
    }

    fn apply_effects(&mut self) {
        let mut persist = false;
        for effect in self.core.take_effects() {
            match effect {
                Effect::Send { node, message } => self.send(node, message),
                Effect::Persist => persist = true,
                Effect::Submitted { check, result } => {
                    if let Some(reply) = self.submitters.remove(&check) {
                        self.answer_submitter(result.map(|job| *job), reply);
                    }
                }
                Effect::Observed(observed) => self.metrics.observed(&observed),
            }
        }
        if persist {
            self.persister.save(&self.core.snapshot());
        }
        self.update_gauges();
    }

    fn send(&mut self, node: usize, message: Message) {
        let Some(conn) = self.node_conn[node] else {
            return;
        };
        let Some(connection) = self.connections.get(&conn) else {
            return;
        };
        if let Err(error) = connection.outbox.try_send(Outgoing::Message(message)) {
            tracing::warn!(
                node = %self.config.nodes[node],
                "agent connection is not keeping up ({error}); closing it"
            );
            self.connections.remove(&conn);
            self.node_conn[node] = None;
        }
    }

    fn update_gauges(&self) {
        for state in [JobStateView::Queued, JobStateView::Running] {
            let count = self.core.count_jobs(state);
            self.metrics
                .jobs
                .with_label_values(&[state.as_str()])
                .set(count as i64);
        }
        self.metrics
            .nodes_connected
            .set(self.node_conn.iter().flatten().count() as i64);
    }

    fn on_event(&mut self, event: ConnEvent) {
        match event {
            ConnEvent::Registered {
                conn,
                register,
                peer,
                protocol,
                outbox,
            } => match self.core.register(&register, peer.ip(), conn, protocol) {
                Ok(node) => {
                    if let Some(old) = self.node_conn[node].replace(conn) {
                        // Dropping its outbox ends the older connection.
                        self.connections.remove(&old);
                    }
                    self.connections.insert(conn, Connection { node, outbox });
                    self.metrics
                        .connections
                        .with_label_values(&["registered"])
                        .inc();
                }
                Err(why) => {
                    let _ = outbox.try_send(Outgoing::Refuse(why));
                }
            },
            ConnEvent::Message {
                conn,
                message,
                received_ns,
            } => {
                if let Some(node) = self.connections.get(&conn).map(|c| c.node) {
                    self.on_message(node, message, received_ns);
                }
            }
            ConnEvent::Closed { conn, reason } => {
                if let Some(connection) = self.connections.remove(&conn) {
                    tracing::info!(node = %self.config.nodes[connection.node], %reason, "agent gone");
                    if self.node_conn[connection.node] == Some(conn) {
                        self.node_conn[connection.node] = None;
                    }
                }
                // The node whose link this was (also when the daemon had
                // already dropped the connection as not keeping up).
                if let Some(node) = self.core.node_of_conn(conn) {
                    let observations = self.core.disconnected(node, conn);
                    self.metrics.observe(&observations);
                }
            }
        }
        self.apply_effects();
    }

    fn on_message(&mut self, node: usize, message: Message, received_ns: u64) {
        let name = &self.config.nodes[node];
        match message {
            Message::HeartbeatReply(reply) => {
                match self.core.heartbeat_reply(node, &reply, received_ns) {
                    Ok(estimate) => {
                        self.metrics
                            .clock_offset
                            .with_label_values(&[name])
                            .set(estimate.offset_ns as f64 / 1e9);
                        self.metrics
                            .clock_uncertainty
                            .with_label_values(&[name])
                            .set(estimate.uncertainty_ns as f64 / 1e9);
                    }
                    Err(error) => {
                        tracing::debug!(node = %name, "heartbeat sample refused: {error}")
                    }
                }
            }
            Message::JobExited(exited) => {
                tracing::info!(node = %name, job = exited.job_id, rank = exited.rank, status = ?exited.status, "rank exited");
                if let Err(why) = self.core.job_exited(node, &exited) {
                    tracing::debug!(node = %name, "exit report ignored: {why}");
                }
            }
            Message::UtilReport(report) => self.core.util_report(node, &report),
            Message::ProgramChecked(checked) => {
                if let Err(why) = self.core.program_checked(node, &checked, received_ns) {
                    tracing::debug!(node = %name, "program check answer ignored: {why}");
                }
            }
            Message::RanksReaped(reaped) => self.core.ranks_reaped(node, &reaped),
            Message::SliceSwitched(switched) => {
                let observations = self.core.slice_switched(node, &switched);
                self.metrics.observe(&observations);
            }
            Message::DivisionSwitched(switched) => self.core.division_switched(node, &switched),
            Message::FrameReport(report) => {
                if let Err(why) = self.core.frame_report(node, &report) {
                    tracing::debug!(node = %name, "frame counts ignored: {why}");
                }
            }
            Message::Error(report) => {
                tracing::warn!(node = %name, reason = %report.reason, "agent reported an error");
            }
            other => {
                self.metrics
                    .wire_rejected
                    .with_label_values(&["unexpected_message"])
                    .inc();
                tracing::warn!(node = %name, kind = %other.kind(), "unexpected message from an agent");
            }
        }
    }

    fn on_admin(&mut self, request: Request, reply: oneshot::Sender<Response>) {
        if let Request::Submit { job } = request {
            // Answered once the agents confirmed the program (or at once).
            match self.core.submit(job, unix_ms(), monotonic_ns()) {
                Ok(Submitted::Checking(check)) => {
                    self.submitters.insert(check, reply);
                }
                Ok(Submitted::Job(job)) => self.answer_submitter(Ok(*job), reply),
                Err(why) => self.answer_submitter(Err(why), reply),
            }
            self.apply_effects();
            return;
        }
        let op = request.op();
        let result = self.answer(request);
        self.reply_admin(op, result, reply);
        self.apply_effects();
    }

    /// A request from the user socket: root's go the admin way; a user's
    /// are judged by `admin::users` first, and the jobs they attach are
    /// theirs.
    fn on_user(&mut self, request: Request, uid: u32, reply: oneshot::Sender<Response>) {
        if uid == 0 {
            return self.on_admin(request, reply);
        }
        let op = request.op();
        let verdict = admin::users::authorize(
            &request,
            uid,
            |id| self.core.owner_of(id),
            &self.config.admin_socket.display().to_string(),
        );
        if let Err(why) = verdict {
            tracing::info!(uid, op, "user request refused: {why}");
            return self.reply_admin(op, Err(why), reply);
        }
        match request {
            Request::Attach { job } => {
                let result = self
                    .core
                    .attach_as(job, Some(uid), unix_ms())
                    .map(|job| Reply::Attached { job });
                if result.is_ok() {
                    self.metrics.jobs_submitted.inc();
                }
                self.reply_admin(op, result, reply);
                self.apply_effects();
            }
            other => self.on_admin(other, reply),
        }
    }

    fn answer_submitter(&self, result: Result<JobView, String>, reply: oneshot::Sender<Response>) {
        if let Ok(job) = &result {
            self.metrics.jobs_submitted.inc();
            tracing::info!(job = job.id, name = %job.name, state = job.state.as_str(), "job submitted");
            if reply.is_closed() {
                // The CLI's --timeout ran out during the program check.
                tracing::warn!(
                    job = job.id,
                    "the submitter stopped waiting; the job is admitted all the same"
                );
            }
        }
        self.reply_admin("submit", result.map(|job| Reply::Submitted { job }), reply);
    }

    fn reply_admin(
        &self,
        op: &'static str,
        result: Result<Reply, String>,
        reply: oneshot::Sender<Response>,
    ) {
        let outcome = if result.is_ok() { "ok" } else { "error" };
        self.metrics
            .admin_requests
            .with_label_values(&[op, outcome])
            .inc();
        let response = match result {
            Ok(answer) => Response::Ok(answer),
            Err(message) => Response::Error(message),
        };
        let _ = reply.send(response);
    }

    fn answer(&mut self, request: Request) -> Result<Reply, String> {
        Ok(match request {
            // Never here: `on_admin` answers submissions once they are checked.
            Request::Submit { .. } => return Err("submit is answered asynchronously".into()),
            Request::Attach { job } => {
                self.metrics.jobs_submitted.inc();
                Reply::Attached {
                    job: self.core.attach(job, unix_ms())?,
                }
            }
            Request::Detach { id, code } => Reply::Detached {
                job: self.core.detach(id, code)?,
            },
            Request::Jobs { all } => Reply::Jobs {
                jobs: self.core.jobs_view(all),
            },
            Request::Job { id } => Reply::Job {
                job: self
                    .core
                    .job_view(id)
                    .ok_or_else(|| format!("unknown job {id}"))?,
            },
            Request::Cancel { id } => Reply::Cancelled {
                job: self.core.cancel(id)?,
            },
            Request::Matrix => Reply::Matrix {
                matrix: self.core.matrix_view(),
            },
            Request::Nodes => Reply::Nodes {
                nodes: self.core.nodes_view(),
            },
            Request::SetPolicy { policy } => {
                self.core.set_policy(policy, monotonic_ns())?;
                Reply::Policy { policy }
            }
            Request::Status => Reply::Status {
                status: self.core.status_view(
                    self.config.slice_ms,
                    self.config.switch_lead().as_micros() as u64,
                ),
            },
        })
    }
}
