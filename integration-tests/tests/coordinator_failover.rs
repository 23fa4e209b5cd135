//! The coordinator dies mid-run: agents leave gang mode after the heartbeat
//! timeout and the job keeps running under the local policy; the coordinator
//! restarts from its state file, the agents rejoin and confirm the job, and
//! gang slicing resumes until the job completes. An agent dies mid-run: the
//! ranks of a job the coordinator gives up are killed on every node, on the
//! dead agent's node once its agent is back.
use std::{path::PathBuf, time::Duration};

use cosched_integration_tests::{
    coord::{CoordOpts, TestCluster, state, wait_until},
    proc::Process,
    require_root, unique,
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
fn a_job_whose_agent_restarted_is_reported_lost_and_its_orphan_rank_killed() {
    require_root();
    let mut cluster = TestCluster::start(67, CoordOpts::default(), "");
    let id = submit_sleepers(&cluster, "orphan");
    cluster
        .coordinator
        .wait_job(id, Duration::from_secs(5), |job| {
            job["ranks"]
                .as_array()
                .is_some_and(|ranks| ranks.iter().all(|rank| rank["state"] == "launched"))
        });
    let [_, orphan] = cluster.rank_processes(id);
    // n1's agent restarts: it no longer knows the rank, so the job is lost
    // (its other rank is cancelled) and the cells are freed.
    cluster.agents[1].stop();
    assert!(
        orphan.iter().all(Process::is_alive),
        "the rank outlives its agent"
    );
    cluster.agents[1].spawn();
    let failed = cluster
        .coordinator
        .wait_job(id, Duration::from_secs(10), |job| state(job) != "running");
    assert_eq!(state(&failed), "failed", "{failed:#}");
    let reason = failed["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("n1"), "{failed:#}");
    let info = cluster.agents[0].wait(id, Duration::from_secs(5));
    assert_ne!(info.state, JobState::Running);
    // The rank the restarted agent never knew is found by its environment
    // (no cgroup_root here) and killed.
    wait_until(
        "the orphaned rank on n1 to be killed",
        Duration::from_secs(10),
        || !orphan.iter().any(Process::is_alive),
    );
    wait_until("n1 to confirm the reap", Duration::from_secs(5), || {
        cluster.node_view(1)["unreaped"] == serde_json::json!([])
    });
}

/// Under gang, n1's agent is SIGKILLed while a job runs, and the job is
/// cancelled before the agent is back: n0's rank is killed at once, n1's
/// keeps running unmanaged until n1's agent restarts and is told to reap it.
#[test]
fn ranks_given_up_while_their_agent_was_dead_are_killed_when_it_is_back() {
    require_root();
    let mut cluster = TestCluster::start(69, CoordOpts::default(), "");
    let id = submit_sleepers(&cluster, "headless");
    wait_for_ranks_and_gang(&cluster, id);
    let [kept, orphan] = cluster.rank_processes(id);

    cluster.agents[1].kill9();
    cluster.wait_node(1, false, Duration::from_secs(5));
    let cancelled = cluster.coordinator.call(&["cancel", &id.to_string()]);
    assert_eq!(state(&cancelled["cancelled"]["job"]), "cancelled");
    wait_until("n0's rank to be killed", Duration::from_secs(10), || {
        !kept.iter().any(Process::is_alive)
    });
    assert!(
        orphan.iter().all(Process::is_alive),
        "nobody can reach n1's rank while its agent is dead"
    );
    assert_eq!(
        cluster.node_view(1)["unreaped"],
        serde_json::json!([format!("job {id} rank 1")])
    );

    cluster.agents[1].spawn();
    cluster.wait_node(1, true, Duration::from_secs(10));
    wait_until(
        "n1's orphaned rank to be killed",
        Duration::from_secs(10),
        || !orphan.iter().any(Process::is_alive),
    );
    wait_until("n1 to confirm the reap", Duration::from_secs(5), || {
        cluster.node_view(1)["unreaped"] == serde_json::json!([])
    });
}

/// With `cgroup_root`, the rank's cgroup outlives a SIGKILLed agent; the
/// restarted agent does not know the rank, so the coordinator fails the
/// job, cancels n0's rank and has n1 kill everything in the cgroup.
#[test]
fn a_sigkilled_agents_rank_is_killed_through_its_cgroup_once_the_job_fails() {
    require_root();
    let root = CgroupRoot::new();
    let mut cluster = TestCluster::start_with(
        70,
        CoordOpts::default(),
        |index| format!("cgroup_root = \"{}\"", root.node(index).display()),
        "",
    );
    let id = submit_sleepers(&cluster, "caged");
    wait_for_ranks_and_gang(&cluster, id);
    let [kept, orphan] = cluster.rank_processes(id);
    let cgroup = root.node(1).join(format!("job-{id}-r1"));
    assert!(cgroup.is_dir(), "{}", cgroup.display());
    // The gate moves itself in (before the job program starts).
    wait_until("the rank in its cgroup", Duration::from_secs(5), || {
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap_or_default();
        orphan
            .iter()
            .all(|p| procs.lines().any(|l| l == p.pid.to_string()))
    });

    cluster.agents[1].kill9();
    cluster.wait_node(1, false, Duration::from_secs(5));
    assert!(orphan.iter().all(Process::is_alive));
    cluster.agents[1].spawn();
    let failed = cluster
        .coordinator
        .wait_job(id, Duration::from_secs(10), |job| state(job) != "running");
    assert_eq!(state(&failed), "failed", "{failed:#}");
    wait_until(
        "every rank of the job to be killed",
        Duration::from_secs(10),
        || !kept.iter().chain(&orphan).any(Process::is_alive),
    );
    wait_until(
        "the rank's cgroup to be removed",
        Duration::from_secs(10),
        || !cgroup.exists(),
    );
    wait_until("n1 to confirm the reap", Duration::from_secs(5), || {
        cluster.node_view(1)["unreaped"] == serde_json::json!([])
    });
}

/// A 2-rank job whose ranks never end on their own (and do not notice each
/// other's death): only a kill ends them.
fn submit_sleepers(cluster: &TestCluster, name: &str) -> u32 {
    let reply = cluster.coordinator.call(&[
        "submit",
        "--name",
        name,
        "--nodes",
        "2",
        "--",
        "/bin/sleep",
        "600",
    ]);
    reply["submitted"]["job"]["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job id in {reply}")) as u32
}

fn wait_for_ranks_and_gang(cluster: &TestCluster, id: u32) {
    cluster
        .coordinator
        .wait_job(id, Duration::from_secs(5), |job| {
            job["ranks"]
                .as_array()
                .is_some_and(|ranks| ranks.iter().all(|rank| rank["state"] == "launched"))
        });
    wait_until("gang mode", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    });
}

/// A cgroup v2 directory per node for the test, removed at the end.
struct CgroupRoot(PathBuf);

impl CgroupRoot {
    fn new() -> Self {
        let dir = PathBuf::from("/sys/fs/cgroup/unified").join(unique("cosched-reap"));
        assert!(
            dir.parent().unwrap().join("cgroup.controllers").is_file(),
            "this test needs cgroup v2 at /sys/fs/cgroup/unified"
        );
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn node(&self, index: usize) -> PathBuf {
        self.0.join(format!("n{index}"))
    }
}

impl Drop for CgroupRoot {
    fn drop(&mut self) {
        // Leaf directories first; each is empty once its processes are gone.
        for index in 0..2 {
            if let Ok(entries) = std::fs::read_dir(self.node(index)) {
                for entry in entries.flatten() {
                    if entry.path().is_dir() {
                        let _ = std::fs::remove_dir(entry.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(self.node(index));
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}
