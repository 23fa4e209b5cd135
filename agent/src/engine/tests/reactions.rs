//! The arrival → decision → kernel path, the eBPF settings each policy
//! needs, and the coordinator's policy override.
use cosched_agent_common::{event_flags, offcpu_arrival};

use super::*;

/// An engine under `policy` with two jobs of one task each at t = 1 s:
/// task 100 (job 1, named `name`) and task 200 (job 2, "other").
fn two_jobs(policy: &str, name: &str) -> Engine<FakeKernel> {
    let mut e = engine_with(policy);
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, name, &[100], None).unwrap();
    e.adopt(2, "other", &[200], None).unwrap();
    e.k.now = 1_000_000_000;
    e
}

/// A task that spun (40 empty receives) and was preempted 2 ms before
/// `now`, having used `oncpu_ns` of CPU.
fn spun_and_preempted(now: u64, oncpu_ns: u64) -> TaskStats {
    TaskStats {
        switches_in: 1,
        switches_out_preempted: 1,
        last_out_preempted: 1,
        last_run_start_ns: now - 3_000_000,
        last_switch_out_ns: now - 2_000_000,
        spin_episode_start_ns: now - 2_500_000,
        recv_empty: 40,
        oncpu_ns,
        ..TaskStats::default()
    }
}

/// A task computing on its CPU since 2 ms before `now`, having used
/// `oncpu_ns` of CPU.
fn computing(now: u64, oncpu_ns: u64) -> TaskStats {
    TaskStats {
        switches_in: 1,
        on_cpu: 1,
        last_run_start_ns: now - 2_000_000,
        oncpu_ns,
        ..TaskStats::default()
    }
}

/// DCS: a receiver preempted while it spun gets its message: the arrival
/// record boosts it at once, and the reaction is recorded from the record's
/// timestamp.
#[test]
fn preempted_spinner_is_boosted_on_arrival_and_the_reaction_is_recorded() {
    let mut e = two_jobs("dcs", "receiver");
    // 100 spun and was preempted by 200, which computes on CPU 0.
    *e.k.stats_mut(100) = spun_and_preempted(e.k.now, 0);
    *e.k.stats_mut(200) = computing(e.k.now, 0);
    e.k.run_on_cpu(0, 200, 2);
    e.policy_tick();
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "no message yet");
    let sent_at = e.k.now;
    e.k.now += 40_000;
    e.k.events.push_back(Event {
        kind: event_kind::ARRIVAL,
        tid: 100,
        job_id: 1,
        flags: event_flags::TASK_SPINNING,
        ts_ns: sent_at,
        arg: 0,
    });
    e.drain_events();
    let a = e.k.attr(100);
    assert_eq!(a.policy, SchedPolicy::Fifo, "boosted: {a:?}");
    assert_ne!(
        e.k.watched.get(&100).copied().unwrap_or(0) & watch_flags::BOOSTED,
        0,
        "its next arrivals wake nobody"
    );
    let job = e.reg.job(1).unwrap();
    assert_eq!((job.boosts, job.latencies.count), (1, 1));
    assert_eq!(job.latencies.percentile(50.0), 40.0, "µs from the record");
    assert_eq!(e.metrics.reaction_latency.get_sample_count(), 1);
}

/// SB: a rank that has spun its threshold between two quiet ticks, next to
/// one other job's task, is reported by the eBPF side (`SPIN_LONG`); the
/// engine as configured by `extra` has then just drained that report.
fn sb_spinner_reported_past_its_threshold(extra: &str) -> Engine<FakeKernel> {
    let mut e = engine_configured(&format!("policy = \"sb\"\n{extra}"));
    assert_eq!(e.k.settings.spin_report_ns, 500_000, "SB's threshold");
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "spinner", &[100], None).unwrap();
    e.adopt(2, "other", &[200], None).unwrap();
    e.k.now = 1_000_000_000;
    let running = TaskStats {
        switches_in: 1,
        on_cpu: 1,
        last_run_start_ns: e.k.now - 2_000_000,
        run_start_ns: e.k.now - 2_000_000,
        ..TaskStats::default()
    };
    *e.k.stats_mut(100) = running;
    e.k.run_on_cpu(0, 100, 1);
    e.policy_tick();
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "computing");
    // It starts waiting at once and spins 500 µs: the report comes.
    let start = e.k.now + 10_000;
    e.k.now = start + 500_000;
    *e.k.stats_mut(100) = TaskStats {
        spin_episode_start_ns: start,
        spin_last_ns: e.k.now,
        empty_polls: 900,
        ..running
    };
    e.k.events.push_back(Event {
        kind: event_kind::SPIN_LONG,
        tid: 100,
        job_id: 1,
        flags: event_flags::TASK_ON_CPU | event_flags::TASK_SPINNING,
        ts_ns: e.k.now,
        arg: 500_000,
    });
    e.drain_events();
    e
}

/// With the fixed threshold (`mpl_aware = false`) the report demotes the
/// spinner at once, not at the next tick.
#[test]
fn spinner_reported_past_its_threshold_is_blocked_at_once() {
    let e = sb_spinner_reported_past_its_threshold("[sb]\nmpl_aware = false");
    assert_eq!(
        e.k.attr(100).policy,
        SchedPolicy::Idle,
        "demoted at the report"
    );
}

/// By default (`mpl_aware`) a spinner with only one other task for its CPU
/// is not blocked at the threshold: the report itself lets the kernel hand
/// the CPU over, and a block would only add its costs.
#[test]
fn by_default_a_spinner_next_to_one_other_task_is_not_blocked_at_its_threshold() {
    let e = sb_spinner_reported_past_its_threshold("");
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "left to the kernel");
    assert_eq!(
        e.k.watched.get(&100).copied().unwrap_or(0) & watch_flags::HELD,
        0,
        "not held until a message"
    );
}

#[test]
fn each_policy_writes_its_wake_up_settings_and_a_switch_rewrites_them() {
    let mut e = engine_with("local");
    assert_eq!(e.k.settings.wake_on_offcpu_arrival, offcpu_arrival::OFF);
    let text = "node = \"n0\"\ncpus = [0]\npolicy = \"dcs\"\n[dcs]\nboost_computing = true";
    assert!(e.reload(Config::parse(text, "t")).accepted);
    assert_eq!(e.k.settings.wake_on_offcpu_arrival, offcpu_arrival::READY);
    assert!(
        e.reload(Config::parse(
            "node = \"n0\"\ncpus = [0]\npolicy = \"sb\"",
            "t"
        ))
        .accepted
    );
    assert_eq!(e.k.settings.wake_on_offcpu_arrival, offcpu_arrival::OFF);
}

#[test]
fn a_reacting_policy_runs_the_agent_real_time_from_the_start() {
    let e = engine_with("dcs");
    assert_eq!(e.k.own_attr.policy, SchedPolicy::Fifo);
    assert_eq!(e.k.own_attr.priority, e.cfg().agent_priority);
    assert_eq!(engine_with("local").k.own_attr.policy, SchedPolicy::Other);
}

#[test]
fn coordinator_policy_overrides_the_file_until_it_leaves() {
    let mut e = engine_with("local");
    assert_eq!(e.k.own_attr.policy, SchedPolicy::Other);
    e.set_coordinator_policy(Some(cosched_policy::local::PolicyKind::Dcs), true);
    assert_eq!(e.running_policy().as_str(), "dcs");
    assert_eq!(
        e.k.own_attr.policy,
        SchedPolicy::Fifo,
        "the agent acts in real time"
    );
    assert_eq!(e.k.settings.wake_on_offcpu_arrival, offcpu_arrival::WAITING);
    // A reload of the file keeps the coordinator's choice.
    assert!(
        e.reload(Config::parse(
            "node = \"n0\"\ncpus = [0]\npolicy = \"sb\"",
            "t"
        ))
        .accepted
    );
    assert_eq!(e.running_policy().as_str(), "dcs");
    assert_eq!(e.cfg().policy.as_str(), "sb");
    e.set_coordinator_policy(None, false);
    assert_eq!(e.running_policy().as_str(), "sb", "the file's policy again");
    assert_eq!(e.k.settings.wake_on_offcpu_arrival, offcpu_arrival::OFF);
}

/// DCS: a boost the policy refuses (the receiver's job got more than its
/// equal share of the CPU in the window) changes no level, but is counted
/// by its reason and shows in a timeline recording, so a probe can tell
/// why a rank with a message was left waiting.
#[test]
fn an_arrival_boost_refused_is_counted_and_recorded_with_its_reason() {
    let mut e = two_jobs("dcs", "receiver");
    e.k.run_on_cpu(0, 200, 2);
    *e.k.stats_mut(100) = spun_and_preempted(e.k.now, 0);
    *e.k.stats_mut(200) = computing(e.k.now, 0);
    e.policy_tick();
    // 40 ms later, in the same 100 ms window: job 1 ran 35 ms, job 2 5 ms.
    e.k.now += 40_000_000;
    *e.k.stats_mut(100) = spun_and_preempted(e.k.now, 35_000_000);
    *e.k.stats_mut(200) = computing(e.k.now, 5_000_000);
    e.policy_tick();
    e.start_recording(100, None).unwrap();
    e.k.events.push_back(Event {
        kind: event_kind::ARRIVAL,
        tid: 100,
        job_id: 1,
        flags: event_flags::TASK_SPINNING,
        ts_ns: e.k.now,
        arg: 0,
    });
    e.drain_events();
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "not boosted");
    assert_eq!(
        e.metrics
            .decisions
            .with_label_values(&["no-boost-cpu-share"])
            .get(),
        1
    );
    let t = e.finish_recording().unwrap();
    let decisions: Vec<(u32, &str)> = t
        .decisions
        .iter()
        .map(|d| (d.tid, d.reason.as_str()))
        .collect();
    assert_eq!(decisions, [(100, "no-boost-cpu-share")]);
    assert!(
        !t.actions
            .iter()
            .any(|a| a.tid == 100 && a.level != "normal"),
        "no level changed"
    );
}
