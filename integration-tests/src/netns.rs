//! Two network namespaces joined by a veth pair: the smallest real "cluster"
//! network. Names are unique per test; everything is removed on drop.
use std::process::Command;

/// Runs `ip ARGS`, panicking with its stderr when it fails.
pub(crate) fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct NodePair {
    pub ns: [String; 2],
    pub addr: [String; 2],
}

impl NodePair {
    /// Creates namespaces `<tag>a`/`<tag>b` with 10.203.<subnet>.1 and .2.
    pub fn new(subnet: u8) -> Self {
        let tag = crate::unique("csit");
        let ns = [format!("{tag}a"), format!("{tag}b")];
        let addr = [format!("10.203.{subnet}.1"), format!("10.203.{subnet}.2")];
        for n in &ns {
            ip(&["netns", "add", n]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        let (va, vb) = (format!("{tag}va"), format!("{tag}vb"));
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        for (i, v) in [&va, &vb].into_iter().enumerate() {
            ip(&["link", "set", v, "netns", &ns[i]]);
            ip(&[
                "-n",
                &ns[i],
                "addr",
                "add",
                &format!("{}/24", addr[i]),
                "dev",
                v,
            ]);
            ip(&["-n", &ns[i], "link", "set", v, "up"]);
        }
        Self { ns, addr }
    }

    /// A command that runs `program` inside node `i`'s network namespace only
    /// (tracefs and the rest of the mounts stay visible).
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/run/netns/{}", self.ns[i]))
            .arg("--")
            .arg(program);
        c
    }
}

impl Drop for NodePair {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Runs `f` on a thread of this process that has entered the network
/// namespace `ns` (setns changes the calling thread only): sockets it opens
/// are the namespace's, e.g. to reach a server listening on its 127.0.0.1.
/// A panic in `f` is the caller's.
pub fn in_namespace<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    use std::os::fd::AsRawFd as _;
    let path = format!("/run/netns/{ns}");
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: a valid namespace file descriptor; affects this thread only.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
            f()
        });
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
