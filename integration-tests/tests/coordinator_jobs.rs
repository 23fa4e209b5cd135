//! Jobs through the coordinator on a real two-node cluster: submit → launch
//! on both agents → run → complete; cancel; FCFS queueing; clear CLI errors;
//! a program that cannot start is refused at submit.
use std::time::Duration;

use cosched_integration_tests::{
    coord::{CoordOpts, TestCluster, coord_bin, state},
    proc::sched_of,
    require_root,
};
use cosched_proto::control::{JobState, Reply, Request};

#[test]
fn submitted_job_runs_on_both_nodes_to_completion_and_leaves_the_matrix() {
    require_root();
    let cluster = TestCluster::start(61, CoordOpts::default(), "");
    let coordinator = &cluster.coordinator;
    // Its event loop (the main thread) runs above the jobs' boosts, so it
    // announces switches on time on a node with boosted jobs.
    let pid = coordinator.child.as_ref().expect("coordinator runs").id();
    let sched = sched_of(pid).expect("coordinator's scheduling attributes");
    assert_eq!((sched.policy, sched.priority), (libc::SCHED_FIFO, 40));
    let id = coordinator.submit_synth("ring", 2, &["--duration", "0.8"]);
    let running = coordinator.job(id);
    assert_eq!(state(&running), "running", "{running:#}");
    assert_eq!(running["nodes"], serde_json::json!(["n0", "n1"]));
    let done = coordinator.wait_job(id, Duration::from_secs(15), |job| state(job) != "running");
    assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    for rank in done["ranks"].as_array().unwrap() {
        assert_eq!(rank["state"], "exited (code 0)", "{done:#}");
    }
    // Each agent ran its rank (the agents' own view, through their sockets).
    for (index, agent) in cluster.agents.iter().enumerate() {
        let Ok(Reply::Jobs { jobs }) = agent.call(Request::Jobs) else {
            panic!("agent {index} jobs");
        };
        let rank = jobs.iter().find(|job| job.job_id == id).expect("rank ran");
        assert_eq!(rank.rank as usize, index);
        assert!(rank.stats.cpu_seconds > 0.1, "{rank:?}");
    }
    let matrix = coordinator.call(&["matrix"]);
    let cells = &matrix["matrix"]["matrix"]["cells"];
    assert!(
        cells
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap())
            .all(serde_json::Value::is_null),
        "matrix still holds cells: {matrix:#}"
    );
}

#[test]
fn cancel_kills_the_ranks_and_starts_the_queued_job() {
    require_root();
    let opts = CoordOpts {
        policy: "fcfs",
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start(62, opts, "");
    let coordinator = &cluster.coordinator;
    let long = coordinator.submit_synth("long", 2, &["--duration", "60"]);
    let queued = coordinator.submit_synth("next", 2, &["--duration", "0.5"]);
    assert_eq!(state(&coordinator.job(queued)), "queued");
    // Wait until both ranks run, then cancel.
    coordinator.wait_job(long, Duration::from_secs(10), |job| {
        job["ranks"]
            .as_array()
            .is_some_and(|ranks| ranks.iter().all(|rank| rank["state"] == "launched"))
    });
    std::thread::sleep(Duration::from_millis(300));
    let cancelled = coordinator.call(&["cancel", &long.to_string()]);
    assert_eq!(state(&cancelled["cancelled"]["job"]), "cancelled");
    for agent in &cluster.agents {
        let info = agent.wait(long, Duration::from_secs(10));
        assert_eq!(
            info.state,
            JobState::Exited {
                code: None,
                signal: Some(9)
            },
            "{info:?}"
        );
    }
    let next = coordinator.wait_job(queued, Duration::from_secs(15), |job| {
        state(job) == "completed" || state(job) == "failed"
    });
    assert_eq!(state(&next), "completed", "{next:#}\n{}", cluster.logs());
    let error = coordinator.cli(&["cancel", &long.to_string()]).unwrap_err();
    assert!(error.contains("already ended"), "{error}");
}

#[test]
fn cli_errors_name_the_problem() {
    require_root();
    let cluster = TestCluster::start(63, CoordOpts::default(), "");
    let coordinator = &cluster.coordinator;
    let error = coordinator.cli(&["cancel", "999"]).unwrap_err();
    assert!(error.contains("unknown job 999"), "{error}");
    let error = coordinator
        .cli(&["submit", "--name", "big", "--nodes", "3", "--", "/bin/true"])
        .unwrap_err();
    assert!(error.contains("3 nodes"), "{error}");
    let error = coordinator
        .cli(&[
            "submit",
            "--name",
            "x",
            "--class",
            "gold",
            "--",
            "/bin/true",
        ])
        .unwrap_err();
    assert!(error.contains("rt:<period_ns>"), "{error}");
    let error = coordinator.cli(&["policy", "set", "lottery"]).unwrap_err();
    assert!(error.contains("lottery"), "{error}");
    let output = std::process::Command::new(coord_bin("cosched"))
        .args(["--socket", "/nonexistent/coordinator.sock", "jobs"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach the coordinator"), "{stderr}");
}

#[test]
fn submit_of_a_program_that_cannot_start_fails_naming_the_node_and_nothing_runs() {
    require_root();
    let cluster = TestCluster::start(71, CoordOpts::default(), "");
    let coordinator = &cluster.coordinator;
    let submit = |command: &[&str], extra: &[&str]| {
        let mut args = vec![
            "--socket".to_string(),
            coordinator.socket.display().to_string(),
            "submit".into(),
            "--name".into(),
            "bad".into(),
            "--nodes".into(),
            "2".into(),
        ];
        args.extend(extra.iter().map(|arg| arg.to_string()));
        args.push("--".into());
        args.extend(command.iter().map(|arg| arg.to_string()));
        std::process::Command::new(coord_bin("cosched"))
            .args(&args)
            .output()
            .unwrap()
    };
    let refused = |program: &str, extra: &[&str]| {
        let output = submit(&[program], extra);
        assert!(
            !output.status.success(),
            "{program} was accepted: {output:?}"
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };

    let error = refused("/nonexistent/program", &[]);
    assert!(
        error.contains(
            "cannot start \"/nonexistent/program\" on n0: /nonexistent/program: no such file; \
             on n1: /nonexistent/program: no such file"
        ),
        "{error}"
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.sh");
    std::fs::write(&data, "#!/bin/sh\n").unwrap();
    let error = refused(data.to_str().unwrap(), &[]);
    assert!(error.contains("not executable"), "{error}");
    let error = refused("cosched-no-such-program", &[]);
    assert!(
        error.contains("on n0: cosched-no-such-program: not found in PATH"),
        "{error}"
    );
    // The job's own PATH is where a bare name is looked up.
    let synth_dir = cosched_integration_tests::bin("cosched-synth");
    let synth_dir = synth_dir.parent().unwrap().display().to_string();
    let error = refused("cosched-synth", &["--env", "PATH=/nonexistent"]);
    assert!(error.contains("not found in PATH /nonexistent"), "{error}");
    // Nothing was admitted, nothing ran.
    let jobs = coordinator.call(&["jobs", "--all"]);
    assert_eq!(jobs["jobs"]["jobs"], serde_json::json!([]), "{jobs:#}");
    for agent in &cluster.agents {
        let Ok(Reply::Jobs { jobs }) = agent.call(Request::Jobs) else {
            panic!("agent jobs");
        };
        assert!(jobs.is_empty(), "{jobs:?}");
    }

    // A silent agent (stopped) refuses the job by name too.
    cluster.agents[1].signal(libc::SIGSTOP);
    let error = refused("/bin/true", &[]);
    cluster.agents[1].signal(libc::SIGCONT);
    assert!(
        error.contains("on n1: its agent did not answer")
            || error.contains("on n1: its agent disconnected before answering"),
        "{error}"
    );
    cluster.wait_connected(Duration::from_secs(10));

    let path = format!("PATH={synth_dir}");
    let output = submit(&["cosched-synth", "--duration", "0.5"], &["--env", &path]);
    assert!(output.status.success(), "{output:?}");
    let reply = coordinator.call(&["jobs"]);
    let id = reply["jobs"]["jobs"][0]["id"].as_u64().unwrap() as u32;
    assert_eq!(id, 1, "the refused submissions used no job id");
    let done = coordinator.wait_job(id, Duration::from_secs(15), |job| state(job) != "running");
    assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
}
