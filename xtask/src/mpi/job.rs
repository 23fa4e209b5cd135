//! A launched MPI job: the launcher process (its output in files of the
//! job's working directory), and on drop whatever is left of it killed and
//! its cgroups removed, so a failed run never leaves ranks behind.
use std::{
    os::unix::process::CommandExt as _,
    path::PathBuf,
    process::{Child, ExitStatus, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    Library,
    launch::{JobLaunch, Nodes},
    ranks,
};
use crate::process;

pub struct MpiJob {
    pub lib: Library,
    pub job: String,
    pub nodes: Nodes,
    pub ranks_per_node: usize,
    pub workdir: PathBuf,
    /// When the launcher was started.
    pub started: Instant,
    child: Child,
}

/// How a job ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the launcher's start to its exit.
    pub wall_s: f64,
}

impl MpiJob {
    /// Spawns the launcher (its own process group: a Ctrl-C meant for the
    /// bench does not abort the job mid-run; and the group is what a failed
    /// run kills).
    pub fn start(launch: &JobLaunch<'_>) -> Result<Self> {
        let mut command = launch.command()?;
        let out = std::fs::File::create(launch.workdir.join("stdout"))?;
        let err = std::fs::File::create(launch.workdir.join("stderr"))?;
        command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = command
            .spawn()
            .with_context(|| format!("starting `{}`", process::describe(&command)))?;
        Ok(Self {
            lib: launch.lib,
            job: launch.job.to_string(),
            nodes: launch.nodes.clone(),
            ranks_per_node: launch.ranks_per_node,
            workdir: launch.workdir.to_path_buf(),
            started: Instant::now(),
            child,
        })
    }

    pub fn launcher_pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the job's ranks run on every node; one list per node.
    pub fn ranks(&mut self, timeout: Duration) -> Result<Vec<Vec<u32>>> {
        let found = ranks::wait_for_ranks(
            &self.nodes,
            self.lib,
            &self.job,
            self.ranks_per_node,
            &mut self.child,
            timeout,
        );
        found.map_err(|e| {
            let stderr = self.read("stderr");
            e.context(process::tail(stderr.trim(), 10))
        })
    }

    /// Waits for the launcher to exit; fails (quoting its stderr) when it
    /// exits non-zero or takes longer than `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Result<Finished> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                bail!(
                    "MPI job {} still running after {} s (its threads: {})",
                    self.job,
                    timeout.as_secs_f32(),
                    self.record_hang()
                );
            }
            thread::sleep(Duration::from_millis(5));
        };
        let wall_s = self.started.elapsed().as_secs_f64();
        let finished = Finished {
            status,
            stdout: self.read("stdout"),
            stderr: self.read("stderr"),
            wall_s,
        };
        if !status.success() {
            bail!(
                "MPI job {} failed ({status}): {}",
                self.job,
                process::tail(finished.stderr.trim(), 10)
            );
        }
        Ok(finished)
    }

    /// Writes what every thread of a job that is still running past its
    /// time is doing, twice a second apart (the CPU ticks that grow show who
    /// spins), to a file under the temp directory; returns its path.
    fn record_hang(&self) -> String {
        let first = ranks::describe_threads(&self.nodes, &self.job);
        thread::sleep(Duration::from_secs(1));
        let second = ranks::describe_threads(&self.nodes, &self.job);
        let dir = std::env::temp_dir().join("cosched-mpi-hangs");
        let path = dir.join(format!("{}.txt", self.job));
        let text = format!("# t\n{first}# t + 1 s\n{second}");
        match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
            Ok(()) => path.display().to_string(),
            Err(e) => format!("not recorded: {e}"),
        }
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.workdir.join(name)).unwrap_or_default()
    }
}

impl Drop for MpiJob {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // The whole group: under `cosched attach` the child is attach
            // and the launcher its child, which must not outlive it.
            // SAFETY: kill(2) on the group this job's spawn created.
            unsafe {
                libc::kill(-(self.child.id() as i32), libc::SIGKILL);
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        ranks::clean_up(&self.nodes, &self.job);
    }
}
