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

pub fn sched_of(pid: u32) -> io::Result<Sched> {
    let pid = pid as libc::pid_t;
    // SAFETY: plain syscalls on a pid.
    unsafe {
        let policy = libc::sched_getscheduler(pid);
        if policy < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut p = libc::sched_param { sched_priority: 0 };
        if libc::sched_getparam(pid, &mut p) != 0 {
            return Err(io::Error::last_os_error());
        }
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, pid as libc::id_t);
        if nice == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sched {
            policy: policy & !libc::SCHED_RESET_ON_FORK,
            nice,
            priority: p.sched_priority,
        })
    }
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

/// The thread ids of a process.
pub fn threads_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
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
