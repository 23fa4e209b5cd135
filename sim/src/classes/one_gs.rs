//! 1GS over a job stream: the coordinator's `OneLevelGang` (arrival,
//! departure, eviction of RT jobs that waited past w, replication, the
//! satisfied set) and its `OneLevelGangRotor` (the slots, the start row of
//! a new RT job under admission, its first-frame instant), applied to
//! simulated time.
//!
//! Every slot, each node runs the process of the job the rotor's slice
//! gives it, the whole slot (one job per node and row): an RT process its
//! due frames, a BE process its work. A slice is fixed when it starts, as
//! the coordinator broadcasts it: a job allocated during a slot runs from
//! the next one, a process that ends leaves its cell idle to the slot's
//! end. An RT job's frames start at the instant the rotor gives for it
//! (its start row's slot plus the offset, [`FirstFrame`]) under admission,
//! at its allocation without; its processes are ready at once (no
//! warm-up). It leaves after `rt_windows` windows.
//!
//! [`FirstFrame`]: cosched_policy::classes::one_level_gang::FirstFrame

use std::collections::{BTreeMap, BTreeSet};

use cosched_policy::classes::one_level_gang::{ArrivalDecision, Evicted, OneGsJob};
use cosched_policy::classes::{
    AdmissionRule, BudgetParams, Class, FrameReading, FrameState, FrameTotals, OneLevelGang,
    OneLevelGangConfig, OneLevelGangRotor, ProcessFrames, RtSpec,
};
use cosched_policy::global::{JobId, Slice};

use super::params::ClassSimParams;
use super::report::ClassReport;
use super::run::{BeJob, Usage, report};
use super::stream::{ClassJob, ClassJobKind, rt_used_ns};

/// The 1GS matrix the coordinator would build for `params`
/// (`ClassesConfig::one_gs_config` with no switch cost): admission control
/// for every rule but `None`.
pub fn one_gs_config(params: &ClassSimParams) -> OneLevelGangConfig {
    OneLevelGangConfig {
        nodes: params.nodes,
        rows: params.one_gs_rows,
        ratio: params.ratio,
        quantum_ns: params.one_gs_slot_ns,
        switch_cost_ns: 0,
        admission_control: params.admission != AdmissionRule::None,
        queue: params.one_gs_queue,
    }
}

/// A process of a job on its node.
enum Proc {
    Rt {
        /// `None` until the job's first frame starts.
        frames: Option<ProcessFrames>,
        spec: RtSpec,
        work_ns: u64,
        frame_left_ns: u64,
    },
    Be {
        left_ns: u64,
    },
}

/// An allocated RT job.
struct RtRun {
    spec: RtSpec,
    windows: u64,
    /// Its nodes.
    columns: Vec<usize>,
}

/// The run's state besides the matrix and the rotor.
struct World {
    /// `procs[node][job]`.
    procs: Vec<BTreeMap<u64, Proc>>,
    rt: BTreeMap<u64, RtRun>,
    be_jobs: BTreeMap<u64, BeJob>,
    /// (end, job) of RT jobs whose frames started.
    departures: BTreeSet<(u64, u64)>,
    /// BE jobs that finished during the last advance.
    be_done: Vec<u64>,
    frames: FrameTotals,
    usage: Usage,
    rt_jobs: u64,
    rt_rejected: u64,
}

/// Simulates `jobs` (sorted by arrival) under 1GS.
pub fn simulate_one_gs(params: &ClassSimParams, jobs: &[ClassJob]) -> ClassReport {
    let config = one_gs_config(params);
    let slot_ns = config.slot_ns();
    let mut gang = OneLevelGang::new(config).expect("the CLI checked the 1GS shape");
    let mut rotor = OneLevelGangRotor::new();
    let mut w = World {
        procs: (0..params.nodes).map(|_| BTreeMap::new()).collect(),
        rt: BTreeMap::new(),
        be_jobs: BTreeMap::new(),
        departures: BTreeSet::new(),
        be_done: Vec::new(),
        frames: FrameTotals::default(),
        usage: Usage::default(),
        rt_jobs: 0,
        rt_rejected: 0,
    };
    // The running slice and when it ends.
    let mut slice: Option<(Slice, u64)> = None;
    let mut next = 0usize;
    let mut now = 0u64;
    loop {
        if slice.as_ref().is_none_or(|&(_, end)| end <= now) {
            slice = start_slice(&mut gang, &mut rotor, &mut w, now, slot_ns);
        }
        let arrival = jobs.get(next).map(|j| j.arrival_ns);
        let departure = w.departures.first().map(|&(t, _)| t);
        let until = [
            arrival,
            departure,
            gang.next_expiry(),
            slice.as_ref().map(|&(_, end)| end),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(until) = until else {
            break;
        };
        let until = until.max(now);
        for node in 0..params.nodes {
            let active = slice
                .as_ref()
                .and_then(|(s, _)| s.active_on(node).first().copied());
            let row_class = slice.as_ref().and_then(|(s, _)| {
                s.rows
                    .rows()
                    .first()
                    .and_then(|&row| gang.split().class_of(row))
            });
            advance(&mut w, node, active, row_class, now, until);
        }
        now = until;
        for job in std::mem::take(&mut w.be_done) {
            depart(&mut gang, &mut rotor, &mut w, params, jobs, job, now);
        }
        while let Some(&(t, job)) = w.departures.first() {
            if t > now {
                break;
            }
            w.departures.pop_first();
            let Some(run) = w.rt.remove(&job) else {
                continue;
            };
            for &node in &run.columns {
                if let Some(Proc::Rt {
                    frames: Some(frames),
                    ..
                }) = w.procs[node].remove(&job)
                {
                    let mut frames = frames;
                    frames.tick(now);
                    w.frames += frames.totals();
                }
            }
            depart(&mut gang, &mut rotor, &mut w, params, jobs, job, now);
        }
        let expired = gang.evict_expired(now);
        note_evicted(&mut w, &expired.evicted);
        for started in expired.started {
            place(&gang, &mut rotor, &mut w, params, jobs, started.0, now);
        }
        while jobs.get(next).is_some_and(|j| j.arrival_ns <= now) {
            let job = &jobs[next];
            next += 1;
            arrive(&mut gang, &mut rotor, &mut w, params, jobs, job, now);
        }
    }
    report(
        params,
        &w.be_jobs,
        w.rt_jobs,
        w.rt_rejected,
        w.frames,
        &w.usage,
        now,
    )
}

/// The job of `jobs` with id `id` (ids are positions in generated streams,
/// not always in hand-made ones).
fn find(jobs: &[ClassJob], id: u64) -> &ClassJob {
    jobs.get(id as usize)
        .filter(|j| j.id == id)
        .or_else(|| jobs.iter().find(|j| j.id == id))
        .expect("a job of the stream")
}

fn arrive(
    gang: &mut OneLevelGang,
    rotor: &mut OneLevelGangRotor,
    w: &mut World,
    params: &ClassSimParams,
    jobs: &[ClassJob],
    job: &ClassJob,
    now: u64,
) {
    let request = match job.kind {
        ClassJobKind::BestEffort { .. } => {
            w.be_jobs.insert(
                job.id,
                BeJob {
                    arrival_ns: job.arrival_ns,
                    processes_left: job.processes,
                    finish_ns: None,
                },
            );
            OneGsJob::best_effort(JobId(job.id), job.processes)
        }
        ClassJobKind::RealTime { spec, .. } => {
            w.rt_jobs += 1;
            OneGsJob::real_time(JobId(job.id), job.processes, spec, params.rt_max_wait_ns)
        }
    };
    let Ok(outcome) = gang.arrive(request, now) else {
        // Out of phase with the cycle (the CLI refuses such streams) or
        // wider than the cluster: turned away.
        if request.class() == Class::RealTime {
            w.rt_rejected += 1;
        }
        return;
    };
    note_evicted(w, &outcome.evicted);
    match outcome.decision {
        ArrivalDecision::Allocated { .. } => place(gang, rotor, w, params, jobs, job.id, now),
        ArrivalDecision::Waiting { .. } => {}
        ArrivalDecision::Refused { .. } => w.rt_rejected += 1,
    }
    for started in outcome.started {
        place(gang, rotor, w, params, jobs, started.0, now);
    }
}

/// Job `job` leaves; the jobs its room lets in are placed.
fn depart(
    gang: &mut OneLevelGang,
    rotor: &mut OneLevelGangRotor,
    w: &mut World,
    params: &ClassSimParams,
    jobs: &[ClassJob],
    job: u64,
    now: u64,
) {
    let Ok(outcome) = gang.depart(JobId(job), now) else {
        return;
    };
    note_evicted(w, &outcome.evicted);
    for started in outcome.started {
        place(gang, rotor, w, params, jobs, started.0, now);
    }
}

fn note_evicted(w: &mut World, evicted: &[Evicted]) {
    w.rt_rejected += evicted.len() as u64;
}

/// Puts the processes of allocated job `id` on its columns.
fn place(
    gang: &OneLevelGang,
    rotor: &mut OneLevelGangRotor,
    w: &mut World,
    params: &ClassSimParams,
    jobs: &[ClassJob],
    id: u64,
    now: u64,
) {
    let Some(held) = gang.allocation(JobId(id)) else {
        return;
    };
    let columns = held.columns.clone();
    let job = find(jobs, id);
    match job.kind {
        ClassJobKind::BestEffort { work_ns } => {
            for &node in &columns {
                w.procs[node].insert(id, Proc::Be { left_ns: work_ns });
            }
        }
        ClassJobKind::RealTime { spec, windows } => {
            // Its processes are ready at once: no warm-up in its start row.
            rotor.counters_ready(JobId(id));
            let work_ns = rt_used_ns(params, id, &spec);
            for &node in &columns {
                w.procs[node].insert(
                    id,
                    Proc::Rt {
                        frames: None,
                        spec,
                        work_ns,
                        frame_left_ns: work_ns,
                    },
                );
            }
            w.rt.insert(
                id,
                RtRun {
                    spec,
                    windows,
                    columns,
                },
            );
            // Without a start row (no admission control) the frames start
            // at once; with one, at the instant the rotor gives.
            if gang.first_frame_of(JobId(id)).is_none() {
                start_frames(w, id, now);
            }
        }
    }
}

/// Job `id`'s first frame starts at `at`; it leaves `rt_windows` windows
/// later.
fn start_frames(w: &mut World, id: u64, at: u64) {
    let Some(run) = w.rt.get(&id) else {
        return;
    };
    for &node in &run.columns {
        if let Some(Proc::Rt { frames, spec, .. }) = w.procs[node].get_mut(&id) {
            *frames = Some(ProcessFrames::new(
                *spec,
                at,
                FrameReading::default(),
                BudgetParams::default(),
            ));
        }
    }
    let end = at.saturating_add(run.spec.window_ns().saturating_mul(run.windows));
    w.departures.insert((end, id));
}

/// The next slot from `now`: the satisfied set as the agents would report
/// it (before every slot; agents report every 500 ms, so the coordinator
/// sees it later), then the rotor's slice and the first-frame instants it
/// gives. A job that falls short again gets rows in this very slot
/// (`set_satisfied` re-runs the replication, session 20).
fn start_slice(
    gang: &mut OneLevelGang,
    rotor: &mut OneLevelGangRotor,
    w: &mut World,
    now: u64,
    slot_ns: u64,
) -> Option<(Slice, u64)> {
    let satisfied: Vec<JobId> =
        w.rt.iter()
            .filter(|(id, run)| {
                run.columns.iter().all(|&node| {
                    matches!(
                        w.procs[node].get(id),
                        Some(Proc::Rt { frames: Some(f), .. })
                            if matches!(f.state(), FrameState::Satisfied { .. })
                    )
                })
            })
            .map(|(&id, _)| JobId(id))
            .collect();
    gang.set_satisfied(satisfied);
    let slice = rotor.next_slice(gang)?;
    for first in rotor.first_frames().to_vec() {
        start_frames(w, first.job.0, now.saturating_add(first.offset_ns));
    }
    Some((slice, now + slot_ns))
}

/// Runs `node` from `from` to `until` with `active` (the slice's job there,
/// in a row of `row_class`'s set).
fn advance(
    w: &mut World,
    node: usize,
    active: Option<JobId>,
    row_class: Option<Class>,
    from: u64,
    until: u64,
) {
    let mut t = from;
    while t < until {
        let Some(proc) = active.and_then(|job| w.procs[node].get_mut(&job.0)) else {
            w.usage.idle += until - t;
            return;
        };
        let job = active.expect("a process of the active job").0;
        match proc {
            Proc::Rt {
                frames,
                work_ns,
                frame_left_ns,
                ..
            } => {
                let Some(frames) = frames else {
                    // Its first frame has not started (its start row or
                    // the offset into it is still ahead).
                    w.usage.idle += until - t;
                    return;
                };
                frames.tick(t);
                let mut end = until.min(frames.next_wakeup_ns());
                if !matches!(frames.state(), FrameState::Due { .. }) {
                    w.usage.idle += end - t;
                    t = end;
                    continue;
                }
                end = end.min(t + *frame_left_ns);
                let ran = end - t;
                *frame_left_ns -= ran;
                if *frame_left_ns == 0 {
                    frames.credit(end, 1, *work_ns);
                    *frame_left_ns = *work_ns;
                }
                w.usage.rt += ran;
                if row_class == Some(Class::BestEffort) {
                    w.usage.rt_lent += ran;
                }
                t = end;
            }
            Proc::Be { left_ns } => {
                let end = until.min(t + *left_ns);
                let ran = end - t;
                *left_ns -= ran;
                w.usage.be += ran;
                if row_class == Some(Class::RealTime) {
                    w.usage.be_lent += ran;
                }
                if *left_ns == 0 {
                    w.procs[node].remove(&job);
                    let be = w.be_jobs.get_mut(&job).expect("a BE process has its job");
                    be.processes_left -= 1;
                    if be.processes_left == 0 {
                        be.finish_ns = Some(end);
                        w.be_done.push(job);
                    }
                }
                t = end;
            }
        }
    }
}
