//! Everything the agent changes on a task is undone: on SIGTERM, by the
//! guardian when the agent is SIGKILLed, and by the next agent when both died.
use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    proc::{Sched, Sleeper, sched_of, set_nice},
    require_root,
};
use cosched_proto::{
    control::{Reply, Request},
    job::{JobSpec, SchedRequest},
};

fn adopt(agent: &TestAgent, job_id: u32, pid: u32, sched: SchedRequest) {
    let r = agent.call(Request::Adopt {
        job_id,
        name: format!("j{job_id}"),
        pids: vec![pid],
        sched: Some(sched),
        move_to_node: false,
        class: cosched_proto::wire::JobClass::BestEffort,
    });
    assert!(
        matches!(r, Ok(Reply::Adopted { .. })),
        "{r:?}\n{}",
        agent.log()
    );
}

fn other(nice: i32) -> Sched {
    Sched {
        policy: libc::SCHED_OTHER,
        nice,
        priority: 0,
    }
}

#[test]
fn sigterm_restores_every_task_the_agent_changed() {
    require_root();
    let mut agent = TestAgent::start(AgentOpts::default());
    let (a, b, c) = (Sleeper::start(), Sleeper::start(), Sleeper::start());
    set_nice(c.pid(), 2);
    let orig = [
        (a.pid(), other(0)),
        (b.pid(), other(0)),
        (c.pid(), other(2)),
    ];
    adopt(&agent, 1, a.pid(), SchedRequest::Fifo { priority: 7 });
    adopt(&agent, 2, b.pid(), SchedRequest::Idle);
    adopt(&agent, 3, c.pid(), SchedRequest::Nice { nice: 10 });
    let launched = agent.launch(JobSpec {
        job_id: 4,
        name: "sleeper".into(),
        rank: 0,
        size: 1,
        command: "sleep".into(),
        args: vec!["600".into()],
        env: BTreeMap::new(),
        peers: vec![],
        cpus: vec![],
        sched: Some(SchedRequest::Rr { priority: 3 }),
        class: cosched_proto::wire::JobClass::BestEffort,
    });
    assert_eq!(
        sched_of(a.pid()).unwrap(),
        Sched {
            policy: libc::SCHED_FIFO,
            nice: 0,
            priority: 7
        }
    );
    assert_eq!(sched_of(b.pid()).unwrap().policy, libc::SCHED_IDLE);
    assert_eq!(sched_of(c.pid()).unwrap(), other(10));
    assert_eq!(sched_of(launched).unwrap().policy, libc::SCHED_RR);

    assert_eq!(
        agent.stop(),
        Some(0),
        "agent exits cleanly on SIGTERM:\n{}",
        agent.log()
    );
    for (pid, want) in orig {
        assert_eq!(
            sched_of(pid).unwrap(),
            want,
            "pid {pid} not restored:\n{}",
            agent.log()
        );
    }
    // The launched job keeps running, with the attributes it was started with.
    assert_eq!(sched_of(launched).unwrap(), other(0));
    unsafe { libc::kill(launched as i32, libc::SIGKILL) };
}

#[test]
fn sigkilled_agent_is_undone_by_its_guardian_within_a_second() {
    require_root();
    let mut agent = TestAgent::start(AgentOpts::default());
    let s = Sleeper::start();
    adopt(&agent, 1, s.pid(), SchedRequest::Fifo { priority: 9 });
    assert_eq!(sched_of(s.pid()).unwrap().policy, libc::SCHED_FIFO);
    agent.kill9();
    let t0 = Instant::now();
    while sched_of(s.pid()).unwrap() != other(0) {
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "task still changed 1 s after SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The guardian of the agent whose journal is in `dir`.
fn guardian_pid(dir: &std::path::Path) -> Option<u32> {
    let journal = dir.join("state/restore.json").display().to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("__guardian") && c.contains(&journal)
                })
                .unwrap_or(false)
        })
}

#[test]
fn restarted_agent_restores_tasks_a_dead_agent_left_changed() {
    require_root();
    let mut agent = TestAgent::start(AgentOpts::default());
    let s = Sleeper::start();
    adopt(&agent, 1, s.pid(), SchedRequest::Batch { nice: 5 });
    // Both the agent and its guardian die (e.g. the node's OOM killer).
    let g = guardian_pid(agent.dir.path()).expect("agent runs a guardian");
    unsafe { libc::kill(g as i32, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(100));
    agent.kill9();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        sched_of(s.pid()).unwrap().policy,
        libc::SCHED_BATCH,
        "nobody restored yet"
    );
    agent.spawn();
    assert_eq!(
        sched_of(s.pid()).unwrap(),
        other(0),
        "restart restores:\n{}",
        agent.log()
    );
    assert!(
        agent
            .log()
            .contains("restored tasks left changed by a previous agent")
    );
}

/// CPUs a process may run on (`Cpus_allowed_list` of /proc/<pid>/status).
fn allowed_cpus(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_process_moved_onto_the_node_is_refused_unless_asked_and_widened_back_on_exit() {
    require_root();
    assert!(
        cosched_integration_tests::proc::online_cpus() >= 2,
        "needs two CPUs: a one-CPU node and a process allowed on both"
    );
    let mut agent = TestAgent::start(AgentOpts {
        cpus: vec![0],
        ..AgentOpts::default()
    });
    let s = Sleeper::start();
    let before = allowed_cpus(s.pid());
    assert_ne!(before, "0", "the sleeper must start allowed beyond CPU 0");
    let adopt = |move_to_node| {
        agent.call(Request::Adopt {
            job_id: 1,
            name: "wide".into(),
            pids: vec![s.pid()],
            sched: None,
            move_to_node,
            class: cosched_proto::wire::JobClass::BestEffort,
        })
    };
    let refused = adopt(false);
    assert!(
        matches!(&refused, Err(e) if e.contains("outside this node's CPUs")),
        "{refused:?}"
    );
    assert_eq!(allowed_cpus(s.pid()), before, "a refusal changes nothing");
    let r = adopt(true);
    assert!(
        matches!(r, Ok(Reply::Adopted { .. })),
        "{r:?}\n{}",
        agent.log()
    );
    assert_eq!(allowed_cpus(s.pid()), "0", "narrowed to the node");
    assert_eq!(agent.stop(), Some(0));
    assert_eq!(
        allowed_cpus(s.pid()),
        before,
        "widened back when the agent exits"
    );
}
