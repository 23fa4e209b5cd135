//! Tests of the restore ledger and its journal replay.
use std::fs;

use super::*;
use crate::kernel::{
    SchedPolicy,
    fake::{Call, FakeKernel},
};

fn boosted() -> SchedAttr {
    SchedAttr::with_policy(SchedPolicy::Fifo, 0, 10)
}

#[test]
fn changed_task_gets_its_original_attributes_back() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(3));
    let mut l = RestoreLedger::new(None);
    assert_eq!(l.original(&k, 10).unwrap(), SchedAttr::other(3));
    k.set_attr(10, &boosted()).unwrap();
    let r = l.restore_all(&mut k);
    assert_eq!(r.restored, 1);
    assert_eq!(k.attr(10), SchedAttr::other(3));
    assert!(l.is_empty());
}

/// The journal is written at adoption; a policy's first boost, first
/// demotion and a task's exit must not write it (a write can stall the
/// event loop for a second on a slow disk).
#[test]
fn journal_is_written_at_adoption_not_on_the_policy_path() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.spawn(11, SchedAttr::other(0));
    k.tasks.get_mut(&10).unwrap().group_nice = 3;
    let (_dir, journal, mut l) = journaled_ledger_of_10_and_11(&k);
    let written = RestoreLedger::load(&journal).unwrap();
    assert_eq!(written.get(10).unwrap().group_nice, Some(3));
    let before = fs::read(&journal).unwrap();
    l.original(&k, 10).unwrap();
    l.will_set_group_nice(&k, 10).unwrap();
    l.forget(11);
    assert_eq!(
        fs::read(&journal).unwrap(),
        before,
        "the policy path wrote the journal"
    );
    l.flush().unwrap();
    let after = RestoreLedger::load(&journal).unwrap();
    assert!(after.get(10).is_some() && after.get(11).is_none());
}

/// A ledger journaling into a fresh directory (removed with the returned
/// guard), with tasks 10 and 11 of `k` recorded.
fn journaled_ledger_of_10_and_11(k: &FakeKernel) -> (tempfile::TempDir, PathBuf, RestoreLedger) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("restore.json");
    let mut l = RestoreLedger::new(Some(journal.clone()));
    l.record(k, 10).unwrap();
    l.record(k, 11).unwrap();
    (dir, journal, l)
}

/// A strict gang switch is announced ahead of its time: the journal is
/// written then, once for every task, and the stops at the switch write
/// nothing (a write there delayed the slice).
#[test]
fn stops_announced_ahead_write_the_journal_before_the_switch_not_at_it() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.spawn(11, SchedAttr::other(0));
    let (_dir, journal, mut l) = journaled_ledger_of_10_and_11(&k);
    l.may_stop([10, 11, 12]).unwrap();
    let written = RestoreLedger::load(&journal).unwrap();
    assert!(written.get(10).unwrap().ever_stopped && written.get(11).unwrap().ever_stopped);
    assert!(
        written.get(12).is_none(),
        "an unrecorded task is not invented"
    );
    let before = fs::read(&journal).unwrap();
    l.will_stop(&k, 10).unwrap();
    l.will_stop(&k, 11).unwrap();
    l.may_stop([10, 11]).unwrap();
    assert_eq!(
        fs::read(&journal).unwrap(),
        before,
        "the switch wrote the journal"
    );
}

/// Adopting a task and seeing a fork each append one line to the file
/// they started, whatever the number of tasks already journaled.
#[test]
fn adoption_and_fork_append_one_line_each() {
    let mut k = FakeKernel::default();
    for tid in 10..=13 {
        k.spawn(tid, SchedAttr::other(0));
    }
    let (_dir, journal, mut l) = journaled_ledger_of_10_and_11(&k);
    let lines = |p: &Path| fs::read_to_string(p).unwrap().lines().count();
    let (inode, before) = (inode_of(&journal), lines(&journal));
    l.record(&k, 12).unwrap();
    assert!(l.inherit(&k, 13, 10).unwrap());
    assert_eq!(lines(&journal), before + 2);
    assert_eq!(inode_of(&journal), inode, "the journal was rewritten");
}

fn inode_of(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    fs::metadata(path).unwrap().ino()
}

/// Exits reach the journal at the next flush, as one line; a task that
/// took an exited task's tid meanwhile keeps its entry.
#[test]
fn forgotten_tasks_leave_the_journal_at_the_next_flush() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.spawn(11, SchedAttr::other(0));
    let (_dir, journal, mut l) = journaled_ledger_of_10_and_11(&k);
    k.exit(11, 0);
    l.forget(11);
    k.spawn(11, SchedAttr::other(4));
    k.tasks.get_mut(&11).unwrap().start_time += 1;
    l.record(&k, 11).unwrap();
    l.forget(10);
    assert!(
        RestoreLedger::load(&journal).unwrap().get(10).is_some(),
        "not yet flushed"
    );
    let lines = fs::read_to_string(&journal).unwrap().lines().count();
    l.flush().unwrap();
    assert_eq!(
        fs::read_to_string(&journal).unwrap().lines().count(),
        lines + 1
    );
    let after = RestoreLedger::load(&journal).unwrap();
    assert!(after.get(10).is_none());
    assert_eq!(after.get(11).unwrap().original, SchedAttr::other(4));
}

#[test]
fn a_torn_last_line_still_restores_everything_before_it() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(-3));
    k.spawn(11, SchedAttr::other(0));
    let (_dir, journal, l) = journaled_ledger_of_10_and_11(&k);
    drop(l);
    k.set_attr(10, &boosted()).unwrap();
    // The agent died inside the write of its next line.
    let mut f = fs::OpenOptions::new().append(true).open(&journal).unwrap();
    std::io::Write::write_all(&mut f, br#"{"original":{"task":{"tid":12,"sta"#).unwrap();
    let mut next = RestoreLedger::load(&journal).unwrap();
    assert_eq!(next.len(), 2);
    assert_eq!(next.restore_all(&mut k).restored, 2);
    assert_eq!(k.attr(10), SchedAttr::other(-3));
}

/// What the ledger does to a task, for the replay property.
#[derive(Clone, Debug)]
enum Op {
    Record(u32),
    Fork {
        child: u32,
        parent: u32,
    },
    WillStop(u32),
    MayStop(Vec<u32>),
    GroupNice(u32),
    /// The task exits and the agent forgets it.
    Exit(u32),
    /// A new task takes the tid.
    Respawn(u32),
    Flush,
    RestoreOne(u32),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let tid = || 1u32..6;
    prop_oneof![
        tid().prop_map(Op::Record),
        (tid(), tid()).prop_map(|(child, parent)| Op::Fork { child, parent }),
        tid().prop_map(Op::WillStop),
        proptest::collection::vec(tid(), 0..4).prop_map(Op::MayStop),
        tid().prop_map(Op::GroupNice),
        tid().prop_map(Op::Exit),
        tid().prop_map(Op::Respawn),
        Just(Op::Flush),
        tid().prop_map(Op::RestoreOne),
    ]
}

proptest::proptest! {
    /// Whatever the ledger did, the journal replays to an entry equal to
    /// the ledger's for every task it knows (written ahead), and after a
    /// flush to exactly the ledger's entries.
    #[test]
    fn journal_replays_to_the_ledger(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("restore.json");
        let mut k = FakeKernel::default();
        let mut starts = 0;
        for tid in 1..6 {
            k.spawn(tid, SchedAttr::other(tid as i32));
        }
        let mut l = RestoreLedger::new(Some(journal.clone()));
        for op in ops {
            match op {
                Op::Record(tid) => { let _ = l.record(&k, tid); }
                Op::Fork { child, parent } => { let _ = l.inherit(&k, child, parent); }
                Op::WillStop(tid) => { let _ = l.will_stop(&k, tid); }
                Op::MayStop(tids) => l.may_stop(tids).unwrap(),
                Op::GroupNice(tid) => {
                    if let Some(t) = k.tasks.get_mut(&tid) {
                        t.group_nice = 7;
                    }
                    let _ = l.will_set_group_nice(&k, tid);
                }
                Op::Exit(tid) => {
                    k.exit(tid, 0);
                    l.forget(tid);
                }
                Op::Respawn(tid) => {
                    k.exit(tid, 0);
                    l.forget(tid);
                    starts += 1;
                    k.spawn(tid, SchedAttr::other(-(tid as i32)));
                    k.tasks.get_mut(&tid).unwrap().start_time += 100 * starts;
                }
                Op::Flush => l.flush().unwrap(),
                Op::RestoreOne(tid) => { let _ = l.restore_one(&mut k, tid); }
            }
            if journal.exists() {
                let replayed = RestoreLedger::load(&journal).unwrap();
                for (tid, e) in &l.entries {
                    proptest::prop_assert_eq!(replayed.get(*tid), Some(e));
                }
            }
        }
        l.flush().unwrap();
        if journal.exists() {
            proptest::prop_assert_eq!(RestoreLedger::load(&journal).unwrap().entries, l.entries);
        } else {
            proptest::prop_assert!(l.is_empty());
        }
    }
}

#[test]
fn original_is_recorded_once_not_overwritten_by_later_changes() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.original(&k, 10).unwrap();
    k.set_attr(10, &boosted()).unwrap();
    assert_eq!(l.original(&k, 10).unwrap(), SchedAttr::other(0));
}

#[test]
fn forked_child_of_changed_task_is_restored_to_parent_original() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.original(&k, 10).unwrap();
    k.set_attr(10, &SchedAttr::other(5)).unwrap();
    // The child inherits nice 5 from its parent.
    k.spawn(11, SchedAttr::other(5));
    assert!(l.inherit(&k, 11, 10).unwrap());
    l.restore_all(&mut k);
    assert_eq!(k.attr(11), SchedAttr::other(0));
}

#[test]
fn autogroup_nice_is_restored() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.tasks.get_mut(&10).unwrap().group_nice = 2;
    let mut l = RestoreLedger::new(None);
    l.will_set_group_nice(&k, 10).unwrap();
    k.set_group_nice(10, 19).unwrap();
    l.restore_all(&mut k);
    assert_eq!(k.tasks[&10].group_nice, 2);
}

#[test]
fn stopped_task_is_continued_on_restore() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.will_stop(&k, 10).unwrap();
    k.stop(10).unwrap();
    l.restore_all(&mut k);
    assert!(!k.tasks[&10].stopped);
}

#[test]
fn reused_tid_is_left_alone() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.original(&k, 10).unwrap();
    // The task exits and an unrelated one gets the same tid.
    k.tasks.remove(&10);
    k.spawn(10, boosted());
    k.tasks.get_mut(&10).unwrap().start_time += 1;
    let r = l.restore_all(&mut k);
    assert_eq!((r.restored, r.gone), (0, 1));
    assert_eq!(
        k.attr(10),
        boosted(),
        "another task's attributes must not be touched"
    );
}

#[test]
fn exited_task_counts_as_gone_not_failed() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.original(&k, 10).unwrap();
    k.exit(10, 5);
    let r = l.restore_all(&mut k);
    assert_eq!((r.restored, r.gone, r.failed.len()), (0, 1, 0));
}

#[test]
fn one_failure_does_not_stop_the_others() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.spawn(11, SchedAttr::other(0));
    let mut l = RestoreLedger::new(None);
    l.original(&k, 10).unwrap();
    l.original(&k, 11).unwrap();
    k.set_attr(10, &boosted()).unwrap();
    k.set_attr(11, &boosted()).unwrap();
    k.deny.push(10);
    let r = l.restore_all(&mut k);
    assert_eq!(r.restored, 1);
    assert_eq!(r.failed.len(), 1);
    assert_eq!(k.attr(11), SchedAttr::other(0));
}

#[test]
fn journal_survives_a_crash_and_a_new_agent_restores_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(-2));
    {
        let mut l = RestoreLedger::new(Some(path.clone()));
        l.will_stop(&k, 10).unwrap();
        k.set_attr(10, &boosted()).unwrap();
        k.stop(10).unwrap();
        // The agent dies here: the ledger is dropped without restoring.
    }
    let mut next = RestoreLedger::load(&path).unwrap();
    assert_eq!(next.len(), 1);
    let r = next.restore_all(&mut k);
    assert_eq!(r.restored, 1);
    assert_eq!(k.attr(10), SchedAttr::other(-2));
    assert!(!k.tasks[&10].stopped);
    assert!(
        RestoreLedger::load(&path).unwrap().is_empty(),
        "journal emptied once everything is restored"
    );
}

fn demoting_ledger(journal: Option<PathBuf>) -> RestoreLedger {
    let mut l = RestoreLedger::new(journal);
    l.set_cpu_groups(Some(CpuGroups::under(Path::new("/fake/cpu/node"))));
    l
}

#[test]
fn original_cpu_cgroup_is_journaled_and_moved_back_to_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.tasks.get_mut(&10).unwrap().cpu_cgroup = "/fake/cpu/mine".into();
    {
        let mut l = demoting_ledger(Some(path.clone()));
        l.record(&k, 10).unwrap();
        k.set_cpu_cgroup(10, Path::new("/fake/cpu/node/idle"))
            .unwrap();
        k.set_attr(10, &SchedAttr::with_policy(SchedPolicy::Idle, 0, 0))
            .unwrap();
        // The agent dies here.
    }
    let mut next = RestoreLedger::load(&path).unwrap();
    assert_eq!(
        next.get(10).unwrap().cpu_cgroup.as_deref(),
        Some(Path::new("/fake/cpu/mine"))
    );
    k.calls.clear();
    assert_eq!(next.restore_all(&mut k).restored, 1);
    assert_eq!(k.cgroup(10), Path::new("/fake/cpu/mine"));
    assert_eq!(k.attr(10), SchedAttr::other(0));
    assert!(
        matches!(k.calls.first(), Some(Call::SetCpuCgroup(10, _))),
        "cgroup before attributes: {:?}",
        k.calls
    );
}

#[test]
fn journal_of_an_older_agent_without_cgroups_still_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    fs::write(
        &path,
        // What the agent wrote before it knew cgroups.
        br#"[{"task":{"tid":10,"start_time":1010},"original":{"policy":"other","flags":0,"nice":-2,"priority":0,"runtime_ns":0,"deadline_ns":0,"period_ns":0},"ever_stopped":false,"group_nice":0}]"#,
    )
    .unwrap();
    let l = RestoreLedger::load(&path).unwrap();
    assert_eq!(l.get(10).unwrap().original, SchedAttr::other(-2));
    assert_eq!(l.get(10).unwrap().cpu_cgroup, None);
    // And an agent without demotion cgroups writes no cgroup field.
    let mut k = FakeKernel::default();
    k.spawn(11, SchedAttr::other(0));
    let mut plain = RestoreLedger::new(Some(path.clone()));
    plain.record(&k, 11).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains("cpu_cgroup"), "{text}");
    assert_eq!(
        RestoreLedger::load(&path)
            .unwrap()
            .get(11)
            .unwrap()
            .cpu_cgroup,
        None
    );
}

#[test]
fn task_found_in_the_agents_own_cgroup_has_no_original_cgroup() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(0));
    k.tasks.get_mut(&10).unwrap().cpu_cgroup = "/fake/cpu/node/idle".into();
    let mut l = demoting_ledger(None);
    l.record(&k, 10).unwrap();
    assert_eq!(l.get(10).unwrap().cpu_cgroup, None);
}

#[test]
fn a_vanished_original_cgroup_still_restores_the_attributes() {
    let mut k = FakeKernel::default();
    k.spawn(10, SchedAttr::other(1));
    let mut l = demoting_ledger(None);
    l.record(&k, 10).unwrap();
    k.set_cpu_cgroup(10, Path::new("/fake/cpu/node/idle"))
        .unwrap();
    k.set_attr(10, &boosted()).unwrap();
    k.deny_cgroup = true;
    let r = l.restore_all(&mut k);
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert!(r.failed[0].1.contains("/fake/cpu"), "{r:?}");
    assert_eq!(k.attr(10), SchedAttr::other(1));
}

#[test]
fn corrupt_journal_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restore.json");
    // A complete line (a half-written last one is what a killed agent
    // leaves, and is ignored).
    fs::write(&path, b"{not json\n").unwrap();
    let e = RestoreLedger::load(&path).unwrap_err();
    assert!(e.to_string().contains("restore.json"), "{e}");
}
