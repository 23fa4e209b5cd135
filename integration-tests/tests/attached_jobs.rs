//! Jobs that something else launched, on a real agent: a cgroup whose
//! processes come and go, a process tree, bad input refused with nothing
//! changed, and a job attached through the coordinator whose ranks join
//! with `cosched join` and are then stopped and run by gang slices.
use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command},
    time::Duration,
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::{TestCluster, exclusive, state, wait_until},
    proc::{sched_of, seen_stopped_and_running, state_of},
    require_root, unique,
};
use cosched_proto::{
    control::{AttachTarget, JobInfo, Reply, Request},
    job::SchedRequest,
};

/// A cgroup-v2 directory for one test, removed (with its processes killed)
/// on drop.
struct Cgroup(PathBuf);

impl Cgroup {
    fn create() -> Self {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                (right.split_whitespace().next()? == "cgroup2")
                    .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
            })
            .expect(
                "this test needs a mounted cgroup-v2 hierarchy (cgroup2 in /proc/self/mountinfo)",
            );
        let dir = mount.join(unique("cosched-it-"));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("creating cgroup {}: {e}", dir.display()));
        Self(dir)
    }

    fn enter(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.0.display()));
    }

    /// Moves `pid` back to the hierarchy's root.
    fn leave(&self, pid: u32) {
        let root = self.0.parent().unwrap().join("cgroup.procs");
        std::fs::write(root, pid.to_string()).unwrap();
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        for _ in 0..100 {
            remove_below(&self.0);
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Removes the (empty) cgroups below `dir`, deepest first.
fn remove_below(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_below(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Children the test owns, each the leader of its own process group; the
/// groups are killed on drop, so what a script started in the background
/// (`sleep 600 &`) goes too instead of outliving the test.
struct Procs(Vec<Child>);

impl Procs {
    fn sh(&mut self, script: &str) -> u32 {
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        self.0.push(child);
        pid
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SAFETY: a plain syscall on the negated pid of a group this
            // test created (the child is its leader and not yet reaped).
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}

fn job(agent: &TestAgent, id: u32) -> JobInfo {
    match agent.call(Request::Jobs).unwrap() {
        Reply::Jobs { jobs } => jobs
            .into_iter()
            .find(|job| job.job_id == id)
            .unwrap_or_else(|| panic!("job {id} is not on the agent\n{}", agent.log())),
        other => panic!("{other:?}"),
    }
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(5), &mut check);
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s[s.rfind(')')? + 2..]
                        .split_whitespace()
                        .nth(1)?
                        .parse::<u32>()
                        .ok()
                })
                == Some(pid)
        })
        .collect()
}

fn attach(agent: &TestAgent, target: AttachTarget, sched: Option<SchedRequest>) -> (u32, u32) {
    match agent.call(Request::Attach {
        job_id: None,
        name: "attached".into(),
        target,
        sched,
        move_to_node: false,
        class: cosched_proto::wire::JobClass::BestEffort,
    }) {
        Ok(Reply::Attached { job_id, tasks }) => (job_id, tasks),
        other => panic!("attach: {other:?}\n{}", agent.log()),
    }
}

#[test]
fn a_cgroup_job_follows_ranks_forked_and_moved_in_and_releases_a_task_that_leaves() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let cgroup = Cgroup::create();
    let mut procs = Procs(Vec::new());
    let go = agent.dir.path().join("go");
    // A "launcher" in the cgroup that forks a rank once told to. It waits on
    // a FIFO, not in a `sleep` loop, so it has no child when it is attached.
    let made = std::process::Command::new("mkfifo")
        .arg(&go)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", go.display());
    let launcher = procs.sh(&format!("read _ < {}; sleep 600 & wait", go.display()));
    cgroup.enter(launcher);
    let (id, tasks) = attach(
        &agent,
        AttachTarget::Cgroup(cgroup.0.display().to_string()),
        Some(SchedRequest::Nice { nice: 7 }),
    );
    assert_eq!(tasks, 1, "the launcher");
    assert_eq!(sched_of(launcher).unwrap().nice, 7);
    // A rank forked after the attach: followed through the fork.
    std::fs::write(&go, "\n").unwrap();
    wait_for("the forked rank", || job(&agent, id).live_tasks == 2);
    let forked = children_of(launcher)[0];
    wait_for("the forked rank at the job's nice", || {
        sched_of(forked).is_ok_and(|s| s.nice == 7)
    });
    // A process moved into the cgroup: taken at the next poll.
    let moved = procs.sh("exec sleep 600");
    cgroup.enter(moved);
    wait_for("the moved-in process", || {
        job(&agent, id).pids.contains(&moved)
    });
    wait_for("the moved-in process at the job's nice", || {
        sched_of(moved).is_ok_and(|s| s.nice == 7)
    });
    assert_eq!(job(&agent, id).live_tasks, 3);
    // The forked rank leaves the cgroup: handed back, nice restored.
    cgroup.leave(forked);
    wait_for("the leaver handed back", || job(&agent, id).live_tasks == 2);
    wait_for("the leaver's nice restored", || {
        sched_of(forked).is_ok_and(|s| s.nice == 0)
    });
    // The job ends when its cgroup is empty.
    drop(procs);
    wait_for("the job to end with its cgroup empty", || {
        job(&agent, id).state != cosched_proto::control::JobState::Running
    });
}

#[test]
fn a_cgroup_job_follows_a_task_into_a_sub_cgroup_made_after_adoption_and_out_of_its_subtree() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let cgroup = Cgroup::create();
    let mut procs = Procs(Vec::new());
    let first = procs.sh("exec sleep 600");
    cgroup.enter(first);
    let (id, tasks) = attach(
        &agent,
        AttachTarget::Cgroup(cgroup.0.display().to_string()),
        Some(SchedRequest::Nice { nice: 7 }),
    );
    assert_eq!(tasks, 1);
    // As Slurm does for a step's task: a sub-cgroup made after the job's
    // cgroup was adopted, and a process moved into it.
    let task_cg = cgroup.0.join("step_0/user/task_0");
    std::fs::create_dir_all(&task_cg).unwrap();
    let task = procs.sh("exec sleep 600");
    std::fs::write(task_cg.join("cgroup.procs"), task.to_string()).unwrap();
    wait_for("the task in the sub-cgroup taken", || {
        job(&agent, id).pids.contains(&task)
    });
    wait_for("the task at the job's nice", || {
        sched_of(task).is_ok_and(|s| s.nice == 7)
    });
    // Leaving the subtree hands it back.
    cgroup.leave(task);
    wait_for("the leaver handed back", || job(&agent, id).live_tasks == 1);
    wait_for("the leaver's nice restored", || {
        sched_of(task).is_ok_and(|s| s.nice == 0)
    });
    drop(procs);
    wait_for("the job to end with its subtree empty", || {
        job(&agent, id).state != cosched_proto::control::JobState::Running
    });
}

#[test]
fn a_pid_tree_job_takes_the_root_and_its_descendants_and_is_released_intact() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let mut procs = Procs(Vec::new());
    let root = procs.sh("sleep 600 & sleep 600 & wait");
    wait_for("two children", || children_of(root).len() == 2);
    let (id, tasks) = attach(
        &agent,
        AttachTarget::PidTree(root),
        Some(SchedRequest::Nice { nice: 5 }),
    );
    assert_eq!(tasks, 3);
    let mut pids = job(&agent, id).pids;
    pids.sort_unstable();
    let mut want = children_of(root);
    want.push(root);
    want.sort_unstable();
    assert_eq!(pids, want);
    for pid in &want {
        assert_eq!(sched_of(*pid).unwrap().nice, 5, "{pid}");
    }
    assert!(matches!(
        agent.call(Request::Release { job_id: id }).unwrap(),
        Reply::Released { tasks: 3, .. }
    ));
    for pid in &want {
        assert_eq!(sched_of(*pid).unwrap().nice, 0, "{pid} restored");
        assert!(state_of(*pid).is_some(), "{pid} keeps running");
    }
}

#[test]
fn bad_attach_and_join_input_is_refused_clearly_and_changes_nothing() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let mut procs = Procs(Vec::new());
    let owned = procs.sh("exec sleep 600");
    let (other_job, _) = attach(&agent, AttachTarget::PidTree(owned), None);
    let cgroup = Cgroup::create();
    let mount = cgroup.0.parent().unwrap().display().to_string();
    let gone = procs.sh("exit 0");
    procs.0.last_mut().unwrap().wait().unwrap();
    let cases: Vec<(AttachTarget, String)> = vec![
        (
            AttachTarget::Cgroup("/no-such-cgroup-for-cosched".into()),
            "no such cgroup".into(),
        ),
        (
            AttachTarget::Cgroup(mount),
            "root of the cgroup-v2 hierarchy".into(),
        ),
        (
            AttachTarget::PidTree(gone),
            format!("no such process: {gone}"),
        ),
        (AttachTarget::PidTree(1), "init (pid 1)".into()),
        (AttachTarget::PidTree(agent.pid()), "is this agent".into()),
        (
            AttachTarget::PidTree(owned),
            format!("already managed as part of job {other_job}"),
        ),
    ];
    for (target, why) in cases {
        let error = agent
            .call(Request::Attach {
                job_id: Some(77),
                name: "bad".into(),
                target: target.clone(),
                sched: None,
                move_to_node: false,
                class: cosched_proto::wire::JobClass::BestEffort,
            })
            .unwrap_err();
        assert!(error.contains(&why), "{target:?}: {error}");
    }
    // A cgroup holding a process of another job refuses the whole cgroup.
    let free = procs.sh("exec sleep 600");
    cgroup.enter(free);
    cgroup.enter(owned);
    let error = agent
        .call(Request::Attach {
            job_id: Some(77),
            name: "bad".into(),
            target: AttachTarget::Cgroup(cgroup.0.display().to_string()),
            sched: Some(SchedRequest::Nice { nice: 9 }),
            move_to_node: false,
            class: cosched_proto::wire::JobClass::BestEffort,
        })
        .unwrap_err();
    assert!(error.contains("already managed"), "{error}");
    assert_eq!(sched_of(free).unwrap().nice, 0, "nothing was changed");
    for (job_id, why) in [(555, "unknown job 555"), (other_job, "")] {
        let result = agent.call(Request::Join {
            job_id,
            pid: free,
            move_to_node: false,
            daemon: false,
        });
        if why.is_empty() {
            continue; // joining a tree job is allowed; covered elsewhere
        }
        assert!(result.unwrap_err().contains(why));
    }
    let Reply::Jobs { jobs } = agent.call(Request::Jobs).unwrap() else {
        panic!()
    };
    let ids: Vec<u32> = jobs.iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![other_job], "no job was left behind");
}

/// Pids written by the ranks of an attached job's launcher script.
fn read_pids(dir: &Path, names: &[&str]) -> Vec<u32> {
    names
        .iter()
        .filter_map(|n| {
            std::fs::read_to_string(dir.join(n))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
        .collect()
}

#[test]
fn a_job_attached_through_the_coordinator_is_stopped_and_run_by_gang_slices() {
    require_root();
    let _serial = exclusive();
    let cluster = TestCluster::gang_stopping(72);
    let coordinator = &cluster.coordinator;
    let dir = tempfile::tempdir().unwrap();
    let cosched = cosched_integration_tests::coord::coord_bin("cosched");
    // Two attached jobs, each a spinning rank per node started the way a
    // launcher's per-node daemon would be: under `$COSCHED_JOIN`.
    let launch = |name: &str| -> Child {
        let mut script = String::new();
        for (node, agent) in cluster.agents.iter().enumerate() {
            script += &format!(
                "COSCHED_AGENT_SOCKET={} taskset -c {node} $COSCHED_JOIN sh -c 'echo $$ > {}/{name}{node}; while :; do :; done' & p{node}=$!\n",
                agent.socket.display(),
                dir.path().display()
            );
        }
        // (taskset and `cosched join` exec: `$!` is the rank itself.)
        script += "sleep 4; kill $p0 $p1; wait\n";
        Command::new(&cosched)
            .arg("--socket")
            .arg(&coordinator.socket)
            .args(["attach", "--name", name, "--nodes", "n0,n1", "--"])
            .args(["sh", "-c", &script])
            .spawn()
            .unwrap()
    };
    let mut a = launch("a");
    let mut b = launch("b");
    wait_until("every rank joined", Duration::from_secs(10), || {
        read_pids(dir.path(), &["a0", "a1", "b0", "b1"]).len() == 4
    });
    let ranks = read_pids(dir.path(), &["a0", "a1", "b0", "b1"]);
    wait_until("gang mode on both agents", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    });
    let jobs = coordinator.call(&["jobs"]);
    let listed = jobs["jobs"]["jobs"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{jobs:#}");
    assert!(listed.iter().all(|job| job["attached"] == true), "{jobs:#}");
    let rows: Vec<u64> = listed.iter().map(|j| j["row"].as_u64().unwrap()).collect();
    assert_ne!(rows[0], rows[1], "both need both nodes: two rows");
    // Each rank is seen stopped (other job's slot) and running (its own).
    if let Err((stopped, ran)) = seen_stopped_and_running(&ranks, Duration::from_millis(1500)) {
        panic!("stopped {stopped:?} ran {ran:?}\n{}", cluster.logs());
    }
    for child in [&mut a, &mut b] {
        let status = child.wait().unwrap();
        // The script kills its ranks: sh reports the last job's signal.
        assert!(status.code().is_some(), "{status:?}");
    }
    let jobs = coordinator.call(&["jobs", "--all"]);
    for job in jobs["jobs"]["jobs"].as_array().unwrap() {
        assert_ne!(state(job), "running", "{jobs:#}");
    }
    // Attaching to a node the cluster does not have is refused.
    let error = coordinator
        .cli(&["attach", "--name", "x", "--nodes", "n0,n9", "--", "true"])
        .unwrap_err();
    assert!(error.contains("unknown node \"n9\""), "{error}");
}
