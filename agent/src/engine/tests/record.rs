//! Timeline recording: off unless asked, one at a time, bounded.
use cosched_agent_common::{TimelineRecord, timeline_kind};
use cosched_proto::timeline::{MAX_DURATION_MS, Slice};

use super::*;
use crate::engine::RecordError;

fn switch(ts_ns: u64, prev: (u32, u32), next: (u32, u32)) -> TimelineRecord {
    TimelineRecord {
        kind: timeline_kind::SWITCH,
        cpu: 0,
        ts_ns,
        prev_tid: prev.0,
        prev_job: prev.1,
        next_tid: next.0,
        next_job: next.1,
    }
}

#[test]
fn recording_is_off_until_asked_and_off_again_once_finished() {
    let mut e = engine();
    assert!(!e.k.recording);
    assert_eq!(e.recording_deadline(), None);
    e.k.now = 1_000;
    let until = e.start_recording(50, None).unwrap();
    assert_eq!(until, 1_000 + 50_000_000);
    assert!(e.k.recording);
    e.k.now = until - 1;
    assert!(!e.recording_due());
    e.k.now = until;
    assert!(e.recording_due());
    let t = e.finish_recording().unwrap();
    assert!(!e.k.recording, "the eBPF side stops recording");
    assert_eq!(
        (t.start_ns, t.end_ns, t.node.as_str()),
        (1_000, until, "n0")
    );
    assert_eq!(e.finish_recording(), None);
}

#[test]
fn a_second_recording_while_one_runs_is_refused_with_a_clear_error() {
    let mut e = engine();
    e.start_recording(1_000, None).unwrap();
    let err = e.start_recording(1_000, None).unwrap_err();
    assert!(matches!(err, RecordError::Busy { .. }));
    assert!(err.to_string().contains("already running"), "{err}");
    e.finish_recording().unwrap();
    e.start_recording(1_000, None).unwrap();
}

#[test]
fn a_recording_is_bounded_in_time_and_records() {
    let mut e = engine();
    for bad in [0, MAX_DURATION_MS + 1] {
        assert_eq!(
            e.start_recording(bad, None),
            Err(RecordError::BadDuration(bad))
        );
    }
    assert!(matches!(
        e.start_recording(10, Some(0)),
        Err(RecordError::BadMaxEvents(0))
    ));
    assert!(!e.k.recording, "refused requests turn nothing on");
    e.start_recording(10_000, Some(3)).unwrap();
    for i in 0..5 {
        e.k.timeline.push_back(switch(i, (0, 0), (100, 1)));
    }
    e.drain_timeline();
    assert!(e.recording_due(), "full before its time");
    let t = e.finish_recording().unwrap();
    assert_eq!(t.switches.len(), 3);
    assert!(t.truncated);
}

#[test]
fn the_recording_holds_the_switches_the_levels_and_the_slices_of_the_jobs() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.k.spawn(200, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.adopt(2, "b", &[200], None).unwrap();
    // Left from before: not this recording's.
    e.k.timeline.push_back(switch(1, (0, 0), (100, 1)));
    e.k.now = 10;
    e.start_recording(100, None).unwrap();
    e.k.timeline.push_back(switch(20, (100, 1), (200, 2)));
    e.k.timeline.push_back(TimelineRecord {
        kind: timeline_kind::SPIN_START,
        cpu: 0,
        ts_ns: 25,
        prev_tid: 200,
        prev_job: 2,
        ..TimelineRecord::default()
    });
    e.k.now = 30;
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    let t = e.finish_recording().unwrap();
    assert_eq!(t.switches.len(), 1);
    assert_eq!((t.switches[0].prev_job, t.switches[0].next_job), (1, 2));
    assert_eq!(t.spins.len(), 1);
    assert!(t.spins[0].start);
    assert_eq!(
        t.slices,
        [Slice {
            ts_ns: 30,
            active: Some(vec![1]),
            number: None,
        }]
    );
    let levels: Vec<(u32, u64, &str)> = t
        .actions
        .iter()
        .map(|a| (a.tid, a.ts_ns, a.level.as_str()))
        .collect();
    assert!(levels.contains(&(100, 10, "normal")), "{levels:?}");
    assert!(levels.contains(&(200, 30, "demote")), "{levels:?}");
    let names: Vec<&str> = t.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn without_a_recording_nothing_is_kept() {
    let mut e = engine();
    e.k.spawn(100, SchedAttr::other(0));
    e.adopt(1, "a", &[100], None).unwrap();
    e.k.timeline.push_back(switch(1, (0, 0), (100, 1)));
    e.drain_timeline();
    e.set_gang(Some(Gang {
        active: [1].into(),
        strict: false,
    }));
    assert!(e.recording.is_none());
    assert_eq!(e.k.timeline.len(), 1, "not even drained");
}
