//! Timeline recording on a real agent: two fine-grain jobs share node n0's
//! one CPU; a recording of that node holds on-CPU intervals of both jobs,
//! and only one recording runs at a time.
use std::time::Duration;

use cosched_integration_tests::{coord::exclusive, pair::Cluster, require_root, synth::fine_spin};
use cosched_proto::control::{Reply, Request};
use cosched_timeline::model::{Holder, NodeIntervals};

#[test]
fn a_recording_of_a_node_shows_both_jobs_on_its_cpu_and_a_second_one_meanwhile_is_refused() {
    require_root();
    let _serial = exclusive();
    let cluster = Cluster::start(91, ["", ""]);
    let a = cluster.launch(1, &fine_spin("udp", "20"));
    let b = cluster.launch(2, &fine_spin("udp", "20"));
    let agent = &cluster.agents[0];
    // Let both jobs get going before recording.
    std::thread::sleep(Duration::from_millis(500));

    let request = || Request::Timeline {
        duration_ms: 3_000,
        max_events: None,
    };
    let (first, second) = std::thread::scope(|s| {
        let first = s.spawn(|| agent.call(request()));
        std::thread::sleep(Duration::from_millis(300));
        let second = agent.call(request());
        (first.join().unwrap(), second)
    });
    // Whichever request reached the agent first records; the other is
    // refused while it runs.
    let (recorded, refused) = match (first, second) {
        (Ok(r), Err(e)) | (Err(e), Ok(r)) => (r, e),
        other => panic!("expected one recording and one refusal: {other:?}"),
    };
    assert!(refused.contains("already running"), "{refused}");
    let Reply::Timeline { timeline } = recorded else {
        panic!("not a timeline: {recorded:?}");
    };
    assert_eq!(timeline.node, "n0");
    assert!(
        timeline.end_ns > timeline.start_ns && !timeline.switches.is_empty(),
        "{} switches\n{}",
        timeline.switches.len(),
        cluster.logs()
    );
    let intervals = NodeIntervals::of(&timeline);
    for job in [a.job_id, b.job_id] {
        let on_cpu = intervals
            .runs
            .iter()
            .filter(|r| r.cpu == 0 && matches!(r.holder, Holder::Job { job: j, .. } if j == job))
            .count();
        assert!(
            on_cpu > 0,
            "job {job} never held n0's CPU in the recording: {:?}",
            intervals.jobs()
        );
    }
    // Only managed tasks are recorded: every switch names a job on one side.
    assert!(
        timeline
            .switches
            .iter()
            .all(|s| s.prev_job != 0 || s.next_job != 0)
    );
    let names: Vec<&str> = timeline.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // The picture has both jobs' runs.
    let svg = cosched_timeline::render("test", &[timeline]);
    assert!(svg.contains("tid"), "no run drawn");
}
