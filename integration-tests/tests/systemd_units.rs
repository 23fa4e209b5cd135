//! The shipped systemd units (`configs/systemd/`): `systemd-analyze verify`
//! accepts them, their hardening does not slip, and each daemon does its job
//! with nothing but the capabilities its unit leaves it.
//!
//! There is no systemd to start the units under here (tests run in a
//! container), so the capability part runs each binary under `setpriv` with
//! the unit's `CapabilityBoundingSet=` and `NoNewPrivileges=yes`: the two
//! settings that decide what a root daemon may do to other tasks.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    bin,
    proc::{Sleeper, sched_of},
    require_root,
};
use cosched_proto::{
    control::{Reply, Request},
    job::SchedRequest,
    wire::JobClass,
};

const UNITS: [&str; 2] = ["cosched-agent.service", "cosched-coordinator.service"];

fn unit_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs/systemd")
        .join(name)
}

fn unit_text(name: &str) -> String {
    std::fs::read_to_string(unit_path(name)).unwrap()
}

fn systemd_analyze(args: &[&str]) -> std::process::Output {
    Command::new("systemd-analyze")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "systemd-analyze does not run ({e}): install systemd (Debian: apt install systemd)"
            )
        })
}

/// The units with `/usr/bin/cosched-*` pointing at the built binaries (verify
/// checks that every command exists and is executable).
fn units_in(dir: &Path) -> Vec<PathBuf> {
    UNITS
        .iter()
        .map(|name| {
            let mut text = unit_text(name);
            for binary in ["cosched-agent", "cosched-coordinator"] {
                text = text.replace(
                    &format!("/usr/bin/{binary}"),
                    &bin(binary).display().to_string(),
                );
            }
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

#[test]
fn systemd_analyze_verify_accepts_both_units() {
    let dir = tempfile::tempdir().unwrap();
    for unit in units_in(dir.path()) {
        let out = systemd_analyze(&["verify", unit.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Complaints about the unit come on stderr, prefixed by its name;
        // the host's own units (if any) are not ours to judge.
        let name = unit.file_name().unwrap().to_str().unwrap();
        let ours: Vec<&str> = stderr.lines().filter(|l| l.contains(name)).collect();
        assert!(
            out.status.success() && ours.is_empty(),
            "systemd-analyze verify {name}: {}\n{stderr}",
            out.status
        );
    }
}

/// systemd's own score of a unit's sandbox, 0 (locked down) to 10.
fn exposure(unit: &Path) -> f64 {
    let out = systemd_analyze(&["security", "--offline=true", unit.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no exposure level in:\n{stdout}"));
    line.split(':')
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unreadable exposure line: {line}"))
}

/// The agent must keep root's reach into other tasks and cannot sandbox the
/// jobs it launches (see the unit's comments); the coordinator needs
/// nothing but its sockets, its state file and SCHED_FIFO for itself.
#[test]
fn units_stay_hardened() {
    let dir = tempfile::tempdir().unwrap();
    let units = units_in(dir.path());
    let agent = exposure(&units[0]);
    let coordinator = exposure(&units[1]);
    assert!(agent <= 6.5, "agent unit exposure {agent} > 6.5");
    assert!(
        coordinator <= 2.5,
        "coordinator unit exposure {coordinator} > 2.5"
    );
}

/// `setpriv` arguments giving a process exactly the unit's bounding set.
fn setpriv_like(unit: &str) -> Vec<String> {
    let text = unit_text(unit);
    let caps: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .flat_map(|caps| caps.split_whitespace())
        .map(|cap| format!("+{}", cap.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert!(
        text.lines().any(|l| l == "NoNewPrivileges=yes"),
        "{unit}: NoNewPrivileges=yes expected"
    );
    let mut bounding = String::from("-all");
    for cap in &caps {
        bounding.push(',');
        bounding.push_str(cap);
    }
    vec![
        "setpriv".into(),
        // As root, exec gives the permitted set = the bounding set.
        format!("--bounding-set={bounding}"),
        "--no-new-privs".into(),
        "--".into(),
    ]
}

#[test]
fn agent_adopts_boosts_and_restores_with_only_its_units_capabilities() {
    require_root();
    let prefix = setpriv_like("cosched-agent.service");
    let prefix: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let mut agent = TestAgent::start_under(AgentOpts::default(), &prefix);
    let job = Sleeper::start();
    let before = sched_of(job.pid()).unwrap();
    match agent.call(Request::Adopt {
        job_id: 1,
        name: "unit".into(),
        pids: vec![job.pid()],
        sched: Some(SchedRequest::Fifo { priority: 3 }),
        move_to_node: false,
        class: JobClass::BestEffort,
    }) {
        Ok(Reply::Adopted { .. }) => {}
        other => panic!(
            "adopt under the unit's capabilities: {other:?}\n{}",
            agent.log()
        ),
    }
    let adopted = sched_of(job.pid()).unwrap();
    assert_eq!(
        (adopted.policy, adopted.priority),
        (libc::SCHED_FIFO, 3),
        "{}",
        agent.log()
    );
    // eBPF attached: sched_switch ran (its cost counter moves).
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.metric("cosched_ebpf_program_runs_total", &["sched_switch"]) > 0.0,
        "{}",
        agent.log()
    );
    agent.stop();
    assert_eq!(sched_of(job.pid()).unwrap(), before, "{}", agent.log());
}

#[test]
fn coordinator_reaches_its_realtime_priority_with_only_its_units_capabilities() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            "nodes = [\"n0\"]\nlisten = \"127.0.0.1:{}\"\nadmin_socket = \"{}\"\nmetrics_listen = \"127.0.0.1:{}\"\nsecret = \"{}\"\nstate_file = \"{}\"\npolicy = \"gang\"\nrealtime_priority = 10\n",
            cosched_integration_tests::free_port(),
            dir.path().join("admin.sock").display(),
            cosched_integration_tests::free_port(),
            cosched_integration_tests::coord::SECRET,
            dir.path().join("state.json").display(),
        ),
    )
    .unwrap();
    let mut argv = setpriv_like("cosched-coordinator.service");
    argv.push(bin("cosched-coordinator").display().to_string());
    let log = dir.path().join("coordinator.log");
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let pid = child.id();
    // The event loop (the main thread) switches itself to SCHED_FIFO at
    // start-up; without CAP_SYS_NICE it would log a warning and stay
    // time-shared.
    let mut sched = sched_of(pid).unwrap();
    while sched.policy != libc::SCHED_FIFO && started.elapsed() < Duration::from_secs(10) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "coordinator exited ({status}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
        sched = sched_of(pid).unwrap();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (sched.policy, sched.priority),
        (libc::SCHED_FIFO, 10),
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}
