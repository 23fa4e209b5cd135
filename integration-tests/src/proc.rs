//! Reading and changing scheduling attributes of processes from tests, with
//! the plain syscalls (independently of the agent's own code).
use std::io;

/// (policy, nice, rt priority) of a task as the kernel reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sched {
    pub policy: i32,
    pub nice: i32,
    pub priority: i32,
}

/// The kernel's `struct sched_attr` (SCHED_ATTR_SIZE_VER1).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// The task's attributes in one `sched_getattr`: one consistent snapshot,
/// even while the agent changes them (separate calls for the policy and
/// the priority could straddle the end of a boost). The kernel reports the
/// nice value of time-shared tasks only (0 for real-time ones).
pub fn sched_of(pid: u32) -> io::Result<Sched> {
    let mut attr = SchedAttr::default();
    // SAFETY: the kernel writes at most `size` bytes into `attr`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            pid as libc::pid_t,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Sched {
        policy: attr.policy as i32,
        nice: attr.nice,
        priority: attr.priority as i32,
    })
}

pub fn set_nice(pid: u32, nice: i32) {
    // SAFETY: plain syscall.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) };
    assert_eq!(rc, 0, "setpriority: {}", io::Error::last_os_error());
}

/// State letter of /proc/<pid>/stat (R, S, T, ...).
pub fn state_of(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// A process by pid and start time, so a reused pid is not mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    start: u64,
}

impl Process {
    /// The process that has `pid` now.
    pub fn of(pid: u32) -> Option<Self> {
        Some(Self {
            pid,
            start: start_time(pid)?,
        })
    }

    /// Whether it has not exited (a zombie has).
    pub fn is_alive(&self) -> bool {
        start_time(self.pid) == Some(self.start)
            && state_of(self.pid).is_some_and(|state| state != 'Z' && state != 'X')
    }
}

/// Field 22 of /proc/<pid>/stat: start time in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// A sleeping child process the test owns; killed on drop.
pub struct Sleeper(pub std::process::Child);

impl Sleeper {
    pub fn start() -> Self {
        Self(
            std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("spawn sleep"),
        )
    }
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Thread ids of a process (its /proc/<pid>/task entries); empty once gone.
pub fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What one thread has cost so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadCost {
    /// Its name (/proc/<pid>/task/<tid>/comm).
    pub name: String,
    /// Context switches: voluntary (the thread slept, so each is a wake-up)
    /// and involuntary (preempted while it ran).
    pub voluntary: u64,
    pub involuntary: u64,
    /// Time on a CPU, ns (first field of /proc/<pid>/task/<tid>/schedstat).
    pub cpu_ns: u64,
}

/// What each thread of a process alive now has cost so far, by thread id.
pub fn thread_costs(pid: u32) -> std::collections::BTreeMap<u32, ThreadCost> {
    threads_of(pid)
        .into_iter()
        .filter_map(|tid| {
            let dir = format!("/proc/{pid}/task/{tid}");
            let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
            let count = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let (voluntary, involuntary) = (
                count("voluntary_ctxt_switches:"),
                count("nonvoluntary_ctxt_switches:"),
            );
            let cpu_ns = std::fs::read_to_string(format!("{dir}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            let name = std::fs::read_to_string(format!("{dir}/comm"))
                .unwrap_or_default()
                .trim()
                .to_string();
            Some((
                tid,
                ThreadCost {
                    name,
                    voluntary,
                    involuntary,
                    cpu_ns,
                },
            ))
        })
        .collect()
}

/// What a process's threads cost during a window of time.
#[derive(Clone, Debug)]
pub struct CostOver {
    pub seconds: f64,
    /// Context switches of all its threads per second: each voluntary one
    /// is a wake-up, each involuntary one a preemption (the thread was awake).
    pub switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// CPU time of all its threads, percent of one CPU.
    pub cpu_percent: f64,
    /// (thread name, context switches in the window), busiest first.
    pub by_thread: Vec<(String, u64)>,
}

impl CostOver {
    /// Watches `pid` for `window`. A thread that started in the window counts
    /// with its whole life; one that exited in it is missed.
    pub fn measure(pid: u32, window: std::time::Duration) -> Self {
        let before = thread_costs(pid);
        let started = std::time::Instant::now();
        std::thread::sleep(window);
        let after = thread_costs(pid);
        let seconds = started.elapsed().as_secs_f64();
        let mut by_thread = Vec::new();
        let (mut switches, mut involuntary, mut cpu_ns) = (0, 0, 0);
        for (tid, now) in after {
            let then = before.get(&tid).cloned().unwrap_or_default();
            let thread_involuntary = now.involuntary.saturating_sub(then.involuntary);
            let thread_switches = now.voluntary.saturating_sub(then.voluntary) + thread_involuntary;
            switches += thread_switches;
            involuntary += thread_involuntary;
            cpu_ns += now.cpu_ns.saturating_sub(then.cpu_ns);
            by_thread.push((format!("{} ({tid})", now.name), thread_switches));
        }
        by_thread.sort_by_key(|(_, switches)| std::cmp::Reverse(*switches));
        Self {
            seconds,
            switches_per_s: switches as f64 / seconds,
            involuntary_per_s: involuntary as f64 / seconds,
            cpu_percent: cpu_ns as f64 / 1e9 / seconds * 100.0,
            by_thread,
        }
    }
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[u32]) {
    // SAFETY: cpu_set_t is plain data; the CPU numbers are online CPUs.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    assert_eq!(rc, 0, "sched_setaffinity: {}", io::Error::last_os_error());
}

/// Runs the calling thread at SCHED_FIFO `priority` (0: SCHED_OTHER), so a
/// test measuring a latency is not itself delayed by a loaded machine.
/// Processes it starts do not inherit it.
pub fn set_current_thread_fifo(priority: i32) {
    let policy = if priority > 0 {
        libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK
    } else {
        libc::SCHED_OTHER
    };
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &p) };
    assert_eq!(rc, 0, "sched_setscheduler: {}", io::Error::last_os_error());
}

/// Number of online CPUs.
pub fn online_cpus() -> u32 {
    // SAFETY: plain sysconf.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as u32 }
}

/// Samples the states of `pids` every 3 ms for at most `within` and says
/// whether each was seen stopped (`T`) and running (`R`): what gang slices
/// do to a job's ranks. Returns early once every one was seen both ways;
/// the per-pid flags `(stopped, ran)` otherwise, for the failure message.
pub fn seen_stopped_and_running(
    pids: &[u32],
    within: std::time::Duration,
) -> Result<(), (Vec<bool>, Vec<bool>)> {
    let mut stopped = vec![false; pids.len()];
    let mut ran = vec![false; pids.len()];
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        for (index, &pid) in pids.iter().enumerate() {
            match state_of(pid) {
                Some('T') => stopped[index] = true,
                Some('R') => ran[index] = true,
                _ => {}
            }
        }
        if stopped.iter().chain(&ran).all(|&seen| seen) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    Err((stopped, ran))
}
