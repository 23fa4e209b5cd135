//! Acting as users who are not root (`setpriv`), and process groups that
//! are killed whatever way a test ends.
use std::{
    os::unix::process::CommandExt as _,
    process::{Child, Command},
    time::Duration,
};

/// A user the tests act as, and another one (no passwd entry needed).
pub const USER: u32 = 65534;
pub const OTHER: u32 = 65533;

/// A command that runs what is appended to it as `uid` (real, effective and
/// saved uid and gid; no supplementary groups).
pub fn as_user(uid: u32) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups")
        .arg("--");
    cmd
}

/// Children started in process groups of their own, each group killed
/// (SIGKILL) and the child reaped on drop.
#[derive(Default)]
pub struct Groups(pub Vec<Child>);

impl Groups {
    /// Starts `cmd` in a new process group; its pid.
    pub fn spawn(&mut self, mut cmd: Command) -> u32 {
        let child = cmd.process_group(0).spawn().unwrap();
        let pid = child.id();
        self.0.push(child);
        pid
    }

    /// `sleep 600` as `uid` (root: 0), once it runs `sleep` itself (not
    /// `setpriv` still).
    pub fn sleeper(&mut self, uid: u32) -> u32 {
        let mut cmd = if uid == 0 {
            Command::new("sleep")
        } else {
            let mut cmd = as_user(uid);
            cmd.arg("sleep");
            cmd
        };
        cmd.arg("600");
        let pid = self.spawn(cmd);
        crate::coord::wait_until("setpriv to exec sleep", Duration::from_secs(5), || {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "sleep"))
        });
        pid
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // SAFETY: a plain syscall on a group this test created.
            unsafe {
                libc::kill(-(child.id() as i32), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}
