//! Jobs launched by something else: a cgroup followed as tasks enter and
//! leave it, process trees, jobs the coordinator announced and processes
//! that join them; and every bad input refused with nothing changed.
use cosched_proto::control::{AttachTarget, LOCAL_JOB_IDS};

use super::*;
use crate::engine::{AttachRequest, Caller};
use cosched_proto::wire::JobClass;

const CG: &str = "/fake/unified/slurm/job_7";

fn by_cgroup(job_id: Option<JobId>) -> AttachRequest {
    AttachRequest {
        job_id,
        name: "mpi".into(),
        target: AttachTarget::Cgroup(CG.into()),
        sched: None,
        move_to_node: false,
        class: JobClass::BestEffort,
    }
}

fn by_tree(root: u32) -> AttachRequest {
    AttachRequest {
        target: AttachTarget::PidTree(root),
        ..by_cgroup(Some(5))
    }
}

/// Nothing of job `id` or of `tids` is left anywhere, and their attributes
/// are what they were.
fn assert_untouched(e: &Engine<FakeKernel>, id: JobId, tids: &[u32]) {
    assert!(e.reg.job(id).is_none(), "job {id} is still recorded");
    for &tid in tids {
        assert!(e.reg.task(tid).is_none(), "registry still has {tid}");
        assert!(!e.k.tracked.contains_key(&tid), "eBPF still tracks {tid}");
        assert_eq!(e.k.attr(tid), SchedAttr::other(0), "{tid} was changed");
    }
}

fn demote_all(e: &mut Engine<FakeKernel>) {
    e.set_gang(Some(Gang {
        active: [99].into(),
        strict: false,
    }));
}

#[test]
fn a_cgroup_job_takes_every_task_then_follows_arrivals_and_departures() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.k.move_to_cgroup2(100, Some(CG));
    let (id, tasks) = e.attach(by_cgroup(None)).unwrap();
    assert_eq!((id, tasks), (LOCAL_JOB_IDS, 2), "a local id, both threads");
    demote_all(&mut e);
    // A rank migrated into the cgroup (not forked by a managed task).
    e.k.spawn(200, SchedAttr::other(0));
    e.k.move_to_cgroup2(200, Some(CG));
    e.poll(10, 0.0);
    assert_eq!(e.reg.task(200).unwrap().job, id, "arrival taken");
    assert_eq!(
        e.k.attr(200).policy,
        SchedPolicy::Idle,
        "and realised at the job's level at once"
    );
    // Rank 100 moves out: handed back, attributes restored.
    e.k.move_to_cgroup2(100, None);
    e.poll(20, 0.0);
    assert!(e.reg.task(100).is_none() && e.reg.task(101).is_none());
    assert!(!e.k.tracked.contains_key(&100));
    assert_eq!(e.k.attr(100), SchedAttr::other(0), "restored when it left");
    assert!(e.job_running(id));
    // The last rank exits: the cgroup is empty, the job ends.
    e.k.exit(200, 30);
    assert_eq!(e.poll(30, 0.0), vec![id]);
}

#[test]
fn an_empty_cgroup_waits_for_its_first_task_and_ends_when_removed() {
    let mut e = engine();
    e.k.cgroups2.insert(CG.into());
    let (id, tasks) = e.attach(by_cgroup(Some(3))).unwrap();
    assert_eq!((id, tasks), (3, 0));
    assert!(e.poll(10, 0.0).is_empty(), "an empty cgroup is awaited");
    e.k.cgroups2.clear();
    assert_eq!(e.poll(20, 0.0), vec![3], "its cgroup is gone");
}

#[test]
fn a_refused_process_entering_the_cgroup_is_left_alone() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.move_to_cgroup2(100, Some(CG));
    let (id, _) = e.attach(by_cgroup(None)).unwrap();
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(8, "other", &[300], None).unwrap();
    e.k.move_to_cgroup2(300, Some(CG));
    e.poll(10, 0.0);
    e.poll(20, 0.0);
    assert_eq!(e.reg.task(300).unwrap().job, 8, "it stays with its own job");
    assert!(e.reg.job(id).unwrap().passed_over.contains(&300));
}

#[test]
fn a_pid_tree_takes_the_root_its_descendants_and_their_threads() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    e.k.spawn_thread(111, 110, SchedAttr::other(0));
    e.k.spawn_child(120, 110, SchedAttr::other(0));
    e.k.spawn(900, SchedAttr::other(0)); // not in the tree
    let (id, tasks) = e.attach(by_tree(100)).unwrap();
    assert_eq!((id, tasks), (5, 4));
    assert!(e.reg.task(900).is_none());
    assert_eq!(e.job(5).unwrap().pids, vec![100, 110, 120]);
    // The root exits first: the job runs while a descendant lives.
    e.k.exit(100, 5);
    assert!(e.poll(10, 0.0).is_empty());
    for tid in [110, 111, 120] {
        e.k.exit(tid, 15);
    }
    assert_eq!(e.poll(20, 0.0), vec![5]);
}

#[test]
fn bad_targets_are_refused_with_the_reason_and_nothing_changed() {
    let mut e = engine();
    let agent = std::process::id();
    e.k.spawn(1, SchedAttr::other(0));
    e.k.spawn(agent, SchedAttr::other(0));
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    e.k.spawn(300, SchedAttr::other(0));
    e.adopt(8, "other", &[300], None).unwrap();
    let cases: Vec<(AttachRequest, &str)> = vec![
        (by_cgroup(Some(5)), "no such cgroup"),
        (by_tree(4242), "no such process: 4242"),
        (by_tree(1), "init"),
        (by_tree(agent), "this agent"),
        (by_tree(300), "already managed as part of job 8"),
        (
            AttachRequest {
                name: String::new(),
                ..by_tree(100)
            },
            "job name",
        ),
    ];
    for (request, why) in cases {
        let error = e.attach(request.clone()).unwrap_err().to_string();
        assert!(error.contains(why), "{request:?}: {error}");
        assert_untouched(&e, 5, &[1, agent, 100, 110]);
    }
    // A refused descendant refuses the whole tree.
    e.k.tasks.get_mut(&300).unwrap().ppid = 110;
    let error = e.attach(by_tree(100)).unwrap_err().to_string();
    assert!(error.contains("pid 300 is already managed"), "{error}");
    assert_untouched(&e, 5, &[100, 110]);
    // The agent inside the cgroup refuses the cgroup.
    e.k.move_to_cgroup2(100, Some(CG));
    e.k.move_to_cgroup2(agent, Some(CG));
    let error = e.attach(by_cgroup(Some(5))).unwrap_err().to_string();
    assert!(error.contains("this agent"), "{error}");
    assert_untouched(&e, 5, &[100, agent]);
    // An id in use.
    let error = e
        .attach(AttachRequest {
            job_id: Some(8),
            ..by_tree(100)
        })
        .unwrap_err();
    assert!(
        error.to_string().contains("job 8 already exists"),
        "{error}"
    );
}

#[test]
fn a_root_that_vanishes_while_it_is_taken_leaves_nothing() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    // Checked fine, gone by the time its threads are listed.
    e.k.vanish_on_threads.push(100);
    let error = e.attach(by_tree(100)).unwrap_err().to_string();
    assert!(error.contains("no such process: 100"), "{error}");
    assert_untouched(&e, 5, &[100, 110]);
    // A descendant that vanishes is simply not part of the job.
    e.k.vanish_on_threads = vec![110];
    assert_eq!(e.attach(by_tree(100)).unwrap(), (5, 1));
}

#[test]
fn an_expected_job_takes_joins_and_ends_when_they_have_exited() {
    let mut e = engine();
    e.expect_job(12, "mpi", 1, None).unwrap();
    e.expect_job(12, "mpi", 1, None).unwrap(); // repeated: a no-op
    assert!(
        e.poll(5, 0.0).is_empty(),
        "nothing joined yet: still running"
    );
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    assert_eq!(e.join(12, 100, false, false).unwrap(), 2);
    // A join from inside the job (a nested `cosched join`) is fine.
    assert_eq!(e.join(12, 110, false, false).unwrap(), 0);
    assert_eq!(e.job(12).unwrap().rank, 1);
    e.k.exit(100, 10);
    e.k.exit(110, 10);
    assert_eq!(e.poll(20, 0.0), vec![12]);
    let error = e.join(12, 100, false, false).unwrap_err().to_string();
    assert!(error.contains("ended"), "{error}");
}

#[test]
fn joins_are_refused_for_unknown_launched_and_cgroup_jobs() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "a", &[200], None).unwrap();
    e.k.cgroups2.insert(CG.into());
    e.attach(by_cgroup(Some(2))).unwrap();
    for (job, why) in [
        (9, "unknown job 9"),
        (1, "only attached jobs take joins"),
        (2, "move the process into it"),
    ] {
        let error = e.join(job, 100, false, false).unwrap_err().to_string();
        assert!(error.contains(why), "{job}: {error}");
    }
    assert!(e.reg.task(100).is_none());
}

#[test]
fn a_cancelled_expected_job_ends_even_if_nothing_joined() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    assert_eq!(e.cancel_attached(12), Some(vec![]));
    assert_eq!(e.poll(5, 0.0), vec![12]);
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    assert_eq!(e.cancel_attached(1), None, "killed by the launcher's way");
}

#[test]
fn attached_tasks_are_demoted_by_attributes_and_never_leave_their_cgroup() {
    let mut e = cgroup_engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.attach(by_tree(100)).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    demote_all(&mut e);
    let own = std::path::Path::new(crate::kernel::fake::FAKE_CPU_ROOT);
    assert_eq!(e.k.cgroup(100), own, "attached: stays in its cgroup");
    assert_eq!(e.k.attr(100).policy, SchedPolicy::Idle);
    assert_eq!(e.k.cgroup(200), cg("idle"), "adopted by pid: moved");
    e.set_gang(Some(Gang {
        active: [5].into(),
        strict: false,
    }));
    assert_eq!(e.k.cgroup(100), own);
    assert_eq!(e.k.attr(100), SchedAttr::other(0));
}

#[test]
fn a_child_forked_after_its_tree_was_taken_is_not_taken_twice() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.attach(by_tree(100)).unwrap();
    fork(&mut e, 100, 101, 5);
    assert_eq!(e.reg.task(101).unwrap().job, 5);
    // The same fork reported again (a tree taken after the fork).
    fork(&mut e, 100, 101, 5);
    assert_eq!(e.job(5).unwrap().live.len(), 2);
}

#[test]
fn a_launcher_daemon_is_followed_but_never_stopped_while_its_ranks_are() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    e.set_gang(Some(Gang {
        active: [99].into(),
        strict: true,
    }));
    e.k.spawn(100, SchedAttr::other(0)); // orted
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.k.spawn_child(110, 100, SchedAttr::other(0)); // a rank
    assert_eq!(e.join(12, 100, false, true).unwrap(), 3);
    assert!(!e.k.tasks[&100].stopped && !e.k.tasks[&101].stopped);
    assert!(e.k.tasks[&110].stopped, "its rank follows the slices");
    // A rank forked later is the job's, not a daemon.
    fork(&mut e, 100, 120, 12);
    e.k.tasks.get_mut(&120).unwrap().tgid = 120;
    e.reg.task_mut(120).unwrap().tgid = 120;
    e.set_gang(None);
    e.set_gang(Some(Gang {
        active: [99].into(),
        strict: true,
    }));
    assert!(e.k.tasks[&120].stopped);
    assert!(!e.k.tasks[&100].stopped);
}

const ALICE: u32 = 1000;
const BOB: u32 = 1001;

/// A process of `uid`.
fn spawn_of(e: &mut Engine<FakeKernel>, pid: u32, uid: u32) {
    e.k.spawn(pid, SchedAttr::other(0));
    e.k.uids.insert(pid, uid);
}

#[test]
fn a_user_joins_its_own_process_and_then_owns_the_job_on_this_node() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    spawn_of(&mut e, 100, ALICE);
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    e.k.uids.insert(110, ALICE);
    assert_eq!(
        e.join_as(12, 100, false, false, Caller::User(ALICE))
            .unwrap(),
        2
    );
    assert_eq!(e.reg.job(12).unwrap().owner, Some(ALICE));
    // Bob cannot join his own process into Alice's job.
    spawn_of(&mut e, 200, BOB);
    let error = e
        .join_as(12, 200, false, false, Caller::User(BOB))
        .unwrap_err()
        .to_string();
    assert!(error.contains("belongs to user 1000"), "{error}");
    assert!(e.reg.task(200).is_none());
}

#[test]
fn an_expected_job_the_coordinator_says_is_alices_cannot_be_claimed_first_by_bob() {
    let mut e = engine();
    e.expect_job(12, "slurm-5.0", 0, Some(ALICE)).unwrap();
    spawn_of(&mut e, 200, BOB);
    let error = e
        .join_as(12, 200, false, false, Caller::User(BOB))
        .unwrap_err()
        .to_string();
    assert!(error.contains("belongs to user 1000"), "{error}");
    assert!(e.reg.task(200).is_none(), "nothing taken");
    spawn_of(&mut e, 100, ALICE);
    assert_eq!(
        e.join_as(12, 100, false, false, Caller::User(ALICE))
            .unwrap(),
        1
    );
    assert_eq!(e.reg.job(12).unwrap().owner, Some(ALICE));
}

#[test]
fn a_user_cannot_join_another_users_or_roots_process() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    spawn_of(&mut e, 200, BOB);
    spawn_of(&mut e, 300, 0);
    for pid in [200, 300] {
        let error = e
            .join_as(12, pid, false, false, Caller::User(ALICE))
            .unwrap_err()
            .to_string();
        assert!(error.contains("not to you (uid 1000)"), "{pid}: {error}");
        assert_untouched_task(&e, pid);
    }
    assert_eq!(e.reg.job(12).unwrap().owner, None, "still nobody's");
    for (pid, why) in [(1, "init"), (4242, "no such process")] {
        if pid == 1 {
            spawn_of(&mut e, 1, ALICE);
        }
        let error = e
            .join_as(12, pid, false, false, Caller::User(ALICE))
            .unwrap_err()
            .to_string();
        assert!(error.contains(why), "{pid}: {error}");
    }
}

#[test]
fn a_tree_with_a_process_of_another_user_is_refused_whole() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    spawn_of(&mut e, 100, ALICE);
    // e.g. a set-user-ID program the user started, now running as root
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    e.k.uids.insert(110, 0);
    let error = e
        .join_as(12, 100, false, false, Caller::User(ALICE))
        .unwrap_err()
        .to_string();
    assert!(error.contains("pid 110"), "{error}");
    assert_untouched_task(&e, 100);
    assert_untouched_task(&e, 110);
}

#[test]
fn a_user_may_not_join_a_job_root_attached_locally_for_nobody() {
    let mut e = engine();
    // Root attached a tree of root's processes: owned by root.
    spawn_of(&mut e, 100, 0);
    e.attach(by_tree(100)).unwrap();
    spawn_of(&mut e, 200, ALICE);
    let error = e
        .join_as(5, 200, false, false, Caller::User(ALICE))
        .unwrap_err()
        .to_string();
    assert!(error.contains("belongs to user 0"), "{error}");
    // Root attached Alice's tree: Alice may add her other processes.
    spawn_of(&mut e, 300, ALICE);
    e.attach(AttachRequest {
        job_id: Some(6),
        ..by_tree(300)
    })
    .unwrap();
    assert_eq!(
        e.join_as(6, 200, false, false, Caller::User(ALICE))
            .unwrap(),
        1
    );
}

#[test]
fn a_process_leaves_with_its_descendants_and_the_job_keeps_the_rest() {
    let mut e = engine();
    e.expect_job(12, "mpi", 0, None).unwrap();
    e.set_gang(Some(Gang {
        active: [99].into(),
        strict: true,
    }));
    spawn_of(&mut e, 100, ALICE);
    e.k.spawn_child(110, 100, SchedAttr::other(0));
    e.k.uids.insert(110, ALICE);
    spawn_of(&mut e, 200, ALICE);
    e.join_as(12, 100, false, false, Caller::User(ALICE))
        .unwrap();
    e.join_as(12, 200, false, false, Caller::User(ALICE))
        .unwrap();
    assert!(e.k.tasks[&110].stopped);
    // Bob may not hand Alice's process back.
    let error = e.leave(100, Caller::User(BOB)).unwrap_err().to_string();
    assert!(error.contains("not to you"), "{error}");
    assert!(e.reg.task(100).is_some());
    assert_eq!(e.leave(100, Caller::User(ALICE)).unwrap(), (12, 2));
    assert_untouched_task(&e, 100);
    assert_untouched_task(&e, 110);
    assert!(!e.k.tasks[&110].stopped, "handed back running");
    assert_eq!(e.reg.task(200).unwrap().job, 12, "the rest stays");
    let error = e.leave(100, Caller::User(ALICE)).unwrap_err().to_string();
    assert!(error.contains("in no job"), "{error}");
}

/// `tid` is not managed and has its attributes as they were.
fn assert_untouched_task(e: &Engine<FakeKernel>, tid: u32) {
    assert!(e.reg.task(tid).is_none(), "registry still has {tid}");
    assert!(!e.k.tracked.contains_key(&tid), "eBPF still tracks {tid}");
    assert_eq!(e.k.attr(tid), SchedAttr::other(0), "{tid} was changed");
}

#[test]
fn a_cgroup_job_follows_tasks_into_sub_cgroups_made_later_and_out_of_its_subtree() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.move_to_cgroup2(100, Some(CG));
    let (id, _) = e.attach(by_cgroup(None)).unwrap();
    // Slurm makes step_0/user/task_0 below the job's cgroup and puts the
    // task there.
    let task_cg = format!("{CG}/step_0/user/task_0");
    e.k.cgroups2.insert(task_cg.clone().into());
    e.k.spawn(200, SchedAttr::other(0));
    e.k.move_to_cgroup2(200, Some(&task_cg));
    e.poll(10, 0.0);
    assert_eq!(
        e.reg.task(200).unwrap().job,
        id,
        "taken from the sub-cgroup"
    );
    // A managed task moving down into a sub-cgroup stays.
    e.k.move_to_cgroup2(100, Some(&task_cg));
    e.poll(20, 0.0);
    assert_eq!(e.reg.task(100).unwrap().job, id);
    // Leaving the subtree (a sibling job's cgroup) hands it back.
    let sibling = "/fake/unified/slurm/job_8";
    e.k.cgroups2.insert(sibling.into());
    e.k.move_to_cgroup2(200, Some(sibling));
    e.poll(30, 0.0);
    assert!(e.reg.task(200).is_none());
    assert_eq!(e.k.attr(200), SchedAttr::other(0));
    assert!(e.job_running(id));
}

#[test]
fn an_expected_rank_nothing_joined_ends_after_the_expect_timeout() {
    let mut e = engine();
    assert_eq!(e.cfg.expect_timeout_s, 120);
    let s = 1_000_000_000;
    e.k.now = 10 * s;
    e.expect_job(12, "slurm-5.0", 1, None).unwrap();
    e.expect_job(13, "slurm-6.0", 1, None).unwrap();
    spawn_of(&mut e, 100, ALICE);
    e.join(13, 100, false, false).unwrap();
    e.k.now = 129 * s;
    assert!(e.poll(129 * s, 0.0).is_empty(), "still within its time");
    e.k.now = 130 * s;
    assert_eq!(
        e.poll(130 * s, 0.0),
        vec![12],
        "the rank nobody joined ends; the joined one runs on"
    );
    assert!(e.job_running(13));
}

#[test]
fn with_no_expect_timeout_an_expected_rank_waits_forever() {
    let mut e = engine();
    e.cfg.expect_timeout_s = 0;
    e.expect_job(12, "mpi", 0, None).unwrap();
    e.k.now = 1_000_000 * 1_000_000_000;
    assert!(e.poll(e.k.now, 0.0).is_empty());
}

/// A cgroup job held stopped by strict gang slices: a thread of its stopped
/// process found by the next rescan gets no signal of its own (the process
/// is stopped already) yet is realised stopped; a process that entered the
/// cgroup meanwhile is stopped by a signal of its own.
#[test]
fn a_task_found_while_its_job_is_stopped_is_signalled_only_if_it_is_a_process_of_its_own() {
    use crate::kernel::fake::Call;
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.move_to_cgroup2(100, Some(CG));
    let (id, _) = e.attach(by_cgroup(None)).unwrap();
    e.set_gang(Some(Gang {
        active: [99].into(),
        strict: true,
    }));
    assert_eq!(
        e.k.calls.iter().filter(|c| **c == Call::Stop(100)).count(),
        1
    );
    e.k.calls.clear();
    e.k.spawn_thread(101, 100, SchedAttr::other(0));
    e.k.tasks.get_mut(&101).unwrap().stopped = true;
    e.k.move_to_cgroup2(100, Some(CG));
    e.poll(10, 0.0);
    assert_eq!(e.reg.task(101).unwrap().job, id, "the thread is taken");
    assert!(
        !e.k.calls.iter().any(|c| matches!(c, Call::Stop(_))),
        "{:?}",
        e.k.calls
    );
    assert_eq!(
        e.reg.task(101).unwrap().realised.level,
        cosched_policy::local::Level::Stop
    );
    e.k.spawn(200, SchedAttr::other(0));
    e.k.move_to_cgroup2(200, Some(CG));
    e.poll(20, 0.0);
    assert!(e.k.calls.contains(&Call::Stop(200)), "{:?}", e.k.calls);
    assert!(e.k.tasks[&200].stopped);
}
