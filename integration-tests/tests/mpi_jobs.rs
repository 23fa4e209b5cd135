//! Real MPI jobs (OpenMPI and MPICH, each started by its own launcher
//! across two namespace nodes) handed to the node agents: the ranks are
//! found and adopted, the agents see their messages, the job runs to
//! completion, and nothing is left behind. What the tests assert is what
//! can be observed of an MPI job today; how MPI ranks wait (poll, epoll,
//! sched_yield, not empty receives) is not detected yet, so the assertions
//! on waits and DCS boosts are a separate test, ignored until the agents
//! detect those waits.
use std::time::Duration;

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::exclusive,
    mpi::{MpiCluster, pingpong},
    pair::watch,
    proc::sched_of,
    require_root,
};
use cosched_proto::control::{JobInfo, JobState, Reply, Request};
use xtask::mpi::{Library, output};

/// The agents' config: DCS, boosting to a priority that is not the default
/// (so a boost seen is this one).
const DCS: &str = "policy = \"dcs\"\n[dcs]\nboost_prio = 13\n";

fn agents(cluster: &MpiCluster) -> [TestAgent; 2] {
    let agent = |i: usize| {
        TestAgent::start(AgentOpts {
            node: ["n0", "n1"][i],
            cpus: vec![cluster.nodes.nodes[i].cpu as u32],
            netns: Some((&cluster.pair, i)),
            extra: DCS,
        })
    };
    [agent(0), agent(1)]
}

fn job_info(agent: &TestAgent, job_id: u32) -> Option<JobInfo> {
    match agent.call(Request::Jobs) {
        Ok(Reply::Jobs { jobs }) => jobs.into_iter().find(|j| j.job_id == job_id),
        _ => None,
    }
}

fn args(iters: u32) -> Vec<String> {
    ["--iters", &iters.to_string(), "--compute-us", "20"]
        .map(String::from)
        .to_vec()
}

/// A ping-pong of `lib` adopted under DCS: the ranks are adopted (one per
/// node, each the only task of its job there), the agents count its
/// messages as they arrive, the job ends normally, the agents record it as
/// exited, and the job's processes and cgroups are gone afterwards.
fn pingpong_adopted_under_dcs(lib: Library, subnet: u8) {
    require_root();
    let _serial = exclusive();
    let program = pingpong(lib);
    let cluster = MpiCluster::new(subnet);
    let agents = agents(&cluster);
    let job_id = 41;
    let (mut job, ranks) = cluster.launch_adopted(
        lib,
        "pp",
        &program,
        &args(20_000),
        [&agents[0], &agents[1]],
        job_id,
    );
    assert!(
        ranks.iter().all(|r| r.len() == 1),
        "one rank per node: {ranks:?}"
    );
    for (agent, node_ranks) in agents.iter().zip(&ranks) {
        let info = job_info(agent, job_id).expect("the agent lists the adopted job");
        assert_eq!(info.pids, *node_ranks, "{}", agent.log());
        for &rank in node_ranks {
            assert!(sched_of(rank).is_ok(), "rank {rank} runs");
        }
    }
    let finished = job
        .wait(Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{} job: {e:#}", lib.as_str()));
    let result = output::bench_result(&finished.stdout).expect("the job's result line");
    assert_eq!((result.ranks, result.iters), (2, 20_000));
    for agent in &agents {
        let info = agent.wait(job_id, Duration::from_secs(10));
        assert!(
            matches!(info.state, JobState::Exited { .. }),
            "{:?}\n{}",
            info.state,
            agent.log()
        );
        // Every iteration brings one message to each rank.
        assert!(
            info.stats.messages_observed >= 10_000,
            "messages seen by eBPF: {:?}",
            info.stats
        );
        assert!(info.stats.cpu_seconds > 0.0, "{:?}", info.stats);
    }
    drop(job);
    for node in &cluster.nodes.nodes {
        assert!(
            !node.job_cgroup("pp").exists(),
            "the job's cgroup on {} is gone",
            node.name
        );
    }
    for mut agent in agents {
        assert_eq!(agent.stop(), Some(0), "{}", agent.log());
    }
}

#[test]
fn openmpi_pingpong_is_adopted_and_observed_under_dcs() {
    pingpong_adopted_under_dcs(Library::Openmpi, 61);
}

#[test]
fn mpich_pingpong_is_adopted_and_observed_under_dcs() {
    pingpong_adopted_under_dcs(Library::Mpich, 62);
}

/// Two ping-pongs of `lib` share the nodes under DCS: the agents count the
/// ranks' waits (empty polls, yields or empty receives, in spin episodes) and DCS
/// boosts a rank (seen at SCHED_FIFO, and a reaction recorded).
fn pingpong_waits_are_counted_and_boosted(lib: Library, subnet: u8) {
    require_root();
    let _serial = exclusive();
    let program = pingpong(lib);
    let cluster = MpiCluster::new(subnet);
    let agents = agents(&cluster);
    let a = [&agents[0], &agents[1]];
    let (mut first, ranks) = cluster.launch_adopted(lib, "w1", &program, &args(10_000), a, 51);
    let (mut second, _) = cluster.launch_adopted(lib, "w2", &program, &args(10_000), a, 52);
    let boosted = watch(Duration::from_secs(20), || {
        ranks.iter().flatten().find_map(|&pid| {
            cosched_integration_tests::proc::threads_of(pid)
                .into_iter()
                .find(|&tid| sched_of(tid).is_ok_and(|s| s.policy == libc::SCHED_FIFO))
        })
    });
    first.wait(Duration::from_secs(300)).expect("first job");
    second.wait(Duration::from_secs(300)).expect("second job");
    assert!(
        boosted.is_some(),
        "no rank was seen at SCHED_FIFO\n{}",
        agents[0].log()
    );
    for agent in &agents {
        let info = agent.wait(51, Duration::from_secs(10));
        let stats = &info.stats;
        let waits = stats.empty_polls + stats.yields + stats.empty_receives;
        assert!(
            waits > 0 && stats.spin_episodes > 0,
            "no waits counted: {stats:?}"
        );
        assert!(stats.reactions > 0, "no reaction recorded: {stats:?}");
    }
}

#[test]
fn openmpi_waits_are_counted_and_dcs_boosts_a_waiting_rank() {
    pingpong_waits_are_counted_and_boosted(Library::Openmpi, 63);
}

#[test]
fn mpich_waits_are_counted_and_dcs_boosts_a_waiting_rank() {
    pingpong_waits_are_counted_and_boosted(Library::Mpich, 64);
}
