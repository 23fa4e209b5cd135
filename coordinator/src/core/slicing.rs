//! Time slicing: computing each slice, telling every agent what runs on its
//! node and when (in its own clock), and learning from what they report
//! back (switch instants, per-quantum utilisation).
//!
//! Under the gang rotation (gang, fcs, fcfs) and `schedule_ahead` (paired
//! gang too with `paired_schedule_ahead`, 1GS with
//! `one_gs_schedule_ahead`), agents of protocol 1.5 are not
//! sent a `SwitchSlice` per slice: each gets one
//! [`SliceSchedule`] (the rotation from this slice to the end of the next
//! round, repeating), switches by its own timer, and reports one slice in
//! [`REPORT_PERIOD_NS`]. Every slice is still planned here as before and
//! compared, node by node, with what that node's schedule predicts: a node
//! whose jobs, rows or switch instant (its clock estimate moved by more
//! than [`ScheduleClockBounds::redrift_ns`]) differ gets a new schedule from
//! this slice on; while its estimate is not yet certain (see
//! [`ScheduleClockBounds`]), any move of it is passed on. Older agents keep
//! their per-slice `SwitchSlice`s.

use std::collections::BTreeSet;

use cosched_policy::global::{
    JobId, NodeIndex, OffsetEstimate, QuantumTiming, ScheduleClockBounds, Slice,
};
use cosched_proto::wire::{
    FirstFrameAt, MAX_SCHEDULED_SLICES, MessageKind, ScheduledSlice, SliceSchedule, SliceSwitched,
    SwitchSlice, UtilReport,
};

use super::{
    Core, CurrentSlice, INVENTORY_QUANTUM, QuantumSamples, SwitchObservation,
    classes::ClassState,
    rotation::{Rotation, Rows},
};
use crate::policy::GlobalPolicy;

/// Per job, whether its rank on each node (by index) is live.
type LiveRanks = std::collections::BTreeMap<u32, Vec<bool>>;

/// A scheduled agent reports one slice in this long (skew is measured on
/// those slices; at least every slice).
pub const REPORT_PERIOD_NS: u64 = 100_000_000;

/// Whether `schedule` predicts slice `number` of `epoch` as planned now
/// (its instant standing against `apply_at_ns`, from the node's current
/// `estimate`, by `clock`).
#[allow(clippy::too_many_arguments)]
pub fn predicts(
    schedule: &SliceSchedule,
    epoch: u64,
    number: u64,
    rows: &[u32],
    active_jobs: &[u32],
    apply_at_ns: u64,
    estimate: Option<&OffsetEstimate>,
    clock: &ScheduleClockBounds,
) -> bool {
    schedule.epoch == epoch
        && schedule
            .entry(number)
            .is_some_and(|entry| entry.rows == rows && entry.active_jobs == active_jobs)
        && schedule
            .apply_at_ns(number)
            .is_some_and(|predicted| clock.still_stands(predicted, apply_at_ns, estimate))
}

/// How many slices a late loop plans back to back to stay on the grid of
/// the schedules agents follow (1 s of 10 ms slices); a longer stall starts
/// a new grid.
pub const MAX_CATCH_UP_SLICES: u64 = 100;

/// The start of the next switch to plan, when the loop gets to plan it at
/// `now_ns` with less than half its lead left. With per-slice switches
/// (`keep_grid` false) the switch is moved to a full lead from now: one
/// announced late is applied late, and every later switch follows it.
/// Agents on a schedule switch by their own timers whatever the loop does,
/// and moving the switch would make every schedule mispredict it and be
/// re-sent at once (1000 schedules at 1000 agents, a burst that delays the
/// loop again); under 1GS, RT jobs' frames are placed on the grid
/// ([`Core::keeps_slice_grid`]). So with `keep_grid` the late slice is
/// planned where it is (a strict switch already due is applied on
/// arrival), unless the loop is more than [`MAX_CATCH_UP_SLICES`] behind.
pub fn resume_at(
    next_start_ns: u64,
    now_ns: u64,
    lead_ns: u64,
    slice_ns: u64,
    keep_grid: bool,
) -> u64 {
    let on_time = next_start_ns >= now_ns.saturating_add(lead_ns / 2);
    let catching_up = keep_grid
        && next_start_ns.saturating_add(MAX_CATCH_UP_SLICES.saturating_mul(slice_ns)) > now_ns;
    if on_time || catching_up {
        next_start_ns
    } else {
        now_ns + lead_ns
    }
}

/// What [`Core::plan`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// Slices closed without all their reports (for the skew metrics).
    pub observations: Vec<SwitchObservation>,
    /// When the next switch (slice or division) starts.
    pub next_start_ns: u64,
}

/// What a `UtilReport` is.
#[derive(Debug, Clone, PartialEq)]
pub enum UtilKind {
    /// The agent's running coordinator jobs (after `Register`).
    Inventory(BTreeSet<u32>),
    Quanta,
}

/// Tells an inventory from per-quantum reports: an empty report, or one
/// whose entries all carry [`INVENTORY_QUANTUM`].
pub fn classify_util_report(report: &UtilReport) -> UtilKind {
    if report
        .jobs
        .iter()
        .all(|job| job.quantum == INVENTORY_QUANTUM)
    {
        UtilKind::Inventory(report.jobs.iter().map(|job| job.job_id).collect())
    } else {
        UtilKind::Quanta
    }
}

impl Core {
    /// A scheduled agent reports one slice in this many.
    fn report_every(&self) -> u64 {
        (REPORT_PERIOD_NS / self.config.slice_ns.max(1)).max(1)
    }

    /// The switch that starts at `start_ns` (coordinator clock): a slice
    /// (`slice_ns` long) under the matrix policies and 1GS, a division under
    /// 2DCS-TDM, nothing under 2DCS-PS (whose agents share their CPUs
    /// themselves) but the next instant to look again.
    pub fn plan(&mut self, start_ns: u64, slice_ns: u64) -> Planned {
        self.advance(start_ns);
        match self.policy {
            GlobalPolicy::TwoDcsTdm => Planned {
                observations: Vec::new(),
                next_start_ns: self.plan_division(start_ns),
            },
            GlobalPolicy::TwoDcsPs => Planned {
                observations: Vec::new(),
                next_start_ns: start_ns + slice_ns,
            },
            _ => Planned {
                observations: self.plan_slice(start_ns),
                next_start_ns: start_ns + slice_ns,
            },
        }
    }

    /// Computes the slice that starts at `start_ns` (coordinator clock) and
    /// queues a `SwitchSlice` for every ready node. Returns observations of
    /// slices closed without all their reports.
    pub fn plan_slice(&mut self, start_ns: u64) -> Vec<SwitchObservation> {
        // Scheduled agents send their quanta with their switch reports, one
        // in `report_every` slices: a quantum waits that long for its samples.
        let waited = self.report_every();
        for samples in self
            .util
            .flush_before(self.slice_counter.saturating_sub(waited))
        {
            self.learn_quantum(&samples);
        }
        self.refresh_ready();
        let rows = match &self.classes {
            ClassState::OneGs(gang) => Rows::OneLevelGang(gang),
            ClassState::Matrix | ClassState::Divided(_) => {
                Rows::Matrix(&mut self.matrix, &self.predictor)
            }
        };
        let next = self.rotation.next(rows);
        let ready: Vec<NodeIndex> = (0..self.nodes.len())
            .filter(|&node| self.nodes[node].is_ready())
            .collect();
        let Some(next) = next else {
            self.current = None;
            if self.idle_sent || ready.is_empty() {
                return Vec::new();
            }
            self.idle_sent = true;
            return self.broadcast(start_ns, &ready, &[], |_| Vec::new());
        };
        if !next.row_moves.is_empty() {
            tracing::debug!(moves = ?next.row_moves, "slot homogeneity moved jobs");
            self.persist();
        }
        self.idle_sent = false;
        let slice = next.slice;
        let rows: Vec<u32> = slice.rows.rows().iter().map(|&row| row as u32).collect();
        self.current = Some(CurrentSlice {
            rows: slice.rows.rows(),
            alternates: slice
                .alternates
                .iter()
                .map(|run| run.job.0 as u32)
                .collect(),
        });
        let live = self.live_ranks();
        let active: Vec<Vec<u32>> = (0..self.nodes.len())
            .map(|node| self.active_on(&slice, node, &live))
            .collect();
        let ahead = self.announces_ahead().then_some(&slice);
        let observations =
            self.broadcast_ahead(start_ns, &ready, &rows, |node| active[node].clone(), ahead);
        for first in &next.first_frames {
            self.send_first_frame(first.job, start_ns.saturating_add(first.offset_ns));
        }
        if self.policy == GlobalPolicy::OneLevelGang {
            // Ranks held back while no slice ran, after the slice that
            // holds them (see `launch_waits_for_a_slice`).
            self.launch_pending();
        }
        observations
    }

    /// Tells the agents of `job`'s live ranks (those of protocol 1.7, which
    /// were launched with a pending gate) that its first frame starts at
    /// `at_ns` (coordinator clock), each in its own clock.
    fn send_first_frame(&mut self, job: JobId, at_ns: u64) {
        let id = job.0 as u32;
        let Some(nodes) = self.jobs.get(&id).map(|job| job.live_nodes()) else {
            return;
        };
        tracing::info!(job = id, at_ns, "real-time job's first frame");
        for node in nodes.into_iter().collect::<BTreeSet<_>>() {
            if self.nodes[node].is_ready() && self.nodes[node].knows(MessageKind::FirstFrameAt) {
                let at_ns = self.nodes[node].to_agent_clock(at_ns);
                self.send(node, FirstFrameAt { job_id: id, at_ns });
            }
        }
    }

    fn broadcast(
        &mut self,
        start_ns: u64,
        ready: &[NodeIndex],
        rows: &[u32],
        active: impl Fn(NodeIndex) -> Vec<u32>,
    ) -> Vec<SwitchObservation> {
        self.broadcast_ahead(start_ns, ready, rows, active, None)
    }

    /// Announces slice `slice_counter` to `ready`: a `SwitchSlice` each, or,
    /// with `ahead` (the slice, when announced ahead), a new schedule to
    /// the 1.5 agents whose schedule does not predict it and nothing to the
    /// others.
    fn broadcast_ahead(
        &mut self,
        start_ns: u64,
        ready: &[NodeIndex],
        rows: &[u32],
        active: impl Fn(NodeIndex) -> Vec<u32>,
        ahead: Option<&Slice>,
    ) -> Vec<SwitchObservation> {
        let number = self.slice_counter;
        self.slice_counter += 1;
        let strict = self.policy.strict_switches();
        let mut told = std::collections::BTreeMap::new();
        let mut future: Option<(Vec<Slice>, u32, LiveRanks)> = None;
        for &node in ready {
            let apply_at_ns = self.nodes[node].to_agent_clock(start_ns);
            if let Some(current) = ahead
                && self.nodes[node].knows(MessageKind::SliceSchedule)
            {
                let active_jobs = active(node);
                let estimate = self.nodes[node].estimate();
                let kept = self.nodes[node].schedule.as_ref().filter(|schedule| {
                    predicts(
                        schedule,
                        self.epoch,
                        number,
                        rows,
                        &active_jobs,
                        apply_at_ns,
                        estimate.as_ref(),
                        &self.config.schedule_clock,
                    )
                });
                if let Some(schedule) = kept {
                    if schedule.reports(number) {
                        let predicted = schedule.apply_at_ns(number).unwrap_or(apply_at_ns);
                        told.insert(node, predicted);
                    }
                    continue;
                }
                let (slices, repeat_from, live) = future.get_or_insert_with(|| {
                    let (slices, repeat_from) = self.lookahead(current);
                    (slices, repeat_from, self.live_ranks())
                });
                let schedule = SliceSchedule {
                    epoch: self.epoch,
                    first_slice: number,
                    first_apply_at_ns: apply_at_ns,
                    slice_ns: self.config.slice_ns,
                    slices: slices
                        .iter()
                        .map(|slice| ScheduledSlice {
                            rows: slice.rows.rows().iter().map(|&row| row as u32).collect(),
                            active_jobs: self.active_on(slice, node, live),
                        })
                        .collect(),
                    repeat_from: *repeat_from,
                    report_every: self.report_every(),
                    strict,
                };
                if schedule.reports(number) {
                    told.insert(node, apply_at_ns);
                }
                self.nodes[node].schedule = Some(schedule.clone());
                self.send(node, schedule);
                continue;
            }
            self.nodes[node].schedule = None;
            told.insert(node, apply_at_ns);
            let message = SwitchSlice {
                epoch: self.epoch,
                slice: number,
                rows: rows.to_vec(),
                active_jobs: active(node),
                apply_at_ns,
                strict,
            };
            self.send(node, message);
        }
        self.skew.expect(self.epoch, number, start_ns, told)
    }

    /// Whether slices are announced ahead as schedules (to 1.5 agents):
    /// under the gang rotation with `schedule_ahead`, under paired gang
    /// with `paired_schedule_ahead` too, under 1GS with
    /// `one_gs_schedule_ahead`.
    fn announces_ahead(&self) -> bool {
        self.config.schedule_ahead
            && match self.rotation {
                Rotation::Gang(_) => true,
                Rotation::Paired(_) => self.config.paired_schedule_ahead,
                Rotation::OneLevelGang(_) => self.config.one_gs_schedule_ahead,
                Rotation::NoSlices => false,
            }
    }

    /// `current` and the slices the rotation runs after it, to the end of
    /// the next round, with the index where that round (the cycle that
    /// repeats while the matrix, and under paired gang the predictions,
    /// stay as they are) starts. Paired gang's rounds are planned on
    /// copies of its rotation and matrix (a round's start may move jobs
    /// between rows), 1GS's on a copy of its rotor over its current rows
    /// (the copy also lets RT jobs reach their start row and warm up, as
    /// the rotor will): what runs if nothing changes; [`predicts`] catches
    /// what does (a job that arrives, leaves, is replicated elsewhere, or
    /// whose processes report ready).
    fn lookahead(&self, current: &Slice) -> (Vec<Slice>, u32) {
        let mut slices = vec![current.clone()];
        let mut next: Box<dyn FnMut() -> Option<Slice> + '_> = match &self.rotation {
            Rotation::Gang(scheduler) => {
                let mut scheduler = scheduler.clone();
                Box::new(move || scheduler.next_slice(&self.matrix))
            }
            Rotation::Paired(scheduler) => {
                let mut scheduler = scheduler.clone();
                let mut matrix = self.matrix.clone();
                Box::new(move || {
                    scheduler
                        .next_slice(&mut matrix, &self.predictor)
                        .map(|paired| paired.slice)
                })
            }
            Rotation::OneLevelGang(rotor) => {
                let Some(state) = self.classes.one_gs() else {
                    return (slices, 0);
                };
                let mut rotor = rotor.clone();
                Box::new(move || rotor.next_slice(state))
            }
            Rotation::NoSlices => return (slices, 0),
        };
        while slices.len() < MAX_SCHEDULED_SLICES {
            match next() {
                Some(next) if next.round <= current.round + 1 => slices.push(next),
                _ => break,
            }
        }
        let repeat_from = slices
            .iter()
            .position(|slice| slice.round > current.round)
            .unwrap_or(0);
        (slices, repeat_from as u32)
    }

    /// Per job, the nodes where its rank has not ended: computed once per
    /// slice, so that telling 1000 nodes what they run does not scan each
    /// job's 1000 ranks per node (`JobRecord::rank_on`, 20 % of the
    /// coordinator's CPU under paired gang at 1000 agents).
    fn live_ranks(&self) -> LiveRanks {
        self.jobs
            .iter()
            .map(|(&id, record)| {
                let mut live = vec![false; self.nodes.len()];
                for rank in &record.ranks {
                    if let Some(slot) = live.get_mut(rank.node)
                        && !rank.state.is_ended()
                    {
                        *slot = true;
                    }
                }
                (id, live)
            })
            .collect()
    }

    /// The jobs that run on `node` in `slice`: the active rows' job first
    /// (the slot owner, for FCS), then alternates, then the rest (1GS's row,
    /// whose matrix is not the Ousterhout one); ranks that ended (by
    /// `live`, [`Core::live_ranks`]) are left out.
    fn active_on(&self, slice: &Slice, node: NodeIndex, live: &LiveRanks) -> Vec<u32> {
        let owners = slice
            .rows
            .rows()
            .into_iter()
            .filter_map(|row| self.matrix.cell(row, node));
        let alternates = slice.alternates.iter().map(|run| run.job);
        let rest = slice.active_on(node).iter().copied();
        let mut seen = BTreeSet::new();
        owners
            .chain(alternates)
            .chain(rest)
            .filter(|job| slice.active_on(node).contains(job))
            .map(|JobId(job)| job as u32)
            .filter(|job| seen.insert(*job))
            .filter(|job| {
                live.get(job)
                    .is_some_and(|nodes| nodes.get(node).copied().unwrap_or(false))
            })
            .collect()
    }

    /// Per-quantum utilisation from `node`; an inventory is handed to
    /// [`Core::inventory`].
    pub fn util_report(&mut self, node: NodeIndex, report: &UtilReport) {
        if let UtilKind::Inventory(running) = classify_util_report(report) {
            self.inventory(node, &running);
            return;
        }
        for entry in &report.jobs {
            let Some(job) = self.jobs.get(&entry.job_id) else {
                continue;
            };
            if job.rank_on(node).is_none() || entry.quantum == INVENTORY_QUANTUM {
                continue;
            }
            let expected = job.ranks.len();
            if let Some(samples) = self.util.add(
                entry.job_id,
                entry.quantum,
                node,
                entry.cpu_utilisation * 100.0,
                expected,
            ) {
                self.learn_quantum(&samples);
            }
        }
    }

    fn learn_quantum(&mut self, samples: &QuantumSamples) {
        let Some(job) = self.jobs.get_mut(&samples.job) else {
            return;
        };
        job.last_cpu_percent =
            Some(samples.percents.iter().sum::<f64>() / samples.percents.len().max(1) as f64);
        // Slices up to `slice_counter - 1` were planned before this report
        // arrived: they cannot be the calibration a sharp change asks for.
        let timing = QuantumTiming {
            quantum: samples.quantum,
            first_unplanned: self.slice_counter,
        };
        if let Err(error) = self.predictor.observe_timed_quantum(
            JobId(u64::from(samples.job)),
            timing,
            &samples.percents,
        ) {
            tracing::warn!(job = samples.job, "utilisation sample refused: {error}");
        }
    }

    /// `node` reports when it switched; returns the lateness and, once
    /// every node reported, the slice's skew.
    pub fn slice_switched(
        &mut self,
        node: NodeIndex,
        switched: &SliceSwitched,
    ) -> Vec<SwitchObservation> {
        self.skew.switched(
            switched.epoch,
            switched.slice,
            node,
            switched.switched_at_ns,
        )
    }

    /// Whether a late loop must plan on the slice grid (see [`resume_at`]):
    /// with slices announced ahead ([`Core::announces_ahead`]), the agents'
    /// schedules follow it; under 1GS, admitted RT jobs' frames are
    /// placed on it (the first-frame instant, the frame model's phase
    /// between matrix cycle and window), so a switch moved by a late loop
    /// would move every later row against the program's own 10 ms grid for
    /// good — lateness that adds up until a window ends before its job's
    /// frames are done (bench rt, session 17: +16 ms in 1.5 s, 2.5 % of
    /// frames missed). A late 1GS switch is strict: applied on arrival.
    pub fn keeps_slice_grid(&self) -> bool {
        match self.rotation {
            Rotation::Gang(_) | Rotation::Paired(_) => self.announces_ahead(),
            Rotation::OneLevelGang(_) => true,
            Rotation::NoSlices => false,
        }
    }

    /// Slices broadcast in this epoch.
    pub fn slices_sent(&self) -> u64 {
        self.slice_counter
    }
}

#[cfg(test)]
mod resume_tests {
    use super::{MAX_CATCH_UP_SLICES, resume_at};

    const MS: u64 = 1_000_000;

    #[test]
    fn an_on_time_loop_plans_the_next_slice_where_it_is() {
        assert_eq!(
            resume_at(100 * MS, 95 * MS, 5 * MS, 10 * MS, false),
            100 * MS
        );
        assert_eq!(
            resume_at(100 * MS, 95 * MS, 5 * MS, 10 * MS, true),
            100 * MS
        );
    }

    #[test]
    fn a_late_loop_moves_per_slice_switches_to_a_full_lead() {
        assert_eq!(
            resume_at(100 * MS, 99 * MS, 5 * MS, 10 * MS, false),
            104 * MS
        );
    }

    #[test]
    fn a_late_loop_keeps_the_grid_of_the_agents_schedules() {
        // 3 ms late, and even past the slice's start: planned where it is.
        assert_eq!(
            resume_at(100 * MS, 99 * MS, 5 * MS, 10 * MS, true),
            100 * MS
        );
        assert_eq!(
            resume_at(100 * MS, 130 * MS, 5 * MS, 10 * MS, true),
            100 * MS
        );
    }

    #[test]
    fn a_stall_longer_than_the_catch_up_starts_a_new_grid() {
        let now = 100 * MS + MAX_CATCH_UP_SLICES * 10 * MS;
        assert_eq!(
            resume_at(100 * MS, now, 5 * MS, 10 * MS, true),
            now + 5 * MS
        );
    }
}
