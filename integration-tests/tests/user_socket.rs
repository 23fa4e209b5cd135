//! The agent's user socket, used by real unprivileged users (`setpriv`
//! to uids that are not root): a user joins its own process to a job of its
//! own and hands it back; another user's process, a root process, init, a
//! pid that does not exist, a job of another user and the root-only ops are
//! each refused with a clear error and change nothing.
use std::{os::unix::fs::PermissionsExt as _, process::Output, time::Duration};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::wait_until,
    require_root,
    users::{Groups, OTHER, USER, as_user},
};
use cosched_proto::{
    control::{AttachTarget, JobInfo, Reply, Request},
    jsonl::user_socket_path,
};

fn cosched_as(uid: u32, agent: &TestAgent, args: &[&str]) -> Output {
    let mut cmd = as_user(uid);
    cmd.arg(cosched_integration_tests::bin("cosched"));
    cmd.env("COSCHED_AGENT_SOCKET", &agent.socket).args(args);
    cmd.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One raw request line on the user socket, sent as `uid`; the reply line.
fn raw_as(uid: u32, agent: &TestAgent, line: &str) -> String {
    let out = as_user(uid)
        .arg(env!("CARGO_BIN_EXE_line-call"))
        .arg(user_socket_path(&agent.socket))
        .arg(line)
        .output()
        .unwrap();
    assert!(out.status.success(), "line-call: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn jobs(agent: &TestAgent) -> Vec<JobInfo> {
    match agent.call(Request::Jobs).unwrap() {
        Reply::Jobs { jobs } => jobs,
        other => panic!("{other:?}"),
    }
}

fn job(agent: &TestAgent, id: u32) -> JobInfo {
    jobs(agent)
        .into_iter()
        .find(|j| j.job_id == id)
        .unwrap_or_else(|| panic!("job {id} is not on the agent\n{}", agent.log()))
}

/// Whether any job of the agent holds `pid`.
fn managed(agent: &TestAgent, pid: u32) -> bool {
    jobs(agent).iter().any(|j| j.pids.contains(&pid))
}

#[test]
fn a_user_joins_only_its_own_processes_into_its_own_job() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    // The socket's directory must be reachable for the users.
    std::fs::set_permissions(agent.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let user_socket = user_socket_path(&agent.socket);
    let mode = std::fs::metadata(&user_socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o666, "the user socket takes any user");

    let mut procs = Groups::default();
    // Root attaches a tree of the user's: the job is the user's on this node.
    let first = procs.sleeper(USER);
    let id = match agent.call(Request::Attach {
        job_id: None,
        name: "users".into(),
        target: AttachTarget::PidTree(first),
        sched: None,
        move_to_node: false,
        class: cosched_proto::wire::JobClass::BestEffort,
    }) {
        Ok(Reply::Attached { job_id, .. }) => job_id,
        other => panic!("attach: {other:?}\n{}", agent.log()),
    };

    // Own process joined: `cosched join` joins itself, then execs.
    let mut join = as_user(USER);
    join.arg(cosched_integration_tests::bin("cosched"))
        .env("COSCHED_AGENT_SOCKET", &agent.socket)
        .args(["join", "--job", &id.to_string(), "--", "sleep", "600"]);
    let joined = procs.spawn(join);
    wait_until(
        "the user's own process joined",
        Duration::from_secs(10),
        || job(&agent, id).pids.contains(&joined),
    );
    // And one more by pid.
    let second = procs.sleeper(USER);
    let out = cosched_as(
        USER,
        &agent,
        &[
            "join",
            "--job",
            &id.to_string(),
            "--pid",
            &second.to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(job(&agent, id).pids.contains(&second));

    // Refused, each with its reason, nothing changed.
    let others = procs.sleeper(OTHER);
    let roots = procs.sleeper(0);
    for (pid, why) in [
        (others, "not to you (uid 65534)"),
        (roots, "not to you (uid 65534)"),
        (1, "init"),
        (4_000_000, "no such process"),
        (agent.pid(), "this agent"),
    ] {
        let out = cosched_as(
            USER,
            &agent,
            &["join", "--job", &id.to_string(), "--pid", &pid.to_string()],
        );
        assert!(!out.status.success(), "pid {pid} joined");
        assert!(stderr(&out).contains(why), "pid {pid}: {}", stderr(&out));
        if pid != 1 && pid != 4_000_000 {
            assert!(
                !managed(&agent, pid),
                "pid {pid} is managed after a refusal"
            );
        }
    }
    // Another user may not join even its own process into this user's job.
    let out = cosched_as(
        OTHER,
        &agent,
        &[
            "join",
            "--job",
            &id.to_string(),
            "--pid",
            &others.to_string(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("belongs to user 65534"),
        "{}",
        stderr(&out)
    );
    assert!(!managed(&agent, others));
    // Nor hand this user's process back.
    let out = cosched_as(
        OTHER,
        &agent,
        &["node", "leave", "--pid", &second.to_string()],
    );
    assert!(!out.status.success());
    assert!(job(&agent, id).pids.contains(&second));

    // Root-only ops on the user socket are refused and change nothing.
    for line in [
        format!(r#"{{"op":"release","job_id":{id}}}"#),
        format!(r#"{{"op":"cancel","job_id":{id}}}"#),
        r#"{"op":"reload"}"#.to_string(),
        format!(r#"{{"op":"attach","name":"x","target":{{"pid-tree":{others}}}}}"#),
    ] {
        let reply = raw_as(USER, &agent, &line);
        assert!(
            reply.contains("not allowed on the user socket"),
            "{line}: {reply}"
        );
    }
    // And the control socket stays closed to users.
    let out = cosched_as(USER, &agent, &["node", "release", &id.to_string()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).to_lowercase().contains("permission denied"),
        "{}",
        stderr(&out)
    );
    let still = job(&agent, id);
    assert_eq!(still.state, cosched_proto::control::JobState::Running);
    assert!(still.pids.contains(&first) && still.pids.contains(&joined));
    assert!(!managed(&agent, others) && !managed(&agent, roots));

    // The user hands its own process back; the job keeps the rest.
    let out = cosched_as(
        USER,
        &agent,
        &["node", "leave", "--pid", &second.to_string()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!managed(&agent, second));
    assert!(job(&agent, id).pids.contains(&joined));
}
