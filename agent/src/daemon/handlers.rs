//! What the daemon does for a request, a reaped process or the coordinator:
//! everything between the sockets and the engine's intent methods. Generic
//! over the kernel so it is unit-tested against the fake one.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use cosched_proto::{
    control::{Reply, Request, Response},
    job::{JobId, JobSpec},
};
use tokio::{
    sync::{mpsc, oneshot},
    time::Instant,
};

use super::{monotonic_ns, own_cpu_seconds};
use crate::{
    config::Config,
    coord::{self, CoordNode},
    engine::{AttachRequest, Caller, Engine},
    kernel::Kernel,
    launch,
};

pub enum Internal {
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

pub struct Daemon<K: Kernel> {
    pub(super) engine: Engine<K>,
    config_path: PathBuf,
    internal: mpsc::Sender<Internal>,
    waiters: Vec<Waiter>,
    /// The link to the coordinator, when configured.
    pub(super) coord: Option<CoordNode>,
    /// Who gets the timeline recording in progress.
    recording: Option<oneshot::Sender<Response>>,
}

impl<K: Kernel> Daemon<K> {
    pub fn new(engine: Engine<K>, config_path: PathBuf, internal: mpsc::Sender<Internal>) -> Self {
        Self {
            engine,
            config_path,
            internal,
            waiters: Vec::new(),
            coord: None,
            recording: None,
        }
    }

    /// Takes the eBPF side's timeline records while a recording runs, and
    /// ends it and replies once it is due (its time is up, it is full, or
    /// its client is gone).
    pub fn on_recording(&mut self) {
        if self.recording.is_none() {
            return;
        }
        self.engine.drain_timeline();
        let gone = self.recording.as_ref().is_some_and(|r| r.is_closed());
        if gone || self.engine.recording_due() {
            let timeline = self.engine.finish_recording();
            if let (Some(reply), Some(timeline)) = (self.recording.take(), timeline) {
                let _ = reply.send(Response::Ok(Reply::Timeline { timeline }));
            }
        }
    }

    /// Whether anyone waits for a job (the poll then keeps its pace).
    pub fn has_waiters(&self) -> bool {
        !self.waiters.is_empty()
    }

    pub fn poll(&mut self) {
        let finished = self.engine.poll(monotonic_ns(), own_cpu_seconds());
        for &job in &finished {
            tracing::info!(job, "job finished");
        }
        if let Some(coord) = &mut self.coord {
            coord.jobs_finished(&self.engine, &finished);
            coord.report_frames(&self.engine, monotonic_ns());
        }
        self.answer_waiters();
    }

    /// Sends a `FrameReport` at once if a coordinator RT job became ready
    /// for its first frame (nothing otherwise; the periodic report waits
    /// for the poll).
    pub fn report_ready_frames(&mut self) {
        if let Some(coord) = &mut self.coord {
            coord.report_if_newly_ready(&self.engine, monotonic_ns());
        }
    }

    pub fn on_internal(&mut self, msg: Internal) {
        match msg {
            Internal::Reaped {
                job,
                pid,
                code,
                signal,
            } => {
                tracing::info!(job, pid, ?code, ?signal, "job process exited");
                self.engine.process_reaped(pid, code, signal);
                self.poll();
            }
            Internal::ConfigChanged => self.reload(),
        }
    }

    pub fn reload(&mut self) {
        // Several file events arrive for one save; they all read the same file.
        self.engine.reload(Config::load(&self.config_path));
    }

    pub fn on_link_event(&mut self, event: coord::link::LinkEvent) {
        let Some(node) = &mut self.coord else {
            return;
        };
        let actions = node.on_link_event(&self.engine, event);
        self.run_coordinator_actions(actions);
    }

    pub fn on_switch_timer(&mut self) {
        let Some(node) = &mut self.coord else {
            return;
        };
        let actions = node.on_switch_timer();
        self.run_coordinator_actions(actions);
    }

    fn run_coordinator_actions(&mut self, actions: Vec<coord::Action>) {
        let Some(node) = &mut self.coord else {
            return;
        };
        let rest = coord::apply_to_engine(node, &mut self.engine, actions);
        for action in rest {
            match action {
                coord::Action::Launch {
                    spec,
                    first_frame_wait_ns,
                } => {
                    let (job, rank) = (spec.job_id, spec.rank);
                    // A finished job of the same id (a coordinator that lost
                    // its state numbers jobs afresh) gives way to the new one.
                    if self.engine.job(job).is_some() && !self.engine.job_running(job) {
                        let _ = self.engine.forget_job(job);
                    }
                    let result = self
                        .launch_gated(*spec, first_frame_wait_ns)
                        .map(|_| ())
                        .map_err(|e| format!("{e:#}"));
                    if let Err(reason) = &result {
                        tracing::warn!(job, rank, %reason, "coordinator launch failed");
                    }
                    if let Some(node) = &mut self.coord {
                        node.launched(job, rank, result);
                    }
                }
                coord::Action::Expect(expect) => {
                    let (job, rank) = (expect.job_id, expect.rank);
                    if self.engine.job(job).is_some() && !self.engine.job_running(job) {
                        let _ = self.engine.forget_job(job);
                    }
                    let result = self
                        .engine
                        .expect_job(job, &expect.name, rank, expect.owner)
                        .map_err(|e| e.to_string());
                    match &result {
                        Ok(()) => {
                            tracing::info!(job, rank, "expecting an attached job's processes")
                        }
                        Err(reason) => {
                            tracing::warn!(job, rank, %reason, "cannot expect the attached job")
                        }
                    }
                    if let Some(node) = &mut self.coord {
                        node.launched(job, rank, result);
                    }
                }
                coord::Action::Cancel(job) => {
                    self.kill(job);
                }
                coord::Action::PolicyChanged => {
                    let (policy, enforced) = self
                        .coord
                        .as_ref()
                        .map_or((None, false), |n| (n.local_policy(), n.gang_active()));
                    self.engine.set_coordinator_policy(policy, enforced);
                }
                coord::Action::CheckProgram(check) => {
                    let found = crate::program::find(&check.command, check.search_path.as_deref());
                    if let Some(node) = &self.coord {
                        node.program_checked(check.check_id, found);
                    }
                }
                coord::Action::Reap(ranks) => {
                    let cfg = self.engine.cfg();
                    let launcher = launch::launcher_id(&launch::log_dir(&cfg.state_dir));
                    let reaped = crate::leftovers::reap_all(
                        cfg.cgroup_root.as_deref(),
                        &cfg.node,
                        &launcher,
                        ranks,
                    );
                    if let Some(node) = &self.coord {
                        node.ranks_reaped(reaped);
                    }
                }
                // Carried out by apply_to_engine.
                coord::Action::SetGang(_)
                | coord::Action::SlotStarted { .. }
                | coord::Action::PrepareToStop
                | coord::Action::Switched(_)
                | coord::Action::SetClasses(_)
                | coord::Action::DivisionStarted(_)
                | coord::Action::FirstFrame { .. } => {}
            }
        }
    }

    /// The cgroup a launched rank runs in, when the agent makes them.
    fn job_cgroup(&self, job: JobId, rank: u32) -> Option<PathBuf> {
        self.engine
            .cfg()
            .cgroup_root
            .as_ref()
            .map(|r| r.join(format!("job-{job}-r{rank}")))
    }

    /// Kills a job's processes (its cgroup when there is one; for a job
    /// launched by something else, every process the agent manages for it).
    fn kill(&mut self, job_id: JobId) -> bool {
        if let Some(pids) = self.engine.cancel_attached(job_id) {
            launch::kill_processes(&pids);
            self.poll();
            return true;
        }
        let Some(j) = self.engine.job(job_id) else {
            return false;
        };
        let cg = self.job_cgroup(j.id, j.rank);
        launch::kill_job(cg.as_deref(), &j.pids);
        true
    }

    fn answer_waiters(&mut self) {
        let now = Instant::now();
        let mut keep = Vec::new();
        for w in std::mem::take(&mut self.waiters) {
            let done = !self.engine.job_running(w.job);
            if done || now >= w.deadline || w.reply.is_closed() {
                let resp = match self.engine.job_info(w.job) {
                    None => Response::Error(format!("unknown job {}", w.job)),
                    Some(job) if done => Response::Ok(Reply::Job { job }),
                    Some(_) => Response::Error(format!("timed out waiting for job {}", w.job)),
                };
                let _ = w.reply.send(resp);
            } else {
                keep.push(w);
            }
        }
        self.waiters = keep;
    }

    pub fn handle(&mut self, req: Request, reply: oneshot::Sender<Response>) {
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
                move_to_node,
                class,
            } => match self
                .engine
                .adopt_with(job_id, &name, &pids, sched, move_to_node, &class)
            {
                Ok(tasks) => Response::Ok(Reply::Adopted { job_id, tasks }),
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Attach {
                job_id,
                name,
                target,
                sched,
                move_to_node,
                class,
            } => match self.engine.attach(AttachRequest {
                job_id,
                name,
                target,
                sched,
                move_to_node,
                class,
            }) {
                Ok((job_id, tasks)) => {
                    tracing::info!(job = job_id, tasks, "attached");
                    Response::Ok(Reply::Attached { job_id, tasks })
                }
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Join {
                job_id,
                pid,
                move_to_node,
                daemon,
            } => match self.engine.join(job_id, pid, move_to_node, daemon) {
                Ok(tasks) => {
                    tracing::info!(job = job_id, pid, tasks, "joined");
                    Response::Ok(Reply::Joined { job_id, tasks })
                }
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Leave { pid } => match self.engine.leave(pid, Caller::Root) {
                Ok((job_id, tasks)) => Response::Ok(Reply::Left { job_id, tasks }),
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Release { job_id } => match self.engine.release_job(job_id) {
                Ok(tasks) => Response::Ok(Reply::Released { job_id, tasks }),
                Err(e) => Response::Error(e.to_string()),
            },
            Request::Jobs => Response::Ok(Reply::Jobs {
                jobs: self.engine.jobs_info(),
            }),
            Request::Wait { job_id, timeout_ms } => {
                if self.engine.job(job_id).is_none() {
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
                let cgroup = self
                    .engine
                    .job(job_id)
                    .and_then(|j| self.job_cgroup(job_id, j.rank));
                match self.engine.forget_job(job_id) {
                    Ok(()) => {
                        if let Some(cg) = cgroup {
                            launch::remove_cgroup(&cg);
                        }
                        Response::Ok(Reply::Done)
                    }
                    Err(e) => Response::Error(e.to_string()),
                }
            }
            Request::Status => Response::Ok(Reply::Status {
                status: self.engine.status(),
            }),
            Request::Timeline {
                duration_ms,
                max_events,
            } => match self.engine.start_recording(duration_ms, max_events) {
                Ok(_) => {
                    self.recording = Some(reply);
                    return;
                }
                Err(e) => Response::Error(e.to_string()),
            },
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

    /// A request from the user socket: only `join` and `leave` of the
    /// caller's own processes and the read-only `jobs` and `status` (see
    /// [`Request::allowed_for_users`]); the rest is refused, naming the
    /// root-only socket. A joined process is pinned by a pidfd from before
    /// its owner is checked until after it is taken: if it exits meanwhile
    /// (its pid may then name another process), the join is undone.
    pub fn handle_user(
        &mut self,
        req: Request,
        peer: cosched_proto::jsonl::Peer,
        reply: oneshot::Sender<Response>,
    ) {
        if peer.uid == 0 {
            // Root may do anything on the control socket anyway.
            return self.handle(req, reply);
        }
        let caller = Caller::User(peer.uid);
        let resp = match req {
            Request::Join {
                job_id,
                pid,
                move_to_node,
                daemon,
            } => match crate::pidfd::PidFd::open(pid) {
                Err(e) => Response::Error(format!("cannot join pid {pid}: {e}")),
                Ok(pin) => match self
                    .engine
                    .join_as(job_id, pid, move_to_node, daemon, caller)
                {
                    Ok(_) if !pin.alive() => {
                        let _ = self.engine.leave(pid, Caller::Root);
                        Response::Error(format!(
                            "cannot join: pid {pid} exited while it was being joined: nothing joined"
                        ))
                    }
                    Ok(tasks) => {
                        tracing::info!(
                            job = job_id,
                            pid,
                            tasks,
                            uid = peer.uid,
                            "joined (user socket)"
                        );
                        Response::Ok(Reply::Joined { job_id, tasks })
                    }
                    Err(e) => {
                        tracing::info!(job = job_id, pid, uid = peer.uid, "user join refused: {e}");
                        Response::Error(e.to_string())
                    }
                },
            },
            Request::Leave { pid } => match self.engine.leave(pid, caller) {
                Ok((job_id, tasks)) => Response::Ok(Reply::Left { job_id, tasks }),
                Err(e) => Response::Error(e.to_string()),
            },
            req @ (Request::Jobs | Request::Status) => return self.handle(req, reply),
            other => Response::Error(format!(
                "op {:?} is not allowed on the user socket (uid {}): it needs root on the control socket {}; users may only join and leave their own processes and list jobs or status",
                other.op(),
                peer.uid,
                self.engine.cfg().control_socket.display()
            )),
        };
        let _ = reply.send(resp);
    }

    fn launch(&mut self, spec: JobSpec) -> anyhow::Result<(JobId, u32)> {
        self.launch_gated(spec, None)
    }

    /// Launches a rank; an RT rank with `first_frame_wait_ns` gets a
    /// pending first-frame gate in its counter directory before it starts
    /// (a gate that cannot be written only costs the gate: the rank starts
    /// its frames at once).
    fn launch_gated(
        &mut self,
        spec: JobSpec,
        first_frame_wait_ns: Option<u64>,
    ) -> anyhow::Result<(JobId, u32)> {
        spec.validate()
            .map_err(|e| anyhow::anyhow!("invalid job spec: {e}"))?;
        self.engine
            .reserve_job(spec.job_id, &spec.name, spec.rank, spec.sched)?;
        let rt_dir = match self.engine.set_job_class(spec.job_id, &spec.class, true) {
            Ok(dir) => dir,
            Err(e) => {
                self.engine.unreserve_job(spec.job_id);
                return Err(e.into());
            }
        };
        if let (Some(_), Some(wait)) = (&rt_dir, first_frame_wait_ns)
            && let Err(e) = self.engine.gate_first_frame(spec.job_id, wait)
        {
            tracing::warn!(job = spec.job_id, "no first-frame gate: {e}");
        }
        match self.start_gated(&spec, rt_dir.as_deref()) {
            Ok(pid) => Ok((spec.job_id, pid)),
            Err(e) => {
                self.engine.unreserve_job(spec.job_id);
                Err(e)
            }
        }
    }

    /// `rt_dir`: an RT job's counter directory (its `COSCHED_RT_DIR`).
    fn start_gated(&mut self, spec: &JobSpec, rt_dir: Option<&Path>) -> anyhow::Result<u32> {
        let cfg = self.engine.cfg();
        let cgroup = cfg
            .cgroup_root
            .as_ref()
            .map(|r| launch::job_cgroup(r, spec));
        // The gate moves itself into the cgroup (see launch.rs: the move
        // can take tens of ms, which must not stall this loop).
        let mut g = launch::spawn_gated(
            spec,
            &cfg.node,
            &self.engine.node_cpus(),
            &launch::log_dir(&cfg.state_dir),
            rt_dir,
            cgroup.as_deref(),
        )?;
        let setup = (|| {
            self.engine.manage_process(spec.job_id, g.pid)?;
            self.engine.mark_launched(g.pid);
            anyhow::Ok(())
        })();
        if let Err(e) = setup {
            launch::kill_job(cgroup.as_deref(), &[g.pid]);
            return Err(e);
        }
        self.engine.set_job_output(
            spec.job_id,
            g.stdout.display().to_string(),
            g.stderr.display().to_string(),
        );
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
