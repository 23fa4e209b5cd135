//! Killing what is left of a rank the coordinator gave up (`ReapRanks`),
//! whether this agent launched it or an earlier one did: an agent restarted
//! after a crash no longer knows the pids of the ranks it ran, and those ranks
//! kept running, unmanaged.
//!
//! Two ways to find them, both used:
//! - with `cgroup_root`, the rank's cgroup `job-<id>-r<rank>` outlives the
//!   agent: `cgroup.kill` kills every process in it, descendants included,
//!   and the emptied directory is removed;
//! - every process whose environment names this rank of this agent
//!   (`COSCHED_JOB_ID`, `COSCHED_RANK`, `COSCHED_NODE`, `COSCHED_LAUNCHER`:
//!   the launcher sets them and children inherit them) is killed through a pidfd opened before
//!   its environment is read, so a pid reused in between is never hit; one
//!   that leads its process group (the rank's main process: the gate made it
//!   a session) takes its group with it. Without `cgroup_root` this is the
//!   only way: a descendant that replaced its environment and left the
//!   rank's process group escapes.

use std::{
    collections::BTreeSet,
    fs,
    os::fd::{FromRawFd as _, OwnedFd},
    path::Path,
    time::{Duration, Instant},
};

use cosched_proto::{
    job::env,
    wire::{RankRef, ReapedRank},
};

/// How long an emptied rank cgroup is waited for before it is left behind.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(5);

/// Carries out a reap order: [`reap`] for each rank.
pub fn reap_all(
    cgroup_root: Option<&Path>,
    node: &str,
    launcher: &str,
    ranks: Vec<RankRef>,
) -> Vec<ReapedRank> {
    ranks
        .into_iter()
        .map(|rank| ReapedRank {
            job_id: rank.job_id,
            rank: rank.rank,
            processes: reap(cgroup_root, &Launcher { node, launcher }, rank),
        })
        .collect()
}

/// The agent whose leftovers are reaped: its node name and its
/// [`crate::launch::launcher_id`].
#[derive(Debug, Clone, Copy)]
pub struct Launcher<'a> {
    pub node: &'a str,
    pub launcher: &'a str,
}

/// Kills every process of `rank` launched by `by`; how many were found.
pub fn reap(cgroup_root: Option<&Path>, by: &Launcher<'_>, rank: RankRef) -> u32 {
    let mut killed = BTreeSet::new();
    if let Some(root) = cgroup_root {
        let dir = root.join(format!("job-{}-r{}", rank.job_id, rank.rank));
        if dir.is_dir() {
            killed.extend(kill_cgroup(&dir));
            remove_when_empty(dir);
        }
    }
    for pid in processes_naming(by, rank) {
        if kill_if_still_naming(pid, by, rank) {
            killed.insert(pid);
        }
    }
    if !killed.is_empty() {
        tracing::warn!(job = rank.job_id, rank = rank.rank, pids = ?killed, "killed the leftovers of a rank the coordinator gave up");
    }
    killed.len() as u32
}

/// Kills a cgroup's processes; their pids.
fn kill_cgroup(dir: &Path) -> Vec<u32> {
    let pids: Vec<u32> = fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect();
    if fs::write(dir.join("cgroup.kill"), "1").is_err() {
        // No cgroup.kill (Linux < 5.14): one by one.
        for &pid in &pids {
            // SAFETY: plain syscall on a member of the rank's cgroup.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
    pids
}

/// Removes the rank's cgroup once its killed processes are gone, off the
/// agent's event loop.
fn remove_when_empty(dir: std::path::PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("cosched-rmcg".into())
        .spawn(move || {
            let started = Instant::now();
            while started.elapsed() < CGROUP_EMPTY_WAIT {
                if fs::remove_dir(&dir).is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            tracing::warn!(cgroup = %dir.display(), "a reaped rank's cgroup did not empty; left behind");
        });
    if let Err(error) = spawned {
        tracing::warn!("cannot start the cgroup removal thread: {error}");
    }
}

/// Pids of the processes whose environment names `rank` of `by`.
fn processes_naming(by: &Launcher<'_>, rank: RankRef) -> Vec<u32> {
    let own = std::process::id();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own && pid != 1)
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| names_rank(&environ, by, rank))
        })
        .collect()
}

/// SIGKILLs `pid` if, pinned by a pidfd, it still names the rank.
fn kill_if_still_naming(pid: u32, by: &Launcher<'_>, rank: RankRef) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return false; // gone already
    }
    // SAFETY: the fd was just returned to us and is owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let still = fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| names_rank(&environ, by, rank));
    if !still {
        return false;
    }
    if process_group(pid) == Some(pid) {
        // The rank's main process leads the group its gate's setsid made:
        // the group also holds descendants that scrubbed their environment.
        // SAFETY: plain syscall; the leader is alive (checked just above),
        // so the group id is still this rank's.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    }
    use std::os::fd::AsRawFd as _;
    // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
}

/// Field 5 of `/proc/<pid>/stat`: the process group.
fn process_group(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

/// Whether a `/proc/<pid>/environ` (NUL-separated `KEY=value`) carries the
/// variables `by`'s launcher sets for `rank`.
fn names_rank(environ: &[u8], by: &Launcher<'_>, rank: RankRef) -> bool {
    let wanted = [
        format!("{}={}", env::JOB_ID, rank.job_id),
        format!("{}={}", env::RANK, rank.rank),
        format!("{}={}", env::NODE, by.node),
        format!("{}={}", env::LAUNCHER, by.launcher),
    ];
    let entries: Vec<&[u8]> = environ.split(|&byte| byte == 0).collect();
    wanted
        .iter()
        .all(|entry| entries.contains(&entry.as_bytes()))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    const RANK: RankRef = RankRef {
        job_id: 41,
        rank: 1,
    };

    const N1: Launcher<'static> = Launcher {
        node: "n1",
        launcher: "/var/lib/cosched/jobs",
    };

    /// A child whose environment names `rank` of `by` (as the launcher sets it).
    fn as_rank<'c>(command: &'c mut Command, by: &Launcher<'_>, rank: u32) -> &'c mut Command {
        command
            .env(env::JOB_ID, RANK.job_id.to_string())
            .env(env::RANK, rank.to_string())
            .env(env::NODE, by.node)
            .env(env::LAUNCHER, by.launcher)
    }

    #[test]
    fn only_the_exact_rank_of_this_agent_matches() {
        let environ = b"PATH=/bin\0COSCHED_JOB_ID=41\0COSCHED_RANK=1\0COSCHED_NODE=n1\0\
                        COSCHED_LAUNCHER=/var/lib/cosched/jobs\0";
        assert!(names_rank(environ, &N1, RANK));
        let n0 = Launcher { node: "n0", ..N1 };
        assert!(!names_rank(environ, &n0, RANK), "another node's agent");
        let other_cluster = Launcher {
            launcher: "/tmp/other/jobs",
            ..N1
        };
        assert!(
            !names_rank(environ, &other_cluster, RANK),
            "another agent with the same node name on this machine"
        );
        let other_job = RankRef { job_id: 4, rank: 1 };
        assert!(!names_rank(environ, &N1, other_job), "prefix of 41");
        let other_rank = RankRef {
            job_id: 41,
            rank: 0,
        };
        assert!(!names_rank(environ, &N1, other_rank));
        assert!(!names_rank(
            b"COSCHED_JOB_ID=41\0COSCHED_RANK=1\0COSCHED_NODE=n1\0",
            &N1,
            RANK
        ));
        assert!(!names_rank(b"", &N1, RANK));
    }

    #[test]
    fn a_process_naming_the_rank_is_killed_and_others_are_not() {
        let launcher = format!("/reap-test-{}", std::process::id());
        let by = Launcher {
            launcher: &launcher,
            ..N1
        };
        let spawn = |rank: u32| {
            as_rank(Command::new("sleep").arg("30"), &by, rank)
                .spawn()
                .unwrap()
        };
        let mut leftover = spawn(RANK.rank);
        let mut bystander = spawn(RANK.rank + 1);
        // Until it execs, a child shows the test's environment.
        let started = Instant::now();
        while !fs::read(format!("/proc/{}/environ", leftover.id()))
            .is_ok_and(|environ| names_rank(&environ, &by, RANK))
        {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "sleep did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reap(None, &by, RANK), 1);
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(leftover.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(bystander.try_wait().unwrap(), None, "another rank survives");
        bystander.kill().unwrap();
        bystander.wait().unwrap();
        assert_eq!(reap(None, &by, RANK), 0, "nothing left");
    }

    #[test]
    fn a_rank_leading_its_process_group_takes_descendants_without_the_environment() {
        use std::{
            io::{BufRead as _, BufReader},
            os::unix::process::CommandExt as _,
        };
        let launcher = format!("/reap-group-{}", std::process::id());
        let by = Launcher {
            launcher: &launcher,
            ..N1
        };
        let mut leader = as_rank(
            Command::new("sh").args(["-c", "env -i sleep 30 & echo $!; wait"]),
            &by,
            RANK.rank,
        )
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
        let mut line = String::new();
        BufReader::new(leader.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let scrubbed: u32 = line.trim().parse().unwrap();
        // Until `env -i` has exec'd sleep, the child still shows the rank.
        // While it execs (sh → env, env → sleep) its environ may not be
        // readable, or read empty (the new image's environment is not set
        // up yet): an empty read during sh → env let the test go on with
        // `env` still naming the rank (reaped too: 2, seen once). Wait for
        // the child to be sleep (its name is set at that exec) with a
        // readable environ without the rank.
        let is_sleep = || {
            fs::read_to_string(format!("/proc/{scrubbed}/comm"))
                .is_ok_and(|comm| comm.trim_end() == "sleep")
        };
        let started = Instant::now();
        while !(is_sleep()
            && fs::read(format!("/proc/{scrubbed}/environ"))
                .is_ok_and(|environ| !names_rank(&environ, &by, RANK)))
        {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "sleep did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reap(None, &by, RANK), 1, "only the leader names the rank");
        leader.wait().unwrap();
        let started = Instant::now();
        // SAFETY: signal 0 only checks that the pid exists.
        while unsafe { libc::kill(scrubbed as i32, 0) } == 0
            && fs::read_to_string(format!("/proc/{scrubbed}/stat"))
                .is_ok_and(|stat| !stat.contains(") Z"))
        {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the scrubbed child survived"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
