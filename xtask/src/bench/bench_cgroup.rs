//! The bench's own cgroup (v2), next to the cluster's: the bench process
//! moves itself into it once, so everything it starts that does not enter a
//! node's cgroup (the launchers `mpirun`/`mpiexec`, `cosched attach`, the
//! CLI calls) is charged there while it runs. The outside-load measure reads
//! its `usage_usec` as the bench's own CPU time.
//!
//! What it replaces, getrusage(RUSAGE_SELF + RUSAGE_CHILDREN), counts a
//! child when it is reaped, with every descendant it reaped in turn: a child
//! that ran before a run and was reaped in it counted in that run, and a
//! launcher whose descendants are the ranks (MPICH's hydra proxy waits for
//! its ranks, `mpiexec` for the proxy's launch agent) brought the ranks'
//! CPU time in a second time, on top of the nodes' cgroups: every MPICH run
//! of `bench mpi` read 0 % outside (a negative load, shown as 0), so a
//! disturbed MPICH run was never repeated (docs/benchmarks.md, session 18).
use std::{
    fs,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use anyhow::{Context as _, Result};

use crate::{
    cluster::{CGROUP_ROOT, cgroups},
    progress::say,
};

/// Name prefix of the benches' cgroups; the pid follows.
const PREFIX: &str = "cosched-bench-";

/// The bench's cgroup, entered on the first call; `None` when it cannot be
/// (no cgroup v2 hierarchy, not root): then the bench falls back to
/// getrusage.
pub fn own() -> Option<&'static Path> {
    static OWN: OnceLock<Option<PathBuf>> = OnceLock::new();
    OWN.get_or_init(|| match enter() {
        Ok(dir) => Some(dir),
        Err(error) => {
            say(
                "bench",
                format!("no cgroup of the bench's own ({error:#}): its children count when reaped"),
            );
            None
        }
    })
    .as_deref()
}

/// The cgroup v2 directory that holds the cluster's, where the bench's goes.
fn base() -> Result<&'static Path> {
    Path::new(CGROUP_ROOT)
        .parent()
        .context("the cluster's cgroup root has no parent")
}

fn enter() -> Result<PathBuf> {
    let base = base()?;
    remove_stale(base);
    let dir = base.join(format!("{PREFIX}{}", std::process::id()));
    cgroups::create(&dir)?;
    // Moves the whole process (every thread); children inherit it.
    fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
        .with_context(|| format!("entering {}", dir.display()))?;
    Ok(dir)
}

/// Removes earlier benches' cgroups that are empty (their bench exited).
fn remove_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let is_bench = entry.file_name().to_string_lossy().starts_with(PREFIX);
        if is_bench && cgroups::direct_members(&entry.path()).is_empty() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The cgroup v2 path (`0::PATH` line of /proc/PID/cgroup) of a process,
/// relative to the hierarchy's root.
pub fn v2_path_of(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::trim)
}

/// Whether `pid` is in `dir` (a cgroup below the v2 root of [`base`]).
pub fn holds(dir: &Path, pid: u32) -> bool {
    let Ok(base) = base() else {
        return false;
    };
    let Ok(relative) = dir.strip_prefix(base) else {
        return false;
    };
    fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .ok()
        .as_deref()
        .and_then(v2_path_of)
        .is_some_and(|path| Path::new(path) == Path::new("/").join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_v2_line_of_a_hybrid_hierarchy() {
        let text = "9:name=systemd:/\n4:memory:/x/y\n1:cpu:/\n0::/cosched-bench-77\n";
        assert_eq!(v2_path_of(text), Some("/cosched-bench-77"));
        assert_eq!(v2_path_of("4:memory:/x\n"), None);
    }
}
