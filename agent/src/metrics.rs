//! Prometheus metrics of the agent (`cosched_` prefix, help on every metric,
//! labels bounded: `job` series exist only for jobs the agent tracks, at most
//! `max_jobs + finished_retention`, and are removed when a job is forgotten).
use std::collections::HashMap;

use cosched_proto::{control::JobStats, job::JobId};
use prometheus::{
    CounterVec, Encoder as _, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::kernel::{ProgramCost, WaitDetectorState};

/// The `kind` labels of `cosched_job_empty_waits_total`.
const WAIT_KINDS: [&str; 3] = ["recv", "poll", "yield"];

/// Labels of `cosched_agent_events_total`, indexed by `event_kind` code (0 =
/// unknown).
const EVENT_KINDS: [&str; 5] = ["unknown", "arrival", "exit", "fork", "spin_start"];

pub struct Metrics {
    registry: Registry,
    job_cpu: CounterVec,
    job_spin: CounterVec,
    job_messages: IntCounterVec,
    job_empty_receives: IntCounterVec,
    job_empty_waits: IntCounterVec,
    job_spin_episodes: IntCounterVec,
    wait_detectors: prometheus::IntGaugeVec,
    job_switches: IntCounterVec,
    pub managed_tasks: IntGauge,
    pub fcs_classes: prometheus::IntGaugeVec,
    pub running_jobs: IntGauge,
    /// `cosched_agent_events_total` by kind, resolved once: it is counted for
    /// every ring-buffer record (tens of thousands a second).
    events: [IntCounter; 5],
    pub event_wakeups: IntCounter,
    pub late_ticks: IntCounter,
    forced_wakeups: IntCounter,
    ebpf_runs: IntCounterVec,
    ebpf_seconds: CounterVec,
    ebpf_drops: IntCounterVec,
    pub reloads: IntCounterVec,
    pub config_ok: IntGauge,
    pub actions: IntCounterVec,
    pub action_errors: IntCounterVec,
    pub restored: IntCounterVec,
    agent_cpu: prometheus::Counter,
    pub reaction_latency: prometheus::Histogram,
    pub decisions: IntCounterVec,
    rt_frames: IntCounterVec,
    rt_expected: IntCounterVec,
    rt_missed: IntCounterVec,
    rt_overruns: IntCounterVec,
    rt_miss_rate: prometheus::GaugeVec,
    /// RT tasks by how the class overlay realises them now.
    pub rt_tasks: prometheus::IntGaugeVec,
    pub rt_deadline_refused: IntCounter,
    pub rt_edf_mechanism: prometheus::IntGaugeVec,
    /// 2DCS-TDM: 1 while the node runs its own division clock because the
    /// coordinator's divisions stopped coming.
    pub tdm_fallback_active: IntGauge,
    /// 2DCS-TDM: times the node fell back to its own division clock.
    pub tdm_fallbacks: IntCounter,
    /// 1 while the agent holds a CPU latency request of 0 µs (RT jobs run).
    pub low_latency_held: IntGauge,
    /// 1 for the class running now (both 0 without a class mode).
    pub class_running: prometheus::IntGaugeVec,
    /// Last totals exported per job, to turn totals into counter increments.
    last_job: HashMap<JobId, JobStats>,
    last_rt: HashMap<JobId, RtCounts>,
    last_prog: HashMap<String, ProgramCost>,
    last_drops: [u64; 3],
    last_forced: u64,
    last_agent_cpu: f64,
}

/// What an RT job counted so far, as exported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RtCounts {
    pub frames: u64,
    pub expected: u64,
    pub missed: u64,
    pub overruns: u64,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, m: T) -> T {
    r.register(Box::new(m.clone()))
        .expect("metric names are unique");
    m
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new();
        let job = &["job_id", "job"];
        let cv = |name: &str, help: &str, labels: &[&str]| {
            reg(
                &r,
                CounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let icv = |name: &str, help: &str, labels: &[&str]| {
            reg(
                &r,
                IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
            )
        };
        let ig = |name: &str, help: &str| reg(&r, IntGauge::new(name, help).expect("valid metric"));
        Self {
            job_cpu: cv("cosched_job_cpu_seconds_total", "CPU time of the job's tasks on this node, from eBPF sched_switch accounting.", job),
            job_spin: cv("cosched_job_spin_seconds_total", "Time the job's tasks spent spinning on empty non-blocking receives.", job),
            job_messages: icv("cosched_job_messages_received_total", "Message arrivals (socket data-ready) for the job's sockets.", job),
            job_empty_receives: icv("cosched_job_empty_receives_total", "Receives by the job's tasks that found no data (EAGAIN).", job),
            job_empty_waits: icv("cosched_job_empty_waits_total", "Empty waits of the job's tasks, by how they waited: recv (a non-blocking receive that found nothing), poll (poll, select or epoll returning nothing without blocking), yield (sched_yield).", &["job_id", "job", "kind"]),
            job_spin_episodes: icv("cosched_job_spin_episodes_total", "Spin episodes of the job's tasks (from the first empty wait to data, a send, a block, or computation past the spin gap).", job),
            wait_detectors: reg(&r, prometheus::IntGaugeVec::new(Opts::new("cosched_wait_detector_active", "1 if the waiting detector runs on this kernel (recv, or the system call), 0 if its tracepoints are missing."), &["detector"]).expect("valid metric")),
            job_switches: icv("cosched_job_context_switches_total", "Context switches out of the job's tasks, by kind (voluntary: blocked or yielded; preempted: still runnable).", &["job_id", "job", "kind"]),
            managed_tasks: ig("cosched_managed_tasks", "Tasks (threads) the agent tracks."),
            fcs_classes: reg(&r, prometheus::IntGaugeVec::new(Opts::new("cosched_fcs_tasks", "Managed tasks per FCS class (cs, f, dc) as scheduled now, measuring phases included; all 0 under other policies."), &["class"]).expect("valid metric")),
            running_jobs: ig("cosched_running_jobs", "Jobs with live processes on this node."),
            events: {
                let v = icv("cosched_agent_events_total", "eBPF events handled by the agent, by kind.", &["kind"]);
                EVENT_KINDS.map(|k| v.with_label_values(&[k]))
            },
            late_ticks: reg(&r, IntCounter::new("cosched_agent_late_policy_ticks_total", "Policy ticks that ran more than 20 ms behind schedule (the agent did not get its CPU).").expect("valid metric")),
            event_wakeups: reg(&r, IntCounter::new("cosched_agent_event_wakeups_total", "Times the agent woke up to drain the event ring buffer (events are batched, not one wakeup each).").expect("valid metric")),
            forced_wakeups: reg(&r, IntCounter::new("cosched_ebpf_forced_wakeups_total", "Events the eBPF programs submitted with a forced wakeup of the agent (arrivals the policy must decide on now).").expect("valid metric")),
            ebpf_runs: icv("cosched_ebpf_program_runs_total", "Runs of each eBPF program (kernel BPF stats).", &["program"]),
            ebpf_seconds: cv("cosched_ebpf_program_run_seconds_total", "Time spent running each eBPF program (kernel BPF stats).", &["program"]),
            ebpf_drops: icv("cosched_ebpf_drops_total", "Records the eBPF programs could not deliver, by reason.", &["reason"]),
            reloads: icv("cosched_config_reloads_total", "Config reload attempts, by outcome (accepted, rejected).", &["outcome"]),
            config_ok: ig("cosched_config_last_reload_ok", "1 if the last config reload was accepted (or none happened), 0 if rejected."),
            actions: icv("cosched_actions_total", "Scheduling actions applied to tasks, by action.", &["action"]),
            action_errors: icv("cosched_action_errors_total", "Scheduling actions that failed (other than the task having exited), by action.", &["action"]),
            restored: icv("cosched_restored_tasks_total", "Tasks put back to their original scheduling attributes, by result (restored, gone, failed).", &["result"]),
            reaction_latency: reg(&r, prometheus::Histogram::with_opts(
                prometheus::HistogramOpts::new(
                    "cosched_reaction_latency_seconds",
                    "Time from a message arrival in the kernel (eBPF timestamp) to the policy's action on it being applied.",
                )
                .buckets(vec![2e-6, 5e-6, 10e-6, 20e-6, 50e-6, 100e-6, 200e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3]),
            ).expect("valid metric")),
            decisions: icv("cosched_policy_decisions_total", "Level changes the local policy decided, by reason.", &["reason"]),
            agent_cpu: reg(&r, prometheus::Counter::new("cosched_agent_cpu_seconds_total", "CPU time used by the agent process itself.").expect("valid metric")),
            rt_frames: icv("cosched_rt_frames_total", "Frames the RT job's processes on this node reported (read from their frame counters).", job),
            rt_expected: icv("cosched_rt_frames_expected_total", "Frames due in the RT job's closed windows (b per window and process).", job),
            rt_missed: icv("cosched_rt_frames_missed_total", "Frames the RT job's processes missed in closed windows (b - n per window with n < b).", job),
            rt_overruns: icv("cosched_rt_overruns_total", "Windows in which an RT process of the job used more CPU than its budget (it was throttled until the window ended).", job),
            rt_miss_rate: reg(&r, prometheus::GaugeVec::new(Opts::new("cosched_rt_miss_rate", "Missed over expected frames of the RT job, over every closed window so far (cumulative)."), job).expect("valid metric")),
            rt_tasks: reg(&r, prometheus::IntGaugeVec::new(Opts::new("cosched_rt_tasks", "RT tasks by how the class overlay realises them now: fifo (EDF priority), deadline (SCHED_DEADLINE), held (SCHED_IDLE: satisfied, throttled or outside its class's turn), none (no class mode)."), &["sched"]).expect("valid metric")),
            rt_edf_mechanism: reg(&r, prometheus::IntGaugeVec::new(Opts::new("cosched_rt_edf_mechanism", "1 for how EDF inside the RT class is realised now: deadline (the kernel's SCHED_DEADLINE, `edf = \"deadline\"` and the kernel accepts it for the node's pinned tasks) or fifo (SCHED_FIFO priorities ordered by absolute deadline: `edf = \"fifo\"`, or the kernel refused SCHED_DEADLINE)."), &["mechanism"]).expect("valid metric")),
            rt_deadline_refused: reg(&r, IntCounter::new("cosched_rt_deadline_refused_total", "RT tasks the kernel refused SCHED_DEADLINE to (they run by EDF-ordered SCHED_FIFO priority instead).").expect("valid metric")),
            tdm_fallback_active: reg(&r, IntGauge::new("cosched_tdm_division_fallback", "1 while 2DCS-TDM runs the node's own division clock (same ratio and period) because no division came from the coordinator for the grace time; 0 otherwise.").expect("valid metric")),
            tdm_fallbacks: reg(&r, IntCounter::new("cosched_tdm_division_fallbacks_total", "Times 2DCS-TDM fell back to the node's own division clock (the coordinator's divisions stopped coming).").expect("valid metric")),
            low_latency_held: reg(&r, IntGauge::new("cosched_low_latency_held", "1 while the agent holds a CPU latency request of 0 µs (/dev/cpu_dma_latency: idle CPUs poll instead of halting) because an RT job runs on the node; 0 otherwise or when the kernel refused it.").expect("valid metric")),
            class_running: reg(&r, prometheus::IntGaugeVec::new(Opts::new("cosched_class_running", "1 for the class the node runs now (rt or be: the 2DCS-TDM division, or 2DCS-PS's choice); both 0 without a class mode."), &["class"]).expect("valid metric")),
            registry: r,
            last_job: HashMap::new(),
            last_rt: HashMap::new(),
            last_prog: HashMap::new(),
            last_drops: [0; 3],
            last_forced: 0,
            last_agent_cpu: 0.0,
        }
    }

    /// Exports which waiting detectors run on this kernel.
    pub fn set_wait_detectors(&self, detectors: &[WaitDetectorState]) {
        for d in detectors {
            self.wait_detectors
                .with_label_values(&[d.name])
                .set(d.problem.is_none() as i64);
        }
    }

    /// Counts one ring-buffer record of `event_kind` code `kind`.
    pub fn count_event(&self, kind: u32) {
        let i = kind as usize;
        self.events[if i < EVENT_KINDS.len() { i } else { 0 }].inc();
    }

    /// Exports a job's new totals as counter increments.
    pub fn update_job(&mut self, id: JobId, name: &str, t: &JobStats) {
        let prev = self.last_job.entry(id).or_default();
        let ids = id.to_string();
        let l = [ids.as_str(), name];
        let df = |a: f64, b: f64| (a - b).max(0.0);
        let du = |a: u64, b: u64| a.saturating_sub(b);
        self.job_cpu
            .with_label_values(&l)
            .inc_by(df(t.cpu_seconds, prev.cpu_seconds));
        self.job_spin
            .with_label_values(&l)
            .inc_by(df(t.spin_seconds, prev.spin_seconds));
        self.job_messages
            .with_label_values(&l)
            .inc_by(du(t.messages_observed, prev.messages_observed));
        self.job_empty_receives
            .with_label_values(&l)
            .inc_by(du(t.empty_receives, prev.empty_receives));
        let by_kind = [
            (t.empty_receives, prev.empty_receives),
            (t.empty_polls, prev.empty_polls),
            (t.yields, prev.yields),
        ];
        for (kind, (now, before)) in WAIT_KINDS.into_iter().zip(by_kind) {
            self.job_empty_waits
                .with_label_values(&[l[0], l[1], kind])
                .inc_by(du(now, before));
        }
        self.job_spin_episodes
            .with_label_values(&l)
            .inc_by(du(t.spin_episodes, prev.spin_episodes));
        self.job_switches
            .with_label_values(&[l[0], l[1], "voluntary"])
            .inc_by(du(t.switches_voluntary, prev.switches_voluntary));
        self.job_switches
            .with_label_values(&[l[0], l[1], "preempted"])
            .inc_by(du(t.switches_preempted, prev.switches_preempted));
        *prev = *t;
    }

    /// Exports an RT job's frame counts as counter increments.
    pub fn update_rt_job(&mut self, id: JobId, name: &str, now: RtCounts) {
        let prev = self.last_rt.entry(id).or_default();
        let ids = id.to_string();
        let l = [ids.as_str(), name];
        for (metric, (after, before)) in [
            (&self.rt_frames, (now.frames, prev.frames)),
            (&self.rt_expected, (now.expected, prev.expected)),
            (&self.rt_missed, (now.missed, prev.missed)),
            (&self.rt_overruns, (now.overruns, prev.overruns)),
        ] {
            metric
                .with_label_values(&l)
                .inc_by(after.saturating_sub(before));
        }
        let rate = if now.expected == 0 {
            0.0
        } else {
            now.missed as f64 / now.expected as f64
        };
        self.rt_miss_rate.with_label_values(&l).set(rate);
        *prev = now;
    }

    /// Removes a forgotten job's series.
    pub fn remove_job(&mut self, id: JobId, name: &str) {
        self.last_job.remove(&id);
        let ids = id.to_string();
        let l = [ids.as_str(), name];
        if self.last_rt.remove(&id).is_some() {
            for metric in [
                &self.rt_frames,
                &self.rt_expected,
                &self.rt_missed,
                &self.rt_overruns,
            ] {
                let _ = metric.remove_label_values(&l);
            }
            let _ = self.rt_miss_rate.remove_label_values(&l);
        }
        let _ = self.job_cpu.remove_label_values(&l);
        let _ = self.job_spin.remove_label_values(&l);
        let _ = self.job_messages.remove_label_values(&l);
        let _ = self.job_empty_receives.remove_label_values(&l);
        let _ = self.job_spin_episodes.remove_label_values(&l);
        for kind in WAIT_KINDS {
            let _ = self
                .job_empty_waits
                .remove_label_values(&[l[0], l[1], kind]);
        }
        for kind in ["voluntary", "preempted"] {
            let _ = self.job_switches.remove_label_values(&[l[0], l[1], kind]);
        }
    }

    pub fn update_programs(&mut self, costs: &[ProgramCost]) {
        for c in costs {
            let prev = self.last_prog.entry(c.name.clone()).or_default();
            self.ebpf_runs
                .with_label_values(&[&c.name])
                .inc_by(c.run_count.saturating_sub(prev.run_count));
            self.ebpf_seconds
                .with_label_values(&[&c.name])
                .inc_by(c.run_time_ns.saturating_sub(prev.run_time_ns) as f64 / 1e9);
            *prev = c.clone();
        }
    }

    pub fn update_drops(&mut self, d: &cosched_agent_common::Drops) {
        let now = [d.ring_full, d.tasks_full, d.sockets_full];
        for (i, reason) in ["ring_full", "tasks_full", "sockets_full"]
            .into_iter()
            .enumerate()
        {
            self.ebpf_drops
                .with_label_values(&[reason])
                .inc_by(now[i].saturating_sub(self.last_drops[i]));
        }
        self.last_drops = now;
        self.forced_wakeups
            .inc_by(d.forced_wakeups.saturating_sub(self.last_forced));
        self.last_forced = d.forced_wakeups;
    }

    pub fn update_agent_cpu(&mut self, seconds: f64) {
        self.agent_cpu
            .inc_by((seconds - self.last_agent_cpu).max(0.0));
        self.last_agent_cpu = seconds;
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding cannot fail");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `want` is in the rendered exposition.
    fn assert_renders(m: &Metrics, want: &[&str]) {
        let text = m.render();
        for line in want {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn job_totals_become_counter_increments_and_every_metric_has_help() {
        let mut m = Metrics::new();
        let t1 = JobStats {
            messages_observed: 10,
            cpu_seconds: 1.0,
            ..JobStats::default()
        };
        m.update_job(3, "ring", &t1);
        let t2 = JobStats {
            messages_observed: 25,
            cpu_seconds: 1.5,
            ..t1
        };
        m.update_job(3, "ring", &t2);
        let text = m.render();
        assert!(
            text.contains("cosched_job_messages_received_total{job=\"ring\",job_id=\"3\"} 25"),
            "{text}"
        );
        assert!(
            text.contains("cosched_job_cpu_seconds_total{job=\"ring\",job_id=\"3\"} 1.5"),
            "{text}"
        );
        for line in text.lines().filter(|l| l.starts_with("# HELP")) {
            assert!(line.split_whitespace().count() > 3, "empty help: {line}");
        }
    }

    #[test]
    fn empty_waits_are_counted_by_kind_and_receives_keep_their_own_series() {
        let mut m = Metrics::new();
        let t = JobStats {
            empty_receives: 3,
            empty_polls: 40,
            yields: 7,
            spin_episodes: 2,
            ..JobStats::default()
        };
        m.update_job(4, "mpi", &t);
        assert_renders(
            &m,
            &[
                "cosched_job_empty_waits_total{job=\"mpi\",job_id=\"4\",kind=\"recv\"} 3",
                "cosched_job_empty_waits_total{job=\"mpi\",job_id=\"4\",kind=\"poll\"} 40",
                "cosched_job_empty_waits_total{job=\"mpi\",job_id=\"4\",kind=\"yield\"} 7",
                "cosched_job_empty_receives_total{job=\"mpi\",job_id=\"4\"} 3",
                "cosched_job_spin_episodes_total{job=\"mpi\",job_id=\"4\"} 2",
            ],
        );
        m.remove_job(4, "mpi");
        assert!(!m.render().contains("job_id=\"4\""));
    }

    #[test]
    fn wait_detectors_show_which_run() {
        let m = Metrics::new();
        m.set_wait_detectors(&[
            WaitDetectorState {
                name: "poll",
                kind: cosched_agent_common::WaitKind::Poll,
                problem: None,
            },
            WaitDetectorState {
                name: "epoll_pwait2",
                kind: cosched_agent_common::WaitKind::Poll,
                problem: Some("tracepoint missing".into()),
            },
        ]);
        let text = m.render();
        assert!(text.contains("cosched_wait_detector_active{detector=\"poll\"} 1"));
        assert!(text.contains("cosched_wait_detector_active{detector=\"epoll_pwait2\"} 0"));
    }

    #[test]
    fn event_kinds_are_labelled_by_their_code() {
        use cosched_agent_common::event_kind;
        let m = Metrics::new();
        m.count_event(event_kind::ARRIVAL);
        m.count_event(event_kind::ARRIVAL);
        m.count_event(event_kind::SPIN_START);
        m.count_event(99);
        let text = m.render();
        assert!(
            text.contains("cosched_agent_events_total{kind=\"arrival\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("cosched_agent_events_total{kind=\"spin_start\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cosched_agent_events_total{kind=\"unknown\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cosched_agent_events_total{kind=\"exit\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn rt_frames_are_counted_per_job_with_a_cumulative_miss_rate() {
        let mut m = Metrics::new();
        let counts = RtCounts {
            frames: 30,
            expected: 40,
            missed: 10,
            overruns: 1,
        };
        m.update_rt_job(5, "video", counts);
        m.update_rt_job(5, "video", counts);
        assert_renders(
            &m,
            &[
                "cosched_rt_frames_total{job=\"video\",job_id=\"5\"} 30",
                "cosched_rt_frames_expected_total{job=\"video\",job_id=\"5\"} 40",
                "cosched_rt_frames_missed_total{job=\"video\",job_id=\"5\"} 10",
                "cosched_rt_overruns_total{job=\"video\",job_id=\"5\"} 1",
                "cosched_rt_miss_rate{job=\"video\",job_id=\"5\"} 0.25",
            ],
        );
        m.remove_job(5, "video");
        assert!(!m.render().contains("job_id=\"5\""));
    }

    #[test]
    fn forgotten_job_series_disappear() {
        let mut m = Metrics::new();
        m.update_job(
            3,
            "ring",
            &JobStats {
                messages_observed: 1,
                ..JobStats::default()
            },
        );
        m.remove_job(3, "ring");
        assert!(!m.render().contains("job_id=\"3\""));
    }

    #[test]
    fn program_costs_are_exported_as_deltas() {
        let mut m = Metrics::new();
        let c = |n, t| ProgramCost {
            name: "sched_switch".into(),
            run_count: n,
            run_time_ns: t,
        };
        m.update_programs(&[c(100, 30_000)]);
        m.update_programs(&[c(150, 45_000)]);
        let text = m.render();
        assert!(
            text.contains("cosched_ebpf_program_runs_total{program=\"sched_switch\"} 150"),
            "{text}"
        );
    }
}
