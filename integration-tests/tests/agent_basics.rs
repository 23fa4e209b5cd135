//! The agent on the real kernel: programs load and attach, a bad config
//! reload is rolled back (SIGHUP, file change, control request alike).
use std::time::Duration;

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    require_root,
};
use cosched_proto::control::{Reply, Request};

#[test]
fn agent_loads_and_attaches_every_program() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    // Context switches happen all the time: sched_switch must be running.
    std::thread::sleep(Duration::from_millis(400));
    let m = agent.metrics();
    for prog in [
        "sched_switch",
        "sock_recv_length",
        "sk_data_ready",
        "sched_process_exit",
    ] {
        assert!(
            m.contains(&format!(
                "cosched_ebpf_program_runs_total{{program=\"{prog}\"}}"
            )),
            "no cost metric for {prog}:\n{m}"
        );
    }
    assert!(
        cosched_integration_tests::agent::metric_sum(
            &m,
            "cosched_ebpf_program_runs_total",
            &["sched_switch"]
        ) > 0.0,
        "sched_switch never ran"
    );
    match agent.call(Request::Status).unwrap() {
        Reply::Status { status } => assert_eq!(status.policy, "local"),
        r => panic!("{r:?}"),
    }
}

fn last_reload(agent: &TestAgent) -> Option<(bool, String)> {
    match agent.call(Request::Status).unwrap() {
        Reply::Status { status } => status.last_reload.map(|o| (o.accepted, o.message)),
        r => panic!("{r:?}"),
    }
}

fn wait_for_reload_count(agent: &TestAgent, outcome: &str, n: f64) {
    let t0 = std::time::Instant::now();
    while agent.metric("cosched_config_reloads_total", &[outcome]) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no {outcome} reload #{n} seen:\n{}",
            agent.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn bad_config_reload_is_rolled_back_and_good_one_applied() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let good = std::fs::read_to_string(&agent.config_path).unwrap();

    // 1. A broken file, announced by SIGHUP (the file watcher fires too).
    std::fs::write(&agent.config_path, format!("{good}\nno_such_key = 1\n")).unwrap();
    agent.signal(libc::SIGHUP);
    wait_for_reload_count(&agent, "rejected", 1.0);
    let (accepted, msg) = last_reload(&agent).unwrap();
    assert!(!accepted && msg.contains("no_such_key"), "{msg}");
    assert_eq!(agent.metric("cosched_config_last_reload_ok", &[]), 0.0);

    // 2. A valid file that changes an immutable field: also rejected.
    std::fs::write(
        &agent.config_path,
        good.replace("node = \"t\"", "node = \"other\""),
    )
    .unwrap();
    match agent.call(Request::Reload).unwrap() {
        Reply::Reloaded { outcome } => {
            assert!(!outcome.accepted && outcome.message.contains("node"))
        }
        r => panic!("{r:?}"),
    }
    match agent.call(Request::Status).unwrap() {
        Reply::Status { status } => assert_eq!(status.node, "t", "old config kept"),
        r => panic!("{r:?}"),
    }

    // 3. A good change is applied (file watcher alone, no signal).
    std::fs::write(
        &agent.config_path,
        format!("{good}[ebpf]\npoll_interval_ms = 20\n"),
    )
    .unwrap();
    wait_for_reload_count(&agent, "accepted", 1.0);
    assert_eq!(agent.metric("cosched_config_last_reload_ok", &[]), 1.0);
    let (accepted, _) = last_reload(&agent).unwrap();
    assert!(accepted);
}

/// Scheduling policy and priority of a thread (the agent's event loop is its
/// main thread).
fn policy_of(pid: u32) -> (i32, i32) {
    let s = cosched_integration_tests::proc::sched_of(pid).unwrap();
    (s.policy, s.priority)
}

#[test]
fn switching_policy_by_reload_changes_the_agents_own_priority() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    assert_eq!(
        policy_of(agent.pid()),
        (libc::SCHED_OTHER, 0),
        "plain Linux: the agent is an ordinary task"
    );
    let good = std::fs::read_to_string(&agent.config_path).unwrap();
    std::fs::write(
        &agent.config_path,
        good.replace("node = \"t\"", "node = \"t\"\npolicy = \"dcs\""),
    )
    .unwrap();
    match agent.call(Request::Reload).unwrap() {
        Reply::Reloaded { outcome } => assert!(outcome.accepted, "{}", outcome.message),
        r => panic!("{r:?}"),
    }
    assert_eq!(
        policy_of(agent.pid()),
        (libc::SCHED_FIFO, 50),
        "a policy that acts runs the agent above its boosts"
    );
    match agent.call(Request::Status).unwrap() {
        Reply::Status { status } => assert_eq!(status.policy, "dcs"),
        r => panic!("{r:?}"),
    }
    std::fs::write(&agent.config_path, &good).unwrap();
    assert!(matches!(
        agent.call(Request::Reload).unwrap(),
        Reply::Reloaded { .. }
    ));
    assert_eq!(policy_of(agent.pid()), (libc::SCHED_OTHER, 0));
}

#[test]
fn malformed_control_requests_get_clear_errors_and_the_agent_keeps_serving() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    use std::io::{BufRead as _, Write as _};
    let mut s = std::os::unix::net::UnixStream::connect(&agent.socket).unwrap();
    s.write_all(b"{\"op\":\"explode\"}\nnot json at all\n")
        .unwrap();
    let mut r = std::io::BufReader::new(s.try_clone().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("malformed request"), "{line}");
    }
    for (req, needle) in [
        (
            Request::Wait {
                job_id: 77,
                timeout_ms: 10,
            },
            "unknown job 77",
        ),
        (Request::Cancel { job_id: 77 }, "unknown job 77"),
        (
            Request::Adopt {
                job_id: 3,
                name: "x".into(),
                pids: vec![999_999_999],
                sched: None,
                move_to_node: false,
                class: cosched_proto::wire::JobClass::BestEffort,
            },
            "no such process",
        ),
    ] {
        let e = agent.call(req).unwrap_err();
        assert!(e.contains(needle), "{e}");
    }
    assert!(matches!(
        agent.call(Request::Jobs).unwrap(),
        Reply::Jobs { .. }
    ));
}

/// Editors save by writing a new file and renaming it over the old one: the
/// config watcher reloads on that too (and not on the temporary file).
#[test]
fn config_replaced_by_rename_is_reloaded() {
    require_root();
    let agent = TestAgent::start(AgentOpts::default());
    let good = std::fs::read_to_string(&agent.config_path).unwrap();
    let saved = agent.config_path.with_extension("toml.new");
    std::fs::write(&saved, format!("{good}[ebpf]\npoll_interval_ms = 20\n")).unwrap();
    std::fs::rename(&saved, &agent.config_path).unwrap();
    wait_for_reload_count(&agent, "accepted", 1.0);
    assert_eq!(
        agent.metric("cosched_config_reloads_total", &["rejected"]),
        0.0
    );
}
