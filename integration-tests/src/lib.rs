//! Harness for tests on the real kernel: finding the built binaries, running
//! agents (optionally inside a network namespace), building two-node
//! networks, running benchmark jobs, reading metrics.
//!
//! These tests need root (eBPF, sched_setattr on other tasks, namespaces) and
//! the release binaries (`cargo xtask build`, or `cargo xtask test` which
//! builds them and sets `COSCHED_BIN_DIR`). Without either they fail with a
//! message saying so: they never pass silently.
pub mod agent;
pub mod coord;
pub mod mpi;
pub mod netns;
pub mod pair;
pub mod proc;
pub mod synth;
pub mod users;

use std::path::PathBuf;

/// Directory with `cosched-agent`, `cosched-synth`, ... .
pub fn bin_dir() -> PathBuf {
    let dir = std::env::var_os("COSCHED_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release"));
    for b in ["cosched-agent", "cosched-synth"] {
        assert!(
            dir.join(b).is_file(),
            "{} not found: build the release binaries first (`cargo xtask build`) or set COSCHED_BIN_DIR",
            dir.join(b).display()
        );
    }
    dir
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Fails the test (never skips it) when not running as root.
pub fn require_root() {
    // SAFETY: plain syscall.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "this test needs root (eBPF, sched_setattr, network namespaces): run it via `cargo xtask test` as root"
    );
}

/// A name unique to this test process and call site, for namespaces, ports,
/// sockets.
pub fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{tag}{}x{}",
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Ports handed out by [`free_port`]: below the kernel's ephemeral range
/// (32768–60999 by default), so an outgoing connection of a daemon or of
/// Prometheus can never take a port between our check and the daemon's bind
/// (a port from `bind(:0)` is ephemeral and was taken that way in CI).
const TEST_PORTS: std::ops::Range<u16> = 10_000..20_000;

/// A port free right now for TCP and UDP on every address, never handed out
/// twice by this process; test processes start at pid-derived points so
/// concurrent test binaries rarely probe the same ports.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static USED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let mut guard = USED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let used = guard.get_or_insert_with(HashSet::new);
    let span = u32::from(TEST_PORTS.end - TEST_PORTS.start);
    let start = std::process::id().wrapping_mul(7919) % span;
    for step in 0..span {
        let port = TEST_PORTS.start + ((start + step) % span) as u16;
        if used.contains(&port) {
            continue;
        }
        // Daemons bind 0.0.0.0 (metrics) or 127.0.0.1; both must be free.
        let free = std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
            && std::net::UdpSocket::bind(("0.0.0.0", port)).is_ok();
        if free {
            used.insert(port);
            return port;
        }
    }
    panic!("no free port in {TEST_PORTS:?}");
}
