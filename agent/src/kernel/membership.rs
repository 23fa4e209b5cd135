//! What the kernel says about who belongs to a job that something else
//! launched: the parent of every process (for pid trees) and the threads of
//! a cgroup-v2 directory (for cgroup jobs).
//!
//! Descendants are found from the parent pid in `/proc/<pid>/stat`: this
//! kernel has no `/proc/<pid>/task/<tid>/children` (CONFIG_PROC_CHILDREN is
//! off), and a scan of `/proc` is only needed when a tree is adopted or
//! joined (later forks come from the eBPF fork tracepoint). Cgroup
//! membership is read from `cgroup.threads`, which lists every thread of
//! the cgroup whatever its process.
use std::{
    fs, io,
    path::{Path, PathBuf},
};

/// `statfs` magic of a cgroup-v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Every process with its parent: `(pid, ppid)`. Processes that exit
/// during the scan are skipped.
pub fn process_parents() -> io::Result<Vec<(u32, u32)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let Some(pid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(ppid) = parse_ppid(&stat) {
            out.push((pid, ppid));
        }
    }
    Ok(out)
}

/// Field 4 of /proc/<pid>/stat (the command name may hold spaces and
/// parentheses).
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Where the cgroup-v2 hierarchy is mounted, from `/proc/self/mountinfo`.
pub fn cgroup2_mount() -> io::Result<Option<PathBuf>> {
    let text = fs::read_to_string("/proc/self/mountinfo")?;
    Ok(parse_cgroup2_mount(&text))
}

/// The mount point of the first `cgroup2` line of a mountinfo text.
pub fn parse_cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })
}

/// A cgroup-v2 directory named by `path`: an absolute path on a cgroup2
/// file system, or a path as `/proc/PID/cgroup` shows it, taken relative to
/// the cgroup2 mount. The root of the hierarchy is refused: it holds every
/// process of the machine.
pub fn resolve_cgroup2(path: &str) -> io::Result<PathBuf> {
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, why);
    if path.is_empty() || !path.starts_with('/') {
        return Err(invalid(format!(
            "cgroup {path:?}: give an absolute path (e.g. /sys/fs/cgroup/my.slice/job or /my.slice/job)"
        )));
    }
    if Path::new(path)
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(invalid(format!("cgroup {path:?}: `..` is not allowed")));
    }
    let mount = cgroup2_mount()?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no cgroup-v2 hierarchy is mounted on this machine",
        )
    })?;
    let direct = PathBuf::from(path);
    let dir = if direct.starts_with(&mount) {
        direct
    } else {
        mount.join(path.trim_start_matches('/'))
    };
    if !dir.join("cgroup.threads").is_file() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no such cgroup: {} (looked for {} on the cgroup-v2 hierarchy at {})",
                path,
                dir.display(),
                mount.display()
            ),
        ));
    }
    if !is_cgroup2(&dir)? {
        return Err(invalid(format!(
            "{} is not on a cgroup-v2 file system",
            dir.display()
        )));
    }
    if dir == mount {
        return Err(invalid(format!(
            "{} is the root of the cgroup-v2 hierarchy (every process of the machine): name the job's own cgroup",
            dir.display()
        )));
    }
    Ok(dir)
}

fn is_cgroup2(dir: &Path) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut c_path = dir.as_os_str().as_bytes().to_vec();
    c_path.push(0);
    // SAFETY: statfs is plain data; the path is NUL-terminated.
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr().cast(), &mut buf) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf.f_type as i64 == CGROUP2_SUPER_MAGIC)
}

/// Most cgroup directories of one subtree read per call: a job's subtree
/// holds a few (Slurm: job, step, user, task; systemd: nested scopes);
/// this only bounds the work a runaway tree can cause per poll.
pub const MAX_SUBTREE_DIRS: usize = 4096;

/// Threads in a cgroup-v2 directory and every cgroup below it (each
/// directory's `cgroup.threads` lists only its own threads; Slurm and
/// systemd put tasks in sub-cgroups made after the job's). NotFound when
/// `dir` itself was removed; a sub-cgroup removed meanwhile is skipped.
pub fn cgroup2_threads(dir: &Path) -> io::Result<Vec<u32>> {
    let mut tids = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    let mut seen = 0;
    while let Some(d) = pending.pop() {
        seen += 1;
        let top = d == dir;
        let text = match fs::read_to_string(d.join("cgroup.threads")) {
            Ok(text) => text,
            Err(e) if !top && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        tids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        let entries = match fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if !top && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            if seen + pending.len() >= MAX_SUBTREE_DIRS {
                break;
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    tids.sort_unstable();
    tids.dedup();
    Ok(tids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_of_sub_cgroups_count_and_a_vanished_one_is_skipped() {
        // Plain directories laid out like cgroup-v2 ones.
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job_5");
        let task = job.join("step_0/user/task_0");
        fs::create_dir_all(&task).unwrap();
        fs::write(job.join("cgroup.threads"), "10\n").unwrap();
        fs::write(job.join("step_0/cgroup.threads"), "").unwrap();
        fs::write(job.join("step_0/user/cgroup.threads"), "").unwrap();
        // step_1 has no cgroup.threads: as if removed meanwhile
        fs::create_dir_all(job.join("step_1/user")).unwrap();
        fs::write(task.join("cgroup.threads"), "30\n31\n").unwrap();
        assert_eq!(cgroup2_threads(&job).unwrap(), vec![10, 30, 31]);
        assert_eq!(cgroup2_threads(&task).unwrap(), vec![30, 31]);
        let gone = cgroup2_threads(&root.path().join("nope")).unwrap_err();
        assert_eq!(gone.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_parent_is_field_4_even_with_an_odd_command_name() {
        assert_eq!(parse_ppid("77 (a) b (c)) S 12 77 77 0"), Some(12));
        assert_eq!(parse_ppid("77 (x)"), None);
    }

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo() {
        let text = "\
35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
";
        assert_eq!(
            parse_cgroup2_mount(text),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(parse_cgroup2_mount("1 2 0:1 / / rw - ext4 /dev/x rw"), None);
    }

    #[test]
    fn relative_and_parent_paths_are_refused_before_any_lookup() {
        for bad in ["", "slurm/job", "/a/../../etc"] {
            let e = resolve_cgroup2(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }
}
