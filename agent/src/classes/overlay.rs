//! The class overlay (pure): which class runs on the node now, and what
//! that means for each RT process and for BE tasks. The engine lays it over
//! the local policy like the gang overlay (see `engine/classes.rs`).
//!
//! Realisation leaves the fine-grain choices to the kernel:
//! - RT tasks with frames due while the RT class runs get SCHED_FIFO
//!   priorities in the RT band, earliest deadline highest
//!   ([`EdfPriorities`]); every BE task is below them, so BE runs only when
//!   every such RT task blocks — the paper's lending of the RT division to
//!   BE, done by the kernel at once rather than at the agent's next tick.
//! - RT tasks whose class does not run, and satisfied or throttled ones,
//!   are held at SCHED_IDLE: they get the CPU only when no BE task can run
//!   (BE lending to RT).
//! - BE tasks follow the local policy, capped at Normal while the RT class
//!   runs, so no BE boost competes with the RT class for its share.
//!
//! 2DCS-TDM: the coordinator's division says which class runs; the
//! [`TdmNode`] decision says whether the RT division is lent (no RT task
//! ready with frames due): BE is then not capped. 2DCS-PS: the [`PsNode`]
//! picks the class at every tick from the classes' readiness; while BE runs
//! only because no due RT task is ready and RT is behind its share, the
//! blocked due RT tasks keep their priorities (armed) so the kernel runs
//! them at their wakeup, as in an RT division lent to BE.
use std::collections::{BTreeMap, BTreeSet};

use cosched_policy::{
    classes::{
        Class, DEFAULT_GRACE_PERIODS, DivisionFallback, DivisionSource, EdfPriorities,
        FairnessRatio, PriorityBand, PsNode, PsParams, Readiness, RtTask, TdmEvent, TdmNode,
        due_before_be_division_ends,
    },
    local::TaskId,
};

/// How the node shares its CPUs between the classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassMode {
    /// 2DCS-TDM: the coordinator's divisions (`Engine::division_started`)
    /// say which class owns the node. `ratio` is the coordinator's, shown in
    /// the status; `rt_band` None: the config's.
    Tdm {
        ratio: FairnessRatio,
        rt_band: Option<PriorityBand>,
        be_under_rt: BeUnderRt,
        /// The coordinator's Δ: after [`DEFAULT_GRACE_PERIODS`] × Δ without
        /// a division the node runs its own division clock with the ratio
        /// and Δ until the coordinator's divisions resume
        /// ([`DivisionFallback`]). 0: no fallback (the last division holds).
        period_ns: u64,
    },
    /// 2DCS-PS: the node alone picks the class by virtual time.
    Ps {
        params: PsParams,
        rt_band: Option<PriorityBand>,
    },
}

impl ClassMode {
    pub fn rt_band(&self) -> Option<PriorityBand> {
        match *self {
            ClassMode::Tdm { rt_band, .. } | ClassMode::Ps { rt_band, .. } => rt_band,
        }
    }
}

/// What a coordinator's global policy asks of the class overlay
/// (`Engine::set_coordinator_classes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoordinatorClasses {
    /// Nothing: the config's `[classes] mode` runs (no coordinator, or a
    /// policy without classes).
    #[default]
    Config,
    /// Off, whatever the config says: under 1GS the slices of its rows are
    /// the RT guarantee, and a node-local class choice would undo it.
    Off,
    /// 2DCS-TDM with the coordinator's ratio and Δ; its divisions follow.
    Tdm {
        ratio: FairnessRatio,
        period_ns: u64,
    },
    /// 2DCS-PS with the coordinator's ratio.
    Ps { ratio: FairnessRatio },
}

/// What BE tasks get while the RT class runs (and is not lent).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BeUnderRt {
    /// Their policy's level, a boost lowered to Normal.
    #[default]
    Capped,
    /// SCHED_IDLE: they share only what RT leaves with held RT tasks.
    Demoted,
}

/// What an RT process gets now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtLevel {
    /// Frames due and its class runs: EDF at this FIFO priority (or
    /// SCHED_DEADLINE, which the engine decides).
    Run { prio: u8 },
    /// SCHED_IDLE until its class runs again or its next window opens.
    Hold,
}

/// What BE tasks get now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BeLevel {
    /// The local policy's level.
    #[default]
    Free,
    Capped,
    Demoted,
}

enum Node {
    Off,
    Tdm(TdmNode),
    Ps(PsNode),
}

/// Which RT processes and BE tasks changed at a decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub rt: Vec<u32>,
    pub be: bool,
}

pub struct ClassOverlay {
    mode: Option<ClassMode>,
    node: Node,
    priorities: EdfPriorities,
    targets: BTreeMap<u32, RtLevel>,
    be: BeLevel,
    /// The RT processes the TDM node was told about.
    placed: BTreeSet<u32>,
    /// 2DCS-TDM: the node's own clock when the coordinator goes silent.
    fallback: Option<DivisionFallback>,
    /// 2DCS-TDM: when the current division ends on this node's clock (0:
    /// not known).
    division_end_ns: u64,
}

impl ClassOverlay {
    /// An overlay that is off.
    pub fn new(band: PriorityBand) -> Self {
        Self {
            mode: None,
            node: Node::Off,
            priorities: EdfPriorities::new(band),
            targets: BTreeMap::new(),
            be: BeLevel::Free,
            placed: BTreeSet::new(),
            fallback: None,
            division_end_ns: 0,
        }
    }

    pub fn mode(&self) -> Option<ClassMode> {
        self.mode
    }

    /// The FIFO priorities RT tasks get.
    pub fn band(&self) -> PriorityBand {
        self.priorities.band()
    }

    /// Enters, changes or leaves (None) a class mode; `band` is the
    /// priority band to use. Returns whether anything changed (the engine
    /// then decides again). A mode that only changes its ratio keeps its
    /// state (the PS virtual times, the TDM division).
    pub fn set_mode(&mut self, mode: Option<ClassMode>, band: PriorityBand, now_ns: u64) -> bool {
        let same_kind = matches!(
            (&self.mode, &mode),
            (Some(ClassMode::Tdm { .. }), Some(ClassMode::Tdm { .. }))
                | (Some(ClassMode::Ps { .. }), Some(ClassMode::Ps { .. }))
        );
        let band_changed = band != self.priorities.band();
        if self.mode == mode && !band_changed {
            return false;
        }
        if band_changed {
            self.priorities = EdfPriorities::new(band);
        }
        let ps_params_changed = matches!(
            (&self.mode, &mode),
            (Some(ClassMode::Ps { params: a, .. }), Some(ClassMode::Ps { params: b, .. })) if a != b
        );
        if !same_kind || ps_params_changed {
            self.node = match mode {
                None => Node::Off,
                // Until the coordinator's first division: RT, so RT tasks
                // with frames due are not held back waiting for it.
                Some(ClassMode::Tdm { .. }) => Node::Tdm(TdmNode::new(Class::RealTime)),
                Some(ClassMode::Ps { params, .. }) => Node::Ps(PsNode::new(params, now_ns)),
            };
            self.placed.clear();
        }
        self.fallback = match mode {
            // A new ratio or Δ: wait the grace time for the coordinator's
            // next division again.
            Some(ClassMode::Tdm {
                ratio, period_ns, ..
            }) if period_ns > 0 => {
                DivisionFallback::new(period_ns, ratio, DEFAULT_GRACE_PERIODS, now_ns).ok()
            }
            _ => None,
        };
        self.mode = mode;
        if mode.is_none() {
            self.targets.clear();
            self.be = BeLevel::Free;
        }
        true
    }

    /// The coordinator's division `class`, `len_ns` long, started at
    /// `now_ns` (2DCS-TDM; ignored in other modes): it rules again if the
    /// node ran its own clock. The engine decides again right after.
    pub fn division_started(&mut self, class: Class, len_ns: u64, now_ns: u64) -> bool {
        let Node::Tdm(node) = &mut self.node else {
            return false;
        };
        self.division_end_ns = now_ns.saturating_add(len_ns);
        if let Some(fallback) = &mut self.fallback {
            fallback.coordinator_division(now_ns);
        }
        node.on_event(TdmEvent::DivisionStarted(class));
        true
    }

    /// Whose divisions 2DCS-TDM follows now (None: not in 2DCS-TDM).
    pub fn division_source(&self) -> Option<DivisionSource> {
        match self.node {
            Node::Tdm(_) => Some(
                self.fallback
                    .as_ref()
                    .map_or(DivisionSource::Coordinator, |f| f.source()),
            ),
            _ => None,
        }
    }

    /// Decides at `now_ns`, given every RT process (`id` = its pid; ready
    /// or not; its frame state) and whether any BE task is ready.
    pub fn decide(&mut self, now_ns: u64, rt: &[RtTask], be_ready: bool) -> Changes {
        // 2DCS-TDM's BE division: the end before which a due frame runs.
        let mut rt_urgent: Option<u64> = None;
        let (rt_runs, be) = match &mut self.node {
            Node::Off => (None, BeLevel::Free),
            Node::Tdm(node) => {
                if let Some(local) = self
                    .fallback
                    .as_mut()
                    .and_then(|f| f.local_division(now_ns, node.division()))
                    && local.class != node.division()
                {
                    node.on_event(TdmEvent::DivisionStarted(local.class));
                    self.division_end_ns = local.end_ns;
                }
                let now: BTreeSet<u32> = rt.iter().map(|t| t.id.0).collect();
                for gone in self.placed.difference(&now) {
                    node.on_event(TdmEvent::RtRemoved(TaskId(*gone)));
                }
                for task in rt {
                    node.on_event(TdmEvent::RtUpdated(*task));
                }
                node.on_event(TdmEvent::BeReady(be_ready));
                self.placed = now;
                let rt_division = node.division() == Class::RealTime;
                let rt_not_lent = node.decision().class() == Some(Class::RealTime);
                let held = rt_division && rt_not_lent;
                rt_urgent =
                    (!rt_division && self.division_end_ns > 0).then_some(self.division_end_ns);
                (Some(rt_division), self.held_be(held))
            }
            Node::Ps(node) => {
                let ready = Readiness {
                    rt: rt.iter().any(|t| t.ready && t.is_due()),
                    be: be_ready,
                };
                let chosen = node.on_event(now_ns, ready);
                // With nothing ready RT keeps its priorities: a task that
                // wakes with frames due runs at once. So does a blocked due
                // task while BE runs if RT is behind its share (armed): the
                // agent sees a timer wakeup only at the task's next
                // switch-in, which a task held at SCHED_IDLE behind a
                // spinning BE task hardly ever gets.
                let armed = node.takes_cpu_on_return(Class::RealTime);
                let rt_runs = chosen != Some(Class::BestEffort) || armed;
                (Some(rt_runs), self.held_be(chosen == Some(Class::RealTime)))
            }
        };
        let mut targets = BTreeMap::new();
        if let Some(rt_runs) = rt_runs {
            self.priorities.assign(rt);
            for task in rt {
                let urgent = rt_urgent.is_some_and(|end| due_before_be_division_ends(task, end));
                let level = match self.priorities.priority(task.id) {
                    Some(prio) if (rt_runs || urgent) && task.is_due() => RtLevel::Run { prio },
                    _ => RtLevel::Hold,
                };
                targets.insert(task.id.0, level);
            }
        }
        let mut changed: BTreeSet<u32> = targets
            .iter()
            .filter(|&(pid, level)| self.targets.get(pid) != Some(level))
            .map(|(&pid, _)| pid)
            .collect();
        changed.extend(self.targets.keys().filter(|p| !targets.contains_key(p)));
        self.targets = targets;
        let be_changed = self.be != be;
        self.be = be;
        Changes {
            rt: changed.into_iter().collect(),
            be: be_changed,
        }
    }

    fn held_be(&self, held: bool) -> BeLevel {
        match (held, self.mode) {
            (false, _) => BeLevel::Free,
            (
                true,
                Some(ClassMode::Tdm {
                    be_under_rt: BeUnderRt::Demoted,
                    ..
                }),
            ) => BeLevel::Demoted,
            (true, _) => BeLevel::Capped,
        }
    }

    /// What RT process `pid` gets (None: no class mode, or not decided yet).
    pub fn rt_level(&self, pid: u32) -> Option<RtLevel> {
        self.targets.get(&pid).copied()
    }

    pub fn be_level(&self) -> BeLevel {
        self.be
    }

    /// The class running now, as the status and metrics show it.
    pub fn running(&self) -> Option<Class> {
        match &self.node {
            Node::Off => None,
            Node::Tdm(node) => Some(node.division()),
            Node::Ps(node) => node.running(),
        }
    }

    /// `off`, `tdm 2:1 (rt division)`, `ps 2:1 (be runs)`.
    pub fn describe(&self) -> String {
        let class = |c: Option<Class>| match c {
            Some(Class::RealTime) => "rt",
            Some(Class::BestEffort) => "be",
            None => "none",
        };
        match (&self.mode, &self.node) {
            (Some(ClassMode::Tdm { ratio, .. }), Node::Tdm(node)) => format!(
                "tdm {}:{} ({} division{})",
                ratio.rt,
                ratio.be,
                class(Some(node.division())),
                match self.division_source() {
                    Some(DivisionSource::Local) =>
                        ", local clock: no division from the coordinator",
                    _ => "",
                }
            ),
            (Some(ClassMode::Ps { params, .. }), Node::Ps(node)) => format!(
                "ps {}:{} ({} runs)",
                params.ratio.rt,
                params.ratio.be,
                class(node.running())
            ),
            _ => "off".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use cosched_policy::classes::FrameState;

    use super::*;

    const MS: u64 = 1_000_000;

    fn band() -> PriorityBand {
        PriorityBand::new(21, 39).unwrap()
    }

    fn tdm() -> ClassMode {
        ClassMode::Tdm {
            ratio: FairnessRatio::new(2, 1).unwrap(),
            rt_band: None,
            be_under_rt: BeUnderRt::Capped,
            period_ns: 30 * MS,
        }
    }

    fn due(id: u32, deadline_ns: u64, ready: bool) -> RtTask {
        RtTask::new(TaskId(id), ready, FrameState::Due { deadline_ns })
    }

    fn satisfied(id: u32) -> RtTask {
        RtTask::new(
            TaskId(id),
            true,
            FrameState::Satisfied {
                until_ns: 20 * MS,
                next_deadline_ns: 30 * MS,
            },
        )
    }

    #[test]
    fn off_decides_nothing() {
        let mut o = ClassOverlay::new(band());
        let c = o.decide(0, &[due(1, 10, true)], true);
        assert_eq!(c, Changes::default());
        assert_eq!(o.rt_level(1), None);
        assert_eq!(o.describe(), "off");
    }

    #[test]
    fn tdm_runs_due_tasks_by_deadline_in_the_rt_division_and_holds_them_in_the_be_one() {
        let mut o = ClassOverlay::new(band());
        assert!(o.set_mode(Some(tdm()), band(), 0));
        let rt = [due(1, 20 * MS, true), due(2, 10 * MS, true), satisfied(3)];
        let c = o.decide(0, &rt, true);
        assert_eq!(c.rt, vec![1, 2, 3]);
        let (Some(RtLevel::Run { prio: p1 }), Some(RtLevel::Run { prio: p2 })) =
            (o.rt_level(1), o.rt_level(2))
        else {
            panic!("{:?} {:?}", o.rt_level(1), o.rt_level(2));
        };
        assert!(p2 > p1, "earlier deadline, higher priority");
        assert!((21..=39).contains(&p1) && (21..=39).contains(&p2));
        assert_eq!(o.rt_level(3), Some(RtLevel::Hold), "satisfied");
        assert_eq!(o.be_level(), BeLevel::Capped);
        assert!(o.division_started(Class::BestEffort, 5 * MS, MS));
        let c = o.decide(MS, &rt, true);
        assert_eq!(
            c,
            Changes {
                rt: vec![1, 2],
                be: true
            }
        );
        assert_eq!(o.rt_level(1), Some(RtLevel::Hold));
        assert_eq!(o.be_level(), BeLevel::Free);
        assert_eq!(o.describe(), "tdm 2:1 (be division)");
    }

    #[test]
    fn tdm_runs_a_frame_due_before_the_be_division_ends_and_holds_the_rest() {
        let mut o = ClassOverlay::new(band());
        assert!(o.set_mode(Some(tdm()), band(), 0));
        // BE division from 1 ms to 11 ms: task 2's frame is due at 10 ms,
        // before the next RT division; task 1's at 20 ms can wait for it.
        assert!(o.division_started(Class::BestEffort, 10 * MS, MS));
        let rt = [due(1, 20 * MS, false), due(2, 10 * MS, false), satisfied(3)];
        o.decide(MS, &rt, true);
        assert_eq!(o.rt_level(1), Some(RtLevel::Hold));
        assert!(matches!(o.rt_level(2), Some(RtLevel::Run { .. })));
        assert_eq!(o.rt_level(3), Some(RtLevel::Hold), "satisfied");
        assert_eq!(o.be_level(), BeLevel::Free, "BE keeps its division");
    }

    #[test]
    fn tdm_lends_the_rt_division_when_no_due_rt_task_is_ready() {
        let mut o = ClassOverlay::new(band());
        o.set_mode(Some(tdm()), band(), 0);
        o.decide(0, &[due(1, 10 * MS, false)], true);
        assert_eq!(o.be_level(), BeLevel::Free, "lent to BE");
        assert!(
            matches!(o.rt_level(1), Some(RtLevel::Run { .. })),
            "a blocked due task keeps its priority to preempt when it wakes"
        );
        o.decide(MS, &[due(1, 10 * MS, true)], true);
        assert_eq!(o.be_level(), BeLevel::Capped);
    }

    #[test]
    fn ps_alternates_by_virtual_time_and_a_returning_class_has_no_saved_credit() {
        let ratio = FairnessRatio::new(2, 1).unwrap();
        let mut o = ClassOverlay::new(band());
        let mode = ClassMode::Ps {
            params: PsParams {
                ratio,
                sleeper_credit: 0,
            },
            rt_band: None,
        };
        o.set_mode(Some(mode), band(), 0);
        let rt = [due(1, u64::MAX, true)];
        // RT alone for a long time: BE has nothing ready.
        for t in 0..1000 {
            o.decide(t * MS, &rt, false);
        }
        assert!(matches!(o.rt_level(1), Some(RtLevel::Run { .. })));
        // BE comes back: it gets its third, not the time it slept.
        let mut be_ticks = 0;
        for t in 1000..1030 {
            o.decide(t * MS, &rt, true);
            if o.rt_level(1) == Some(RtLevel::Hold) {
                be_ticks += 1;
            }
        }
        assert!((9..=11).contains(&be_ticks), "{be_ticks} of 30 ticks");
    }

    fn ps() -> ClassMode {
        ClassMode::Ps {
            params: PsParams {
                ratio: FairnessRatio::new(2, 1).unwrap(),
                sleeper_credit: 0,
            },
            rt_band: None,
        }
    }

    #[test]
    fn an_rt_task_waking_on_its_timer_while_be_runs_takes_the_cpu_when_rt_is_behind_its_share() {
        let mut o = ClassOverlay::new(band());
        o.set_mode(Some(ps()), band(), 0);
        // RT ran its 1 ms frame (vt_RT 1.5 ms) and sleeps on its timer
        // until the next period; a BE spinner is always ready.
        o.decide(0, &[due(1, 10 * MS, true)], true);
        assert!(matches!(o.rt_level(1), Some(RtLevel::Run { .. })));
        o.decide(MS, &[due(1, 20 * MS, false)], true);
        assert_eq!(o.running(), Some(Class::BestEffort));
        assert_eq!(
            o.rt_level(1),
            Some(RtLevel::Hold),
            "RT is ahead of its share: BE keeps the CPU even at a wakeup"
        );
        // BE catches up (0.5 ms) and keeps running: the sleeping RT task
        // keeps its EDF priority, so the kernel runs it the moment its timer
        // wakes it — the agent sees the wakeup only at its next switch-in.
        for t in 2..10 {
            o.decide(t * MS, &[due(1, 20 * MS, false)], true);
            assert_eq!(o.running(), Some(Class::BestEffort));
            assert!(
                matches!(o.rt_level(1), Some(RtLevel::Run { .. })),
                "at {t} ms: {:?}",
                o.rt_level(1)
            );
            assert_eq!(o.be_level(), BeLevel::Free, "lent to BE meanwhile");
        }
        // A satisfied RT task is not armed: it has no frame to run.
        o.decide(10 * MS, &[satisfied(1)], true);
        assert_eq!(o.rt_level(1), Some(RtLevel::Hold));
    }

    #[test]
    fn under_ps_backlogged_classes_still_alternate_x_to_y_with_rt_held_in_be_turns() {
        let mut o = ClassOverlay::new(band());
        o.set_mode(Some(ps()), band(), 0);
        let rt = [due(1, u64::MAX, true)];
        let mut held = 0;
        for t in 0..300 {
            o.decide(t * MS, &rt, true);
            if o.rt_level(1) == Some(RtLevel::Hold) {
                held += 1;
                assert_eq!(o.running(), Some(Class::BestEffort));
            }
        }
        assert!((95..=105).contains(&held), "BE turns: {held} of 300");
    }

    #[test]
    fn divisions_that_stop_arriving_give_way_to_the_nodes_own_clock_until_they_resume() {
        let mut o = ClassOverlay::new(band());
        o.set_mode(Some(tdm()), band(), 0);
        let rt = [due(1, u64::MAX, true)];
        o.division_started(Class::RealTime, 20 * MS, 10 * MS);
        o.decide(10 * MS, &rt, true);
        assert_eq!(o.be_level(), BeLevel::Capped);
        // The coordinator goes silent in the RT division: BE starves for
        // 3 Δ (90 ms), then the node alternates on its own, 20 ms RT and
        // 10 ms BE, starting with BE.
        let mut rt_ms = 0;
        for t in 11..100 {
            o.decide(t * MS, &rt, true);
            assert_eq!(o.running(), Some(Class::RealTime), "at {t} ms");
        }
        assert_eq!(o.division_source(), Some(DivisionSource::Coordinator));
        for t in 100..400 {
            o.decide(t * MS, &rt, true);
            if o.running() == Some(Class::RealTime) {
                rt_ms += 1;
                assert!(matches!(o.rt_level(1), Some(RtLevel::Run { .. })));
            } else {
                assert_eq!(o.rt_level(1), Some(RtLevel::Hold), "at {t} ms");
            }
        }
        assert_eq!(rt_ms, 200, "2:1 over 300 ms");
        assert_eq!(o.division_source(), Some(DivisionSource::Local));
        assert!(o.describe().contains("local clock"), "{}", o.describe());
        // The coordinator's BE division arrives: it rules again at once.
        o.division_started(Class::BestEffort, 10 * MS, 400 * MS);
        for t in 400..480 {
            o.decide(t * MS, &rt, true);
            assert_eq!(o.running(), Some(Class::BestEffort), "at {t} ms");
        }
        assert_eq!(o.division_source(), Some(DivisionSource::Coordinator));
    }

    #[test]
    fn without_a_period_the_last_division_holds() {
        let mut o = ClassOverlay::new(band());
        let mode = ClassMode::Tdm {
            ratio: FairnessRatio::new(2, 1).unwrap(),
            rt_band: None,
            be_under_rt: BeUnderRt::Capped,
            period_ns: 0,
        };
        o.set_mode(Some(mode), band(), 0);
        for t in 0..1000 {
            o.decide(t * MS, &[due(1, u64::MAX, true)], true);
        }
        assert_eq!(o.running(), Some(Class::RealTime));
    }
}
