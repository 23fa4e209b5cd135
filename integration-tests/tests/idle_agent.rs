//! An agent with nothing to react to stays asleep: with no job it has
//! nothing to look at, and sleeping jobs give it only counters to read. The
//! issue's targets: with no job at most 10 wake-ups per second (and 0.2 % of
//! a CPU), with 60 sleeping jobs 0.5 % of a CPU.
//!
//! Wake-ups are what the kernel counts for the agent's threads: context
//! switches, voluntary (each one a sleep ended by a wake-up) and involuntary
//! (preempted while awake), which barely depend on the machine's load. The
//! CPU share is printed (`--nocapture`) and quoted in failures, not
//! asserted: on a shared machine it is a benchmark figure.
use std::time::Duration;

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::exclusive,
    proc::{CostOver, Sleeper},
    require_root,
};
use cosched_proto::control::{Reply, Request};

/// Wake-ups per second an agent with no job may make.
const NO_JOB_WAKEUPS_PER_S: f64 = 10.0;
/// With 60 sleeping jobs the issue bounds the CPU share (0.5 %), not the
/// wake-ups: a wake-up that reads the counters of 60 jobs costs about 0.2 ms
/// of CPU, so 0.5 % allows about 25 of them per second.
const SLEEPING_JOBS_WAKEUPS_PER_S: f64 = 25.0;
const SLEEPING_JOBS: u32 = 60;

/// How long the agent gets to finish starting (programs attached, first
/// stats pass) before it is measured, and how long it is measured.
const SETTLE: Duration = Duration::from_secs(1);
const WINDOW: Duration = Duration::from_secs(3);

fn agent_with_policy(policy: &str) -> TestAgent {
    TestAgent::start(AgentOpts {
        extra: &format!("policy = \"{policy}\"\n"),
        ..AgentOpts::default()
    })
}

/// Measures the agent's threads and checks their wake-ups against `bound`.
fn assert_wakeups_at_most(agent: &TestAgent, what: &str, bound: f64) {
    std::thread::sleep(SETTLE);
    let cost = CostOver::measure(agent.pid(), WINDOW);
    println!(
        "{what}: {:.1} context switches/s ({:.1} involuntary), {:.2} % of a CPU over {:.1} s; by thread: {:?}",
        cost.switches_per_s, cost.involuntary_per_s, cost.cpu_percent, cost.seconds, cost.by_thread
    );
    assert!(
        cost.switches_per_s <= bound,
        "{what}: the agent's threads woke {:.1} times/s (context switches over {:.1} s), \
         more than the {bound}/s an agent with nothing to react to may; \
         {:.2} % of a CPU; switches by thread: {:?}",
        cost.switches_per_s,
        cost.seconds,
        cost.cpu_percent,
        cost.by_thread
    );
}

fn no_job(policy: &str) {
    require_root();
    let _serial = exclusive();
    let agent = agent_with_policy(policy);
    assert_wakeups_at_most(
        &agent,
        &format!("{policy} agent, no job"),
        NO_JOB_WAKEUPS_PER_S,
    );
}

fn sleeping_jobs(policy: &str) {
    require_root();
    let _serial = exclusive();
    let agent = agent_with_policy(policy);
    let sleepers: Vec<Sleeper> = (0..SLEEPING_JOBS).map(|_| Sleeper::start()).collect();
    for (job_id, sleeper) in (1..).zip(&sleepers) {
        let reply = agent.call(Request::Adopt {
            job_id,
            name: format!("sleeper{job_id}"),
            pids: vec![sleeper.pid()],
            sched: None,
            move_to_node: false,
            class: cosched_proto::wire::JobClass::BestEffort,
        });
        assert!(
            matches!(reply, Ok(Reply::Adopted { tasks: 1, .. })),
            "adopting sleeper {job_id}: {reply:?}\n{}",
            agent.log()
        );
    }
    assert_wakeups_at_most(
        &agent,
        &format!("{policy} agent, {SLEEPING_JOBS} sleeping jobs"),
        SLEEPING_JOBS_WAKEUPS_PER_S,
    );
}

#[test]
fn idle_local_agent_with_no_job_wakes_at_most_10_times_per_second() {
    no_job("local");
}

#[test]
fn idle_dcs_agent_with_no_job_wakes_at_most_10_times_per_second() {
    no_job("dcs");
}

#[test]
fn local_agent_with_60_sleeping_jobs_wakes_at_most_25_times_per_second() {
    sleeping_jobs("local");
}

#[test]
fn dcs_agent_with_60_sleeping_jobs_wakes_at_most_25_times_per_second() {
    sleeping_jobs("dcs");
}
