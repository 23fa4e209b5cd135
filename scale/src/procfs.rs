//! CPU time and memory of processes, and of the machine, from /proc.

use std::path::Path;

/// Clock ticks per second (USER_HZ).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// utime + stime of a process (all its threads), in seconds.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start after ") ".
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second())
}

/// A `VmRSS`/`VmHWM`-style line of /proc/PID/status, in KiB.
pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}

/// Open file descriptors of a process.
pub fn open_fds(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// Busy and total CPU seconds of the whole machine (all CPUs) from /proc/stat.
pub fn machine_cpu_seconds() -> Option<(f64, f64)> {
    machine_cpu_seconds_from(Path::new("/proc/stat"))
}

fn machine_cpu_seconds_from(path: &Path) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let values: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|value| value.parse().ok())
        .collect();
    let total: f64 = values.iter().take(8).sum();
    // idle and iowait
    let idle = values.get(3).copied().unwrap_or(0.0) + values.get(4).copied().unwrap_or(0.0);
    let ticks = ticks_per_second();
    Some(((total - idle) / ticks, total / ticks))
}

/// Raises the soft open-file limit to `wanted` (at most the hard limit);
/// returns the soft limit in force after.
pub fn raise_fd_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    if limit.rlim_cur < wanted {
        let raised = libc::rlimit {
            rlim_cur: wanted.min(limit.rlim_max),
            rlim_max: limit.rlim_max,
        };
        // SAFETY: valid rlimit pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

/// Pins the calling thread (and the threads it starts later) to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET within its size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// CPUs online.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_cpu_time_memory_and_fds() {
        let pid = std::process::id();
        assert!(process_cpu_seconds(pid).is_some());
        assert!(status_kib(pid, "VmRSS").unwrap() > 0);
        assert!(open_fds(pid).unwrap() >= 3);
    }

    #[test]
    fn machine_busy_is_at_most_total() {
        let (busy, total) = machine_cpu_seconds().unwrap();
        assert!(busy <= total && total > 0.0);
    }
}
