//! The ranks of a launched job: on every node, the processes of the job's
//! cgroup (where the launch agent put the node daemon, so also its
//! children) whose parent is the library's node daemon. And the job's
//! clean-up: everything left in its cgroups killed, the cgroups removed.
use std::{
    path::Path,
    process::Child,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use super::{Library, launch::Nodes};

/// The ranks of `job` on the node whose cgroup is `node_cgroup`, sorted.
pub fn ranks_on(node_cgroup: &Path, lib: Library, job: &str) -> Vec<u32> {
    let dir = node_cgroup.join(format!("{}{job}", super::launch::JOB_CGROUP_PREFIX));
    let mut ranks: Vec<u32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|pid| pid.parse().ok())
        .filter(|&pid| parent(pid).and_then(comm).as_deref() == Some(lib.node_daemon()))
        .collect();
    ranks.sort_unstable();
    ranks
}

/// Waits until every node has `per_node` ranks of `job`; one list per
/// node. Fails when `launcher` exits first (quoting nothing: its output is
/// the caller's) or after `timeout`.
pub fn wait_for_ranks(
    nodes: &Nodes,
    lib: Library,
    job: &str,
    per_node: usize,
    launcher: &mut Child,
    timeout: Duration,
) -> Result<Vec<Vec<u32>>> {
    let deadline = Instant::now() + timeout;
    loop {
        let found: Vec<Vec<u32>> = nodes
            .nodes
            .iter()
            .map(|n| ranks_on(&n.cgroup, lib, job))
            .collect();
        if found.iter().all(|r| r.len() >= per_node) {
            return Ok(found);
        }
        if let Some(status) = launcher.try_wait()? {
            bail!(
                "{} of job {job} exited ({status}) before all its ranks started",
                lib.launcher()
            );
        }
        if Instant::now() >= deadline {
            let counts: Vec<String> = nodes
                .nodes
                .iter()
                .zip(&found)
                .map(|(n, r)| format!("{} {}", n.name, r.len()))
                .collect();
            bail!(
                "job {job}: not all ranks appeared within {} s (ranks per node: {})",
                timeout.as_secs_f32(),
                counts.join(", ")
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Kills whatever is left of `job` on every node and removes its cgroups;
/// returns the cgroups that could not be removed.
pub fn clean_up(nodes: &Nodes, job: &str) -> Vec<String> {
    let dirs: Vec<_> = nodes.nodes.iter().map(|n| n.job_cgroup(job)).collect();
    for dir in dirs.iter().filter(|d| d.exists()) {
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = Vec::new();
    for dir in dirs.iter().filter(|d| d.exists()) {
        while populated(dir) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        if std::fs::remove_dir(dir).is_err() {
            left.push(dir.display().to_string());
        }
    }
    left
}

/// Every thread of `job` on every node, one line each: pid/tid, name,
/// state, scheduling policy and priority, on-CPU jiffies (user+system),
/// kernel wait channel. What a job that stopped making progress was doing
/// (which thread spins, which waits, at what priority).
pub fn describe_threads(nodes: &Nodes, job: &str) -> String {
    let mut out = String::new();
    for node in &nodes.nodes {
        let procs =
            std::fs::read_to_string(node.job_cgroup(job).join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()) {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
            for tid in tasks.into_iter().flatten().flatten() {
                let tid = tid.file_name().to_string_lossy().to_string();
                out.push_str(&format!(
                    "{} {pid}/{tid} {}\n",
                    node.name,
                    thread_line(pid, &tid)
                ));
            }
        }
    }
    out
}

/// `comm state policy=P rt_prio=R nice=N cpu_ticks=T wchan=W` of one thread.
fn thread_line(pid: u32, tid: &str) -> String {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).unwrap_or_default();
    let name = stat
        .find('(')
        .zip(stat.rfind(')'))
        .map(|(a, b)| stat[a + 1..b].to_string())
        .unwrap_or_default();
    let rest: Vec<&str> = stat
        .rfind(')')
        .map(|b| stat[b + 1..].split_whitespace().collect())
        .unwrap_or_default();
    // Fields after the name, 0-based: state 0, utime 11, stime 12, nice 16,
    // rt_priority 37, policy 38 (proc(5) numbers them from 3).
    let field = |i: usize| rest.get(i).copied().unwrap_or("?");
    let ticks = field(11).parse::<u64>().unwrap_or(0) + field(12).parse::<u64>().unwrap_or(0);
    let wchan = std::fs::read_to_string(format!("{dir}/wchan")).unwrap_or_default();
    format!(
        "{name} {} policy={} rt_prio={} nice={} cpu_ticks={ticks} wchan={}",
        field(0),
        field(38),
        field(37),
        field(16),
        if wchan.is_empty() { "-" } else { wchan.trim() }
    )
}

fn populated(cgroup: &Path) -> bool {
    std::fs::read_to_string(cgroup.join("cgroup.events"))
        .map(|e| e.lines().any(|l| l == "populated 1"))
        .unwrap_or(false)
}

/// The parent pid (field 4 of /proc/PID/stat).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn comm(pid: u32) -> Option<String> {
    Some(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()?
            .trim()
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_parent_and_a_name_from_proc() {
        let me = std::process::id();
        let parent_pid = parent(me).unwrap();
        assert_eq!(parent_pid, std::os::unix::process::parent_id());
        assert!(comm(me).is_some());
        assert_eq!(parent(u32::MAX), None);
    }

    #[test]
    fn a_job_without_a_cgroup_has_no_ranks() {
        assert!(ranks_on(Path::new("/nonexistent"), Library::Openmpi, "j").is_empty());
    }
}
