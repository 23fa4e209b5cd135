//! A BE/RT scheme over a job stream: the coordinator's admission and
//! placement (2DCS-PS uses 2DCS-TDM's), and on every node the policy crate's
//! choice of class — 2DCS-TDM's division clock and class decision, or
//! 2DCS-PS's virtual times — and EDF order, applied to simulated time.
//!
//! Between two cluster events (an arrival, an RT job's departure) nodes do
//! not interact, so each node is advanced on its own, segment by segment: a
//! segment ends at the division's end (2DCS-TDM) or the PS quantum, the running frame's completion, a BE
//! process's completion or an RT process's window end, whichever is first,
//! and the decision is taken again there (the agent re-decides on exactly
//! these changes).

use std::collections::BTreeMap;

use cosched_policy::classes::tdm::{ClassDecision, DivisionClock, allocate_be, decide};
use cosched_policy::classes::{
    AdmissionRule, BudgetParams, Class, ClassLedger, DivisionCost, EdfOrder, FrameReading,
    FrameState, FrameTotals, MeasuredWork, ProcessFrames, PsNode, PsParams, Readiness, RtJob,
    RtLoadModel, RtTask, WorkMoments,
};
use cosched_policy::global::JobId;
use cosched_policy::local::TaskId;

use super::params::{ClassScheme, ClassSimParams};
use super::report::ClassReport;
use super::stream::{ClassJob, ClassJobKind, class_stream, rt_used_ns};

/// One RT process on its node.
pub(super) struct RtProc {
    pub(super) job: u64,
    /// Process index in the job's placement (the ledger's process).
    pub(super) process: usize,
    pub(super) frames: ProcessFrames,
    /// CPU one frame really takes ([`rt_used_ns`]).
    pub(super) work_ns: u64,
    /// CPU still needed by the frame in progress.
    pub(super) frame_left_ns: u64,
    /// Frames finished so far, for the measurement the ledger is given.
    pub(super) frames_done: u64,
}

/// One BE process on its node.
struct BeProc {
    job: u64,
    left_ns: u64,
}

struct Node {
    rt: Vec<RtProc>,
    be: Vec<BeProc>,
    /// 2DCS-PS's per-node scheduler.
    ps: Option<PsNode>,
}

/// How a node picks its class.
enum Chooser {
    Tdm(DivisionClock),
    /// 2DCS-PS, with the quantum after which a node looks again when
    /// nothing else happens.
    Ps {
        quantum_ns: u64,
    },
}

/// Per-class CPU, summed over nodes.
#[derive(Default)]
pub(super) struct Usage {
    pub(super) rt: u64,
    pub(super) be: u64,
    pub(super) rt_lent: u64,
    pub(super) be_lent: u64,
    pub(super) idle: u64,
}

pub(super) struct BeJob {
    pub(super) arrival_ns: u64,
    pub(super) processes_left: usize,
    pub(super) finish_ns: Option<u64>,
}

/// Simulates `params`' stream under `params.scheme`.
pub fn simulate_classes(params: &ClassSimParams) -> ClassReport {
    simulate_class_jobs(params, &class_stream(params))
}

/// Simulates `jobs` (sorted by arrival) under `params`' scheme, cluster,
/// ratio, division and admission.
pub fn simulate_class_jobs(params: &ClassSimParams, jobs: &[ClassJob]) -> ClassReport {
    if params.scheme == ClassScheme::OneLevelGang {
        return super::one_gs::simulate_one_gs(params, jobs);
    }
    let (chooser, division) = match params.scheme {
        ClassScheme::TwoDcsTdm => (
            Chooser::Tdm(
                DivisionClock::new(params.division_ns, params.ratio, 0)
                    .expect("the division period gives each class at least 1 ns"),
            ),
            Some(DivisionCost {
                period_ns: params.division_ns,
                switch_ns: 0,
            }),
        ),
        ClassScheme::TwoDcsPs => (
            Chooser::Ps {
                quantum_ns: params.ps_quantum_ns.max(1),
            },
            None,
        ),
        ClassScheme::OneLevelGang => unreachable!("1GS returned above"),
    };
    let model = RtLoadModel {
        division,
        ..RtLoadModel::bare(params.ratio)
    };
    let ps = PsParams {
        ratio: params.ratio,
        sleeper_credit: 0,
    };
    let mut ledger = ClassLedger::new(params.nodes);
    let mut nodes: Vec<Node> = (0..params.nodes)
        .map(|_| Node {
            rt: Vec::new(),
            be: Vec::new(),
            ps: matches!(chooser, Chooser::Ps { .. }).then(|| PsNode::new(ps, 0)),
        })
        .collect();
    let mut usage = Usage::default();
    let mut be_jobs: BTreeMap<u64, BeJob> = BTreeMap::new();
    let mut departures: BTreeMap<(u64, u64), ()> = BTreeMap::new();
    let mut frames = FrameTotals::default();
    let (mut rt_jobs, mut rt_rejected) = (0u64, 0u64);
    let mut next = 0usize;
    let mut now = 0u64;
    loop {
        let arrival = jobs.get(next).map(|j| j.arrival_ns);
        let departure = departures.keys().next().map(|&(t, _)| t);
        let be_running = be_jobs.values().any(|j| j.finish_ns.is_none());
        let until = match (arrival, departure) {
            (Some(a), Some(d)) => a.min(d),
            (Some(t), None) | (None, Some(t)) => t,
            // Only BE work left: advance a division period at a time.
            (None, None) if be_running => now + params.division_ns,
            (None, None) => break,
        };
        for node in &mut nodes {
            advance(node, now, until, &chooser, &mut usage, &mut be_jobs);
        }
        now = until;
        for (&id, job) in &be_jobs {
            if job.finish_ns.is_some() && ledger.contains(JobId(id)) {
                ledger.remove(JobId(id));
            }
        }
        while let Some((&(t, id), _)) = departures.iter().next() {
            if t > now {
                break;
            }
            departures.remove(&(t, id));
            for node in &mut nodes {
                node.rt.retain_mut(|p| {
                    if p.job != id {
                        return true;
                    }
                    p.frames.tick(now);
                    frames += p.frames.totals();
                    false
                });
            }
            ledger.remove(JobId(id));
        }
        if matches!(
            params.admission,
            AdmissionRule::Statistical(_) | AdmissionRule::Probabilistic(_)
        ) {
            measure(&nodes, &mut ledger);
        }
        while jobs.get(next).is_some_and(|j| j.arrival_ns <= now) {
            let job = &jobs[next];
            next += 1;
            match job.kind {
                ClassJobKind::BestEffort { work_ns } => {
                    let placed = allocate_be(&ledger, job.processes)
                        .expect("the stream's sizes fit the cluster");
                    for &n in &placed {
                        nodes[n].be.push(BeProc {
                            job: job.id,
                            left_ns: work_ns,
                        });
                    }
                    ledger.place_be(JobId(job.id), placed);
                    be_jobs.insert(
                        job.id,
                        BeJob {
                            arrival_ns: job.arrival_ns,
                            processes_left: job.processes,
                            finish_ns: None,
                        },
                    );
                }
                ClassJobKind::RealTime { spec, windows } => {
                    rt_jobs += 1;
                    let rt = RtJob::uniform(JobId(job.id), spec, job.processes);
                    let Ok(placement) = params.admission.admit(&mut ledger, &rt, &model) else {
                        rt_rejected += 1;
                        continue;
                    };
                    let used_ns = rt_used_ns(params, job.id, &spec);
                    for (process, &n) in placement.nodes.iter().enumerate() {
                        nodes[n].rt.push(RtProc {
                            job: job.id,
                            process,
                            frames: ProcessFrames::new(
                                spec,
                                now,
                                FrameReading::default(),
                                BudgetParams::default(),
                            ),
                            work_ns: used_ns,
                            frame_left_ns: used_ns,
                            frames_done: 0,
                        });
                    }
                    let end = now.saturating_add(spec.window_ns().saturating_mul(windows));
                    departures.insert((end, job.id), ());
                }
            }
        }
    }
    report(params, &be_jobs, rt_jobs, rt_rejected, frames, &usage, now)
}

/// What the agents' frame reports tell the coordinator's ledger, for the
/// statistical and probabilistic rules: each RT process's per-frame work
/// (its p95 and its mean and deviation; constant per process here) once it
/// finished a frame.
fn measure(nodes: &[Node], ledger: &mut ClassLedger) {
    for p in nodes.iter().flat_map(|node| &node.rt) {
        if p.frames_done == 0 {
            continue;
        }
        let job = JobId(p.job);
        ledger.set_measured(
            job,
            p.process,
            MeasuredWork {
                frames: p.frames_done,
                work_ns: p.work_ns,
            },
        );
        ledger.set_moments(
            job,
            p.process,
            WorkMoments {
                frames: p.frames_done,
                mean_ns: p.work_ns,
                sd_ns: 0,
            },
        );
    }
}

/// Runs one node from `from` to `until`.
fn advance(
    node: &mut Node,
    from: u64,
    until: u64,
    chooser: &Chooser,
    usage: &mut Usage,
    be_jobs: &mut BTreeMap<u64, BeJob>,
) {
    let mut t = from;
    while t < until {
        for p in &mut node.rt {
            p.frames.tick(t);
        }
        let tasks: Vec<RtTask> = node
            .rt
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let state = p.frames.state();
                // A process with its b frames done waits for the next
                // window's input: only due processes are ready.
                let ready = matches!(state, FrameState::Due { .. });
                RtTask::new(TaskId(i as u32), ready, state)
            })
            .collect();
        let be_ready = !node.be.is_empty();
        let mut end = until;
        for p in &node.rt {
            end = end.min(p.frames.next_wakeup_ns());
        }
        let decision = match chooser {
            Chooser::Tdm(clock) => {
                let division = clock.division_at(t);
                end = end.min(division.end_ns);
                decide(division.class, &tasks, be_ready)
            }
            Chooser::Ps { quantum_ns } => {
                end = end.min(t + quantum_ns);
                let order = EdfOrder::of(&tasks);
                let ready = Readiness {
                    rt: !order.due.is_empty(),
                    be: be_ready,
                };
                let ps = node.ps.as_mut().expect("a 2DCS-PS node has its scheduler");
                match ps.on_event(t, ready) {
                    Some(Class::RealTime) => ClassDecision::RealTime {
                        order: order.due,
                        lent: false,
                    },
                    Some(Class::BestEffort) => ClassDecision::BestEffort { lent: false },
                    None => ClassDecision::Idle,
                }
            }
        };
        match decision {
            ClassDecision::RealTime { order, lent } => {
                let p = &mut node.rt[order[0].0 as usize];
                end = end.min(t + p.frame_left_ns);
                let ran = end - t;
                p.frame_left_ns -= ran;
                if p.frame_left_ns == 0 {
                    p.frames.credit(end, 1, p.work_ns);
                    p.frames_done += 1;
                    p.frame_left_ns = p.work_ns;
                }
                usage.rt += ran;
                if lent {
                    usage.rt_lent += ran;
                }
            }
            ClassDecision::BestEffort { lent } => {
                // Processor sharing among the node's BE processes.
                let k = node.be.len() as u64;
                let least = node.be.iter().map(|p| p.left_ns).min().unwrap_or(0);
                end = end.min(t + least.saturating_mul(k).max(1));
                let ran = end - t;
                let share = ran / k;
                for p in &mut node.be {
                    p.left_ns = p.left_ns.saturating_sub(share);
                    if share == 0 && p.left_ns <= ran {
                        p.left_ns = 0;
                    }
                }
                node.be.retain(|p| {
                    if p.left_ns > 0 {
                        return true;
                    }
                    let job = be_jobs.get_mut(&p.job).expect("a BE process has its job");
                    job.processes_left -= 1;
                    if job.processes_left == 0 {
                        job.finish_ns = Some(end);
                    }
                    false
                });
                usage.be += ran;
                if lent {
                    usage.be_lent += ran;
                }
            }
            ClassDecision::Idle => usage.idle += end - t,
        }
        t = end;
    }
}

pub(super) fn report(
    params: &ClassSimParams,
    be_jobs: &BTreeMap<u64, BeJob>,
    rt_jobs: u64,
    rt_rejected: u64,
    frames: FrameTotals,
    usage: &Usage,
    end_ns: u64,
) -> ClassReport {
    let done: Vec<(u64, u64)> = be_jobs
        .values()
        .filter_map(|j| j.finish_ns.map(|f| (j.arrival_ns, f)))
        .collect();
    let n = done.len() as f64;
    let mean_response = done.iter().map(|&(a, f)| (f - a) as f64).sum::<f64>() / n.max(1.0);
    let first = done.iter().map(|&(a, _)| a).min().unwrap_or(0);
    let last = done.iter().map(|&(_, f)| f).max().unwrap_or(0);
    let span_s = (last.saturating_sub(first)) as f64 / 1e9;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    ClassReport {
        scheme: params.scheme.label().into(),
        admission: admission_label(params),
        arrival_rate_per_s: params.arrival_rate_per_s,
        rt_share: params.rt_share,
        be_jobs: done.len() as u64,
        be_mean_response_s: mean_response / 1e9,
        be_throughput_per_s: if span_s > 0.0 { n / span_s } else { 0.0 },
        rt_jobs,
        rt_rejected,
        rt_rejection_ratio: ratio(rt_rejected, rt_jobs),
        rt_frames_expected: frames.expected,
        rt_frames_missed: frames.missed,
        rt_miss_rate: ratio(frames.missed, frames.expected),
        rt_cpu_ns: usage.rt,
        be_cpu_ns: usage.be,
        rt_lent_ns: usage.rt_lent,
        be_lent_ns: usage.be_lent,
        idle_ns: usage.idle,
        makespan_s: end_ns as f64 / 1e9,
    }
}

pub(super) fn admission_label(params: &ClassSimParams) -> String {
    match params.admission {
        AdmissionRule::None => "none",
        AdmissionRule::Deterministic => "deterministic",
        AdmissionRule::Statistical(_) => "statistical",
        AdmissionRule::Probabilistic(_) => "probabilistic",
    }
    .into()
}
