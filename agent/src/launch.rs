//! Launching a job's processes so that they are managed from their first
//! instruction.
//!
//! The agent starts `cosched-agent __gate -- <command> <args>`: the gate
//! process waits on an inherited pipe (fd 3) while the agent puts it in the
//! job's cgroup, tracks it in the eBPF map and applies the job's scheduling
//! request; the agent then writes one byte and the gate execs the job program
//! (same pid, attributes kept). If the agent dies before that, the gate sees
//! EOF and exits without running anything.
//!
//! The gate moves itself into the rank's cgroup (v2) before it waits: the
//! first migration into a cgroup after a quiet spell waits for an RCU grace
//! period (the cgroup threadgroup lock switching to its slow path), 7–30 ms
//! measured on the 2-core VM, and in the agent that wait stalled its event
//! loop — every slice switch due meanwhile was applied that much late, on
//! every node launching a rank (the late 1GS rows of docs/bench-rt.md). The
//! gate pays it instead, before the job program starts.
use std::{
    fs,
    io::{self, Read as _},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use cosched_proto::job::JobSpec;

/// The fd the gate reads its go byte from.
pub const GATE_FD: i32 = 3;

/// A launched gate process waiting for its go byte.
pub struct Gated {
    pub child: tokio::process::Child,
    pub pid: u32,
    go: Option<OwnedFd>,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl Gated {
    /// Lets the job program start.
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(fd) = self.go.take() {
            let mut f = fs::File::from(fd);
            io::Write::write_all(&mut f, b"g")?;
        }
        Ok(())
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn cpu_set(cpus: &[u32]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        set
    }
}

/// Where an agent with `state_dir` puts its ranks' stdout/stderr.
pub fn log_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("jobs")
}

/// The agent's identity in the processes it launches
/// ([`cosched_proto::job::env::LAUNCHER`]): its canonical `log_dir`.
pub fn launcher_id(log_dir: &Path) -> String {
    fs::canonicalize(log_dir)
        .unwrap_or_else(|_| log_dir.to_path_buf())
        .display()
        .to_string()
}

/// Spawns the gate for one rank of a job. `log_dir` receives its
/// stdout/stderr; `rt_dir`, for an RT job, is where its processes report
/// their frames (`COSCHED_RT_DIR`, over anything the spec's env says);
/// `cgroup`, created here, is the cgroup the gate moves into before it
/// waits for its go byte.
pub fn spawn_gated(
    spec: &JobSpec,
    node: &str,
    cpus: &[u32],
    log_dir: &Path,
    rt_dir: Option<&Path>,
    cgroup: Option<&Path>,
) -> anyhow::Result<Gated> {
    // The gate would fail the same way, but only into the rank's stderr file.
    crate::program::find(&spec.command, spec.env.get("PATH").map(String::as_str))
        .map_err(anyhow::Error::msg)?;
    fs::create_dir_all(log_dir).with_context(|| format!("creating {}", log_dir.display()))?;
    let base = format!("job-{}-r{}", spec.job_id, spec.rank);
    let stdout = log_dir.join(format!("{base}.out"));
    let stderr = log_dir.join(format!("{base}.err"));
    let out =
        fs::File::create(&stdout).with_context(|| format!("creating {}", stdout.display()))?;
    let err =
        fs::File::create(&stderr).with_context(|| format!("creating {}", stderr.display()))?;
    if let Some(dir) = cgroup {
        fs::create_dir_all(dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
    }
    let exe = fs::read_link("/proc/self/exe").context("finding the agent executable")?;
    let (rd, wr) = pipe()?;
    let rd_raw = rd.as_raw_fd();
    let set = cpu_set(if spec.cpus.is_empty() {
        cpus
    } else {
        &spec.cpus
    });

    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg("__gate");
    if let Some(dir) = cgroup {
        cmd.arg("--cgroup").arg(dir);
    }
    cmd.arg("--")
        .arg(&spec.command)
        .args(&spec.args)
        .env_clear()
        .env("PATH", crate::program::agent_search_path())
        .envs(spec.cosched_env(node))
        .envs(&spec.env)
        .env(cosched_proto::job::env::LAUNCHER, launcher_id(log_dir))
        .envs(rt_dir.map(|dir| (cosched_agent_common::rt_frames::DIR_ENV, dir)))
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(false);
    // SAFETY: only async-signal-safe calls (setsid, dup2, sched_setaffinity)
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Own session, as a resource manager starts a job step: a signal
            // to the agent's terminal does not reach the job, `kill(-pid)`
            // reaches all of it, and with autogroup scheduling the job is its
            // own CFS group (demotion lowers that group's weight too).
            libc::setsid();
            if libc::dup2(rd_raw, GATE_FD) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", spec.command))?;
    drop(rd);
    let pid = child.id().context("launched process has no pid")?;
    Ok(Gated {
        child,
        pid,
        go: Some(wr),
        stdout,
        stderr,
    })
}

/// The exit status of a gate that could not enter its cgroup (the job
/// program never ran; the reason is in the rank's stderr).
pub const GATE_CGROUP_FAILED: i32 = 125;

/// The gate side: move into `cgroup` (if any), wait for the go byte on fd
/// 3, then exec the job program.
pub fn run_gate(cgroup: Option<&Path>, command: &[String]) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;
    let Some((prog, args)) = command.split_first() else {
        bail!("__gate needs a command");
    };
    if let Some(dir) = cgroup
        && let Err(e) = fs::write(dir.join("cgroup.procs"), "0")
    {
        eprintln!(
            "cosched gate: cannot enter cgroup {}: {e}; not starting {prog}",
            dir.display()
        );
        std::process::exit(GATE_CGROUP_FAILED);
    }
    // SAFETY: fd 3 was set up by the agent for this process alone.
    let mut f = unsafe { fs::File::from_raw_fd(GATE_FD) };
    let mut b = [0u8; 1];
    if f.read(&mut b)? != 1 {
        bail!("agent went away before releasing the job; not starting {prog}");
    }
    drop(f);
    let e = std::process::Command::new(prog).args(args).exec();
    Err(anyhow::anyhow!("cannot execute {prog}: {e}"))
}

/// cgroup v2 directory of one rank of a job.
pub fn job_cgroup(root: &Path, spec: &JobSpec) -> PathBuf {
    root.join(format!("job-{}-r{}", spec.job_id, spec.rank))
}

/// Kills every process of a job: the cgroup when there is one, and the
/// process groups the gates' setsid made (a gate may not have entered its
/// cgroup yet).
pub fn kill_job(cgroup: Option<&Path>, pids: &[u32]) {
    if let Some(dir) = cgroup {
        let _ = fs::write(dir.join("cgroup.kill"), "1");
    }
    for &p in pids {
        // SAFETY: plain syscalls; negative pid = process group.
        unsafe {
            libc::kill(-(p as i32), libc::SIGKILL);
            libc::kill(p as i32, libc::SIGKILL);
        }
    }
}

/// SIGKILLs each process (not its group: a job the agent did not launch
/// may share its group with its launcher, e.g. mpirun).
pub fn kill_processes(pids: &[u32]) {
    for &p in pids {
        // SAFETY: a plain syscall on a positive pid.
        unsafe {
            libc::kill(p as i32, libc::SIGKILL);
        }
    }
}

/// Removes an empty job cgroup (best effort: it may still hold a zombie).
pub fn remove_cgroup(dir: &Path) {
    let _ = fs::remove_dir(dir);
}
