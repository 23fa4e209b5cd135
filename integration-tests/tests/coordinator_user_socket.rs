//! The coordinator's user socket, used by real unprivileged users
//! (`setpriv` to uids that are not root), as a Slurm SrunProlog or a user's
//! own `cosched attach -- mpirun …` uses it: a user attaches a job whose
//! ranks join on both nodes through the agents' user sockets and are gang
//! sliced; the job is the user's; another user cannot cancel it, nor
//! switch the policy or submit (each refused with a clear error and
//! nothing changed), but may read the views, nor claim an expected rank of
//! the user's job with a process of their own; a user cannot cancel
//! root's job; the owner cancels their own.
use std::{
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Output},
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    coord::{TestCluster, coord_bin, exclusive, state, wait_until},
    proc::{seen_stopped_and_running, state_of},
    require_root,
    users::{Groups, OTHER, USER, as_user},
};
use cosched_proto::jsonl::user_socket_path;

/// `cosched --json --socket <admin socket> ARGS` as `uid`.
fn cosched_as(uid: u32, socket: &Path, args: &[&str]) -> Output {
    as_user(uid)
        .arg(coord_bin("cosched"))
        .arg("--socket")
        .arg(socket)
        .arg("--json")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `cosched --socket <admin socket> attach --name NAME --nodes n0,n1 --
/// LAUNCHER…` as `uid` (0: root).
fn attach_as(uid: u32, socket: &Path, name: &str, launcher: &[&str]) -> Command {
    let mut cmd = if uid == 0 {
        Command::new(coord_bin("cosched"))
    } else {
        let mut cmd = as_user(uid);
        cmd.arg(coord_bin("cosched"));
        cmd
    };
    cmd.arg("--socket")
        .arg(socket)
        .args(["attach", "--name", name, "--nodes", "n0,n1", "--"])
        .args(launcher);
    cmd
}

fn open_to_users(dir: &Path, mode: u32) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_user_attaches_their_own_job_and_only_they_or_root_may_end_it() {
    require_root();
    let _serial = exclusive();
    let cluster = TestCluster::gang_stopping(74);
    let coordinator = &cluster.coordinator;
    // The sockets' directories must be reachable for the users.
    open_to_users(coordinator.dir.path(), 0o755);
    for agent in &cluster.agents {
        open_to_users(agent.dir.path(), 0o755);
    }
    let user_socket = user_socket_path(&coordinator.socket);
    let mode = std::fs::metadata(&user_socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666, "the user socket takes any user");
    let pids = tempfile::tempdir().unwrap();
    open_to_users(pids.path(), 0o777);

    // The user's own launcher: one spinning rank per node started under
    // `$COSCHED_JOIN`, as a launcher's per-node daemon would be; the joins
    // reach the agents' user sockets because the user is not root.
    let mut script = String::new();
    for (node, agent) in cluster.agents.iter().enumerate() {
        script += &format!(
            "COSCHED_AGENT_SOCKET={} taskset -c {node} $COSCHED_JOIN sh -c 'echo $$ > {}/r{node}; while :; do :; done' &\n",
            agent.socket.display(),
            pids.path().display()
        );
    }
    script += "wait\n";
    let mut groups = Groups::default();
    groups.spawn(attach_as(
        USER,
        &coordinator.socket,
        "mine",
        &["sh", "-c", &script],
    ));
    let rank_pids = || -> Vec<u32> {
        (0..2)
            .filter_map(|node| {
                std::fs::read_to_string(pids.path().join(format!("r{node}")))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    };
    wait_until("both ranks started", Duration::from_secs(10), || {
        rank_pids().len() == 2
    });
    let ranks = rank_pids();
    let jobs = coordinator.call(&["jobs"]);
    let listed = jobs["jobs"]["jobs"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1, "{jobs:#}");
    let mine = &listed[0];
    assert_eq!(mine["owner"], USER, "the attaching user owns it: {mine:#}");
    assert_eq!(mine["attached"], true, "{mine:#}");
    let id = mine["id"].as_u64().unwrap().to_string();

    // Root's job in the other row: the gang slices then stop and run the
    // user's ranks, so they did join on both nodes.
    let mut root_script = String::new();
    for (node, agent) in cluster.agents.iter().enumerate() {
        root_script += &format!(
            "COSCHED_AGENT_SOCKET={} taskset -c {node} $COSCHED_JOIN sh -c 'while :; do :; done' &\n",
            agent.socket.display(),
        );
    }
    root_script += "wait\n";
    groups.spawn(attach_as(
        0,
        &coordinator.socket,
        "roots",
        &["sh", "-c", &root_script],
    ));
    wait_until("root's job attached", Duration::from_secs(10), || {
        coordinator.call(&["jobs"])["jobs"]["jobs"]
            .as_array()
            .is_some_and(|jobs| jobs.len() == 2)
    });
    let jobs = coordinator.call(&["jobs"]);
    let roots = jobs["jobs"]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["name"] == "roots")
        .unwrap_or_else(|| panic!("{jobs:#}"))
        .clone();
    assert!(
        roots.get("owner").is_none(),
        "root's job has no owner: {roots:#}"
    );
    let roots_id = roots["id"].as_u64().unwrap().to_string();
    if let Err((stopped, ran)) = seen_stopped_and_running(&ranks, Duration::from_secs(3)) {
        panic!(
            "the user's ranks were not gang sliced: stopped {stopped:?} ran {ran:?}\n{}",
            cluster.logs()
        );
    }

    // Another user: may read, may not end the job, switch or submit.
    let out = cosched_as(OTHER, &coordinator.socket, &["cancel", &id]);
    assert!(!out.status.success(), "another user cancelled the job");
    assert!(
        stderr(&out).contains("belongs to user 65534"),
        "{}",
        stderr(&out)
    );
    let out = cosched_as(OTHER, &coordinator.socket, &["policy", "set", "fcfs"]);
    assert!(!out.status.success(), "a user switched the policy");
    assert!(stderr(&out).contains("needs root"), "{}", stderr(&out));
    let out = cosched_as(
        OTHER,
        &coordinator.socket,
        &["submit", "--name", "x", "--nodes", "1", "--", "/bin/true"],
    );
    assert!(!out.status.success(), "a user submitted a job");
    assert!(stderr(&out).contains("needs root"), "{}", stderr(&out));
    let out = cosched_as(OTHER, &coordinator.socket, &["jobs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen["jobs"]["jobs"].as_array().unwrap().len(),
        2,
        "{seen:#}"
    );
    let status = coordinator.call(&["status"]);
    assert_eq!(status["status"]["status"]["policy"], "gang", "{status:#}");
    let job = coordinator.job(id.parse().unwrap());
    assert_eq!(state(&job), "running", "{job:#}");

    // A job the user attached whose ranks have not joined yet: another
    // user cannot claim its expected rank on a node with a process of
    // their own (the coordinator told the agents whose job it is).
    groups.spawn(attach_as(
        USER,
        &coordinator.socket,
        "idle",
        &["sleep", "60"],
    ));
    let idle_id = {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let jobs = coordinator.call(&["jobs"]);
            let found = jobs["jobs"]["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|job| job["name"] == "idle")
                .map(|job| job["id"].as_u64().unwrap());
            if let Some(id) = found {
                break id.to_string();
            }
            assert!(Instant::now() < deadline, "idle not attached: {jobs:#}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let squatter = groups.sleeper(OTHER);
    let out = as_user(OTHER)
        .arg(coord_bin("cosched"))
        .env("COSCHED_AGENT_SOCKET", &cluster.agents[0].socket)
        .args(["join", "--job", &idle_id, "--pid"])
        .arg(squatter.to_string())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "another user claimed the expected rank"
    );
    assert!(
        stderr(&out).contains("belongs to user 65534"),
        "{}",
        stderr(&out)
    );

    // The owner: not root's job, but their own.
    let out = cosched_as(USER, &coordinator.socket, &["cancel", &roots_id]);
    assert!(!out.status.success(), "a user cancelled root's job");
    assert!(
        stderr(&out).contains("only root may cancel"),
        "{}",
        stderr(&out)
    );
    let out = cosched_as(USER, &coordinator.socket, &["cancel", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    coordinator.wait_job(id.parse().unwrap(), Duration::from_secs(5), |job| {
        state(job) == "cancelled"
    });
    wait_until(
        "the cancelled job's ranks killed on their nodes",
        Duration::from_secs(10),
        || {
            ranks
                .iter()
                .all(|&pid| state_of(pid).is_none_or(|s| s == 'Z'))
        },
    );
    assert_eq!(
        state(&coordinator.job(roots_id.parse().unwrap())),
        "running",
        "root's job is untouched"
    );
    drop(groups);
}
