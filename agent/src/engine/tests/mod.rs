//! Scenario tests of the engine over the fake kernel.
use cosched_agent_common::{Event, TaskStats, event_kind, watch_flags};
use cosched_proto::job::SchedRequest;

use super::*;
use crate::kernel::{SchedAttr, SchedPolicy, fake::FakeKernel};

mod attach;
mod job_cpu;
mod lifecycle;
mod low_latency;
mod reactions;
mod record;
mod rt;
mod rt_rows;

fn engine() -> Engine<FakeKernel> {
    engine_with("local")
}

/// Jobs 1 (task 100) and 2 (task 200) adopted, and a demoting gang slice
/// of job 1 applied.
fn job_a_slice_demoting_job_b(e: &mut Engine<FakeKernel>) {
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
}

/// Job `id` adopted with a request to move its processes onto the node's
/// CPUs (as a coordinator-launched or attached job is).
fn adopt_moved(e: &mut Engine<FakeKernel>, id: JobId, name: &str, pids: &[u32]) {
    e.adopt_with(
        id,
        name,
        pids,
        None,
        true,
        &cosched_proto::wire::JobClass::BestEffort,
    )
    .unwrap();
}

/// An engine on CPU 0 running local policy `policy`.
fn engine_with(policy: &str) -> Engine<FakeKernel> {
    engine_configured(&format!("policy = \"{policy}\""))
}

/// An engine on CPU 0 with `extra` added to its config.
fn engine_configured(extra: &str) -> Engine<FakeKernel> {
    let cfg = Config::parse(&format!("node = \"n0\"\ncpus = [0]\n{extra}"), "test").unwrap();
    Engine::new(
        FakeKernel::default(),
        cfg,
        RestoreLedger::new(None),
        "test",
        2,
    )
}

#[test]
fn adopting_a_process_tracks_every_thread() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    assert_eq!(e.adopt(1, "a", &[100], None).unwrap(), 2);
    assert!(e.k.tracked.contains_key(&100) && e.k.tracked.contains_key(&101));
    assert_eq!(e.reg.task(101).unwrap().job, 1);
}

#[test]
fn adopting_unknown_pid_fails_and_leaves_nothing() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    assert!(matches!(
        e.adopt(1, "a", &[100, 555], None),
        Err(EngineError::NoSuchProcess(555))
    ));
    assert!(e.reg.job(1).is_none());
    assert!(e.k.tracked.is_empty());
}

#[test]
fn job_sched_request_is_applied_and_undone_on_shutdown() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(-1));
    e.adopt(1, "a", &[100], Some(SchedRequest::Nice { nice: 10 }))
        .unwrap();
    assert_eq!(e.k.attr(100), SchedAttr::other(10));
    let r = e.shutdown();
    assert_eq!(r.restored, 1);
    assert_eq!(e.k.attr(100), SchedAttr::other(-1));
    assert!(e.k.tracked.is_empty(), "shutdown stops tracking");
}

#[test]
fn forked_thread_joins_its_job_and_is_restored_to_the_parent_original() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], Some(SchedRequest::Nice { nice: 4 }))
        .unwrap();
    // Kernel side: the child inherits nice 4 and the fork program tracks it.
    fork(&mut e, 100, 102, 1);
    assert_eq!(e.reg.task(102).unwrap().job, 1);
    e.shutdown();
    assert_eq!(e.k.attr(102), SchedAttr::other(0));
}

#[test]
fn exit_folds_final_counters_and_finishes_the_job() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.k.stats_mut(100).arrivals = 42;
    e.k.exit(100, 10);
    e.k.events.push_back(Event {
        kind: event_kind::EXIT,
        tid: 100,
        job_id: 1,
        flags: 0,
        ts_ns: 10,
        arg: 0,
    });
    let finished = e.poll(20, 0.0);
    assert_eq!(finished, vec![1]);
    let j = e.reg.job(1).unwrap();
    assert_eq!(j.totals.messages_observed, 42);
    assert!(matches!(j.state, JobState::Exited { .. }));
    assert!(!e.k.tracked.contains_key(&100), "exited task untracked");
}

#[test]
fn lost_exit_event_is_caught_by_the_poll() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.k.stats_mut(100).sends = 7;
    e.k.exit(100, 10); // no event queued
    assert_eq!(e.poll(20, 0.0), vec![1]);
    assert_eq!(e.reg.job(1).unwrap().totals.sends, 7);
}

#[test]
fn reaped_exit_code_is_reported() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.reserve_job(1, "a", 0, None).unwrap();
    e.manage_process(1, 100).unwrap();
    e.mark_launched(100);
    e.k.exit(100, 5);
    assert!(
        e.poll(8, 0.0).is_empty(),
        "a launched job ends when reaped, not when it vanishes"
    );
    e.process_reaped(100, Some(3), None);
    e.poll(10, 0.0);
    assert_eq!(
        e.reg.job(1).unwrap().state,
        JobState::Exited {
            code: Some(3),
            signal: None
        }
    );
}

#[test]
fn live_counters_reach_job_totals_and_metrics() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(7, "ring", &[100], None).unwrap();
    *e.k.stats_mut(100) = TaskStats {
        arrivals: 5,
        spin_ns: 2_000_000_000,
        job_id: 7,
        ..TaskStats::default()
    };
    e.poll(1, 0.0);
    assert_eq!(e.reg.job(7).unwrap().totals.messages_observed, 5);
    let text = e.metrics.render();
    assert!(
        text.contains("cosched_job_spin_seconds_total{job=\"ring\",job_id=\"7\"} 2"),
        "{text}"
    );
}

#[test]
fn gang_slice_demotes_other_jobs_and_restores_them_after() {
    let mut e = engine();
    job_a_slice_demoting_job_b(&mut e);
    assert_eq!(
        e.k.attr(100),
        SchedAttr::other(0),
        "slice owner runs normally"
    );
    assert_eq!(
        e.k.attr(200).policy,
        SchedPolicy::Idle,
        "other job only in idle time"
    );
    e.set_gang(Some(Gang {
        active: [2].into(),
        strict: true,
    }));
    assert!(e.k.tasks[&100].stopped, "strict mode stops the other job");
    assert_eq!(e.k.attr(200), SchedAttr::other(0));
    assert_eq!(e.k.tasks[&200].group_nice, 0, "back to its group weight");
    e.set_gang(None);
    assert!(!e.k.tasks[&100].stopped);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
}

/// Two jobs of multi-threaded processes (an MPI rank and its helper
/// threads) under strict gang slices: each switch sends one SIGSTOP and one
/// SIGCONT per process, not one per thread, and continues the incoming job
/// before it stops the outgoing one.
#[test]
fn strict_gang_signals_each_process_once_per_switch_incoming_first() {
    use crate::kernel::fake::Call;
    let mut e = engine();
    for (pid, threads) in [(100, [101, 102]), (200, [201, 202])] {
        e.k.spawn(pid, SchedAttr::other(0));
        for t in threads {
            e.k.spawn_thread(t, pid, SchedAttr::other(0));
        }
    }
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    let slice = |job| {
        Some(Gang {
            active: [job].into(),
            strict: true,
        })
    };
    let signals = |e: &Engine<FakeKernel>| -> Vec<Call> {
        e.k.calls
            .iter()
            .filter(|c| matches!(c, Call::Stop(_) | Call::Cont(_)))
            .cloned()
            .collect()
    };
    e.set_gang(slice(1));
    assert_eq!(signals(&e), vec![Call::Stop(200)]);
    assert!([200, 201, 202].iter().all(|t| e.k.tasks[t].stopped));
    e.k.calls.clear();
    e.set_gang(slice(2));
    assert_eq!(signals(&e), vec![Call::Cont(200), Call::Stop(100)]);
    assert!([100, 101, 102].iter().all(|t| e.k.tasks[t].stopped));
    assert!([200, 201, 202].iter().all(|t| !e.k.tasks[t].stopped));
    assert!(
        [100, 101, 102]
            .iter()
            .all(|t| e.reg.task(*t).unwrap().realised.level == cosched_policy::local::Level::Stop),
        "every thread is realised stopped through its process's signal"
    );
}

#[test]
fn fcs_class_demotion_is_not_a_wait_so_its_arrivals_do_not_wake_the_agent() {
    let mut e = engine_with("fcs");
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "owner", &[100], None).unwrap();
    e.adopt(2, "other", &[200], None).unwrap();
    let until = e.k.now_ns() + 10_000_000;
    e.slot_started(Some(1), until);
    // New processes are measured as CS first: outside its slot, job 2
    // is in the lowest priority group.
    assert_eq!(e.k.attr(200).policy, SchedPolicy::Idle);
    assert_eq!(
        e.k.watched.get(&200).copied().unwrap_or(0) & watch_flags::HELD,
        0,
        "a priority group is not a wait for a message"
    );
}

#[test]
fn spinner_blocked_past_its_threshold_has_its_arrivals_reported() {
    // The fixed threshold: the block mechanism, not when MPL-aware SB uses it.
    let mut e = engine_configured("policy = \"sb\"\n[sb]\nmpl_aware = false");
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "spinner", &[100], None).unwrap();
    e.k.now = 1_000_000_000;
    *e.k.stats_mut(100) = TaskStats {
        on_cpu: 1,
        spin_episode_start_ns: e.k.now - 50_000_000,
        ..TaskStats::default()
    };
    e.policy_tick();
    e.k.now += 1_000_000;
    e.policy_tick();
    assert_ne!(
        e.k.attr(100),
        SchedAttr::other(0),
        "spun 50 ms without a message: held back"
    );
    assert_ne!(
        e.k.watched.get(&100).copied().unwrap_or(0) & watch_flags::HELD,
        0,
        "its next message ends the hold"
    );
}

#[test]
fn task_adopted_during_a_slice_gets_the_overlay_and_shutdown_undoes_it() {
    let mut e = engine();
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: true,
    }));
    e.k.spawn(300, SchedAttr::other(3));
    e.adopt(3, "late", &[300], None).unwrap();
    assert!(e.k.tasks[&300].stopped);
    e.shutdown();
    assert!(!e.k.tasks[&300].stopped);
    assert_eq!(e.k.attr(300), SchedAttr::other(3));
}

#[test]
fn invalid_reload_keeps_the_running_config() {
    let mut e = engine();
    let bad = Config::parse("node = \"n0\"\npolicy = \"nope\"", "t");
    let out = e.reload(bad);
    assert!(!out.accepted);
    assert_eq!(e.cfg.policy.as_str(), "local");
    assert!(
        e.metrics
            .render()
            .contains("cosched_config_reloads_total{outcome=\"rejected\"} 1")
    );
    let renamed = Config::parse("node = \"other\"", "t");
    assert!(!e.reload(renamed).accepted);
    assert_eq!(e.cfg.node, "n0");
}

#[test]
fn valid_reload_is_applied() {
    let mut e = engine();
    let good = Config::parse(
        "node = \"n0\"\ncpus = [0]\n[ebpf]\npoll_interval_ms = 5",
        "t",
    );
    assert!(e.reload(good).accepted);
    assert_eq!(e.cfg.ebpf.poll_interval_ms, 5);
}

// --- demotion cgroups (`demote_cpu_cgroup`) ---------------------------

const NODE_CG: &str = "/fake/cpu/node";

fn cg(name: &str) -> std::path::PathBuf {
    std::path::Path::new(NODE_CG).join(name)
}

fn cgroup_engine() -> Engine<FakeKernel> {
    engine_configured(&format!("demote_cpu_cgroup = \"{NODE_CG}\""))
}

fn fork(e: &mut Engine<FakeKernel>, parent: u32, child: u32, job: JobId) {
    let tgid = e.k.tasks[&parent].tgid;
    let (attr, cgroup) = (e.k.attr(parent), e.k.cgroup(parent).to_path_buf());
    // Kernel side: the thread inherits its creator's attributes and
    // cgroup, and the fork program tracks it.
    e.k.spawn_thread(child, tgid, attr);
    e.k.tasks.get_mut(&child).unwrap().cpu_cgroup = cgroup;
    e.k.track(child, tgid, job).unwrap();
    e.k.events.push_back(Event {
        kind: event_kind::FORK,
        tid: parent,
        job_id: job,
        flags: 0,
        ts_ns: 1,
        arg: u64::from(child),
    });
    e.k.now = 2;
    e.drain_events();
}

#[test]
fn gang_slice_moves_other_jobs_into_the_idle_cgroup_and_back() {
    use crate::kernel::fake::Call;
    let mut e = cgroup_engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    let own = std::path::Path::new(crate::kernel::fake::FAKE_CPU_ROOT);
    assert_eq!(e.k.cgroup(100), own, "outside demoting slices: own cgroup");
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    assert_eq!(e.k.cgroup(100), cg("active"), "slice owner stays");
    assert_eq!(e.k.cgroup(200), cg("idle"), "other job demoted by cgroup");
    assert_eq!(e.k.tasks[&200].group_nice, 0, "no autogroup nice");
    e.k.calls.clear();
    e.set_gang(Some(Gang {
        active: [2].into(),
        strict: false,
    }));
    assert_eq!(e.k.cgroup(100), cg("idle"));
    assert_eq!(e.k.cgroup(200), cg("active"));
    assert_eq!(e.k.attr(200), SchedAttr::other(0));
    let promoted: Vec<&Call> =
        e.k.calls
            .iter()
            .filter(|c| matches!(c, Call::SetCpuCgroup(200, _) | Call::SetAttr(200, _)))
            .collect();
    assert!(
        matches!(promoted[..], [Call::SetCpuCgroup(..), Call::SetAttr(..)]),
        "into active before the attributes: {promoted:?}"
    );
    let demoted: Vec<&Call> =
        e.k.calls
            .iter()
            .filter(|c| matches!(c, Call::SetCpuCgroup(100, _) | Call::SetAttr(100, _)))
            .collect();
    assert!(
        matches!(demoted[..], [Call::SetAttr(..), Call::SetCpuCgroup(..)]),
        "into idle after the attributes: {demoted:?}"
    );
    // Leaving gang mode: everyone back in its own cgroup.
    e.set_gang(None);
    assert_eq!(e.k.cgroup(100), own);
    assert_eq!(e.k.cgroup(200), own);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
    // Strict slices stop, they do not move.
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: true,
    }));
    assert!(e.k.tasks[&200].stopped);
    assert_eq!(e.k.cgroup(200), own);
    assert_eq!(e.k.cgroup(100), own);
    // A task adopted during a demoting slice goes straight to its group.
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    assert!(!e.k.tasks[&200].stopped);
    assert_eq!(e.k.cgroup(200), cg("idle"));
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(3, "c", &[300], None).unwrap();
    assert_eq!(e.k.cgroup(300), cg("idle"));
    assert_eq!(e.k.attr(300).policy, SchedPolicy::Idle);
    assert_eq!(e.k.tasks[&300].group_nice, 0);
}

#[test]
fn cgroup_demotion_does_not_write_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");
    let mut e = cgroup_engine();
    e.ledger = RestoreLedger::new(Some(journal.clone()));
    e.ledger
        .set_cpu_groups(Some(crate::cpu_group::CpuGroups::under(NODE_CG.as_ref())));
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = "/fake/cpu/x".into();
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    let written = RestoreLedger::load(&journal).unwrap();
    assert_eq!(
        written.get(200).unwrap().cpu_cgroup.as_deref(),
        Some(std::path::Path::new("/fake/cpu/x")),
        "original cgroup journaled at adoption"
    );
    let before = std::fs::read(&journal).unwrap();
    for owner in [1, 2, 1] {
        e.set_gang(Some(Gang {
            active: [owner].into(),
            strict: false,
        }));
    }
    assert_eq!(e.k.cgroup(200), cg("idle"));
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        before,
        "the policy path wrote the journal"
    );
}

#[test]
fn without_a_demotion_cgroup_no_task_changes_cgroup() {
    use crate::kernel::fake::{Call, FAKE_CPU_ROOT};
    let mut e = engine();
    job_a_slice_demoting_job_b(&mut e);
    assert_eq!(e.k.tasks[&200].group_nice, 19, "autogroup nice as before");
    e.shutdown();
    assert!(
        !e.k.calls
            .iter()
            .any(|c| matches!(c, Call::SetCpuCgroup(..))),
        "{:?}",
        e.k.calls
    );
    assert_eq!(e.k.cgroup(200), std::path::Path::new(FAKE_CPU_ROOT));
    assert!(e.ledger.is_empty());
}

#[test]
fn shutdown_puts_every_task_back_in_its_original_cgroup() {
    use crate::kernel::fake::FAKE_CPU_ROOT;
    let mut e = cgroup_engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(2));
    for t in [100, 101] {
        e.k.tasks.get_mut(&t).unwrap().cpu_cgroup = "/fake/cpu/jobs/a".into();
    }
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    assert_eq!(e.k.cgroup(200), cg("idle"));
    // Threads the ledger does not know: one of process 100 (its fork
    // event was lost) and a stranger someone put in idle.
    e.k.spawn_thread(102, 100, SchedAttr::other(0));
    e.k.tasks.get_mut(&102).unwrap().cpu_cgroup = cg("idle");
    e.k.spawn(300, SchedAttr::other(0));
    e.k.tasks.get_mut(&300).unwrap().cpu_cgroup = cg("idle");
    let r = e.shutdown();
    assert!(r.failed.is_empty(), "{r:?}");
    assert_eq!(e.k.cgroup(100), std::path::Path::new("/fake/cpu/jobs/a"));
    assert_eq!(e.k.cgroup(101), std::path::Path::new("/fake/cpu/jobs/a"));
    assert_eq!(e.k.cgroup(200), std::path::Path::new(FAKE_CPU_ROOT));
    assert_eq!(e.k.attr(200), SchedAttr::other(2));
    assert_eq!(
        e.k.cgroup(102),
        std::path::Path::new("/fake/cpu/jobs/a"),
        "swept to its process's original cgroup"
    );
    assert_eq!(
        e.k.cgroup(300),
        std::path::Path::new(FAKE_CPU_ROOT),
        "swept to the hierarchy root"
    );
    assert!(e.k.cpu_cgroup_tasks(&cg("idle")).unwrap().is_empty());
    assert!(e.k.cpu_cgroup_tasks(&cg("active")).unwrap().is_empty());
}

#[test]
fn forked_thread_of_a_demoted_task_stays_demoted_then_follows_its_job() {
    let mut e = cgroup_engine();
    job_a_slice_demoting_job_b(&mut e);
    fork(&mut e, 200, 201, 2);
    assert_eq!(e.reg.task(201).unwrap().job, 2);
    assert_eq!(e.k.cgroup(201), cg("idle"), "demoted like its job");
    assert_eq!(e.k.attr(201).policy, SchedPolicy::Idle);
    // A thread of the slot's job starts in active.
    fork(&mut e, 100, 101, 1);
    assert_eq!(e.k.cgroup(101), cg("active"));
    e.set_gang(Some(Gang {
        active: [2].into(),
        strict: false,
    }));
    assert_eq!(e.k.cgroup(201), cg("active"), "promoted with its job");
    assert_eq!(e.k.attr(201), SchedAttr::other(0));
    assert_eq!(e.k.cgroup(101), cg("idle"));
    // Forked in idle, but its job owns the slot by the time the agent
    // sees the fork: it must not stay in idle.
    e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = cg("idle");
    fork(&mut e, 200, 202, 2);
    e.k.tasks.get_mut(&200).unwrap().cpu_cgroup = cg("active");
    assert_eq!(e.k.cgroup(202), cg("active"));
    e.shutdown();
    for t in [100, 101, 200, 201, 202] {
        assert_eq!(
            e.k.cgroup(t),
            std::path::Path::new(crate::kernel::fake::FAKE_CPU_ROOT),
            "task {t}"
        );
    }
    assert_eq!(e.k.attr(201), SchedAttr::other(0));
}
