//! The node's side of the coordinator protocol, between the link and the
//! engine: launches and cancels for the daemon, slice switches and 2DCS-TDM
//! divisions applied at their instant, the class overlay the BE/RT policies
//! ask for, utilisation, frame counts and exits reported, fallback to the
//! local policy when the coordinator goes away.

use std::collections::{BTreeMap, BTreeSet};

use cosched_policy::local::PolicyKind;
use cosched_proto::{
    control::JobState,
    job::{JobId, JobSpec},
    wire::{
        CheckProgram, ClassSettings, DivisionSwitched, ErrorReport, ExitStatus, ExpectJob,
        JobExited, JobUtilisation, LaunchJob, MOMENTS_SINCE_MINOR, Message, MessageKind,
        ProgramCheck, ProgramChecked, ProtocolVersion, READY_SINCE_MINOR, RankRef, RanksReaped,
        ReapedRank, SliceSchedule, SliceSwitched, SwitchDivision, SwitchSlice, UtilReport,
    },
};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{
    classes::{ClassTerms, announced, check_settings, class_order, frame_entries, frame_report},
    config::CoordinatorConfig,
    exits::ExitLog,
    link::{self, LinkConfig, LinkEvent, LinkHandle},
    metrics::CoordMetrics,
    quantum::{QuantumTracker, UtilBatch},
    spec::job_spec,
    switch::{
        ClassPolicy, Enforcement, Mode, PolicyCommand, SliceLength, Timing, enforcement,
        parse_set_policy, timing, timing_of,
    },
    timer::SwitchTimer,
};
use crate::{
    classes::CoordinatorClasses,
    config::Config,
    daemon::monotonic_ns,
    engine::{Engine, Gang},
    kernel::Kernel,
};

/// The quantum number that marks a `UtilReport` as the inventory of
/// coordinator jobs running here (the coordinator's `INVENTORY_QUANTUM`).
pub const INVENTORY_QUANTUM: u64 = u64::MAX;

/// What the daemon must do for the coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Launch a rank (then report with [`CoordNode::launched`]); an RT
    /// rank with `first_frame_wait_ns` gets a pending first-frame gate
    /// before it starts.
    Launch {
        spec: Box<JobSpec>,
        first_frame_wait_ns: Option<u64>,
    },
    /// An RT job's first frame starts at this instant (agent clock):
    /// publish it in its gate.
    FirstFrame { job: JobId, at_ns: u64 },
    /// Expect the processes of an attached job's rank to join (then report
    /// with [`CoordNode::launched`], as for a launch).
    Expect(ExpectJob),
    /// Kill a job's processes on this node.
    Cancel(JobId),
    /// The local policy to run changed ([`CoordNode::local_policy`]) or gang
    /// mode started or ended: re-apply the policy and the agent's priority.
    PolicyChanged,
    /// Enter, change or leave (None) the gang overlay.
    SetGang(Option<Gang>),
    /// A gang slot started (FCS): `owner` runs until `until_ns`.
    SlotStarted { owner: Option<JobId>, until_ns: u64 },
    /// A strict switch was announced: journal that every task may stop.
    PrepareToStop,
    /// A switch was enforced (the actions before this one): report it with
    /// [`CoordNode::switched`].
    Switched(Box<SwitchSlice>),
    /// The class overlay the coordinator's policy asks for (then, if the
    /// engine refuses it, [`CoordNode::refused`]).
    SetClasses(CoordinatorClasses),
    /// A 2DCS-TDM division starts now: tell the engine, then report it
    /// with [`CoordNode::division_switched`].
    DivisionStarted(SwitchDivision),
    /// Find the program a submission would run here (then answer with
    /// [`CoordNode::program_checked`]).
    CheckProgram(CheckProgram),
    /// Kill whatever is left of these ranks the coordinator gave up, known
    /// to this agent or not (then answer with [`CoordNode::ranks_reaped`]).
    Reap(Vec<RankRef>),
}

/// A switch waiting for its instant on the timer.
#[derive(Debug, Clone)]
enum Due {
    Slice(SwitchSlice),
    /// A slice of the current [`SliceSchedule`] (the next one is armed when
    /// it is applied).
    Scheduled(SwitchSlice),
    Division(SwitchDivision),
}

/// What the daemon's main loop selects on.
pub struct CoordReceivers {
    pub link: UnboundedReceiver<LinkEvent>,
    /// The switch timer's fd (owned by the node's timer, which outlives
    /// the loop): readable when a switch is due, then call
    /// [`CoordNode::on_switch_timer`].
    pub switch_fd: std::os::fd::RawFd,
}

pub struct CoordNode {
    config: CoordinatorConfig,
    link: LinkHandle,
    timer: SwitchTimer,
    pub metrics: CoordMetrics,
    connected: bool,
    mode: Mode,
    local_override: Option<PolicyKind>,
    /// Coordinator jobs launched here whose end was not reported yet.
    jobs: BTreeMap<JobId, u32>,
    exits: ExitLog,
    pending: BTreeMap<u64, Due>,
    next_token: u64,
    last_applied: Option<(u64, u64)>,
    /// The coordinator's slices announced ahead (protocol 1.5), switched by
    /// the timer one after the other until a `SwitchSlice`, another
    /// schedule, a policy or the link replaces it.
    schedule: Option<SliceSchedule>,
    /// The protocol the coordinator speaks (None: not connected).
    peer: Option<ProtocolVersion>,
    /// What the global policy asks of the class overlay.
    class_policy: ClassPolicy,
    /// The ratio and Δ of the last `ClassSettings` of this connection.
    ratio: Option<ClassTerms>,
    /// The last (epoch, division) applied.
    last_division: Option<(u64, u64)>,
    /// When the next periodic `FrameReport` is due.
    next_frame_report_ns: u64,
    /// Coordinator RT jobs already reported ready (their processes are
    /// past start-up): a job that becomes ready is reported at once.
    ready_sent: BTreeSet<JobId>,
    slice_length: SliceLength,
    quanta: QuantumTracker,
    /// Ended quanta's utilisation not sent yet (sent with switch reports).
    util_batch: UtilBatch,
    node_cpus: usize,
}

impl CoordNode {
    /// Starts the link and the switch timer (inside the tokio runtime).
    pub fn start(
        config: &Config,
        coordinator: &CoordinatorConfig,
        node_cpus: Vec<u32>,
        registry: &prometheus::Registry,
        autogroup: bool,
    ) -> anyhow::Result<(Self, CoordReceivers)> {
        let metrics = CoordMetrics::register(registry)?;
        if let Some(warning) = demotion_warning(
            coordinator.stop_inactive,
            config.demote_cpu_cgroup.is_some(),
            autogroup,
        ) {
            tracing::warn!("{warning}");
        }
        let secret = coordinator.load_secret().map_err(anyhow::Error::msg)?;
        let timer = SwitchTimer::new()?;
        let switch_fd = timer.raw_fd();
        let (link, link_events) = link::spawn(
            LinkConfig {
                address: coordinator.address.clone(),
                secret,
                node: config.node.clone(),
                cpus: node_cpus.clone(),
                metrics_addr: Some(config.metrics_listen),
                advertise_ip: coordinator.advertise_ip,
                heartbeat_interval: coordinator.heartbeat_interval(),
                heartbeat_timeout: coordinator.heartbeat_timeout(),
                reconnect_min: std::time::Duration::from_millis(coordinator.reconnect_min_ms),
                reconnect_max: std::time::Duration::from_millis(coordinator.reconnect_max_ms),
            },
            metrics.wire_rejected.clone(),
        );
        let node = Self::new(coordinator, link, timer, metrics, node_cpus.len());
        Ok((
            node,
            CoordReceivers {
                link: link_events,
                switch_fd,
            },
        ))
    }

    /// A node side over an existing link and timer (tests drive it with
    /// [`LinkHandle::detached`]).
    pub fn new(
        coordinator: &CoordinatorConfig,
        link: LinkHandle,
        timer: SwitchTimer,
        metrics: CoordMetrics,
        node_cpus: usize,
    ) -> Self {
        Self {
            exits: ExitLog::new(2 * coordinator.heartbeat_timeout_ms * 1_000_000),
            config: coordinator.clone(),
            link,
            timer,
            metrics,
            connected: false,
            mode: Mode::default(),
            local_override: None,
            jobs: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_token: 0,
            last_applied: None,
            schedule: None,
            peer: None,
            class_policy: ClassPolicy::default(),
            ratio: None,
            last_division: None,
            next_frame_report_ns: 0,
            ready_sent: BTreeSet::new(),
            slice_length: SliceLength::default(),
            quanta: QuantumTracker::default(),
            util_batch: UtilBatch::default(),
            node_cpus: node_cpus.max(1),
        }
    }

    /// The local policy the coordinator asked for, if any.
    pub fn local_policy(&self) -> Option<PolicyKind> {
        self.local_override
    }

    /// Whether slices or divisions are enforced (the agent then runs at
    /// its priority).
    pub fn gang_active(&self) -> bool {
        self.connected && self.mode.enforces_switches()
    }

    pub fn on_link_event<K: Kernel>(
        &mut self,
        engine: &Engine<K>,
        event: LinkEvent,
    ) -> Vec<Action> {
        match event {
            LinkEvent::Up { protocol } => self.joined(engine, protocol),
            LinkEvent::Down { .. } => self.left(),
            LinkEvent::Message(message) => self.on_message(engine, message),
        }
    }

    fn joined<K: Kernel>(&mut self, engine: &Engine<K>, protocol: ProtocolVersion) -> Vec<Action> {
        self.connected = true;
        self.peer = Some(protocol);
        self.metrics.connected.set(1);
        self.metrics.link_events.with_label_values(&["up"]).inc();
        for exit in self.exits.to_resend(monotonic_ns()) {
            self.link.send(exit);
        }
        // The inventory: coordinator jobs still running here.
        self.jobs.retain(|&job, _| engine.job_running(job));
        let jobs = self
            .jobs
            .keys()
            .map(|&job_id| JobUtilisation {
                job_id,
                quantum: INVENTORY_QUANTUM,
                cpu_utilisation: 0.0,
            })
            .collect();
        self.link.send(UtilReport { jobs });
        vec![Action::PolicyChanged]
    }

    /// The coordinator is gone: leave gang mode, the local policy (as
    /// configured) runs alone until it comes back.
    fn left(&mut self) -> Vec<Action> {
        self.connected = false;
        self.peer = None;
        self.metrics.connected.set(0);
        self.metrics.link_events.with_label_values(&["down"]).inc();
        for (token, _) in std::mem::take(&mut self.pending) {
            self.timer.cancel(token);
        }
        self.last_applied = None;
        self.schedule = None;
        self.last_division = None;
        self.quanta.reset();
        self.util_batch.clear();
        self.mode = Mode::default();
        self.local_override = None;
        self.class_policy = ClassPolicy::default();
        self.ratio = None;
        self.metrics.gang_mode.set(0);
        vec![
            Action::SetGang(None),
            Action::SetClasses(CoordinatorClasses::Config),
            Action::PolicyChanged,
        ]
    }

    fn on_message<K: Kernel>(&mut self, engine: &Engine<K>, message: Message) -> Vec<Action> {
        match message {
            Message::SetPolicy(set) => match parse_set_policy(&set.policy) {
                Ok(PolicyCommand::Global {
                    mode,
                    local,
                    classes,
                }) => {
                    tracing::info!(policy = %set.policy, "coordinator policy");
                    self.drop_schedule();
                    self.mode = mode;
                    self.local_override = local;
                    let mut actions = Vec::new();
                    // Only gang mode's switches replace (or end) the
                    // overlay: under any other mode the last gang slice
                    // would otherwise hold new jobs out (stopped, in strict
                    // mode) until an idle slice that may never come, e.g.
                    // when the policy changes right after the last job
                    // ended and new jobs arrive before the next slice.
                    if mode != Mode::Gang {
                        self.metrics.gang_mode.set(0);
                        actions.push(Action::SetGang(None));
                    }
                    if classes != self.class_policy {
                        self.class_policy = classes;
                        actions.extend(class_order(classes, self.ratio).map(Action::SetClasses));
                    }
                    actions.push(Action::PolicyChanged);
                    actions
                }
                Ok(PolicyCommand::Local(kind)) => {
                    self.local_override = Some(kind);
                    vec![Action::PolicyChanged]
                }
                Err(reason) => {
                    tracing::warn!(%reason, "refusing the coordinator's policy");
                    self.link.send(ErrorReport { reason });
                    Vec::new()
                }
            },
            Message::LaunchJob(launch) => self.on_launch(engine, &launch),
            Message::ExpectJob(expect) => {
                let already = engine.job(expect.job_id).is_some_and(|job| {
                    job.state == JobState::Running && job.expected && job.rank == expect.rank
                });
                if already && self.jobs.contains_key(&expect.job_id) {
                    Vec::new() // a repeated order: the rank is expected
                } else {
                    vec![Action::Expect(expect)]
                }
            }
            Message::CancelJob(cancel) => {
                if engine.job_running(cancel.job_id) {
                    vec![Action::Cancel(cancel.job_id)]
                } else {
                    Vec::new()
                }
            }
            Message::SwitchSlice(switch) => {
                self.drop_schedule();
                self.on_switch(switch, false)
            }
            Message::SliceSchedule(schedule) => self.on_schedule(schedule),
            Message::FirstFrameAt(first) => vec![Action::FirstFrame {
                job: first.job_id,
                at_ns: first.at_ns,
            }],
            Message::ClassSettings(settings) => self.on_class_settings(&settings),
            Message::SwitchDivision(division) => self.on_division(division),
            Message::CheckProgram(check) => vec![Action::CheckProgram(check)],
            Message::ReapRanks(reap) => self.on_reap(engine, reap.ranks),
            Message::Error(report) => {
                tracing::warn!(reason = %report.reason, "the coordinator reported an error");
                Vec::new()
            }
            other => {
                self.metrics
                    .wire_rejected
                    .with_label_values(&["unexpected_message"])
                    .inc();
                tracing::warn!(kind = %other.kind(), "unexpected message from the coordinator");
                Vec::new()
            }
        }
    }

    /// A reap order. A rank this agent launched is also killed the way a
    /// cancel kills it (its cgroup, else its whole process group). A job of
    /// that id the agent runs for someone else (launched or adopted through
    /// its control socket) shares the rank's cgroup name and environment, so
    /// nothing is killed for it: it is reported reaped with no process.
    fn on_reap<K: Kernel>(&mut self, engine: &Engine<K>, ranks: Vec<RankRef>) -> Vec<Action> {
        let (foreign, ranks): (Vec<RankRef>, Vec<RankRef>) = ranks.into_iter().partition(|rank| {
            !self.jobs.contains_key(&rank.job_id) && engine.job_running(rank.job_id)
        });
        if !foreign.is_empty() {
            tracing::warn!(
                ?foreign,
                "not reaping ranks whose job id belongs to a job not launched by the coordinator"
            );
            self.ranks_reaped(
                foreign
                    .iter()
                    .map(|rank| ReapedRank {
                        job_id: rank.job_id,
                        rank: rank.rank,
                        processes: 0,
                    })
                    .collect(),
            );
        }
        if ranks.is_empty() {
            return Vec::new();
        }
        let mut actions: Vec<Action> = ranks
            .iter()
            .filter(|rank| self.jobs.get(&rank.job_id) == Some(&rank.rank))
            .map(|rank| Action::Cancel(rank.job_id))
            .collect();
        actions.push(Action::Reap(ranks));
        actions
    }

    fn on_launch<K: Kernel>(&mut self, engine: &Engine<K>, launch: &LaunchJob) -> Vec<Action> {
        let already = engine
            .job(launch.job_id)
            .is_some_and(|job| job.state == JobState::Running && job.rank == launch.rank);
        if already && self.jobs.contains_key(&launch.job_id) {
            return Vec::new(); // a repeated launch: the rank runs
        }
        vec![Action::Launch {
            spec: Box::new(job_spec(launch)),
            first_frame_wait_ns: launch.first_frame_wait_ns,
        }]
    }

    /// The daemon launched a rank (`Ok`) or could not (`Err`).
    pub fn launched(&mut self, job: JobId, rank: u32, result: Result<(), String>) {
        match result {
            Ok(()) => {
                self.jobs.insert(job, rank);
            }
            Err(reason) => self.report_exit(JobExited {
                job_id: job,
                rank,
                status: ExitStatus::LaunchFailed { reason },
            }),
        }
    }

    /// The daemon looked for a checked program: `Ok(path)` of the file it
    /// would run, or why it could not.
    pub fn program_checked(&self, check_id: u64, found: Result<std::path::PathBuf, String>) {
        let outcome = match found {
            Ok(path) => ProgramCheck::Runnable {
                path: path.display().to_string(),
            },
            Err(reason) => ProgramCheck::NotRunnable { reason },
        };
        self.link.send(ProgramChecked { check_id, outcome });
    }

    /// The daemon carried out a reap order.
    pub fn ranks_reaped(&self, ranks: Vec<ReapedRank>) {
        self.link.send(RanksReaped { ranks });
    }

    /// Jobs the engine found finished: report the coordinator's (an RT
    /// job's last frame counts first, so they reach the coordinator before
    /// it retires the job).
    pub fn jobs_finished<K: Kernel>(&mut self, engine: &Engine<K>, finished: &[JobId]) {
        let ended: BTreeMap<JobId, u32> = finished
            .iter()
            .filter_map(|job| Some((*job, *self.jobs.get(job)?)))
            .collect();
        if !ended.is_empty() {
            self.send_frames(engine, &ended);
        }
        for &job in finished {
            let Some(rank) = self.jobs.remove(&job) else {
                continue;
            };
            let status = match engine.job(job).map(|record| &record.state) {
                Some(JobState::Exited {
                    signal: Some(signal),
                    ..
                }) => ExitStatus::Signalled { signal: *signal },
                Some(JobState::Exited { code, .. }) => ExitStatus::Exited {
                    code: code.unwrap_or(0),
                },
                _ => ExitStatus::Exited { code: 0 },
            };
            self.metrics.remove_job(job);
            self.report_exit(JobExited {
                job_id: job,
                rank,
                status,
            });
        }
    }

    fn report_exit(&mut self, exit: JobExited) {
        let sent = self.connected.then(monotonic_ns);
        if self.connected {
            self.link.send(exit.clone());
        }
        self.exits.record(exit, sent);
    }

    /// Forgets the schedule and its armed slice (which then never fires).
    fn drop_schedule(&mut self) {
        self.schedule = None;
        let timer = &mut self.timer;
        self.pending.retain(|&token, due| {
            let keep = !matches!(due, Due::Scheduled(_));
            if !keep {
                timer.cancel(token);
            }
            keep
        });
    }

    /// A `SliceSchedule`: it replaces the current one from its first slice,
    /// which is armed (or applied now if its instant passed, as a late
    /// switch is).
    fn on_schedule(&mut self, schedule: SliceSchedule) -> Vec<Action> {
        self.drop_schedule();
        let first = schedule.first_slice;
        let Some(switch) = schedule.switch(first) else {
            return Vec::new();
        };
        self.metrics
            .switches
            .with_label_values(&["scheduled"])
            .inc();
        self.schedule = Some(schedule);
        self.on_switch(switch, true)
    }

    /// Arms the schedule's slice after `applied` (skipping those whose
    /// instant already passed: they are over).
    fn arm_next_scheduled(&mut self, applied: &SwitchSlice) -> Vec<Action> {
        let Some(schedule) = &self.schedule else {
            return Vec::new();
        };
        if schedule.epoch != applied.epoch || applied.slice < schedule.first_slice {
            return Vec::new();
        }
        let now = monotonic_ns();
        let next = (applied.slice + 1).max(schedule.next_from(now));
        match schedule.switch(next) {
            Some(switch) => self.on_switch(switch, true),
            None => Vec::new(),
        }
    }

    /// Whether the switch to `switch` is reported: always, except the
    /// slices of a schedule that are not its report slices.
    fn reports(&self, switch: &SwitchSlice) -> bool {
        self.schedule.as_ref().is_none_or(|schedule| {
            schedule.epoch != switch.epoch
                || switch.slice < schedule.first_slice
                || schedule.reports(switch.slice)
        })
    }

    fn on_switch(&mut self, switch: SwitchSlice, scheduled: bool) -> Vec<Action> {
        let now = monotonic_ns();
        let timing = timing(&switch, now, self.last_applied);
        let will_stop = self.mode == Mode::Gang && self.config.stop_inactive;
        let mut actions = Vec::new();
        if will_stop
            && !switch.rows.is_empty()
            && matches!(timing, Timing::At(_) | Timing::Now { .. })
        {
            actions.push(Action::PrepareToStop);
        }
        match timing {
            Timing::At(at) => {
                let token = self.next_token;
                self.next_token += 1;
                let due = if scheduled {
                    Due::Scheduled(switch)
                } else {
                    Due::Slice(switch)
                };
                self.pending.insert(token, due);
                self.timer.arm(at, token);
            }
            Timing::Now { late_ns } => {
                tracing::debug!(
                    late_ns,
                    slice = switch.slice,
                    "switch arrived late; applying now"
                );
                self.metrics.switches.with_label_values(&["late"]).inc();
                let next = scheduled.then(|| switch.clone());
                actions.extend(self.apply(switch));
                if let Some(applied) = next {
                    actions.extend(self.arm_next_scheduled(&applied));
                }
            }
            Timing::Skip { late_ns } => {
                tracing::debug!(
                    late_ns,
                    slice = switch.slice,
                    "late non-strict switch skipped"
                );
                self.metrics.switches.with_label_values(&["skipped"]).inc();
                if scheduled {
                    actions.extend(self.arm_next_scheduled(&switch));
                }
            }
            Timing::Stale => {
                self.metrics.switches.with_label_values(&["stale"]).inc();
                // A schedule re-announced from a slice the last one already
                // switched to goes on from the next.
                if scheduled {
                    actions.extend(self.arm_next_scheduled(&switch));
                }
            }
            Timing::TooFar { ahead_ns } => {
                self.metrics.switches.with_label_values(&["refused"]).inc();
                self.link.send(ErrorReport {
                    reason: format!(
                        "slice {} announced {ahead_ns} ns ahead; refused",
                        switch.slice
                    ),
                });
            }
        }
        actions
    }

    /// The switch timer's fd is readable: apply the switches now due, in
    /// the order of their instants.
    pub fn on_switch_timer(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        for token in self.timer.take_due(monotonic_ns()) {
            actions.extend(self.on_switch_due(token));
        }
        actions
    }

    /// How many switches are armed on the timer.
    pub fn armed_switches(&self) -> usize {
        self.timer.armed()
    }

    /// Blocks until a switch is due (tests: no event loop).
    #[cfg(test)]
    pub fn wait_for_switch_timer(&self) {
        self.timer.wait();
    }

    /// The timer fired `token`: apply its switch now.
    fn on_switch_due(&mut self, token: u64) -> Vec<Action> {
        match self.pending.remove(&token) {
            Some(Due::Slice(switch)) => self.apply(switch),
            Some(Due::Scheduled(switch)) => {
                let mut actions = self.apply(switch.clone());
                actions.extend(self.arm_next_scheduled(&switch));
                actions
            }
            Some(Due::Division(division)) => self.apply_division(division),
            None => Vec::new(),
        }
    }

    /// Reports a refusal to the coordinator (and the log).
    pub fn refused(&self, reason: String) {
        tracing::warn!(%reason, "refusing the coordinator's order");
        self.link.send(ErrorReport { reason });
    }

    /// `ClassSettings`: the ratio (and Δ) of the BE/RT policies. Settings
    /// that cannot be used are refused and change nothing.
    fn on_class_settings(&mut self, settings: &ClassSettings) -> Vec<Action> {
        let terms = match check_settings(settings) {
            Ok(terms) => terms,
            Err(why) => {
                self.refused(format!(
                    "class settings refused: {why}; the running ones stay"
                ));
                return Vec::new();
            }
        };
        if self.ratio == Some(terms) {
            return Vec::new();
        }
        self.ratio = Some(terms);
        match self.class_policy {
            ClassPolicy::Tdm | ClassPolicy::Ps => class_order(self.class_policy, self.ratio)
                .map(Action::SetClasses)
                .into_iter()
                .collect(),
            // Kept for a later switch to a 2DCS policy.
            ClassPolicy::Config | ClassPolicy::Off => Vec::new(),
        }
    }

    /// `SwitchDivision` (2DCS-TDM): applied at its instant like a strict
    /// slice; refused under any other policy, and before the policy's
    /// `ClassSettings` (the class mode has not started).
    fn on_division(&mut self, division: SwitchDivision) -> Vec<Action> {
        let refusal = if self.mode != Mode::Tdm {
            Some("this node does not run 2dcs-tdm")
        } else if self.ratio.is_none() {
            Some("no class settings came with 2dcs-tdm yet")
        } else {
            None
        };
        if let Some(why) = refusal {
            self.metrics
                .division_switches
                .with_label_values(&["refused"])
                .inc();
            self.refused(format!(
                "division {} of epoch {} refused: {why}",
                division.division, division.epoch
            ));
            return Vec::new();
        }
        let now = monotonic_ns();
        match timing_of(announced(&division), now, self.last_division) {
            Timing::At(at) => {
                let token = self.next_token;
                self.next_token += 1;
                self.pending.insert(token, Due::Division(division));
                self.timer.arm(at, token);
                Vec::new()
            }
            Timing::Now { late_ns } | Timing::Skip { late_ns } => {
                tracing::debug!(
                    late_ns,
                    division = division.division,
                    "division arrived late; applying now"
                );
                self.metrics
                    .division_switches
                    .with_label_values(&["late"])
                    .inc();
                self.apply_division(division)
            }
            Timing::Stale => {
                self.metrics
                    .division_switches
                    .with_label_values(&["stale"])
                    .inc();
                Vec::new()
            }
            Timing::TooFar { ahead_ns } => {
                self.metrics
                    .division_switches
                    .with_label_values(&["refused"])
                    .inc();
                self.refused(format!(
                    "division {} announced {ahead_ns} ns ahead; refused",
                    division.division
                ));
                Vec::new()
            }
        }
    }

    /// The division's instant came: it starts, unless a newer one was
    /// applied or the policy changed meanwhile.
    fn apply_division(&mut self, division: SwitchDivision) -> Vec<Action> {
        let stale = self
            .last_division
            .is_some_and(|(epoch, number)| epoch == division.epoch && division.division <= number);
        if stale || self.mode != Mode::Tdm {
            self.metrics
                .division_switches
                .with_label_values(&["stale"])
                .inc();
            return Vec::new();
        }
        self.last_division = Some((division.epoch, division.division));
        vec![Action::DivisionStarted(division)]
    }

    /// The engine started `division`: reports the instant it took effect.
    pub fn division_switched(&mut self, division: &SwitchDivision) {
        let switched_at_ns = monotonic_ns();
        self.metrics
            .division_switches
            .with_label_values(&["applied"])
            .inc();
        self.metrics
            .division_lateness
            .observe(switched_at_ns.saturating_sub(division.apply_at_ns) as f64 / 1e9);
        self.link.send(DivisionSwitched {
            epoch: division.epoch,
            division: division.division,
            switched_at_ns,
        });
    }

    /// Sends the frame counts of the coordinator's RT jobs running here
    /// when the periodic report is due (called from the daemon's poll).
    /// A job whose processes all became ready for their first frame is
    /// reported at once (1GS warms a new RT job up in its start row until
    /// then), not at the next period.
    pub fn report_frames<K: Kernel>(&mut self, engine: &Engine<K>, now_ns: u64) {
        self.ready_sent.retain(|job| self.jobs.contains_key(job));
        if now_ns < self.next_frame_report_ns && !self.newly_ready(engine) {
            return;
        }
        self.next_frame_report_ns =
            now_ns.saturating_add(self.config.frame_report_interval_ms * 1_000_000);
        let jobs = self.jobs.clone();
        self.send_frames(engine, &jobs);
    }

    /// A `FrameReport` of `jobs` (those of them that are RT), if the
    /// coordinator is there and knows the message.
    fn send_frames<K: Kernel>(&mut self, engine: &Engine<K>, jobs: &BTreeMap<JobId, u32>) {
        if !self
            .peer
            .is_some_and(|peer| MessageKind::FrameReport.known_to(peer))
        {
            return;
        }
        let with_ready = self
            .peer
            .is_some_and(|peer| peer.minor >= READY_SINCE_MINOR);
        let with_moments = self
            .peer
            .is_some_and(|peer| peer.minor >= MOMENTS_SINCE_MINOR);
        let (entries, broken) =
            frame_entries(&engine.rt_frame_reports(), jobs, with_ready, with_moments);
        self.ready_sent
            .extend(entries.iter().filter(|e| e.ready).map(|e| e.job_id));
        if !broken.is_empty() {
            tracing::warn!(?broken, "frame counts left out of the report: inconsistent");
        }
        if let Some(report) = frame_report(entries) {
            self.metrics.frame_reports.inc();
            self.link.send(report);
        }
    }

    /// [`report_frames`](Self::report_frames) now if a coordinator RT job
    /// became ready since the last report, else nothing.
    pub fn report_if_newly_ready<K: Kernel>(&mut self, engine: &Engine<K>, now_ns: u64) {
        if self.newly_ready(engine) {
            self.next_frame_report_ns = 0;
            self.report_frames(engine, now_ns);
        }
    }

    /// Whether a coordinator RT job here became ready since the last report
    /// (only for a coordinator that takes readiness).
    fn newly_ready<K: Kernel>(&self, engine: &Engine<K>) -> bool {
        self.peer
            .is_some_and(|peer| peer.minor >= READY_SINCE_MINOR)
            && engine
                .rt_ready_jobs()
                .any(|job| self.jobs.contains_key(&job) && !self.ready_sent.contains(&job))
    }

    /// What enforcing `switch` takes, followed by [`Action::Switched`].
    fn apply(&mut self, switch: SwitchSlice) -> Vec<Action> {
        if self
            .last_applied
            .is_some_and(|(epoch, slice)| epoch == switch.epoch && switch.slice <= slice)
        {
            self.metrics.switches.with_label_values(&["stale"]).inc();
            return Vec::new();
        }
        self.slice_length.observe(&switch);
        let plan = enforcement(
            self.mode,
            &switch,
            self.config.stop_inactive,
            self.slice_length.get(),
        );
        let mut actions = match plan {
            Enforcement::LeaveGang => {
                self.metrics.gang_mode.set(0);
                vec![Action::SetGang(None)]
            }
            Enforcement::Gang(gang) => {
                self.metrics.gang_mode.set(1);
                vec![Action::SetGang(Some(gang))]
            }
            Enforcement::Slot { owner, until_ns } => vec![Action::SlotStarted { owner, until_ns }],
            Enforcement::Nothing => Vec::new(),
        };
        self.last_applied = Some((switch.epoch, switch.slice));
        actions.push(Action::Switched(Box::new(switch)));
        actions
    }

    /// The daemon enforced `switch`: reports the instant it took effect and
    /// ends the previous quantum.
    pub fn switched<K: Kernel>(&mut self, engine: &Engine<K>, switch: &SwitchSlice) {
        let switched_at_ns = monotonic_ns();
        self.metrics.switches.with_label_values(&["applied"]).inc();
        self.metrics
            .switch_lateness
            .observe(switched_at_ns.saturating_sub(switch.apply_at_ns) as f64 / 1e9);
        let reported = self.reports(switch);
        if reported {
            self.link.send(SliceSwitched {
                epoch: switch.epoch,
                slice: switch.slice,
                switched_at_ns,
            });
        }
        self.measure_quantum(engine, switch, switched_at_ns, reported);
    }

    /// Ends the previous quantum: utilisation of the jobs that ran in it,
    /// and where each job's CPU time went.
    fn measure_quantum<K: Kernel>(
        &mut self,
        engine: &Engine<K>,
        switch: &SwitchSlice,
        now_ns: u64,
        reported: bool,
    ) {
        if switch.rows.is_empty() {
            self.quanta.reset();
            // Slicing stopped: what was held goes now, not at some later slice.
            if let Some(jobs) = self.util_batch.add(Vec::new(), true) {
                self.link.send(UtilReport { jobs });
            }
            return;
        }
        let cpu = engine.jobs_cpu_seconds(self.jobs.keys().copied(), now_ns);
        let active: BTreeSet<JobId> = switch.active_jobs.iter().copied().collect();
        let end = self
            .quanta
            .switch(now_ns, switch.slice, active, cpu, self.node_cpus);
        for (job, inside, outside) in &end.attribution {
            let id = job.to_string();
            self.metrics
                .slot_cpu
                .with_label_values(&[&id, "in"])
                .inc_by(*inside);
            self.metrics
                .slot_cpu
                .with_label_values(&[&id, "out"])
                .inc_by(*outside);
        }
        if let Some(jobs) = self.util_batch.add(end.reports, reported) {
            self.link.send(UtilReport { jobs });
        }
    }
}

/// What to warn about at start when other jobs are demoted (not stopped)
/// outside their slot: with autogroups and no demotion cgroup, SCHED_IDLE
/// only counts inside each job's own session, and the demoted jobs keep a
/// large share of the CPU.
fn demotion_warning(stop_inactive: bool, demote_cgroup: bool, autogroup: bool) -> Option<String> {
    if stop_inactive || demote_cgroup || !autogroup {
        return None;
    }
    Some(
        "kernel.sched_autogroup_enabled=1: launched jobs get a session (and autogroup) each, \
         so demoting other jobs to SCHED_IDLE outside their slot barely slows them; set \
         demote_cpu_cgroup (a cgroup-v1 cpu directory: demoted tasks then move to its idle \
         cgroup), coordinator.stop_inactive = true (SIGSTOP), or disable autogroup"
            .into(),
    )
}

#[cfg(test)]
mod demotion_tests {
    use super::demotion_warning;

    #[test]
    fn demotion_warning_only_when_demotion_cannot_work() {
        let warning = demotion_warning(false, false, true).unwrap();
        assert!(warning.contains("demote_cpu_cgroup"), "{warning}");
        assert_eq!(demotion_warning(false, true, true), None, "cgroup set");
        assert_eq!(demotion_warning(true, false, true), None, "stopping");
        assert_eq!(demotion_warning(false, false, false), None, "no autogroups");
    }
}
