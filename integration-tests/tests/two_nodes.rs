//! A two-node cluster on one machine (network namespaces joined by veth,
//! one CPU and one agent per node) observing a real benchmark job.
use std::time::Duration;

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    netns::NodePair,
    require_root,
    synth::{fine_spin, num, result, specs},
};
use cosched_proto::control::JobInfo;

struct Cluster {
    nodes: NodePair,
    agents: Vec<TestAgent>,
}

/// Two nodes on CPUs 0 and 1, or both on CPU 0 (`share_cpu`: each rank then
/// waits while its peer holds the CPU, so waits are long and spinning shows).
fn cluster(subnet: u8, share_cpu: bool) -> Cluster {
    let nodes = NodePair::new(subnet);
    let agents = (0..2)
        .map(|i| {
            TestAgent::start(AgentOpts {
                node: if i == 0 { "n0" } else { "n1" },
                cpus: vec![if share_cpu { 0 } else { i as u32 }],
                netns: Some((&nodes, i)),
                extra: "",
            })
        })
        .collect();
    Cluster { nodes, agents }
}

/// Runs one 2-rank job across the nodes and returns each rank's agent view
/// and benchmark result.
fn run_job(c: &Cluster, job_id: u32, args: &[&str]) -> Vec<(JobInfo, serde_json::Value)> {
    let addrs = [c.nodes.addr[0].as_str(), c.nodes.addr[1].as_str()];
    for (i, spec) in specs(
        job_id,
        &format!("job{job_id}"),
        &addrs,
        7000 + job_id as u16,
        args,
    )
    .into_iter()
    .enumerate()
    {
        c.agents[i].launch(spec);
    }
    (0..2)
        .map(|i| {
            let info = c.agents[i].wait(job_id, Duration::from_secs(60));
            assert_eq!(
                info.state,
                cosched_proto::control::JobState::Exited {
                    code: Some(0),
                    signal: None
                },
                "rank {i} failed: {:?}",
                info.stderr.as_ref().map(std::fs::read_to_string)
            );
            let r = result(&info);
            (info, r)
        })
        .collect()
}

fn assert_observed_within_1pct(ranks: &[(JobInfo, serde_json::Value)]) {
    for (info, r) in ranks {
        let sent_to_me = num(r, "messages_received");
        let observed = info.stats.messages_observed as f64;
        assert!(sent_to_me > 200.0, "too few messages to judge: {r}");
        let err = (observed - sent_to_me).abs() / sent_to_me;
        assert!(
            err <= 0.01,
            "rank {}: agent observed {observed} arrivals, benchmark received {sent_to_me} ({:.2}% off)",
            info.rank,
            err * 100.0
        );
    }
}

#[test]
fn udp_spinning_job_is_observed_within_one_percent_and_shows_spin_time() {
    require_root();
    let c = cluster(41, true);
    let ranks = run_job(&c, 1, &fine_spin("udp", "1.5"));
    assert_observed_within_1pct(&ranks);
    for (info, r) in &ranks {
        assert!(
            info.stats.empty_receives > 0,
            "spinning rank made no empty receives: {info:?}"
        );
        // Sharing one CPU, a rank mostly waits for a peer that is not
        // running: when it holds the CPU it spins nearly all the time (its
        // useful work is 20 µs per iteration), and it can only spin while it
        // waits. Spin time is on-CPU time, so it is bounded by both.
        let wait = num(r, "wait_s");
        assert!(wait > 0.2, "ranks sharing a CPU wait a lot: {r}");
        let (spin, cpu) = (info.stats.spin_seconds, info.stats.cpu_seconds);
        assert!(spin > 0.8 * cpu, "spin {spin} vs cpu {cpu}");
        assert!(
            spin <= wait * 1.01,
            "spin {spin} exceeds the benchmark's wait {wait}"
        );
        assert!(cpu > 0.3, "a spinning rank burns CPU: {info:?}");
    }
}

#[test]
fn tcp_spinning_job_is_observed_within_one_percent() {
    require_root();
    let c = cluster(42, false);
    let ranks = run_job(&c, 2, &fine_spin("tcp", "1.5"));
    assert_observed_within_1pct(&ranks);
}

#[test]
fn blocking_job_shows_almost_no_spin_time() {
    require_root();
    let c = cluster(43, false);
    let ranks = run_job(
        &c,
        3,
        &[
            "--proto",
            "udp",
            "--recv",
            "block",
            "--compute-us",
            "20",
            "--duration",
            "1.5",
        ],
    );
    assert_observed_within_1pct(&ranks);
    for (info, r) in &ranks {
        // Only the start handshake polls; the measured loop never finds an
        // empty socket.
        assert!(
            info.stats.empty_receives * 100 < info.stats.receives,
            "blocking receives return EAGAIN: {info:?}"
        );
        assert!(
            info.stats.spin_seconds < 0.001,
            "spin {}",
            info.stats.spin_seconds
        );
        assert!(num(r, "wait_s") > 0.0);
        assert!(
            info.stats.switches_voluntary > 100,
            "blocking rank sleeps in receive: {info:?}"
        );
    }
}
