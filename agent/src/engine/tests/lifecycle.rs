//! Adoption, hand-back and forgetting: nothing the agent knew or set about a
//! task survives it leaving, and what may not be adopted is refused before
//! anything changes.
use std::path::PathBuf;

use super::*;
use cosched_policy::local::Level;

use crate::kernel::TaskControl as _;

use crate::kernel::ProcessInfo;

/// Nothing anywhere still knows `tid`: registry, policy, eBPF maps, ledger.
fn assert_forgotten(e: &Engine<FakeKernel>, tid: u32) {
    assert!(e.reg.task(tid).is_none(), "registry still has {tid}");
    assert!(!e.k.tracked.contains_key(&tid), "eBPF still tracks {tid}");
    assert!(!e.k.watched.contains_key(&tid), "eBPF still watches {tid}");
    assert!(e.ledger.get(tid).is_none(), "ledger still has {tid}");
}

#[test]
fn rolled_back_adoption_leaves_no_task_state_anywhere() {
    let mut e = engine_with("dcs");
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.k.deny_track.push(200);
    // Under a demoting slice of another job, task 100 is demoted as soon as
    // it is taken; then 200 fails and the whole adoption is rolled back.
    e.set_gang(Some(Gang {
        active: [9].into(),
        strict: false,
    }));
    assert!(e.adopt(1, "a", &[100, 200], None).is_err());
    assert!(e.reg.job(1).is_none());
    assert_eq!(e.driver.task_count(), 0, "the policy still knows a task");
    assert_forgotten(&e, 100);
    assert_forgotten(&e, 200);
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "demotion undone");
    // Adopted again, it is realised from scratch (no stale level).
    e.set_gang(None);
    e.adopt(2, "b", &[100], None).unwrap();
    assert_eq!(e.reg.task(100).unwrap().realised.level, Level::Normal);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
}

#[test]
fn released_job_is_handed_back_untouched_and_keeps_running() {
    let mut e = engine_with("sb");
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], Some(SchedRequest::Nice { nice: 10 }))
        .unwrap();
    e.set_gang(Some(Gang {
        active: [9].into(),
        strict: true,
    }));
    assert!(e.k.tasks[&100].stopped);
    assert_eq!(e.release_job(1).unwrap(), 2);
    for tid in [100, 101] {
        assert_eq!(e.k.attr(tid), SchedAttr::other(0), "{tid}");
        assert!(!e.k.tasks[&tid].stopped, "{tid} continued");
        assert_forgotten(&e, tid);
    }
    assert!(e.k.tasks.contains_key(&100), "not killed");
    assert!(e.reg.job(1).is_none());
    assert_eq!(e.driver.task_count(), 0);
    assert!(matches!(
        e.release_job(1),
        Err(EngineError::Registry(RegistryError::UnknownJob(1)))
    ));
}

/// A process the fake kernel reports as `info` says.
fn spawn_as(e: &mut Engine<FakeKernel>, info: ProcessInfo) {
    e.k.spawn(info.pid, SchedAttr::other(0));
    e.k.processes.insert(info.pid, info);
}

fn refused(e: &mut Engine<FakeKernel>, pid: u32) -> String {
    e.k.calls.clear();
    let err = e.adopt(5, "x", &[pid], None).unwrap_err();
    assert!(e.reg.job(5).is_none(), "no job left behind");
    assert!(e.k.calls.is_empty(), "nothing changed: {:?}", e.k.calls);
    err.to_string()
}

#[test]
fn init_kernel_threads_zombies_and_cosched_daemons_are_refused() {
    let mut e = engine();
    e.k.spawn(1, SchedAttr::other(0));
    assert!(refused(&mut e, 1).contains("init"));
    spawn_as(
        &mut e,
        ProcessInfo {
            pid: 2,
            state: 'S',
            kernel_thread: true,
            exe: None,
            allowed_cpus: vec![0, 1],
            uids: Default::default(),
        },
    );
    assert!(refused(&mut e, 2).contains("kernel thread"));
    spawn_as(
        &mut e,
        ProcessInfo {
            pid: 3,
            state: 'Z',
            kernel_thread: false,
            exe: None,
            allowed_cpus: vec![0],
            uids: Default::default(),
        },
    );
    assert!(refused(&mut e, 3).contains("zombie"));
    spawn_as(
        &mut e,
        ProcessInfo {
            pid: 4,
            state: 'S',
            kernel_thread: false,
            exe: Some(PathBuf::from("/usr/bin/cosched-agent")),
            allowed_cpus: vec![0],
            uids: Default::default(),
        },
    );
    assert!(refused(&mut e, 4).contains("cosched daemon"));
}

#[test]
fn the_agent_and_its_guardian_are_refused() {
    let mut e = engine();
    let me = std::process::id();
    e.k.spawn(me, SchedAttr::other(0));
    assert!(refused(&mut e, me).contains("this agent"));
    e.k.spawn(77, SchedAttr::other(0));
    e.set_guardian(Some(77));
    assert!(refused(&mut e, 77).contains("guardian"));
}

#[test]
fn a_task_of_another_job_is_refused_and_keeps_its_job() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.k.calls.clear();
    assert!(refused(&mut e, 100).contains("job 1"));
    assert_eq!(e.reg.task(100).unwrap().job, 1);
}

#[test]
fn a_process_allowed_outside_the_node_cpus_is_refused() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.allowed_cpus = vec![0, 1];
    assert!(refused(&mut e, 100).contains("outside this node's CPUs"));
}

#[test]
fn an_empty_pid_list_says_so() {
    let mut e = engine();
    let err = e.adopt(1, "a", &[], None).unwrap_err();
    assert!(err.to_string().contains("no process given"), "{err}");
}

#[test]
fn cpus_cannot_change_by_reload_nor_name_a_missing_cpu() {
    let mut e = engine();
    let moved = Config::parse("node = \"n0\"\ncpus = [1]", "t");
    let outcome = e.reload(moved);
    assert!(
        !outcome.accepted && outcome.message.contains("cpus"),
        "{outcome:?}"
    );
    assert_eq!(e.node_cpus(), vec![0]);
}

#[test]
fn no_policy_tick_without_a_task() {
    let mut e = engine_with("dcs");
    assert_eq!(e.next_policy_tick(), None, "nothing to look at");
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    assert!(e.next_policy_tick().is_some());
}

#[test]
fn a_process_asked_onto_the_node_is_narrowed_and_widened_back_on_release() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.k.allowed_cpus = vec![0, 1];
    adopt_moved(&mut e, 1, "a", &[100]);
    for tid in [100, 101] {
        assert_eq!(e.k.affinity(tid).unwrap(), vec![0], "{tid} on the node");
        assert_eq!(
            e.ledger.get(tid).unwrap().affinity,
            Some(vec![0, 1]),
            "{tid}: its CPUs journaled before the change"
        );
    }
    e.release_job(1).unwrap();
    for tid in [100, 101] {
        assert_eq!(e.k.affinity(tid).unwrap(), vec![0, 1], "{tid} widened back");
    }
}

#[test]
fn a_process_already_on_the_node_is_not_touched_when_asked_to_move() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    adopt_moved(&mut e, 1, "a", &[100]);
    assert!(
        !e.k.calls
            .iter()
            .any(|c| matches!(c, crate::kernel::fake::Call::SetAffinity(..))),
        "{:?}",
        e.k.calls
    );
    assert_eq!(e.ledger.get(100).unwrap().affinity, None);
}

#[test]
fn shutdown_widens_a_narrowed_process_back() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.allowed_cpus = vec![0, 1];
    adopt_moved(&mut e, 1, "a", &[100]);
    e.shutdown();
    assert_eq!(e.k.affinity(100).unwrap(), vec![0, 1]);
}

#[test]
fn a_job_asking_for_the_agents_own_priority_is_refused_and_one_below_is_taken() {
    let mut e = engine_configured("policy = \"dcs\"\nagent_priority = 50");
    e.k.spawn(100, SchedAttr::other(0));
    let refused = e.adopt(1, "a", &[100], Some(SchedRequest::Fifo { priority: 50 }));
    assert!(
        matches!(&refused, Err(EngineError::BadSched(m)) if m.contains("below the agent")),
        "{refused:?}"
    );
    assert!(e.job(1).is_none(), "nothing kept of the refused job");
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "task untouched");
    e.adopt(1, "a", &[100], Some(SchedRequest::Rr { priority: 49 }))
        .unwrap();
    assert_eq!(e.k.attr(100).priority, 49);
}

#[test]
fn under_plain_linux_a_realtime_job_lifts_the_agent_until_it_is_handed_back() {
    let mut e = engine_configured("policy = \"local\"\nagent_priority = 50");
    assert_eq!(
        e.k.own_attr.policy,
        SchedPolicy::Other,
        "time-shared at rest"
    );
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], Some(SchedRequest::Fifo { priority: 20 }))
        .unwrap();
    assert_eq!(
        (e.k.own_attr.policy, e.k.own_attr.priority),
        (SchedPolicy::Fifo, 50),
        "above the job it could otherwise be starved by"
    );
    e.release_job(1).unwrap();
    assert_eq!(e.k.own_attr.policy, SchedPolicy::Other);
}

/// FCS on a node with no coordinator acts on nothing (every process at its
/// own attributes): the agent stays time-shared, as under plain Linux, and
/// does not preempt the jobs for ticks; the first gang slot lifts it above
/// the jobs, which it must then preempt to switch slots on time.
#[test]
fn fcs_without_gang_slots_leaves_the_agent_time_shared_until_the_first_slot() {
    let mut e = engine_configured("policy = \"fcs\"\nagent_priority = 50");
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.policy_tick();
    assert_eq!(e.k.own_attr.policy, SchedPolicy::Other, "no slot yet");
    assert_eq!(e.next_policy_tick(), None, "and no tick to run");
    let now = e.k.now;
    e.slot_started(Some(1), now + 10_000_000);
    assert_eq!(
        (e.k.own_attr.policy, e.k.own_attr.priority),
        (SchedPolicy::Fifo, 50),
        "gang slots: FCS acts"
    );
    assert!(e.next_policy_tick().is_some());
}
