//! Gang scheduling on a real two-node cluster: two 2-rank jobs share both
//! nodes in 50 ms slices; the agents' eBPF on-CPU accounting shows each job
//! running only in its own slots, each getting about half of each CPU, and
//! the coordinator measures how far apart the nodes switch.
use std::time::Duration;

use cosched_integration_tests::{
    coord::{CoordOpts, TestCluster, exclusive, state, wait_until},
    require_root,
    synth::fine_spin,
};

/// CPU seconds of `job` on an agent inside / outside its slots.
fn slot_cpu(agent: &cosched_integration_tests::agent::TestAgent, job: u32) -> (f64, f64) {
    let text = agent.metrics();
    let id = format!("job_id=\"{job}\"");
    let sum = |slot: &str| {
        cosched_integration_tests::agent::metric_sum(
            &text,
            "cosched_gang_job_cpu_seconds_total",
            &[&id, &format!("slot=\"{slot}\"")],
        )
    };
    (sum("in"), sum("out"))
}

#[test]
fn each_job_runs_only_in_its_own_slots_and_nodes_switch_together() {
    require_root();
    let _serial = exclusive();
    let cluster = TestCluster::gang_stopping(64);
    let coordinator = &cluster.coordinator;
    let args = fine_spin("udp", "3");
    let a = coordinator.submit_synth("a", 2, &args);
    let b = coordinator.submit_synth("b", 2, &args);
    wait_until("gang mode on both agents", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    });
    std::thread::sleep(Duration::from_millis(2000));
    for (index, agent) in cluster.agents.iter().enumerate() {
        let (a_in, a_out) = slot_cpu(agent, a);
        let (b_in, b_out) = slot_cpu(agent, b);
        let total = a_in + a_out + b_in + b_out;
        assert!(
            total > 1.0,
            "node {index}: jobs barely ran ({total} s)\n{}",
            cluster.logs()
        );
        // Only in their own slots...
        assert!(
            a_out + b_out < 0.03 * total,
            "node {index}: CPU outside own slots: a {a_out:.3}/{a_in:.3} s, b {b_out:.3}/{b_in:.3} s"
        );
        // ...and each gets about its slot share (half) of the CPU.
        let share = a_in / (a_in + b_in);
        assert!(
            (0.4..=0.6).contains(&share),
            "node {index}: job a got {:.0}% of the jobs' CPU",
            share * 100.0
        );
    }
    // Both jobs' utilisation was reported and predicted.
    for id in [a, b] {
        let job = coordinator.job(id);
        assert!(job["cpu_percent"].as_f64().is_some(), "{job:#}");
    }
    let status = coordinator.call(&["status"]);
    let skew = &status["status"]["status"]["skew"];
    let samples = skew["samples"].as_u64().unwrap();
    let p50 = skew["p50_s"].as_f64().unwrap();
    let p99 = skew["p99_s"].as_f64().unwrap();
    println!(
        "slice switch skew over {samples} slices: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        p50 * 1e6,
        p99 * 1e6,
        skew["max_s"].as_f64().unwrap() * 1e6
    );
    // Agents that follow a slice schedule (protocol 1.5) report one switch
    // per 100 ms of slices (`REPORT_PERIOD_NS`): every 2nd of these 50 ms
    // slices is measured.
    let slices = status["status"]["status"]["slices"].as_u64().unwrap();
    assert!(
        samples > 15 && samples * 2 + 4 >= slices,
        "{samples} skew samples over {slices} slices\n{status:#}"
    );
    assert!(p50 < 500e-6, "median skew {p50} s");
    assert!(
        coordinator.metric("cosched_slice_switch_skew_seconds_count", &[]) >= samples as f64,
        "the histogram counts every slice"
    );
    timeline_on_the_coordinator_clock_numbers_the_same_slices_on_both_nodes(&cluster);
    for id in [a, b] {
        let done = coordinator.wait_job(id, Duration::from_secs(15), |job| state(job) != "running");
        assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    }
}

/// `cosched timeline --coordinator-clock` on the running gang: both nodes'
/// recordings moved onto the coordinator's clock (on one machine the offset
/// is about 0), every slice change numbered, the same numbers on both nodes
/// at about the same instant.
fn timeline_on_the_coordinator_clock_numbers_the_same_slices_on_both_nodes(cluster: &TestCluster) {
    let sockets: Vec<String> = cluster
        .agents
        .iter()
        .map(|agent| agent.socket.display().to_string())
        .collect();
    let mut args = vec!["timeline", "--coordinator-clock", "--seconds", "0.5"];
    for socket in &sockets {
        args.extend(["--agent-socket", socket.as_str()]);
    }
    let nodes = cluster.coordinator.call(&args);
    let nodes = nodes.as_array().expect("one recording per node");
    assert_eq!(nodes.len(), 2, "{nodes:#?}");
    let mut numbered: Vec<std::collections::BTreeMap<(u64, u64), u64>> = Vec::new();
    for node in nodes {
        let clock = &node["clock"];
        assert_eq!(clock["reference"], "coordinator", "{clock:#}");
        // One machine, one CLOCK_MONOTONIC: the estimate is about 0.
        let offset = clock["offset_ns"].as_i64().unwrap();
        assert!(offset.abs() < 5_000_000, "offset {offset} ns");
        let slices = node["slices"].as_array().unwrap();
        assert!(slices.len() >= 5, "0.5 s of 50 ms slices: {slices:#?}");
        numbered.push(
            slices
                .iter()
                .filter_map(|s| {
                    let n = s.get("number")?;
                    Some((
                        (n["epoch"].as_u64()?, n["slice"].as_u64()?),
                        s["ts_ns"].as_u64()?,
                    ))
                })
                .collect(),
        );
    }
    let common: Vec<u64> = numbered[0]
        .iter()
        .filter_map(|(n, at)| Some(numbered[1].get(n)?.abs_diff(*at)))
        .collect();
    assert!(
        common.len() >= 5,
        "slice numbers both nodes recorded: {numbered:?}"
    );
    // The same slice started on both nodes within the switch skew, not a
    // slice (50 ms) apart.
    let mut gaps = common.clone();
    gaps.sort_unstable();
    assert!(gaps[gaps.len() / 2] < 10_000_000, "gaps {gaps:?} ns");
}

#[test]
fn paired_gang_explains_its_pairing_and_fcs_runs_slots() {
    require_root();
    let _serial = exclusive();
    let opts = CoordOpts {
        policy: "paired-gang",
        slice_ms: 20,
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start(65, opts, "stop_inactive = true");
    let coordinator = &cluster.coordinator;
    // Mostly blocked in I/O: light jobs that paired gang runs two at a time.
    let args = [
        "--recv",
        "block",
        "--compute-us",
        "50",
        "--io-us",
        "400",
        "--duration",
        "3",
    ];
    let a = coordinator.submit_synth("light-a", 2, &args);
    let b = coordinator.submit_synth("light-b", 2, &args);
    wait_until("a measured prediction", Duration::from_secs(5), || {
        let job = coordinator.job(a);
        job["prediction"]
            .as_str()
            .is_some_and(|text| text.contains("equation 1"))
            && job["pair"].as_str().is_some()
    });
    let job = coordinator.job(a);
    let predicted = job["predicted_percent"].as_f64().unwrap();
    assert!(predicted < 50.0, "an I/O-bound job is light: {job:#}");
    wait_until("the light rows paired", Duration::from_secs(5), || {
        coordinator.job(a)["pair"]
            .as_str()
            .is_some_and(|pair| pair.contains("paired with"))
    });
    // Switching to fcs at run time: agents learn it and keep slicing.
    coordinator.call(&["policy", "set", "fcs"]);
    let slices = |c: &cosched_integration_tests::coord::TestCoordinator| {
        c.call(&["status"])["status"]["status"]["slices"]
            .as_u64()
            .unwrap()
    };
    let before = slices(coordinator);
    std::thread::sleep(Duration::from_millis(300));
    assert!(slices(coordinator) > before);
    assert_eq!(
        coordinator.call(&["status"])["status"]["status"]["policy"],
        "fcs"
    );
    for id in [a, b] {
        let done = coordinator.wait_job(id, Duration::from_secs(15), |job| state(job) != "running");
        assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    }
}
