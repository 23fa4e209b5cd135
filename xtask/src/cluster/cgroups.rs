//! Per-node cgroup v2 directories. They are not for resource control (the cpu
//! controller lives in cgroup v1 here) but for accounting and cleanup: one
//! `cgroup.kill` ends the agent and every job below it, even after a crash.
//!
//! When the agents demote (a coordinator with `stop_inactive = false`), each
//! node also gets a cgroup-v1 cpu directory (`<CPU_CGROUP_ROOT>/n<i>`) under
//! which its agent makes `active` and `idle` (`demote_cpu_cgroup`), and a
//! scratch named v1 hierarchy is mounted with `favordynmods` for the life of
//! the cluster: that option is global in effect and makes a task's move
//! between cgroups take ~0.1 ms instead of waiting ~14 ms for an RCU grace
//! period.

use std::{
    fs, io,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use super::{CGROUP_ROOT, CPU_CGROUP_ROOT, FAVORDYNMODS_NAME, V1_CPU_HIERARCHY};
use crate::process;

/// Creates the node's cgroup (and the cosched parent).
pub fn create(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("could not create cgroup {}", dir.display()))
}

/// Node cgroups (`<root>/n<i>`) that exist. Other directories under the root
/// are not the cluster's and are left alone.
pub fn leftover_node_cgroups() -> Result<Vec<PathBuf>> {
    node_dirs(CGROUP_ROOT)
}

/// The node directories (`n<i>`) under `root`, sorted; none if `root` is
/// missing.
fn node_dirs(root: &str) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("could not list {root}")),
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
pub(crate) fn remove_when_empty(dir: &Path) -> std::io::Result<()> {
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

/// Why the agents cannot demote by cgroup here (None: they can): the cpu
/// controller must be mounted as cgroup v1 at [`V1_CPU_HIERARCHY`] and have
/// `cpu.idle`.
pub fn v1_cpu_unavailable() -> Option<String> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mounted = mounts.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() >= 4
            && fields[1] == V1_CPU_HIERARCHY
            && fields[2] == "cgroup"
            && fields[3].split(',').any(|option| option == "cpu")
    });
    if !mounted {
        return Some(format!(
            "{V1_CPU_HIERARCHY} is not a cgroup-v1 hierarchy with the cpu controller"
        ));
    }
    let idle = Path::new(V1_CPU_HIERARCHY).join("cpu.idle");
    if !idle.exists() {
        return Some(format!(
            "{} does not exist (kernel too old)",
            idle.display()
        ));
    }
    None
}

/// Creates the nodes' cgroup-v1 cpu directories and shares the real-time
/// runtime of the hierarchy's root between them (with RT group scheduling a
/// cgroup without runtime cannot hold a SCHED_FIFO task: the agents' boosts
/// would fail). A runtime that cannot be set is reported, not fatal.
pub fn create_v1(dirs: &[PathBuf]) -> Result<Option<String>> {
    let root = Path::new(CPU_CGROUP_ROOT);
    fs::create_dir_all(root)
        .with_context(|| format!("could not create cgroup {}", root.display()))?;
    for dir in dirs {
        fs::create_dir_all(dir)
            .with_context(|| format!("could not create cgroup {}", dir.display()))?;
    }
    let runtime = |dir: &Path| dir.join("cpu.rt_runtime_us");
    let hierarchy = Path::new(V1_CPU_HIERARCHY);
    if !runtime(hierarchy).exists() || dirs.is_empty() {
        return Ok(None);
    }
    let read =
        |dir: &Path| -> Option<u64> { fs::read_to_string(runtime(dir)).ok()?.trim().parse().ok() };
    let total = read(hierarchy).unwrap_or(0);
    let share = total / dirs.len() as u64;
    let set = (|| -> std::io::Result<()> {
        fs::write(runtime(root), total.to_string())?;
        for dir in dirs {
            fs::write(runtime(dir), share.to_string())?;
        }
        Ok(())
    })();
    Ok(match set {
        Ok(()) => Some(format!(
            "real-time runtime {share} µs per node (of {total} µs per period: RT group scheduling)"
        )),
        Err(error) => Some(format!(
            "could not give the node cgroups real-time runtime ({error}): boosts of managed \
             tasks will fail"
        )),
    })
}

/// Node directories (`n<i>`) under [`CPU_CGROUP_ROOT`].
pub fn leftover_v1_node_cgroups() -> Result<Vec<PathBuf>> {
    node_dirs(CPU_CGROUP_ROOT)
}

/// Moves every thread still in a cgroup-v1 tree (a task the agent could not
/// put back, or one that was never the cluster's) to the hierarchy's root,
/// then removes the tree. Returns (threads moved, cgroups removed).
pub fn empty_and_remove_v1_tree(dir: &Path) -> Result<(usize, usize)> {
    let mut dirs = Vec::new();
    collect_dirs(dir, &mut dirs)?;
    let root_tasks = Path::new(V1_CPU_HIERARCHY).join("tasks");
    let mut moved = 0;
    for dir in &dirs {
        let tasks = fs::read_to_string(dir.join("tasks")).unwrap_or_default();
        for tid in tasks.split_whitespace() {
            match fs::write(&root_tasks, tid) {
                Ok(()) => moved += 1,
                // Exited meanwhile.
                Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("could not move thread {tid} out of {}", dir.display())
                    });
                }
            }
        }
    }
    Ok((moved, remove_tree(dir)?))
}

/// Removes the v1 cosched directory when nothing else lives below it.
pub fn remove_v1_root_if_empty() -> bool {
    fs::remove_dir(CPU_CGROUP_ROOT).is_ok()
}

/// Mounts the scratch hierarchy with `favordynmods` at `dir`.
pub fn mount_favordynmods(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    process::run(
        std::process::Command::new("mount")
            .args(["-t", "cgroup", "-o"])
            .arg(format!("none,name={FAVORDYNMODS_NAME},favordynmods"))
            .arg(FAVORDYNMODS_NAME)
            .arg(dir),
    )
    .with_context(|| {
        format!(
            "could not mount the favordynmods hierarchy at {}",
            dir.display()
        )
    })
}

/// Where the scratch hierarchy is mounted (found by its name, so also after
/// a crash), innermost first.
pub fn favordynmods_mounts() -> Vec<PathBuf> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut found = parse_named_mounts(&mounts, FAVORDYNMODS_NAME);
    found.reverse();
    found
}

fn parse_named_mounts(proc_mounts: &str, name: &str) -> Vec<PathBuf> {
    let option = format!("name={name}");
    proc_mounts
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.len() >= 4
                && fields[2] == "cgroup"
                && fields[3].split(',').any(|o| o == option))
            .then(|| PathBuf::from(fields[1].replace("\\040", " ")))
        })
        .collect()
}

pub fn unmount(dir: &Path) -> Result<()> {
    process::run(std::process::Command::new("umount").arg(dir))
        .with_context(|| format!("could not unmount {}", dir.display()))
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
    fn finds_the_scratch_hierarchy_by_name() {
        let mounts = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cosched-cluster /run/cosched-cluster/favordynmods cgroup rw,relatime,name=cosched-cluster,favordynmods 0 0\n\
                      other /mnt cgroup rw,name=cosched-cluster-x 0 0\n";
        assert_eq!(
            parse_named_mounts(mounts, "cosched-cluster"),
            vec![PathBuf::from("/run/cosched-cluster/favordynmods")]
        );
    }

    #[test]
    fn recognises_node_cgroup_names() {
        assert!(is_node_name("n0"));
        assert!(is_node_name("n17"));
        assert!(!is_node_name("n"));
        assert!(!is_node_name("test-1"));
    }
}
