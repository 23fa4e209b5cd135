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
