//! Best-effort and real-time jobs together on a real two-node cluster: a
//! coordinator under 2DCS-TDM or 1GS, an RT `cosched-synth` pipeline and a
//! BE job. The agents take the coordinator's class mode, switch its
//! divisions (and say when), count the RT ranks' frames and report them;
//! the coordinator shows them, refuses what admission cannot keep, and
//! refuses a policy switch that would drop the RT guarantee while allowing
//! one that keeps it.
use std::time::Duration;

use cosched_integration_tests::{
    agent::TestAgent,
    coord::{CoordOpts, TestCluster, TestCoordinator, exclusive, state, wait_until},
    netns::NodePair,
    require_root,
    synth::fine_spin,
};
use cosched_proto::control::{Reply, Request};
use serde_json::Value;

/// d = 10 ms, b = 2, τ = 1 ms: windows of 20 ms, 2 ms of work in each.
const RT_CLASS: &str = "rt:10000000:2:1000000";
/// 1GS: Γ = 6 × 10 ms = 60 ms, the cycle of 3 rows × 20 ms (1GS admission
/// refuses a window that is not a multiple of it).
const RT_1GS_CLASS: &str = "rt:10000000:6:1000000";

/// The synth's arguments for an RT job of `class` (`rt:<spec>`) that
/// blocks in its receives for `seconds`.
fn rt_args_of<'a>(class: &'a str, seconds: &'a str) -> [&'a str; 6] {
    let spec = class.strip_prefix("rt:").expect("an rt: class");
    ["--rt", spec, "--recv", "block", "--duration", seconds]
}

fn rt_args(seconds: &str) -> [&str; 6] {
    rt_args_of(RT_CLASS, seconds)
}

/// The agent's class mode as its status says it (`off`, `tdm 2:1 (...)`).
fn agent_classes(agent: &TestAgent) -> String {
    match agent.call(Request::Status) {
        Ok(Reply::Status { status }) => status.classes,
        other => panic!("status: {other:?}"),
    }
}

/// The job's frames as `cosched job` shows them: (nodes reporting,
/// frames, expected).
fn frames(job: &Value) -> (u64, u64, u64) {
    let f = &job["frames"];
    (
        f["nodes_reporting"].as_u64().unwrap_or(0),
        f["frames"].as_u64().unwrap_or(0),
        f["expected"].as_u64().unwrap_or(0),
    )
}

fn classes_status(coordinator: &TestCoordinator) -> Value {
    coordinator.call(&["status"])["status"]["status"].clone()
}

#[test]
fn under_2dcs_tdm_agents_switch_divisions_report_frames_and_admission_and_policy_switches_hold() {
    require_root();
    let _serial = exclusive();
    let opts = CoordOpts {
        policy: "2dcs-tdm",
        slice_ms: 50,
        extra: "[classes]\nratio = \"2:1\"\ntdm_period_ms = 150\n",
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start(73, opts, "frame_report_interval_ms = 100");
    let coordinator = &cluster.coordinator;
    let video = coordinator
        .try_submit_synth("video", 2, RT_CLASS, &rt_args("8"))
        .unwrap_or_else(|error| panic!("RT submit: {error}\n{}", cluster.logs()));
    let batch = coordinator
        .try_submit_synth("batch", 2, "be", &fine_spin("udp", "8"))
        .unwrap_or_else(|error| panic!("BE submit: {error}\n{}", cluster.logs()));

    // Both agents run 2DCS-TDM with the coordinator's ratio...
    wait_until("TDM on both agents", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent_classes(agent).starts_with("tdm 2:1"))
    });
    // ...and switch its divisions, telling the coordinator when.
    wait_until(
        "divisions applied on both agents",
        Duration::from_secs(5),
        || {
            cluster.agents.iter().all(|agent| {
                agent.metric("cosched_division_switches_total", &["outcome=\"applied\""]) >= 4.0
            })
        },
    );
    wait_until("the division skew measured", Duration::from_secs(5), || {
        classes_status(coordinator)["division_skew"]["samples"]
            .as_u64()
            .is_some_and(|samples| samples > 0)
    });
    assert!(coordinator.metric("cosched_division_switch_skew_seconds_count", &[]) > 0.0);
    let status = classes_status(coordinator);
    let class = status["classes"]["division"]["class"]
        .as_str()
        .unwrap_or("");
    assert!(class == "rt" || class == "be", "{status:#}");

    // The RT ranks' frames reach the coordinator from both nodes.
    wait_until("frames from both nodes", Duration::from_secs(5), || {
        let (nodes, done, expected) = frames(&coordinator.job(video));
        nodes == 2 && done > 0 && expected > 0
    });
    for agent in &cluster.agents {
        assert!(agent.metric("cosched_frame_reports_total", &[]) > 0.0);
    }
    assert!(
        coordinator.job(batch)["frames"].is_null(),
        "a BE job has no frames"
    );

    // A job beyond the admission bound (14 ms of work per 20 ms window,
    // more than the RT class's 2/3 on any node) is refused at submit.
    let error = coordinator
        .try_submit_synth("too-big", 1, "rt:10000000:2:7000000", &rt_args("1"))
        .expect_err("admission must refuse it");
    assert!(error.contains("admission control"), "{error}");

    // A policy without classes would drop the RT guarantee: refused,
    // naming the job; nothing changes.
    let error = coordinator
        .cli(&["policy", "set", "gang"])
        .expect_err("gang cannot keep real-time guarantees");
    assert!(
        error.contains("real-time") && error.contains(&format!("job {video}")),
        "{error}"
    );
    assert_eq!(classes_status(coordinator)["policy"], "2dcs-tdm");
    assert!(agent_classes(&cluster.agents[0]).starts_with("tdm"));

    // 2DCS-PS keeps it (the job passes admission where it runs): the
    // agents share their CPUs themselves and keep counting.
    let before = frames(&coordinator.job(video)).1;
    coordinator.call(&["policy", "set", "2dcs-ps"]);
    wait_until("PS on both agents", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent_classes(agent).starts_with("ps 2:1"))
    });
    wait_until(
        "frames keep coming under PS",
        Duration::from_secs(5),
        || frames(&coordinator.job(video)).1 > before,
    );

    for id in [video, batch] {
        let done = coordinator.wait_job(id, Duration::from_secs(30), |job| state(job) != "running");
        assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    }
    // The RT job's last counts stay with it.
    let job = coordinator.job(video);
    let (nodes, done, expected) = frames(&job);
    assert!(nodes == 2 && done > 0 && expected > 0, "{job:#}");
    let skew = &classes_status(coordinator)["division_skew"];
    println!(
        "2DCS-TDM then 2DCS-PS: division skew over {} divisions p50 {:.1} us, max {:.1} us; RT job: {done} frames, {expected} due, miss rate {:?} %",
        skew["samples"],
        skew["p50_s"].as_f64().unwrap_or(0.0) * 1e6,
        skew["max_s"].as_f64().unwrap_or(0.0) * 1e6,
        job["frames"]["miss_rate_percent"].as_f64(),
    );
}

#[test]
fn under_one_level_gang_rt_rows_run_as_gang_slices_without_a_node_class_mode() {
    require_root();
    let _serial = exclusive();
    let opts = CoordOpts {
        policy: "one-level-gang",
        slice_ms: 20,
        extra: "[classes]\nratio = \"2:1\"\n",
        ..CoordOpts::default()
    };
    // A node-local 2DCS-PS in the agents' config: 1GS holds it off.
    let cluster = TestCluster::start_with(
        74,
        opts,
        |_| "[classes]\nmode = \"ps\"\n".into(),
        "frame_report_interval_ms = 100",
    );
    let coordinator = &cluster.coordinator;
    let video = coordinator
        .try_submit_synth("video", 2, RT_1GS_CLASS, &rt_args_of(RT_1GS_CLASS, "4"))
        .unwrap_or_else(|error| panic!("RT submit: {error}\n{}", cluster.logs()));
    let batch = coordinator
        .try_submit_synth("batch", 2, "be", &fine_spin("udp", "4"))
        .unwrap_or_else(|error| panic!("BE submit: {error}\n{}", cluster.logs()));
    wait_until("gang slices on both agents", Duration::from_secs(5), || {
        cluster
            .agents
            .iter()
            .all(|agent| agent.metric("cosched_gang_mode", &[]) == 1.0)
    });
    for agent in &cluster.agents {
        assert_eq!(agent_classes(agent), "off", "{}", agent.log());
    }
    let job = coordinator.job(video);
    assert!(
        job["rows_held"]
            .as_array()
            .is_some_and(|rows| !rows.is_empty()),
        "{job:#}"
    );
    wait_until("frames from both nodes", Duration::from_secs(5), || {
        let (nodes, done, _) = frames(&coordinator.job(video));
        nodes == 2 && done > 0
    });
    for id in [video, batch] {
        let done = coordinator.wait_job(id, Duration::from_secs(30), |job| state(job) != "running");
        assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    }
}

#[test]
fn rt_specs_no_schedule_can_meet_are_refused_at_submit_with_the_reason() {
    require_root();
    let nodes = NodePair::new(75);
    let coordinator = TestCoordinator::start(
        &nodes,
        CoordOpts {
            policy: "2dcs-tdm",
            ..CoordOpts::default()
        },
    );
    for (class, reason) in [
        ("rt:0:2:1000000", "period must be positive"),
        (
            "rt:-10000000:2:1000000",
            "rt:<period_ns>:<frames>:<work_ns>",
        ),
        ("rt:10000000:0:1000000", "frames must be at least 1"),
        ("rt:10000000:2:20000000", "exceeds the period"),
        ("rt:10000000:2:0", "work per frame must be positive"),
        ("rt:10:2", "rt:<period_ns>:<frames>:<work_ns>"),
    ] {
        let error = coordinator
            .try_submit_synth("bad", 1, class, &rt_args("1"))
            .expect_err(class);
        assert!(error.contains(reason), "{class}: {error}");
    }
    let jobs = coordinator.call(&["jobs", "--all"]);
    assert_eq!(
        jobs["jobs"]["jobs"].as_array().map(Vec::len),
        Some(0),
        "nothing is kept: {jobs:#}"
    );
}

/// Both agents' fallback gauges and counters: (gauges, counters) summed.
fn fallback_metrics(cluster: &TestCluster) -> (f64, f64) {
    cluster
        .agents
        .iter()
        .fold((0.0, 0.0), |(gauge, total), agent| {
            (
                gauge + agent.metric("cosched_tdm_division_fallback", &[]),
                total + agent.metric("cosched_tdm_division_fallbacks_total", &[]),
            )
        })
}

#[test]
fn under_2dcs_tdm_a_silent_coordinator_hands_the_divisions_to_each_node_until_it_speaks_again() {
    require_root();
    let _serial = exclusive();
    let opts = CoordOpts {
        policy: "2dcs-tdm",
        slice_ms: 50,
        extra: "[classes]\nratio = \"2:1\"\ntdm_period_ms = 150\n",
        // The link must outlive the silence: only the divisions stop.
        heartbeat_timeout_ms: 20_000,
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start(83, opts, "frame_report_interval_ms = 100");
    let coordinator = &cluster.coordinator;
    let video = coordinator
        .try_submit_synth("video", 2, RT_CLASS, &rt_args("8"))
        .unwrap_or_else(|error| panic!("RT submit: {error}\n{}", cluster.logs()));
    wait_until(
        "the coordinator's divisions applied on both agents",
        Duration::from_secs(5),
        || {
            cluster.agents.iter().all(|agent| {
                agent_classes(agent).starts_with("tdm 2:1")
                    && agent.metric("cosched_division_switches_total", &["outcome=\"applied\""])
                        >= 4.0
            })
        },
    );
    assert_eq!(
        fallback_metrics(&cluster),
        (0.0, 0.0),
        "divisions arrive: no fallback"
    );

    // The coordinator stops (SIGSTOP: the connections stay, nothing comes).
    // After 3 Δ = 450 ms each node runs its own division clock.
    let pid = coordinator.child.as_ref().expect("running").id() as i32;
    // SAFETY: signals our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let silent = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(
            "both nodes on their own clocks",
            Duration::from_secs(5),
            || fallback_metrics(&cluster) == (2.0, 2.0),
        );
        // The local clocks still alternate the classes and count frames.
        let frames: Vec<f64> = cluster
            .agents
            .iter()
            .map(|agent| agent.metric("cosched_rt_frames_total", &[]))
            .collect();
        let mut seen = vec![[false; 2]; cluster.agents.len()];
        wait_until(
            "both classes run on the local clocks and frames are counted",
            Duration::from_secs(5),
            || {
                for (i, agent) in cluster.agents.iter().enumerate() {
                    for (c, class) in ["class=\"rt\"", "class=\"be\""].iter().enumerate() {
                        seen[i][c] |= agent.metric("cosched_class_running", &[class]) == 1.0;
                    }
                }
                cluster.agents.iter().enumerate().all(|(i, agent)| {
                    seen[i] == [true, true]
                        && agent.metric("cosched_rt_frames_total", &[]) > frames[i]
                })
            },
        );
        for agent in &cluster.agents {
            assert!(agent_classes(agent).starts_with("tdm 2:1"));
        }
    }));
    // SAFETY: as above; resumed even when a check failed.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    if let Err(panic) = silent {
        eprintln!("{}", cluster.logs());
        std::panic::resume_unwind(panic);
    }

    // The coordinator's next division ends the local clocks; the count of
    // fallbacks stays.
    wait_until(
        "both nodes back on the coordinator's divisions",
        Duration::from_secs(5),
        || fallback_metrics(&cluster) == (0.0, 2.0),
    );
    let done = coordinator.wait_job(video, Duration::from_secs(30), |job| {
        state(job) != "running"
    });
    assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
}

/// `rt.timeline` of the rank of job `job` that ran on `agent`, from its
/// report (the rank's stdout the agent keeps).
fn rank_timeline(agent: &TestAgent, job: u32) -> Option<Value> {
    let jobs = agent.dir.path().join("state/jobs");
    std::fs::read_dir(&jobs).ok()?.find_map(|entry| {
        let path = entry.ok()?.path();
        let name = path.file_name()?.to_str()?.to_owned();
        if !(name.starts_with(&format!("job-{job}-r")) && name.ends_with(".out")) {
            return None;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let report: Value = serde_json::from_str(text.lines().last()?).ok()?;
        Some(report["rt"]["timeline"].clone())
    })
}

#[test]
fn under_1gs_with_admission_an_rt_jobs_first_frame_waits_for_the_instant_its_agents_published() {
    require_root();
    let _serial = exclusive();
    let opts = CoordOpts {
        policy: "one-level-gang",
        slice_ms: 20,
        extra: "[classes]\nratio = \"2:1\"\nadmission = \"deterministic\"\n",
        ..CoordOpts::default()
    };
    let cluster = TestCluster::start_with(76, opts, |_| String::new(), "");
    let coordinator = &cluster.coordinator;
    let video = coordinator
        .try_submit_synth("video", 2, RT_1GS_CLASS, &rt_args_of(RT_1GS_CLASS, "2"))
        .unwrap_or_else(|error| panic!("RT submit: {error}\n{}", cluster.logs()));
    let done = coordinator.wait_job(video, Duration::from_secs(30), |job| {
        state(job) != "running"
    });
    assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    let mut gates = Vec::new();
    for agent in &cluster.agents {
        let timeline = rank_timeline(agent, video).unwrap_or_else(|| {
            panic!(
                "no rank report on {}\n{}",
                agent.dir.path().display(),
                agent.log()
            )
        });
        let at = |key: &str| timeline[key].as_u64().unwrap_or(0);
        let gate = at("gate_ns");
        assert!(
            gate > 0,
            "the rank's cosched_rt_init() waited for no first-frame instant: {timeline:#}\n{}",
            cluster.logs()
        );
        // Published after the rank had started and was ready (the
        // coordinator picks it once every node reported the job ready),
        // and nothing of the first frame ran before it.
        assert!(at("process_start_ns") < gate, "{timeline:#}");
        assert!(at("began_ns") >= gate, "{timeline:#}");
        assert!(at("first_frame_ns") >= gate, "{timeline:#}");
        gates.push(gate);
    }
    assert_eq!(gates.len(), 2);
}
