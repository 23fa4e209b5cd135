//! Slurm on the namespace cluster (`cluster up --slurm`) with a gang
//! coordinator: two plain `srun` steps of a real MPI program, one of them
//! run by a user who is not root, become coscheduled jobs (attached by the
//! hook through the coordinator's sockets, their ranks joined on each node
//! through the agents'), the unprivileged one owned by its user, that gang
//! slices stop and run; a step run with `COSCHED_SLURM=off` is left alone;
//! a step whose `srun` is killed with SIGKILL (so SrunEpilog never runs)
//! still ends at the coordinator and frees its row. It needs root and Slurm (`cargo xtask setup --slurm`),
//! and would take down a cluster someone is using, so it runs only on
//! request: `cargo test -p xtask --test cluster_slurm -- --ignored`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;
use xtask::{
    cluster::{self, Cluster, CoordinatorOptions, UpOptions, coordinator},
    mpi::{Library, build},
    workspace::Workspace,
};

/// Takes the cluster down however the test ends.
struct Down;

impl Drop for Down {
    fn drop(&mut self) {
        let _ = cluster::down();
    }
}

/// The user (not root) who runs one of the steps; no passwd entry needed
/// beyond Debian's `nobody`, which Slurm looks up to start its tasks.
const USER: u32 = 65534;

struct Step<'a> {
    opt_out: bool,
    /// Run `srun` as this uid instead of root.
    user: Option<u32>,
    max_seconds: u32,
    program: &'a Path,
}

fn srun(conf: &Path, step: Step<'_>) -> Child {
    let mut command = match step.user {
        Some(uid) => {
            let mut command = Command::new("setpriv");
            command
                .arg(format!("--reuid={uid}"))
                .arg(format!("--regid={uid}"))
                .args(["--clear-groups", "--", "srun"]);
            command
        }
        None => Command::new("srun"),
    };
    command
        // Somewhere every user may be (Slurm runs the tasks in srun's cwd).
        .current_dir("/tmp")
        .env("SLURM_CONF", conf)
        .env("OMPI_MCA_btl", "tcp,self")
        .env("OMPI_MCA_btl_tcp_if_include", "10.201.0.0/24")
        .env("OMPI_MCA_oob_tcp_if_include", "10.201.0.0/24")
        .args(["-N2", "-n2", "--mpi=pmix"])
        .arg(step.program)
        .args(["--iters", "1000000000", "--max-seconds"])
        .arg(step.max_seconds.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if step.opt_out {
        command.env("COSCHED_SLURM", "off");
    }
    command.spawn().expect("starting srun")
}

/// The coordinator's jobs (`cosched --json jobs --all`): name -> job.
fn jobs(cluster: &Cluster) -> BTreeMap<String, Value> {
    let reply = coordinator::cli(cluster.coordinator.as_ref().unwrap(), &["jobs", "--all"])
        .expect("cosched jobs");
    reply["jobs"]["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|job| (job["name"].as_str().unwrap_or("").to_string(), job.clone()))
        .collect()
}

/// Pids of running processes whose command name is `comm`.
fn processes_named(comm: &str) -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

#[test]
#[ignore = "needs root and Slurm; brings a real cluster up and down"]
fn srun_steps_of_root_and_of_users_are_gang_sliced_unless_opted_out_and_end_when_srun_is_killed() {
    for tool in ["slurmctld", "slurmd", "srun", "munged"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|out| out.status.success());
        assert!(
            found,
            "{tool} is not installed: run `cargo xtask setup --slurm` first"
        );
    }
    let workspace = Workspace::locate().unwrap();
    assert!(
        Cluster::try_load().unwrap().is_none(),
        "a cluster is up already; this test would take it down"
    );
    let target = workspace.metadata().unwrap().target_dir.clone();
    let program = build::ensure(
        &build::source_dir(workspace.root()),
        Library::Openmpi,
        &build::out_dir(&target, Library::Openmpi),
    )
    .unwrap()
    .join("pingpong");
    // A copy every user may run (the build may live under a private home).
    let shared = tempfile::tempdir().unwrap();
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::copy(&program, shared.path().join("pingpong")).unwrap();
    let program = shared.path().join("pingpong");
    let step = |user: Option<u32>, opt_out: bool, max_seconds: u32| Step {
        opt_out,
        user,
        max_seconds,
        program: &program,
    };
    let options = UpOptions {
        nodes: 2,
        coordinator: Some(CoordinatorOptions {
            policy: "gang".into(),
            slice_ms: 10,
            stop_inactive: true,
            bin_dir: None,
            classes: None,
            paired_schedule_ahead: false,
        }),
        slurm: true,
        ..UpOptions::default()
    };
    let _down = Down;
    let cluster = cluster::up(&workspace, &options).unwrap();
    let conf = cluster.slurm.as_ref().unwrap().conf.clone();

    let steps = [
        srun(&conf, step(None, false, 3)),
        srun(&conf, step(Some(USER), false, 3)),
    ];
    // Both steps attached and running at the coordinator.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let running = jobs(&cluster)
            .values()
            .filter(|j| j["attached"] == true && j["state"] == "running")
            .count();
        if running == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "steps not attached: {:?}",
            jobs(&cluster)
        );
        thread::sleep(Duration::from_millis(50));
    }
    // Four ranks (two per step, one per node), each seen both stopped and
    // running while the gang slices alternate the two jobs.
    let deadline = Instant::now() + Duration::from_secs(10);
    let ranks = loop {
        let ranks = processes_named("pingpong");
        if ranks.len() == 4 {
            break ranks;
        }
        assert!(Instant::now() < deadline, "ranks: {ranks:?}");
        thread::sleep(Duration::from_millis(20));
    };
    let mut seen: BTreeMap<u32, BTreeSet<char>> = BTreeMap::new();
    let until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < until {
        for &pid in &ranks {
            if let Some(s) = state(pid) {
                seen.entry(pid).or_default().insert(s);
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    for pid in &ranks {
        let states = &seen[pid];
        assert!(
            states.contains(&'T') && (states.contains(&'R') || states.contains(&'S')),
            "rank {pid} was not both stopped and run by the slices: {states:?}"
        );
    }
    for step in steps {
        let out = step.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("MPIBENCH"),
            "step failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let attached: Vec<Value> = jobs(&cluster)
        .into_iter()
        .filter(|(name, _)| name.starts_with("slurm-"))
        .map(|(_, job)| job)
        .collect();
    assert_eq!(attached.len(), 2, "{attached:?}");
    for job in &attached {
        assert_eq!(job["state"], "completed", "{job}");
        assert_eq!(job["nodes"], serde_json::json!(["n0", "n1"]), "{job}");
    }
    let owners: BTreeSet<Option<u64>> = attached.iter().map(|j| j["owner"].as_u64()).collect();
    assert_eq!(
        owners,
        BTreeSet::from([None, Some(u64::from(USER))]),
        "root's step has no owner, the user's is theirs: {attached:?}"
    );

    // Opted out: it runs, and the coordinator never hears of it.
    let out = srun(&conf, step(None, true, 3)).wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        jobs(&cluster).len(),
        2,
        "an opted-out step was attached: {:?}",
        jobs(&cluster)
    );

    // srun killed (SIGKILL: no SrunEpilog): Slurm kills the tasks, the
    // agents report the ranks gone, and the job ends well before its
    // program would have (30 s), freeing its row.
    let mut killed = srun(&conf, step(None, false, 30));
    let deadline = Instant::now() + Duration::from_secs(20);
    let name = loop {
        let running = jobs(&cluster)
            .into_iter()
            .find(|(_, j)| j["attached"] == true && j["state"] == "running");
        if let Some((name, _)) = running {
            break name;
        }
        assert!(Instant::now() < deadline, "step not attached");
        thread::sleep(Duration::from_millis(50));
    };
    thread::sleep(Duration::from_secs(1));
    killed.kill().unwrap();
    let _ = killed.wait();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let job = jobs(&cluster).remove(&name).expect("listed with --all");
        if job["state"] != "running" {
            assert_eq!(job["row"], Value::Null, "its row is freed: {job}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the killed srun's job still runs 15 s later: {job}"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let matrix = coordinator::cli(cluster.coordinator.as_ref().unwrap(), &["matrix"]).unwrap();
    assert!(
        !matrix.to_string().contains(&name),
        "the killed step still holds a cell: {matrix}"
    );
}
