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
