//! Exclusive cgroup-v1 cpusets, one per node, so that each node's CPU is a
//! root domain of its own (`cluster up --exclusive-cpusets`).
//!
//! Why: the kernel refuses SCHED_DEADLINE (EPERM) to a task whose affinity is
//! narrower than its root domain, and every node's tasks are pinned to one
//! CPU; with the whole machine one root domain the agents'
//! `[classes] edf = "deadline"` falls back to FIFO priorities. The kernel
//! builds a root domain per load-balanced cpuset when the cpusets above it
//! do not balance, so:
//!
//! - the hierarchy's root gets `cpuset.sched_load_balance = 0` (its old value
//!   is recorded in cluster.json and put back by `down`; after a crash, the
//!   kernel's default 1),
//! - `<root>/cosched` holds every node's CPU, exclusive, not balancing,
//! - `<root>/cosched/n<i>` holds node i's CPU, exclusive, balancing: its own
//!   root domain. The agent is started inside it; its jobs inherit it.
//!
//! While such a cluster is up, tasks outside the nodes are not load-balanced
//! between the nodes' CPUs (each CPU is its own domain): a machine-wide
//! effect, hence opt-in. Nodes must not share CPUs (exclusive cpusets cannot
//! overlap).
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

/// The cgroup-v1 hierarchy with the cpuset controller.
pub const CPUSET_HIERARCHY: &str = "/sys/fs/cgroup/cpuset";
/// The cluster's directory in it; nodes are `n<i>` below.
pub const CPUSET_ROOT: &str = "/sys/fs/cgroup/cpuset/cosched";
/// What the kernel starts the hierarchy's root with (restored after a crash
/// when the recorded value is gone with cluster.json).
pub const DEFAULT_ROOT_BALANCE: &str = "1";

/// Node i's cpuset directory.
pub fn node_dir(name: &str) -> PathBuf {
    Path::new(CPUSET_ROOT).join(name)
}

/// Makes sure the cgroup-v1 cpuset hierarchy is at [`CPUSET_HIERARCHY`]:
/// mounts it when it is not (a machine that mounts only some v1
/// controllers). Fails with the reason when it cannot be (no tmpfs at
/// /sys/fs/cgroup to make the directory in, or the cpuset controller is
/// bound to cgroup v2). The mount stays: an empty v1 cpuset hierarchy
/// changes nothing, and `down` may still need it after a crash.
pub fn ensure_hierarchy() -> Result<()> {
    if unavailable().is_none() {
        return Ok(());
    }
    let dir = Path::new(CPUSET_HIERARCHY);
    fs::create_dir_all(dir).with_context(|| {
        format!(
            "no cgroup-v1 cpuset hierarchy at {CPUSET_HIERARCHY}, and no directory can be made there"
        )
    })?;
    crate::process::run(
        std::process::Command::new("mount")
            .args(["-t", "cgroup", "-o", "cpuset", "cpuset"])
            .arg(dir),
    )
    .with_context(|| {
        format!(
            "no cgroup-v1 cpuset hierarchy at {CPUSET_HIERARCHY}, and mounting one failed \
             (is the cpuset controller in use by cgroup v2?)"
        )
    })?;
    match unavailable() {
        None => Ok(()),
        Some(reason) => bail!("mounted a cpuset hierarchy, but {reason}"),
    }
}

/// Why exclusive cpusets cannot be made here (None: they can).
pub fn unavailable() -> Option<String> {
    let balance = Path::new(CPUSET_HIERARCHY).join("cpuset.sched_load_balance");
    (!balance.exists()).then(|| {
        format!(
            "{} does not exist: no cgroup-v1 cpuset hierarchy at {CPUSET_HIERARCHY}",
            balance.display()
        )
    })
}

/// Refuses node CPUs that overlap (two nodes on one CPU).
pub fn check_distinct(cpus: &[usize]) -> Result<()> {
    let distinct: BTreeSet<_> = cpus.iter().collect();
    if distinct.len() != cpus.len() {
        bail!(
            "--exclusive-cpusets needs one CPU per node, but the nodes share CPUs ({cpus:?}): \
             use at most as many nodes as online CPUs"
        );
    }
    Ok(())
}

/// The hierarchy root's `cpuset.sched_load_balance` now.
pub fn root_balance() -> Result<String> {
    let file = Path::new(CPUSET_HIERARCHY).join("cpuset.sched_load_balance");
    Ok(fs::read_to_string(&file)
        .with_context(|| format!("could not read {}", file.display()))?
        .trim()
        .to_owned())
}

/// Makes `<root>/cosched` and one exclusive, balancing cpuset per
/// `(name, cpu)`, then stops the root from balancing (which is what splits
/// the root domain). The caller has recorded [`root_balance`] first.
pub fn create(nodes: &[(String, usize)]) -> Result<()> {
    let cpus: Vec<usize> = nodes.iter().map(|(_, cpu)| *cpu).collect();
    check_distinct(&cpus)?;
    let hierarchy = Path::new(CPUSET_HIERARCHY);
    let mems = read(hierarchy, "cpuset.mems")?;
    let all = cpus
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let root = Path::new(CPUSET_ROOT);
    make(root, &all, &mems, false)?;
    for (name, cpu) in nodes {
        make(&node_dir(name), &cpu.to_string(), &mems, true)?;
    }
    write(hierarchy, "cpuset.sched_load_balance", "0")
}

/// A cpuset with `cpus` and `mems`, exclusive, balancing or not.
fn make(dir: &Path, cpus: &str, mems: &str, balance: bool) -> Result<()> {
    fs::create_dir_all(dir)
        .with_context(|| format!("could not create cpuset {}", dir.display()))?;
    write(dir, "cpuset.cpus", cpus)?;
    write(dir, "cpuset.mems", mems)?;
    write(dir, "cpuset.cpu_exclusive", "1")?;
    write(
        dir,
        "cpuset.sched_load_balance",
        if balance { "1" } else { "0" },
    )
}

/// Puts the root's balancing back (`balance_was`, or the kernel's default),
/// moves any thread still in the cluster's cpusets to the root and removes
/// them. Also after a crash: found by name. Returns (threads moved, cpusets
/// removed); (0, 0) and nothing touched when there is nothing of ours.
pub fn remove(balance_was: Option<&str>) -> Result<(usize, usize)> {
    let root = Path::new(CPUSET_ROOT);
    if !root.exists() {
        return Ok((0, 0));
    }
    let hierarchy = Path::new(CPUSET_HIERARCHY);
    let mut dirs = Vec::new();
    collect_dirs(root, &mut dirs)?;
    dirs.sort_by_key(|dir| std::cmp::Reverse(dir.components().count()));
    let mut moved = 0;
    for dir in &dirs {
        for tid in read(dir, "tasks").unwrap_or_default().split_whitespace() {
            match fs::write(hierarchy.join("tasks"), tid) {
                Ok(()) => moved += 1,
                Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!("could not move thread {tid} out of {}", dir.display())
                    });
                }
            }
        }
    }
    write(
        hierarchy,
        "cpuset.sched_load_balance",
        balance_was.unwrap_or(DEFAULT_ROOT_BALANCE),
    )?;
    for dir in &dirs {
        super::cgroups::remove_when_empty(dir)
            .with_context(|| format!("could not remove cpuset {}", dir.display()))?;
    }
    Ok((moved, dirs.len()))
}

/// The cluster's cpuset directories that exist (for `status` and `up`).
pub fn leftovers() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if Path::new(CPUSET_ROOT).exists() {
        let _ = collect_dirs(Path::new(CPUSET_ROOT), &mut dirs);
    }
    dirs
}

fn collect_dirs(dir: &Path, dirs: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        fs::read_dir(dir).with_context(|| format!("could not list cpuset {}", dir.display()))?;
    for entry in entries.filter_map(|entry| entry.ok()) {
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            collect_dirs(&entry.path(), dirs)?;
        }
    }
    dirs.push(dir.to_path_buf());
    Ok(())
}

fn read(dir: &Path, file: &str) -> Result<String> {
    let path = dir.join(file);
    Ok(fs::read_to_string(&path)
        .with_context(|| format!("could not read {}", path.display()))?
        .trim()
        .to_owned())
}

fn write(dir: &Path, file: &str, value: &str) -> Result<()> {
    let path = dir.join(file);
    fs::write(&path, value)
        .with_context(|| format!("could not write {value} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_sharing_a_cpu_cannot_have_exclusive_cpusets() {
        assert!(check_distinct(&[0, 1]).is_ok());
        let error = check_distinct(&[0, 1, 0]).unwrap_err().to_string();
        assert!(error.contains("one CPU per node"), "{error}");
    }

    #[test]
    fn a_node_cpuset_is_named_after_the_node() {
        assert_eq!(
            node_dir("n1"),
            PathBuf::from("/sys/fs/cgroup/cpuset/cosched/n1")
        );
    }
}
