//! One cell of `bench rt`: the arrival stream of a (mix, rate) replayed in
//! real time under one column and admission setting. Each arrival is
//! submitted at its instant (to the coordinator with `cosched submit
//! --class`, or launched on the agents by the bench); queued jobs (1GS) are
//! followed until they run or are evicted; a job that ended is collected at
//! once (its ranks' JSON results, the agents' counters) and forgotten, so
//! the agents' records never fill up. Every wait has a deadline; on a
//! failure whatever still runs is cancelled.
use std::{
    thread,
    time::{Duration, Instant},
};

use anyhow::bail;
use cosched_policy::{
    classes::{AdmissionRule, ClassLedger, FairnessRatio, RtJob, RtLoadModel},
    global::JobId,
};
use cosched_proto::{
    control::{JobState, Reply, Request},
    job::SchedRequest,
    wire::JobClass,
};
use serde::Serialize;
use serde_json::Value;

use super::{
    columns::{Admission, Column},
    deadline,
    stream::{Arrival, Kind, WorkRange},
};
use crate::{
    bench::{
        coordinator::CoordAdmin,
        gang::coord_run::plan_of,
        jobs::{self, JobOutcome, JobPlan, unix_ns},
        outside_load::{Ours, outside_percent},
    },
    cluster::Cluster,
};

/// What the jobs do (the paper's appendix, scaled down: see docs/bench-rt.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Workload {
    /// d: one frame every period.
    pub period_ns: u64,
    /// b: frames per window Γ = b·d.
    pub frames: u32,
    /// τ: each RT job declares `work.max_ns` and really does a work drawn
    /// from the range.
    pub work_min_ns: u64,
    pub work_max_ns: u64,
    /// How long an RT job streams frames.
    pub rt_duration_s: f64,
    /// A BE job: a 2-rank ring of this many iterations of this much CPU,
    /// spinning receives (the paper's BE jobs compute and communicate).
    pub be_iterations: u64,
    pub be_compute_us: u64,
}

impl Workload {
    pub const DEFAULT: Workload = Workload {
        period_ns: 10_000_000,
        frames: 30,
        work_min_ns: 1_000_000,
        work_max_ns: 2_000_000,
        rt_duration_s: 1.5,
        be_iterations: 600,
        be_compute_us: 500,
    };

    pub fn work(&self) -> WorkRange {
        WorkRange {
            min_ns: self.work_min_ns,
            max_ns: self.work_max_ns,
        }
    }

    /// The class an RT job declares (its worst-case work).
    pub fn declared(&self) -> JobClass {
        JobClass::RealTime {
            period_ns: self.period_ns,
            frames: self.frames,
            work_ns: self.work_max_ns,
        }
    }

    pub fn declared_text(&self) -> String {
        format!("rt:{}:{}:{}", self.period_ns, self.frames, self.work_max_ns)
    }

    /// The benchmark's arguments for an arrival.
    pub fn synth_args(&self, kind: Kind) -> Vec<String> {
        match kind {
            Kind::Rt { work_ns } => vec![
                "--rt".into(),
                format!("{}:{}:{}", self.period_ns, self.frames, work_ns),
                "--recv".into(),
                "block".into(),
                "--duration".into(),
                self.rt_duration_s.to_string(),
            ],
            Kind::Be => vec![
                "--pattern".into(),
                "ring".into(),
                "--recv".into(),
                "spin".into(),
                "--compute-us".into(),
                self.be_compute_us.to_string(),
                "--iterations".into(),
                self.be_iterations.to_string(),
            ],
        }
    }
}

/// One cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellSpec {
    pub column: Column,
    pub admission: Admission,
    pub window_s: f64,
}

/// What became of one arrival.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobResult {
    pub index: usize,
    /// `rt` or `be`.
    pub class: &'static str,
    pub arrival_s: f64,
    /// `finished`, `rejected`, `failed`, `unfinished`.
    pub fate: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Arrival to the end of its last rank, s (finished jobs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_s: Option<f64>,
    /// RT, from the benchmark's own frame counts (all ranks): Σ (b − n)
    /// over windows with n < b, and b × windows.
    pub missed_frames: u64,
    pub expected_frames: u64,
    /// RT: b − n by window index, summed over its ranks.
    pub missed_by_window: Vec<u64>,
    /// RT, from the agents' frame accounting (what FrameReport carries).
    pub agent_missed_frames: u64,
    pub agent_expected_frames: u64,
    /// On-CPU time of its ranks (eBPF), s.
    pub cpu_s: f64,
    /// RT: each rank's start-up timeline as the benchmark reports it
    /// (`rt.timeline`: CLOCK_MONOTONIC ns of its start, run, first frame
    /// and first frames done), in rank order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rank_timelines: Vec<Value>,
}

/// What one cell gave.
#[derive(Clone, Debug, Default)]
pub struct CellRun {
    pub jobs: Vec<JobResult>,
    /// From the first arrival instant to the last job's end, s.
    pub wall_s: f64,
    pub outside_cpu_percent: f64,
}

/// How long the jobs may take to end after the arrival window.
const DRAIN_TIMEOUT_S: f64 = 40.0;
const POLL: Duration = Duration::from_millis(100);
/// SCHED_FIFO priority of RT ranks (fifo column, refused deadline ranks):
/// below the agents (their `agent_priority`).
pub const FIFO_PRIORITY: u32 = 10;
/// The SCHED_DEADLINE runtime's margin over the declared work, percent.
const DEADLINE_SLACK_PERCENT: u64 = 20;
/// Ports for the jobs the bench launches itself (the coordinator picks its
/// own): a block per cell, cycled.
const FIRST_PORT: u16 = 7600;
const PORTS_PER_CELL: u16 = 200;
const PORT_BLOCKS: u16 = 4;

enum State {
    Queued(u32),
    Running(JobPlan),
    Done,
}

struct Live {
    arrival: Arrival,
    arrived_unix_ns: u64,
    state: State,
    result: JobResult,
}

/// Runs cells on one cluster: the bench's job ids and ports.
pub struct Runner<'a> {
    pub cluster: &'a Cluster,
    pub synth: &'a str,
    pub workload: Workload,
    next_job_id: u32,
    cells: u16,
}

impl<'a> Runner<'a> {
    pub fn new(cluster: &'a Cluster, synth: &'a str, workload: Workload) -> Self {
        Self {
            cluster,
            synth,
            workload,
            next_job_id: 5000,
            cells: 0,
        }
    }

    fn admin(&self) -> CoordAdmin<'a> {
        CoordAdmin::of(self.cluster)
    }

    /// Replays `arrivals` under `spec`.
    pub fn run(&mut self, spec: CellSpec, arrivals: &[Arrival]) -> anyhow::Result<CellRun> {
        let ours = Ours::of(self.cluster);
        let load_before = ours.sample();
        let first_port = FIRST_PORT + (self.cells % PORT_BLOCKS) * PORTS_PER_CELL;
        self.cells += 1;
        let mut ledger = ClassLedger::one_process_per_node(self.cluster.nodes.len());
        let t0 = Instant::now();
        let mut live: Vec<Live> = Vec::new();
        let mut next = 0;
        let mut last_poll = Instant::now();
        let outcome = loop {
            let now = t0.elapsed().as_secs_f64();
            while next < arrivals.len() && arrivals[next].at_s <= now {
                let a = arrivals[next];
                let port = first_port + (next as u16 % PORTS_PER_CELL);
                let l = self.arrive(spec, a, port, &mut ledger);
                live.push(l);
                next += 1;
            }
            if last_poll.elapsed() >= POLL {
                last_poll = Instant::now();
                if let Err(e) = self.poll(&mut live, &mut ledger) {
                    break Err(e);
                }
            }
            if next == arrivals.len() && live.iter().all(|l| matches!(l.state, State::Done)) {
                break Ok(());
            }
            if now > spec.window_s + DRAIN_TIMEOUT_S {
                break Err(anyhow::anyhow!(
                    "jobs still running {DRAIN_TIMEOUT_S} s after the arrival window"
                ));
            }
            let until_next = arrivals
                .get(next)
                .map_or(0.02, |a| (a.at_s - now).clamp(0.0, 0.02));
            thread::sleep(Duration::from_secs_f64(until_next));
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let outside_cpu_percent = outside_percent(load_before, ours.sample());
        if let Err(e) = outcome {
            self.discard(&mut live);
            return Err(e);
        }
        Ok(CellRun {
            jobs: live.into_iter().map(|l| l.result).collect(),
            wall_s,
            outside_cpu_percent,
        })
    }

    fn arrive(
        &mut self,
        spec: CellSpec,
        arrival: Arrival,
        port: u16,
        ledger: &mut ClassLedger,
    ) -> Live {
        let arrived_unix_ns = unix_ns();
        let args = self.workload.synth_args(arrival.kind);
        let name = format!(
            "{}-{}",
            match arrival.kind {
                Kind::Rt { .. } => "rt",
                Kind::Be => "be",
            },
            arrival.index
        );
        let result = JobResult {
            index: arrival.index,
            class: match arrival.kind {
                Kind::Rt { .. } => "rt",
                Kind::Be => "be",
            },
            arrival_s: arrival.at_s,
            ..JobResult::default()
        };
        let mut l = Live {
            arrival,
            arrived_unix_ns,
            state: State::Done,
            result,
        };
        let state = if spec.column.coordinator_policy().is_some() {
            self.submit(&name, arrival.kind, args)
        } else {
            self.launch_direct(spec, &name, arrival, args, port, ledger)
        };
        match state {
            Ok(s) => l.state = s,
            Err((fate, reason)) => {
                l.result.fate = fate;
                l.result.reason = Some(reason);
            }
        }
        l
    }

    /// `cosched submit`: running, queued, or (rejected|failed, why).
    fn submit(
        &self,
        name: &str,
        kind: Kind,
        args: Vec<String>,
    ) -> Result<State, (&'static str, String)> {
        let class = match kind {
            Kind::Rt { .. } => self.workload.declared_text(),
            Kind::Be => "be".into(),
        };
        let mut cli = vec![
            "submit", "--name", name, "--nodes", "2", "--class", &class, "--", self.synth,
        ];
        cli.extend(args.iter().map(String::as_str));
        let reply = match self.admin().cli(&cli) {
            Ok(r) => r,
            Err(e) => {
                let text = format!("{e:#}");
                return Err((refusal_fate(kind, &text), text));
            }
        };
        let job = &reply["submitted"]["job"];
        state_of(self.cluster, job, args)
    }

    /// The fifo and deadline columns: admission (if any) by the bench, then
    /// a launch on the agents.
    fn launch_direct(
        &mut self,
        spec: CellSpec,
        name: &str,
        arrival: Arrival,
        args: Vec<String>,
        port: u16,
        ledger: &mut ClassLedger,
    ) -> Result<State, (&'static str, String)> {
        let job_id = self.next_job_id;
        self.next_job_id += 1;
        let plan = JobPlan {
            job_id,
            name: name.to_string(),
            nodes: (0..self.cluster.nodes.len()).collect(),
            port,
            args,
        };
        let rt = matches!(arrival.kind, Kind::Rt { .. });
        if rt && spec.column == Column::Fifo && spec.admission != Admission::None {
            let job = RtJob::new(
                JobId(u64::from(job_id)),
                self.workload.period_ns,
                self.workload.frames,
                vec![self.workload.work_max_ns; plan.nodes.len()],
            )
            .map_err(|e| ("failed", e.to_string()))?;
            let model = RtLoadModel::bare(FairnessRatio::new(2, 1).expect("2:1"));
            AdmissionRule::Deterministic
                .admit(ledger, &job, &model)
                .map_err(|e| ("rejected", e.to_string()))?;
        }
        let (class, sched) = match (arrival.kind, spec.column) {
            (Kind::Be, _) => (JobClass::BestEffort, None),
            (Kind::Rt { .. }, Column::Fifo) => (
                self.workload.declared(),
                Some(SchedRequest::Fifo {
                    priority: FIFO_PRIORITY,
                }),
            ),
            (Kind::Rt { .. }, _) => (self.workload.declared(), None),
        };
        let pids = match jobs::launch(self.cluster, self.synth, &plan, class, sched) {
            Ok(p) => p,
            Err(e) => {
                jobs::discard(self.cluster, std::slice::from_ref(&plan));
                ledger.remove(JobId(u64::from(job_id)));
                return Err(("failed", format!("{e:#}")));
            }
        };
        if rt && spec.column == Column::Deadline {
            let runtime = deadline::runtime_ns(
                self.workload.work_max_ns,
                DEADLINE_SLACK_PERCENT,
                self.workload.period_ns,
            );
            for pid in pids {
                match deadline::set_deadline(pid, runtime, self.workload.period_ns) {
                    Ok(()) => {}
                    Err(deadline::Refused::Admission) if spec.admission == Admission::None => {
                        if let Err(e) = deadline::set_fifo(pid, FIFO_PRIORITY) {
                            jobs::discard(self.cluster, std::slice::from_ref(&plan));
                            return Err(("failed", format!("SCHED_FIFO fallback: {e}")));
                        }
                    }
                    Err(deadline::Refused::Admission) => {
                        jobs::discard(self.cluster, std::slice::from_ref(&plan));
                        return Err(("rejected", deadline::Refused::Admission.to_string()));
                    }
                    Err(e) => {
                        jobs::discard(self.cluster, std::slice::from_ref(&plan));
                        return Err(("failed", format!("SCHED_DEADLINE for pid {pid}: {e}")));
                    }
                }
            }
        }
        Ok(State::Running(plan))
    }

    /// Queued jobs that got their rows (or were evicted), running jobs
    /// that ended.
    fn poll(&self, live: &mut [Live], ledger: &mut ClassLedger) -> anyhow::Result<()> {
        if live.iter().any(|l| matches!(l.state, State::Queued(_))) {
            let all = self.admin().cli(&["jobs", "--all"])?;
            let views = all["jobs"]["jobs"].as_array().cloned().unwrap_or_default();
            for l in live.iter_mut() {
                let State::Queued(id) = l.state else { continue };
                let Some(view) = views
                    .iter()
                    .find(|v| v["id"].as_u64() == Some(u64::from(id)))
                else {
                    continue;
                };
                let args = self.workload.synth_args(l.arrival.kind);
                match state_of(self.cluster, view, args) {
                    Ok(s) => l.state = s,
                    Err((fate, reason)) => {
                        l.state = State::Done;
                        l.result.fate = fate;
                        l.result.reason = Some(reason);
                    }
                }
            }
        }
        if !live.iter().any(|l| matches!(l.state, State::Running(_))) {
            return Ok(());
        }
        let mut ended: Vec<(u32, usize)> = Vec::new();
        for node in &self.cluster.nodes {
            match jobs::call(self.cluster, node.index, Request::Jobs)? {
                Reply::Jobs { jobs } => ended.extend(
                    jobs.iter()
                        .filter(|j| matches!(j.state, JobState::Exited { .. }))
                        .map(|j| (j.job_id, node.index)),
                ),
                other => bail!("unexpected reply to jobs: {other:?}"),
            }
        }
        for l in live.iter_mut() {
            let State::Running(plan) = &l.state else {
                continue;
            };
            let done = plan
                .nodes
                .iter()
                .all(|&n| ended.contains(&(plan.job_id, n)));
            if !done {
                continue;
            }
            let plan = plan.clone();
            l.state = State::Done;
            ledger.remove(JobId(u64::from(plan.job_id)));
            match jobs::collect(self.cluster, std::slice::from_ref(&plan), 5_000) {
                Ok(mut outcomes) => {
                    let o = outcomes.remove(0);
                    finish(&mut l.result, &o, l.arrived_unix_ns);
                }
                Err(e) => {
                    jobs::discard(self.cluster, std::slice::from_ref(&plan));
                    l.result.fate = "failed";
                    l.result.reason = Some(format!("{e:#}"));
                }
            }
        }
        Ok(())
    }

    /// After a failed cell: cancel what still runs, mark it unfinished.
    fn discard(&self, live: &mut [Live]) {
        let coordinated = self.cluster.coordinator.is_some();
        for l in live.iter_mut() {
            match &l.state {
                State::Running(plan) => {
                    if coordinated {
                        let _ = self.admin().cli(&["cancel", &plan.job_id.to_string()]);
                    }
                    jobs::discard(self.cluster, std::slice::from_ref(plan));
                }
                State::Queued(id) => {
                    let _ = self.admin().cli(&["cancel", &id.to_string()]);
                }
                State::Done => continue,
            }
            l.state = State::Done;
            l.result.fate = "unfinished";
        }
    }
}

/// A coordinator job view as a state: running (its plan), queued, or done
/// without running (evicted, refused, failed).
fn state_of(
    cluster: &Cluster,
    job: &Value,
    args: Vec<String>,
) -> Result<State, (&'static str, String)> {
    match job["state"].as_str() {
        Some("running") => {
            let mut plan = plan_of(cluster, job).map_err(|e| ("failed", format!("{e:#}")))?;
            plan.args = args;
            Ok(State::Running(plan))
        }
        Some("queued") => Ok(State::Queued(job["id"].as_u64().unwrap_or(0) as u32)),
        other => {
            let reason = job["reason"]
                .as_str()
                .or_else(|| job["admission"]["reason"].as_str())
                .unwrap_or("")
                .to_string();
            let rejected = job["admission"]["state"] == "rejected" || reason.contains("evicted");
            Err((
                if rejected { "rejected" } else { "failed" },
                format!("{}: {reason}", other.unwrap_or("?")),
            ))
        }
    }
}

/// Whether a refused submission is an admission decision or a failure.
pub fn refusal_fate(kind: Kind, message: &str) -> &'static str {
    let admission = ["admission", "rejected", "real-time set", "rows of 1GS"];
    if matches!(kind, Kind::Rt { .. }) && admission.iter().any(|w| message.contains(w)) {
        "rejected"
    } else {
        "failed"
    }
}

/// Fills a finished job's result from its outcome.
pub fn finish(r: &mut JobResult, o: &JobOutcome, arrived_unix_ns: u64) {
    r.fate = "finished";
    let end = o
        .rank_results
        .iter()
        .filter_map(|v| v["finished_unix_ns"].as_u64())
        .max()
        .unwrap_or(arrived_unix_ns);
    r.response_s = Some(end.saturating_sub(arrived_unix_ns) as f64 / 1e9);
    r.cpu_s = o.cpu_seconds;
    for v in &o.rank_results {
        let rt = &v["rt"];
        if rt.is_object() {
            let u = |k: &str| rt[k].as_u64().unwrap_or(0);
            if rt["timeline"].is_object() {
                r.rank_timelines.push(rt["timeline"].clone());
            }
            r.missed_frames += u("missed_frames");
            r.expected_frames += u("windows") * u("frames_per_window");
            if let Some(list) = rt["missed_by_window"].as_array() {
                for (i, m) in list.iter().enumerate() {
                    if r.missed_by_window.len() <= i {
                        r.missed_by_window.resize(i + 1, 0);
                    }
                    r.missed_by_window[i] += m.as_u64().unwrap_or(0);
                }
            }
        }
    }
    r.agent_missed_frames = o.rt_missed;
    r.agent_expected_frames = o.rt_expected;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rt_jobs_stream_frames_and_declare_their_worst_case() {
        let w = Workload::DEFAULT;
        let args = w.synth_args(Kind::Rt { work_ns: 1_500_000 });
        assert_eq!(args[..2], ["--rt", "10000000:30:1500000"]);
        assert!(args.windows(2).any(|a| a == ["--recv", "block"]));
        assert_eq!(w.declared_text(), "rt:10000000:30:2000000");
        let be = w.synth_args(Kind::Be);
        assert!(be.windows(2).any(|a| a == ["--iterations", "600"]));
    }

    #[test]
    fn refusals_of_rt_jobs_by_admission_are_rejections_others_failures() {
        let rt = Kind::Rt { work_ns: 1 };
        assert_eq!(
            refusal_fate(rt, "real-time job rejected by admission control: ..."),
            "rejected"
        );
        assert_eq!(
            refusal_fate(
                rt,
                "its frames need 3 rows of 1GS's real-time set every cycle"
            ),
            "rejected"
        );
        assert_eq!(refusal_fate(rt, "cannot start \"/x\" on n0"), "failed");
        assert_eq!(refusal_fate(Kind::Be, "rejected"), "failed");
    }

    #[test]
    fn a_finished_job_counts_frames_over_its_ranks_and_responds_from_its_arrival() {
        let o = JobOutcome {
            cpu_seconds: 0.5,
            rt_missed: 3,
            rt_expected: 80,
            rank_results: vec![
                json!({"finished_unix_ns": 3_000_000_000u64,
                       "rt": {"missed_frames": 2, "windows": 2, "frames_per_window": 20}}),
                json!({"finished_unix_ns": 3_500_000_000u64,
                       "rt": {"missed_frames": 1, "windows": 2, "frames_per_window": 20}}),
            ],
            ..JobOutcome::default()
        };
        let mut r = JobResult::default();
        finish(&mut r, &o, 1_000_000_000);
        assert_eq!(r.fate, "finished");
        assert_eq!(r.response_s, Some(2.5));
        assert_eq!((r.missed_frames, r.expected_frames), (3, 80));
        assert_eq!((r.agent_missed_frames, r.agent_expected_frames), (3, 80));
    }

    #[test]
    fn coordinator_views_become_states() {
        let cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let queued = json!({"id": 4, "state": "queued"});
        assert!(matches!(
            state_of(&cluster, &queued, vec![]),
            Ok(State::Queued(4))
        ));
        let evicted = json!({"id": 4, "state": "failed",
            "reason": "evicted: waited 125 ms for 2 rows", "admission": {"state": "rejected"}});
        let Err((fate, why)) = state_of(&cluster, &evicted, vec![]) else {
            panic!("evicted is not running")
        };
        assert_eq!(fate, "rejected");
        assert!(why.contains("evicted"));
        let running = json!({"id": 5, "name": "rt-1", "state": "running", "port": 20005,
            "ranks": [{"node": "n0"}, {"node": "n1"}]});
        let Ok(State::Running(plan)) = state_of(&cluster, &running, vec!["a".into()]) else {
            panic!("running")
        };
        assert_eq!(
            (plan.job_id, plan.nodes.clone(), plan.args.clone()),
            (5, vec![0, 1], vec!["a".to_string()])
        );
    }
}
