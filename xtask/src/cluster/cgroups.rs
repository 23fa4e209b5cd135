//! Per-node cgroup v2 directories. They are not for resource control (the cpu
//! controller lives in cgroup v1 here) but for accounting and cleanup: one
//! `cgroup.kill` ends the agent and every job below it, even after a crash.

use std::{
    fs, io,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use super::CGROUP_ROOT;

/// Creates the node's cgroup (and the cosched parent).
pub fn create(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("could not create cgroup {}", dir.display()))
}

/// Node cgroups (`<root>/n<i>`) that exist. Other directories under the root
/// are not the cluster's and are left alone.
pub fn leftover_node_cgroups() -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(CGROUP_ROOT) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("could not list {CGROUP_ROOT}")),
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_dir())
        .filter(|entry| is_node_name(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .collect();
    dirs.sort();
    Ok(dirs)
}

/// Pids directly in this cgroup (not in its children).
pub fn direct_members(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .collect()
}

/// Kills every process in the cgroup and its descendants (asynchronously:
/// see [`wait_until_empty`]).
pub fn kill_all(dir: &Path) -> Result<()> {
    let file = dir.join("cgroup.kill");
    fs::write(&file, "1").with_context(|| format!("could not write {}", file.display()))
}

/// Waits until no process is left in the cgroup tree; true when empty.
pub fn wait_until_empty(dir: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let events = fs::read_to_string(dir.join("cgroup.events")).unwrap_or_default();
        if !events.lines().any(|line| line.trim() == "populated 1") {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Removes a cgroup and all its descendants, deepest first (a cgroup with
/// children cannot be removed). Returns how many were removed.
pub fn remove_tree(dir: &Path) -> Result<usize> {
    let mut dirs = Vec::new();
    collect_dirs(dir, &mut dirs)?;
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    for dir in &dirs {
        remove_when_empty(dir)
            .with_context(|| format!("could not remove cgroup {}", dir.display()))?;
    }
    Ok(dirs.len())
}

/// A cgroup stays busy for a moment after its last process was reaped (the
/// kernel frees exiting tasks asynchronously): retry EBUSY for a while.
fn remove_when_empty(dir: &Path) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match fs::remove_dir(dir) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// Removes the cosched cgroup root when nothing else lives below it.
pub fn remove_root_if_empty() -> bool {
    fs::remove_dir(CGROUP_ROOT).is_ok()
}

fn collect_dirs(dir: &Path, dirs: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        fs::read_dir(dir).with_context(|| format!("could not list cgroup {}", dir.display()))?;
    for entry in entries.filter_map(|entry| entry.ok()) {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            collect_dirs(&entry.path(), dirs)?;
        }
    }
    dirs.push(dir.to_path_buf());
    Ok(())
}

fn is_node_name(name: &str) -> bool {
    name.strip_prefix('n')
        .is_some_and(|index| !index.is_empty() && index.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_node_cgroup_names() {
        assert!(is_node_name("n0"));
        assert!(is_node_name("n17"));
        assert!(!is_node_name("n"));
        assert!(!is_node_name("test-1"));
    }
}
