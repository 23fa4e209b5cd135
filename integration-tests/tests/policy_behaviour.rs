//! The reacting policies acting on real tasks: the real agent with its eBPF
//! programs, on two nodes (network namespaces, one CPU each), changes the
//! scheduling of real benchmark ranks as its policy says, and puts it back.
//!
//! The tests watch the ranks from outside with the plain syscalls (never
//! through the agent's own code) and assert that a state was seen at least
//! once, never how often: the machine is shared and loaded.
use std::time::Duration;

use cosched_integration_tests::{
    coord::exclusive,
    pair::{Cluster, eventually, holds_throughout, job_info, watch},
    proc::{Sched, sched_of, state_of},
    require_root,
    synth::fine_spin,
};
use cosched_proto::control::JobStats;

/// The boost priority the DCS test configures (not the default 10, so a
/// boost seen is the configured one).
const DCS_BOOST_PRIO: i32 = 12;

#[test]
fn dcs_boosts_a_preempted_spinner_to_fifo_and_restores_it_when_the_agent_stops() {
    require_root();
    let _serial = exclusive();
    let config = format!("policy = \"dcs\"\n[dcs]\nboost_prio = {DCS_BOOST_PRIO}\n");
    let mut cluster = Cluster::start(51, [&config, &config]);
    // Two fine-grain spinning jobs share each node's one CPU: a rank is
    // often preempted (by the other job's rank) while it spins for its
    // peer's message, the case DCS boosts.
    let job = cluster.launch(1, &fine_spin("udp", "20"));
    let competitor = cluster.launch(2, &fine_spin("udp", "20"));

    let boosted = watch(Duration::from_secs(10), || {
        job.threads().into_iter().find_map(|tid| {
            let s = sched_of(tid).ok()?;
            (s.policy == libc::SCHED_FIFO).then_some((tid, s))
        })
    });
    let Some((tid, sched)) = boosted else {
        panic!(
            "no rank of the spinning job was seen at SCHED_FIFO within 10 s\n{}",
            cluster.logs()
        );
    };
    assert_eq!(
        sched,
        Sched {
            policy: libc::SCHED_FIFO,
            nice: 0,
            priority: DCS_BOOST_PRIO
        },
        "a DCS boost is SCHED_FIFO at dcs.boost_prio"
    );
    // The boost ends when the task waits again: the same task is seen back
    // at its original attributes while the job still runs.
    let back = watch(Duration::from_secs(5), || {
        (sched_of(tid).ok()? == ORIGINAL).then_some(())
    });
    assert!(
        back.is_some(),
        "task {tid} stayed boosted for 5 s\n{}",
        cluster.logs()
    );

    // The agents recorded what they did: boosts of the job, each with its
    // reaction latency (message arrival in the kernel -> boost applied).
    // Counters reach the control socket with the next stats pass.
    let job_stats = || -> Vec<JobStats> {
        cluster
            .agents
            .iter()
            .map(|agent| job_info(agent, job.job_id).stats)
            .collect()
    };
    let recorded = eventually(Duration::from_secs(5), || {
        let stats = job_stats();
        stats.iter().any(|s| s.boosts > 0) && stats.iter().any(|s| s.reactions > 0)
    });
    assert!(
        recorded,
        "the agents counted no boost with a reaction for job {}: {:?}\n{}",
        job.job_id,
        job_stats(),
        cluster.logs()
    );
    let metric = |name: &str, filters: &[&str]| -> f64 {
        cluster.agents.iter().map(|a| a.metric(name, filters)).sum()
    };
    assert!(
        metric("cosched_reaction_latency_seconds_count", &[]) > 0.0,
        "no reaction latency observed"
    );
    assert!(metric("cosched_actions_total", &["\"boost\""]) > 0.0);
    assert!(metric("cosched_policy_decisions_total", &["\"arrival-boost\""]) > 0.0);

    // Stop the agents while a boost is live (or just was): every thread
    // of both jobs is back at its original attributes once they have
    // exited, and stays there.
    let live = watch(Duration::from_secs(5), || {
        job.threads()
            .into_iter()
            .chain(competitor.threads())
            .any(|tid| sched_of(tid).is_ok_and(|s| s.policy == libc::SCHED_FIFO))
            .then_some(())
    });
    assert!(
        live.is_some(),
        "no boost seen a second time\n{}",
        cluster.logs()
    );
    for agent in &mut cluster.agents {
        assert_eq!(agent.stop(), Some(0), "agent exit code\n{}", agent.log());
    }
    let tasks: Vec<u32> = job
        .threads()
        .into_iter()
        .chain(competitor.threads())
        .collect();
    assert!(tasks.len() >= 4, "the jobs still run: {tasks:?}");
    let restored = holds_throughout(Duration::from_millis(500), || {
        tasks
            .iter()
            .all(|&tid| sched_of(tid).map_or(true, |sched| sched == ORIGINAL))
    });
    assert!(
        restored,
        "a task is not back at {ORIGINAL:?} after the agents stopped: {:?}\n{}",
        tasks
            .iter()
            .map(|&tid| (tid, sched_of(tid)))
            .collect::<Vec<_>>(),
        cluster.logs()
    );
}

/// What the benchmark ranks start with (the agent launches them unchanged).
const ORIGINAL: Sched = Sched {
    policy: libc::SCHED_OTHER,
    nice: 0,
    priority: 0,
};

/// How SB holds a task that spun past its threshold (`sb.block_by`).
#[derive(Clone, Copy, Debug)]
enum BlockBy {
    /// SCHED_IDLE.
    Demote,
    /// SIGSTOP.
    Stop,
}

impl BlockBy {
    fn config(self) -> &'static str {
        match self {
            BlockBy::Demote => "demote",
            BlockBy::Stop => "stop",
        }
    }

    /// Whether the real task is held the way this method holds it.
    fn holds(self, tid: u32) -> bool {
        match self {
            BlockBy::Demote => sched_of(tid).is_ok_and(|s| s.policy == libc::SCHED_IDLE),
            BlockBy::Stop => state_of(tid) == Some('T'),
        }
    }
}

/// SB on node n0 (plain Linux on n1): rank 0 of a fine-grain spinning job
/// spins for a message from rank 1, which the test stops (SIGSTOP) as if
/// another job held its CPU. Past its spin threshold rank 0 is held; when
/// rank 1 runs again its message releases rank 0; held again, rank 0 is
/// released when the agent stops.
fn spin_block_holds_a_long_spinner_until_its_message_arrives(block_by: BlockBy) {
    require_root();
    let _serial = exclusive();
    // A block bound far beyond the test's pauses: only the message (or the
    // agent's exit) may end a hold here.
    let sb = format!(
        "policy = \"sb\"\n[sb]\nblock_by = \"{}\"\nspin_threshold_us = 500\nmax_block_us = 20000000\n",
        block_by.config()
    );
    let subnet = match block_by {
        BlockBy::Demote => 52,
        BlockBy::Stop => 53,
    };
    let mut cluster = Cluster::start(subnet, [&sb, ""]);
    let job = cluster.launch(1, &fine_spin("udp", "30"));
    let (rank0, rank1) = (job.pids[0], job.pids[1]);
    let sb_agent = &cluster.agents[0];
    let running = eventually(Duration::from_secs(10), || {
        job_info(sb_agent, job.job_id).stats.messages_observed > 100
    });
    assert!(running, "the job did not start\n{}", cluster.logs());
    let decisions = |reason: &str| {
        sb_agent.metric(
            "cosched_policy_decisions_total",
            &[&format!("reason=\"{reason}\"")],
        )
    };
    let held = |timeout| watch(timeout, || block_by.holds(rank0).then_some(())).is_some();

    // 1. Rank 1 stops: rank 0 spins without its message, is held past its
    //    threshold, and stays held.
    signal(rank1, libc::SIGSTOP);
    assert!(
        held(Duration::from_secs(10)),
        "rank 0 was never held ({block_by:?}) while its peer was stopped: {:?}, state {:?}\n{}\n{}",
        sched_of(rank0),
        state_of(rank0),
        policy_counters(sb_agent),
        cluster.logs()
    );
    assert!(
        holds_throughout(Duration::from_millis(300), || block_by.holds(rank0)),
        "rank 0 was released with no message (its peer is stopped): {:?}, state {:?}\n{}\n{}",
        sched_of(rank0),
        state_of(rank0),
        policy_counters(sb_agent),
        cluster.logs()
    );
    assert!(decisions("spin-threshold-block") >= 1.0);
    // A message hands the held rank back: with its wake boost
    // (`wake-on-arrival`) or, when the policy refuses the boost, under the
    // refusal's reason (a demoted rank alone on its CPU keeps spinning
    // there, so it is handed back `no-boost-on-cpu`).
    let handed_back_by_message = || {
        [
            "wake-on-arrival",
            "no-boost-on-cpu",
            "no-boost-job-budget",
            "no-boost-node-budget",
            "no-boost-cpu-share",
        ]
        .into_iter()
        .map(decisions)
        .sum::<f64>()
    };
    let woken_before = handed_back_by_message();

    // 2. Rank 1 runs again: its message releases rank 0.
    signal(rank1, libc::SIGCONT);
    let released = watch(Duration::from_secs(5), || {
        (!block_by.holds(rank0)).then_some(())
    });
    assert!(
        released.is_some(),
        "rank 0 still held 5 s after its peer ran again\n{}\n{}",
        policy_counters(sb_agent),
        cluster.logs()
    );
    assert!(
        handed_back_by_message() > woken_before,
        "rank 0 was released, but not by its message\n{}",
        policy_counters(sb_agent)
    );
    assert_eq!(decisions("block-timeout"), 0.0, "no hold reached its bound");

    // 3. Held again, then the agent stops: rank 0 is released, back at its
    //    original attributes.
    signal(rank1, libc::SIGSTOP);
    assert!(
        held(Duration::from_secs(10)),
        "rank 0 not held a second time: {:?}, state {:?}\n{}\n{}",
        sched_of(rank0),
        state_of(rank0),
        policy_counters(sb_agent),
        cluster.logs()
    );
    assert_eq!(cluster.agents[0].stop(), Some(0), "{}", cluster.logs());
    assert!(
        !block_by.holds(rank0),
        "rank 0 still held after the agent stopped: {:?}, state {:?}",
        sched_of(rank0),
        state_of(rank0)
    );
    assert_eq!(sched_of(rank0).unwrap(), ORIGINAL);
    signal(rank1, libc::SIGCONT);
}

#[test]
fn sb_demotes_a_long_spinner_to_sched_idle_until_its_message_arrives() {
    spin_block_holds_a_long_spinner_until_its_message_arrives(BlockBy::Demote);
}

#[test]
fn sb_stops_a_long_spinner_until_its_message_arrives() {
    spin_block_holds_a_long_spinner_until_its_message_arrives(BlockBy::Stop);
}

/// The agent's decision, action, event and spin counters (its metrics
/// without the rest), for a failure message.
fn policy_counters(agent: &cosched_integration_tests::agent::TestAgent) -> String {
    agent
        .metrics()
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && [
                    "cosched_policy_decisions_total",
                    "cosched_actions_total",
                    "cosched_action_errors_total",
                    "cosched_agent_events_total",
                    "cosched_agent_late_policy_ticks_total",
                    "cosched_ebpf_drops_total",
                    "cosched_job_spin",
                    "cosched_job_messages_received_total",
                ]
                .iter()
                .any(|m| l.starts_with(m))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: plain syscall.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}
