//! The coordinator dies mid-run: agents leave gang mode after the heartbeat
//! timeout and the job keeps running under the local policy; the coordinator
//! restarts from its state file, the agents rejoin and confirm the job, and
//! gang slicing resumes until the job completes.
use std::time::Duration;

use cosched_integration_tests::{
    coord::{CoordOpts, TestCluster, state, wait_until},
    require_root,
};
use cosched_proto::control::{JobState, Reply, Request};

#[test]
fn agents_fall_back_when_the_coordinator_dies_and_rejoin_its_restart() {
    require_root();
    let mut cluster = TestCluster::start(66, CoordOpts::default(), "");
    let id = cluster.coordinator.submit_synth(
        "survivor",
        2,
        &["--recv", "block", "--compute-us", "200", "--duration", "5"],
    );
    let gang_on = |cluster: &TestCluster| {
        cluster
            .agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    };
    wait_until("gang mode", Duration::from_secs(5), || gang_on(&cluster));

    cluster.coordinator.kill9();
    // Heartbeat timeout 600 ms: both agents fall back soon after.
    wait_until("agents to leave gang mode", Duration::from_secs(3), || {
        cluster.agents.iter().all(|agent| {
            agent.metric("cosched_gang_mode", &[]) == 0.0
                && agent.metric("cosched_coordinator_connected", &[]) == 0.0
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    for agent in &cluster.agents {
        let Ok(Reply::Jobs { jobs }) = agent.call(Request::Jobs) else {
            panic!("agent jobs");
        };
        let rank = jobs
            .iter()
            .find(|job| job.job_id == id)
            .expect("rank known");
        assert_eq!(rank.state, JobState::Running, "the job keeps running alone");
    }

    cluster.coordinator.spawn();
    cluster.wait_connected(Duration::from_secs(5));
    let resumed = cluster
        .coordinator
        .wait_job(id, Duration::from_secs(5), |job| {
            job["ranks"]
                .as_array()
                .is_some_and(|ranks| ranks.iter().all(|rank| rank["state"] == "running"))
        });
    assert_eq!(state(&resumed), "running");
    assert_eq!(resumed["row"], 0, "{resumed:#}");
    wait_until("gang mode again", Duration::from_secs(5), || {
        gang_on(&cluster)
    });
    let status = cluster.coordinator.call(&["status"]);
    assert_eq!(status["status"]["status"]["epoch"], 2, "{status:#}");

    let done = cluster
        .coordinator
        .wait_job(id, Duration::from_secs(15), |job| state(job) != "running");
    assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
}

#[test]
fn a_job_whose_agent_restarted_is_reported_lost() {
    require_root();
    let mut cluster = TestCluster::start(67, CoordOpts::default(), "");
    let id =
        cluster
            .coordinator
            .submit_synth("orphan", 2, &["--recv", "block", "--duration", "30"]);
    cluster
        .coordinator
        .wait_job(id, Duration::from_secs(5), |job| {
            job["ranks"]
                .as_array()
                .is_some_and(|ranks| ranks.iter().all(|rank| rank["state"] == "launched"))
        });
    let Ok(Reply::Jobs { jobs }) = cluster.agents[1].call(Request::Jobs) else {
        panic!("agent jobs");
    };
    let rank = jobs
        .into_iter()
        .find(|job| job.job_id == id)
        .expect("n1 runs the rank");
    // n1's agent restarts: it no longer knows the rank, so the job is lost
    // (its other rank is cancelled) and the cells are freed.
    cluster.agents[1].stop();
    cluster.agents[1].spawn();
    let failed = cluster
        .coordinator
        .wait_job(id, Duration::from_secs(10), |job| state(job) != "running");
    assert_eq!(state(&failed), "failed", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("n1"), "{failed:#}");
    let info = cluster.agents[0].wait(id, Duration::from_secs(5));
    assert_ne!(info.state, JobState::Running);
    // The orphaned rank on n1 (which the restarted agent never knew) is
    // this test's to end.
    for pid in rank.pids {
        // SAFETY: plain syscall on the rank's own pid.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
}
