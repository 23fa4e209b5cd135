//! The class overlay over the local policy: which class runs now (2DCS-TDM
//! from the coordinator's divisions, or 2DCS-PS decided here) and the level
//! it means for each task (see `crate::classes::overlay`).
//!
//! The RT tick reads the frame counters (`rt.rs`), then decides here: RT
//! processes (their frame state, whether they are ready) and whether any
//! BE task is ready go to the overlay; the tasks whose level changed are
//! realised through the usual plan and executor, so every change is undone
//! by the restore ledger like any other.
use cosched_agent_common::TaskStats;
use cosched_policy::{
    classes::{
        DEFAULT_GRACE_PERIODS, DeadlineParams, Division, DivisionSource, PriorityBand, RtTask,
        deadline_params,
    },
    local::{Level, TaskId},
};

use super::{Engine, EngineError};
use crate::{
    classes::{
        BeLevel, BeUnderRt, ClassMode, CoordinatorClasses, EdfKind, LocalClassMode, RtLevel,
        config::check_band, readiness::task_ready,
    },
    kernel::Kernel,
    registry::TaskState,
};

/// The RT tick's period at the fastest: frame counters are read, and the
/// class decided, at most this often.
pub(super) const RT_TICK_NS: u64 = 1_000_000;

impl<K: Kernel> Engine<K> {
    /// The coordinator's class mode: 2DCS-TDM (its divisions then come by
    /// [`Self::division_started`]), or None to go back to the config's
    /// `[classes] mode`. Refused (the running mode stays) when its priority
    /// band does not fit this agent's boosts and own priority.
    pub fn set_class_mode(&mut self, mode: Option<ClassMode>) -> Result<(), EngineError> {
        if let Some(band) = mode.and_then(|m| m.rt_band()) {
            self.check_rt_band(band)?;
        }
        self.class_override = mode;
        self.classes_held_off = false;
        self.apply_class_mode();
        Ok(())
    }

    /// What the coordinator's global policy asks of the class overlay
    /// (`SetPolicy` and `ClassSettings`): 2DCS-TDM or 2DCS-PS with its
    /// ratio (the config's RT band, EDF kind and PS sleeper credit), off
    /// whatever the config says (1GS), or the config's mode again.
    pub fn set_coordinator_classes(
        &mut self,
        order: CoordinatorClasses,
    ) -> Result<(), EngineError> {
        let sleeper_credit = self.cfg.classes.ps_sleeper_credit_us.saturating_mul(1000);
        match order {
            CoordinatorClasses::Config => self.set_class_mode(None),
            CoordinatorClasses::Off => {
                self.class_override = None;
                self.classes_held_off = true;
                self.apply_class_mode();
                Ok(())
            }
            CoordinatorClasses::Tdm { ratio, period_ns } => {
                self.set_class_mode(Some(ClassMode::Tdm {
                    ratio,
                    rt_band: None,
                    be_under_rt: BeUnderRt::Capped,
                    period_ns,
                }))
            }
            CoordinatorClasses::Ps { ratio } => self.set_class_mode(Some(ClassMode::Ps {
                params: cosched_policy::classes::PsParams {
                    ratio,
                    sleeper_credit,
                },
                rt_band: None,
            })),
        }
    }

    /// A 2DCS-TDM division started on the coordinator's clock (its
    /// `SwitchDivision`); ignored outside TDM.
    pub fn division_started(&mut self, division: Division) {
        let now = self.k.now_ns();
        if self.classes.division_source() == Some(DivisionSource::Local) {
            tracing::info!("the coordinator's 2DCS-TDM divisions resumed");
            self.metrics.tdm_fallback_active.set(0);
        }
        if self
            .classes
            .division_started(division.class, division.len_ns(), now)
        {
            self.decide_classes(now, None);
        }
    }

    /// The class mode running now (None: off).
    pub fn class_mode(&self) -> Option<ClassMode> {
        self.classes.mode()
    }

    /// `off`, or the mode, its ratio and the class running; and how RT
    /// tasks are realised.
    pub(super) fn class_status(&self) -> String {
        match self.classes.mode() {
            None => "off".into(),
            Some(_) => format!("{}, edf {}", self.classes.describe(), self.edf_in_force()),
        }
    }

    /// The kernel's answer to the daemon's SCHED_DEADLINE probe (a thread
    /// pinned to the node's CPUs): with `edf = "deadline"` a refusal means
    /// every RT task runs by EDF-ordered FIFO priority, said once here.
    pub fn set_edf_probe(&mut self, probe: Result<(), String>) {
        if self.cfg.classes.edf == EdfKind::Deadline {
            match &probe {
                Ok(()) => tracing::info!(
                    cpus = ?self.cfg.cpus,
                    "EDF mechanism: SCHED_DEADLINE (the kernel accepts it for a task pinned to the node's CPUs)"
                ),
                Err(error) => tracing::warn!(
                    cpus = ?self.cfg.cpus,
                    "EDF mechanism: SCHED_FIFO priorities by absolute deadline, not SCHED_DEADLINE as configured: the kernel refused it for a task pinned to the node's CPUs ({error}); a pinned task needs an exclusive cpuset root domain (`cargo xtask cluster up --exclusive-cpusets`)"
                ),
            }
        }
        self.edf_probe = Some(probe);
        self.export_edf_mechanism();
    }

    /// How EDF is realised now: `deadline`, `fifo`, or `fifo (deadline
    /// refused: …)` when `edf = "deadline"` and the kernel refused it
    /// (to the probe, or to some task).
    pub fn edf_in_force(&self) -> String {
        if self.cfg.classes.edf != EdfKind::Deadline {
            return "fifo".into();
        }
        if let Some(Err(error)) = &self.edf_probe {
            return format!("fifo (deadline refused: {error})");
        }
        match self.metrics.rt_deadline_refused.get() {
            0 => "deadline".into(),
            n => format!("deadline ({n} task(s) refused: fifo for them)"),
        }
    }

    /// `cosched_rt_edf_mechanism`: 1 for the mechanism in force.
    pub(super) fn export_edf_mechanism(&self) {
        let deadline =
            self.cfg.classes.edf == EdfKind::Deadline && !matches!(self.edf_probe, Some(Err(_)));
        for (label, on) in [("deadline", deadline), ("fifo", !deadline)] {
            self.metrics
                .rt_edf_mechanism
                .with_label_values(&[label])
                .set(i64::from(on));
        }
    }

    fn check_rt_band(&self, band: PriorityBand) -> Result<(), EngineError> {
        let top_boost = [
            self.cfg.dcs.boost_prio,
            self.cfg.sb.wake_boost_prio,
            self.cfg.pb.boost_prio,
            self.cfg.fcs.top_prio,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let ceiling = match self.cfg.agent_priority {
            0 => crate::guardian::PRIORITY,
            p => p,
        };
        check_band(band, top_boost, ceiling).map_err(EngineError::BadClass)
    }

    /// The mode asked for: the coordinator's, else the config's.
    fn wanted_class_mode(&self) -> Option<ClassMode> {
        if self.classes_held_off {
            return None;
        }
        if self.class_override.is_some() {
            return self.class_override;
        }
        let c = &self.cfg.classes;
        match c.mode {
            LocalClassMode::Off => None,
            LocalClassMode::Ps => c.ps_params().ok().map(|params| ClassMode::Ps {
                params,
                rt_band: None,
            }),
        }
    }

    /// The config's RT priority band.
    pub(super) fn classes_band(&self) -> PriorityBand {
        self.cfg
            .classes
            .band()
            .unwrap_or_else(|_| self.classes.band())
    }

    /// Applies the mode asked for (after a reload or the coordinator's
    /// order) and decides at once.
    pub(super) fn apply_class_mode(&mut self) {
        let mode = self.wanted_class_mode();
        let band = mode
            .and_then(|m| m.rt_band())
            .unwrap_or_else(|| self.classes_band());
        let now = self.k.now_ns();
        if self.classes.set_mode(mode, band, now) {
            tracing::info!(classes = %self.class_status(), "class mode set");
            self.update_own_priority();
            self.decide_classes(now, None);
            // Leaving a mode (or changing it) may leave tasks the overlay
            // no longer holds: every task is realised again.
            let tids = self.reg.task_ids();
            self.realize_all(&tids, None);
        }
    }

    /// The RT tick: counters, then the class decision. `live`: the managed
    /// tasks' counters, read by the policy tick.
    pub(super) fn rt_tick(&mut self, now_ns: u64, live: &[(u32, TaskStats)]) {
        self.last_rt_tick = now_ns;
        self.read_frames(now_ns, live);
        self.decide_classes(now_ns, Some(live));
        if self.classes_held_off && self.gang.is_some() {
            // 1GS: a process that went over its budget loses its row's
            // priority (and gets it back in its next window).
            let tids: Vec<u32> = self
                .reg
                .tasks()
                .filter(|(_, s)| self.is_rt_process(s.job, s.tgid))
                .map(|(t, _)| t)
                .collect();
            self.realize_all(&tids, None);
        }
    }

    /// When the RT tick is next due (None: no RT process).
    pub(super) fn next_rt_tick(&self) -> Option<u64> {
        if !self.has_rt_processes() {
            return None;
        }
        let period = (self.cfg.policy_tick_us * 1000).max(RT_TICK_NS);
        Some(self.last_rt_tick.saturating_add(period))
    }

    /// Decides which class runs and realises the tasks whose level changed.
    /// `live`: the tick's counters (None: read now).
    pub(super) fn decide_classes(&mut self, now_ns: u64, live: Option<&[(u32, TaskStats)]>) {
        if self.classes.mode().is_none() {
            self.metrics.tdm_fallback_active.set(0);
            return;
        }
        let owned;
        let live = match live {
            Some(l) => l,
            None => {
                owned = self.live_stats().0;
                &owned
            }
        };
        let mut rt_ready: std::collections::BTreeMap<u32, bool> = Default::default();
        let mut be_ready = false;
        for (tid, s) in live {
            let Some(state) = self.reg.task(*tid) else {
                continue;
            };
            let ready = s.exited_ns == 0 && task_ready(s);
            if self.is_rt_process(state.job, state.tgid) {
                *rt_ready.entry(state.tgid).or_default() |= ready;
            } else if !self.daemons.contains(&state.tgid) {
                be_ready |= ready;
            }
        }
        let rt: Vec<RtTask> = self
            .reg
            .jobs()
            .filter_map(|j| j.rt.as_ref())
            .flat_map(|rt| {
                rt.pids()
                    .into_iter()
                    .filter_map(|pid| Some((pid, rt.state(pid)?)))
                    .collect::<Vec<_>>()
            })
            .map(|(pid, state)| {
                RtTask::new(
                    TaskId(pid),
                    rt_ready.get(&pid).copied().unwrap_or(false),
                    state,
                )
            })
            .collect();
        let source = self.classes.division_source();
        let changes = self.classes.decide(now_ns, &rt, be_ready);
        let now_source = self.classes.division_source();
        self.metrics
            .tdm_fallback_active
            .set(i64::from(now_source == Some(DivisionSource::Local)));
        if source == Some(DivisionSource::Coordinator) && now_source == Some(DivisionSource::Local)
        {
            self.metrics.tdm_fallbacks.inc();
            tracing::warn!(
                "no 2DCS-TDM division from the coordinator for {DEFAULT_GRACE_PERIODS} periods: running the node's own division clock (same ratio and period) until its divisions resume"
            );
        }
        let tids: Vec<u32> = self
            .reg
            .tasks()
            .filter(|(_, s)| {
                if self.is_rt_process(s.job, s.tgid) {
                    changes.rt.contains(&s.tgid)
                } else {
                    changes.be
                }
            })
            .map(|(t, _)| t)
            .collect();
        self.realize_all(&tids, None);
    }

    /// The level the class overlay gives a task the policy wants at
    /// `wanted`: an RT process's EDF priority or hold; a BE task's policy
    /// level, capped (or demoted) while the RT class runs.
    pub(super) fn class_level(&self, state: &TaskState, wanted: Level) -> Level {
        if let Some(level) = self.classes.rt_level(state.tgid)
            && self.is_rt_process(state.job, state.tgid)
        {
            return match level {
                RtLevel::Run { prio } => Level::Boost { prio },
                // A task at SCHED_DEADLINE is not taken out of it for a
                // hold: its reservation (τ + slack per d) is what bounds it.
                // Leaving SCHED_DEADLINE throttled and coming back before
                // the task's 0-lag time leaves it throttled for good on
                // Linux 6.18 (the replenishment timer fired while it was
                // away and did nothing), and until that 0-lag time its
                // bandwidth still counts against the root domain, so a
                // return is also admitted as if it needed it twice (EBUSY).
                // The priority is unused: the task keeps its reservation.
                RtLevel::Hold if self.realised_at_deadline(state) => Level::Boost {
                    prio: self.classes_band().lo(),
                },
                RtLevel::Hold => Level::Demote,
            };
        }
        match self.classes.be_level() {
            BeLevel::Free => wanted,
            BeLevel::Capped if wanted.is_boost() => Level::Normal,
            BeLevel::Capped => wanted,
            BeLevel::Demoted if wanted == Level::Stop => wanted,
            BeLevel::Demoted => Level::Demote,
        }
    }

    /// Whether a task is an RT process's thread under the class overlay
    /// (its watch flags are then the overlay's business: none).
    pub(super) fn under_rt_overlay(&self, state: &TaskState) -> bool {
        self.classes.rt_level(state.tgid).is_some() && self.is_rt_process(state.job, state.tgid)
    }

    /// SCHED_DEADLINE parameters for a task boosted by the overlay, with
    /// `edf = "deadline"` and unless the kernel refused it for this task.
    pub(super) fn deadline_for(&self, state: &TaskState, level: Level) -> Option<DeadlineParams> {
        if !self.realised_at_deadline(state) || !level.is_boost() || !self.under_rt_overlay(state) {
            return None;
        }
        let spec = self.reg.job(state.job)?.rt.as_ref()?.spec;
        let slack = self.cfg.classes.budget_slack_percent;
        let margin = spec.work_ns.saturating_mul(u64::from(slack)) / 100;
        Some(deadline_params(&spec, margin))
    }

    /// Whether an RT task's boosts are realised by SCHED_DEADLINE:
    /// `edf = "deadline"`, and the kernel refused it neither to the
    /// daemon's probe nor to this task.
    fn realised_at_deadline(&self, state: &TaskState) -> bool {
        self.cfg.classes.edf == EdfKind::Deadline
            && !matches!(self.edf_probe, Some(Err(_)))
            && !state.deadline_refused
    }

    /// The kernel refused SCHED_DEADLINE for `tid` (its affinity is
    /// narrower than its root domain, or the admission test failed): from
    /// now on it runs EDF by FIFO priority.
    pub(super) fn refuse_deadline(&mut self, tid: u32, error: &std::io::Error) {
        let Some(state) = self.reg.task_mut(tid) else {
            return;
        };
        if state.deadline_refused {
            return;
        }
        state.deadline_refused = true;
        self.metrics.rt_deadline_refused.inc();
        let why = if error.raw_os_error() == Some(libc::EBUSY) {
            "its admission test: the root domain's deadline bandwidth is taken"
        } else {
            "SCHED_DEADLINE needs an exclusive cpuset root domain for a pinned task"
        };
        tracing::warn!(
            tid,
            "the kernel refused SCHED_DEADLINE ({error}; {why}): this RT task runs by EDF-ordered SCHED_FIFO priority instead"
        );
    }
}
