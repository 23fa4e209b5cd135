//! Demotion by cgroup (`demote_cpu_cgroup`) on the real kernel: in a gang of
//! two jobs whose agents demote (not stop) the job outside its slot, the
//! demoted job's threads are listed in `<dir>/idle/tasks`; when the agent
//! exits (SIGTERM on one node, SIGKILL and its guardian on the other) they
//! are back in their original cgroup-v1 cpu cgroup.
use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::{CoordOpts, TestCoordinator, exclusive, wait_until},
    netns::NodePair,
    require_root, unique,
};
use cosched_proto::control::{Reply, Request};

const V1_CPU: &str = "/sys/fs/cgroup/cpu";

/// Fails (never skips) when the machine has no cgroup-v1 cpu controller
/// with `cpu.idle`.
fn require_v1_cpu_idle() {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mounted = mounts.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() >= 4
            && fields[1] == V1_CPU
            && fields[2] == "cgroup"
            && fields[3].split(',').any(|o| o == "cpu")
    });
    assert!(
        mounted && Path::new(V1_CPU).join("cpu.idle").exists(),
        "this test needs the cpu controller as cgroup v1 at {V1_CPU} with cpu.idle \
         (Linux 5.15+); this machine does not have it"
    );
}

/// The cpu line of /proc/<tid>/cgroup (path relative to the hierarchy).
fn cpu_cgroup_of(tid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/cgroup")).ok()?;
    text.lines().find_map(|line| {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        controllers
            .split(',')
            .any(|c| c == "cpu")
            .then(|| path.to_string())
    })
}

fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn tasks_in(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("tasks"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Main pids of the jobs an agent runs.
fn job_pids(agent: &TestAgent) -> Vec<u32> {
    match agent.call(Request::Jobs) {
        Ok(Reply::Jobs { jobs }) => jobs.into_iter().flat_map(|j| j.pids).collect(),
        other => panic!("jobs: {other:?}\n{}", agent.log()),
    }
}

/// Removes the test's v1 directory tree (moving any thread left in it to
/// the root first) even when the test fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        for sub in [
            "n0/active",
            "n0/idle",
            "n1/active",
            "n1/idle",
            "n0",
            "n1",
            "",
        ] {
            let dir = self.0.join(sub);
            for tid in tasks_in(&dir) {
                let _ = std::fs::write(Path::new(V1_CPU).join("tasks"), tid.to_string());
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

#[test]
fn demoted_threads_wait_in_the_idle_cgroup_and_are_moved_back_when_the_agent_exits() {
    require_root();
    require_v1_cpu_idle();
    let _serial = exclusive();
    let scratch = Scratch(Path::new(V1_CPU).join(unique("cosched-it-")));
    std::fs::create_dir_all(&scratch.0).unwrap();
    let original = cpu_cgroup_of(std::process::id()).expect("a v1 cpu cgroup");

    let nodes = NodePair::new(66);
    let coordinator = TestCoordinator::start(
        &nodes,
        CoordOpts {
            policy: "gang",
            slice_ms: 50,
            ..CoordOpts::default()
        },
    );
    let node_dir = |i: usize| scratch.0.join(format!("n{i}"));
    let mut agents: Vec<TestAgent> = (0..2)
        .map(|i| {
            let extra = format!(
                "demote_cpu_cgroup = \"{}\"\n{}",
                node_dir(i).display(),
                coordinator.agent_table("stop_inactive = false")
            );
            TestAgent::start(AgentOpts {
                node: ["n0", "n1"][i],
                cpus: vec![i as u32],
                netns: Some((&nodes, i)),
                extra: &extra,
            })
        })
        .collect();
    for (i, agent) in agents.iter().enumerate() {
        let idle = node_dir(i).join("idle");
        assert_eq!(
            std::fs::read_to_string(idle.join("cpu.idle"))
                .unwrap_or_default()
                .trim(),
            "1",
            "{} is an idle cgroup\n{}",
            idle.display(),
            agent.log()
        );
    }
    wait_until("both agents registered", Duration::from_secs(10), || {
        coordinator.call(&["nodes"])["nodes"]["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().all(|node| node["connected"] == true))
    });
    let args = [
        "--proto",
        "udp",
        "--recv",
        "block",
        "--compute-us",
        "500",
        "--duration",
        "60",
    ];
    coordinator.submit_synth("a", 2, &args);
    coordinator.submit_synth("b", 2, &args);
    wait_until("gang mode on both agents", Duration::from_secs(10), || {
        agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    });
    wait_until("two jobs on each node", Duration::from_secs(10), || {
        agents.iter().all(|agent| job_pids(agent).len() == 2)
    });
    let pids: Vec<Vec<u32>> = agents.iter().map(job_pids).collect();
    for (i, agent) in agents.iter().enumerate() {
        let idle = node_dir(i).join("idle");
        let active = node_dir(i).join("active");
        let started = Instant::now();
        loop {
            let demoted = tasks_in(&idle);
            let mine: Vec<u32> = pids[i].iter().flat_map(|&p| threads(p)).collect();
            if demoted.iter().any(|t| mine.contains(t)) {
                assert!(
                    demoted.iter().all(|t| mine.contains(t)),
                    "node {i}: only job threads are demoted: {demoted:?} vs {mine:?}"
                );
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "node {i}: no job thread ever listed in {} (active: {:?}, jobs {:?})\n{}",
                idle.display(),
                tasks_in(&active),
                pids[i],
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            agent.metrics().contains("cosched_cgroup_favordynmods "),
            "the agent exports whether moves are fast"
        );
    }

    // Node 0: a clean exit; node 1: SIGKILL, its guardian restores.
    assert_eq!(agents[0].stop(), Some(0), "{}", agents[0].log());
    agents[1].kill9();
    for (i, node_pids) in pids.iter().enumerate() {
        let started = Instant::now();
        loop {
            let misplaced: Vec<(u32, Option<String>)> = node_pids
                .iter()
                .flat_map(|&p| threads(p))
                .map(|t| (t, cpu_cgroup_of(t)))
                .filter(|(_, cg)| cg.as_ref().is_some_and(|cg| *cg != original))
                .collect();
            if misplaced.is_empty() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "node {i}: threads not back in {original}: {misplaced:?}\n{}",
                agents[i].log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The clean exit removed its (now empty) cgroups.
    assert!(
        !node_dir(0).join("idle").exists() && !node_dir(0).join("active").exists(),
        "agent n0 left its cgroups behind\n{}",
        agents[0].log()
    );
    for pid in pids.iter().flatten() {
        // SAFETY: plain syscall.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
}
