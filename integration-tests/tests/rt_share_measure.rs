//! A measurement, run on request (ignored): the RT synth pipeline
//! `rt:10000000:2:1000000` on two nodes for 5 s under a coordinator's BE/RT
//! policy, with or without a spinning BE job beside it. Prints the RT job's
//! miss rate (`cosched job`), the BE job's CPU share, and how the
//! timer-woken RT rank (node 0) was realised over time: sampled every
//! 0.5 ms, the fraction of samples it was runnable while held at
//! SCHED_IDLE (waiting behind BE) or at SCHED_FIFO.
//!
//! ```sh
//! COSCHED_MEASURE_POLICY=2dcs-ps COSCHED_MEASURE_BE=1 \
//!   COSCHED_BIN_DIR=target/release cargo test --release \
//!   -p cosched-integration-tests --test rt_share_measure -- --ignored --nocapture
//! ```
use std::time::{Duration, Instant};

use cosched_integration_tests::{
    coord::{CoordOpts, TestCluster, exclusive, state, wait_until},
    proc::threads_of,
    require_root,
    synth::fine_spin,
};

/// (state letter, scheduling policy, utime + stime ticks) of a thread.
fn thread_stat(pid: u32, tid: u32) -> Option<(char, u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let fields: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    // After the comm: field 3 is index 0; utime 14, stime 15, policy 41.
    let letter = fields.first()?.chars().next()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let policy: u32 = fields.get(38)?.parse().ok()?;
    Some((letter, policy, utime + stime))
}

fn cpu_ticks(pids: &[u32]) -> u64 {
    pids.iter()
        .flat_map(|&pid| threads_of(pid).into_iter().map(move |tid| (pid, tid)))
        .filter_map(|(pid, tid)| thread_stat(pid, tid).map(|s| s.2))
        .sum()
}

#[test]
#[ignore = "a measurement: run on request"]
fn rt_miss_rate_beside_a_spinning_be_job() {
    require_root();
    let _serial = exclusive();
    let policy = std::env::var("COSCHED_MEASURE_POLICY").unwrap_or_else(|_| "2dcs-ps".into());
    let with_be = std::env::var("COSCHED_MEASURE_BE").map_or(true, |v| v != "0");
    let seconds = "5";
    let opts = CoordOpts {
        policy: &policy,
        slice_ms: 50,
        extra: "[classes]\nratio = \"2:1\"\ntdm_period_ms = 30\n",
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start(87, opts, "frame_report_interval_ms = 100");
    let coordinator = &cluster.coordinator;
    let batch = with_be.then(|| {
        coordinator
            .try_submit_synth("batch", 2, "be", &fine_spin("udp", "7"))
            .unwrap_or_else(|error| panic!("BE submit: {error}\n{}", cluster.logs()))
    });
    let video = coordinator
        .try_submit_synth(
            "video",
            2,
            "rt:10000000:2:1000000",
            &[
                "--rt",
                "10000000:2:1000000",
                "--recv",
                "block",
                "--duration",
                seconds,
            ],
        )
        .unwrap_or_else(|error| panic!("RT submit: {error}\n{}", cluster.logs()));
    wait_until("the RT ranks run", Duration::from_secs(5), || {
        coordinator.job(video)["state"] == "running"
    });
    std::thread::sleep(Duration::from_millis(300));
    let rt = cluster.rank_processes(video);
    let be_pids: Vec<u32> = batch
        .map(|id| {
            cluster
                .rank_processes(id)
                .iter()
                .flatten()
                .map(|p| p.pid)
                .collect()
        })
        .unwrap_or_default();
    let be_before = cpu_ticks(&be_pids);
    // Sample node 0's RT rank (woken by its timer).
    let pid = rt[0][0].pid;
    let started = Instant::now();
    let (mut samples, mut runnable_idle, mut runnable_fifo, mut runnable_other) = (0u64, 0, 0, 0);
    while started.elapsed() < Duration::from_secs(3) {
        for tid in threads_of(pid) {
            if let Some((letter, policy, _)) = thread_stat(pid, tid) {
                samples += 1;
                if letter == 'R' {
                    match policy {
                        5 => runnable_idle += 1,
                        1 | 2 | 6 => runnable_fifo += 1,
                        _ => runnable_other += 1,
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let be_ticks = cpu_ticks(&be_pids).saturating_sub(be_before);
    let hz = 100.0; // USER_HZ
    let be_share = be_ticks as f64 / hz / started.elapsed().as_secs_f64() / 2.0;
    let done = coordinator.wait_job(video, Duration::from_secs(30), |job| {
        state(job) != "running"
    });
    let f = &done["frames"];
    println!(
        "MEASURE policy={policy} be={with_be}: RT miss rate {:?} % ({} frames, {} due, {} missed); BE CPU share {:.3} of 2 CPUs; node-0 RT rank samples {samples}: runnable at SCHED_IDLE {:.1} %, at FIFO {:.1} %, at OTHER {:.1} %",
        f["miss_rate_percent"].as_f64(),
        f["frames"],
        f["expected"],
        f["missed"],
        be_share,
        100.0 * runnable_idle as f64 / samples.max(1) as f64,
        100.0 * runnable_fifo as f64 / samples.max(1) as f64,
        100.0 * runnable_other as f64 / samples.max(1) as f64,
    );
    if let Some(id) = batch {
        coordinator.wait_job(id, Duration::from_secs(30), |job| state(job) != "running");
    }
}
