//! The waiting detectors' cost: ns per system call of a loop that makes
//! the calls a message-passing library makes while it waits — `poll(fd, 1,
//! 0)`, `epoll_wait(ep, …, 0)`, `sched_yield()` — plus `getppid()`, which no
//! detector watches: enabling any `syscalls` tracepoint sends every system
//! call of every task through the kernel's tracing entry path, and
//! `getppid` shows that cost alone.
//!
//! One thread of the bench process, pinned to a CPU, makes the calls on
//! request, so the same thread is measured unmanaged and managed (adopted
//! with the whole process).
use std::{
    net::UdpSocket,
    os::fd::AsRawFd,
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde::Serialize;

/// The calls measured, in report order.
pub const CALLS: [Call; 4] = [Call::Poll, Call::EpollWait, Call::SchedYield, Call::Getppid];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    Poll,
    EpollWait,
    SchedYield,
    Getppid,
}

impl Call {
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Poll => "poll(0)",
            Call::EpollWait => "epoll_wait(0)",
            Call::SchedYield => "sched_yield",
            Call::Getppid => "getppid",
        }
    }
}

/// Median ns per call in each mode, and the added cost.
#[derive(Clone, Debug, Serialize)]
pub struct CallCost {
    pub call: Call,
    pub baseline_ns: f64,
    pub attached_ns: f64,
    pub managed_ns: f64,
    /// Medians of the per-repetition differences to the baseline.
    pub added_ns_attached: f64,
    pub added_ns_managed: f64,
}

/// A pinned thread that makes `n` calls of a kind on request.
pub struct SyscallLoop {
    go: mpsc::Sender<(Call, u64)>,
    done: mpsc::Receiver<anyhow::Result<Duration>>,
}

impl SyscallLoop {
    pub fn start(cpu: usize) -> anyhow::Result<Self> {
        let (go_tx, go_rx) = mpsc::channel::<(Call, u64)>();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("syscalls".into())
            .spawn(move || {
                let _ = super::overhead::pin(cpu);
                let quiet = match Quiet::open() {
                    Ok(q) => q,
                    Err(e) => {
                        let _ = done_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok((call, n)) = go_rx.recv() {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        quiet.call(call);
                    }
                    if done_tx.send(Ok(t0.elapsed())).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Self {
            go: go_tx,
            done: done_rx,
        })
    }

    /// ns per call over `n` calls.
    pub fn measure(&self, call: Call, n: u64) -> anyhow::Result<f64> {
        self.go.send((call, n))?;
        let d = self
            .done
            .recv_timeout(Duration::from_secs(120))
            .context("syscall loop stalled")??;
        Ok(d.as_nanos() as f64 / n as f64)
    }
}

/// A socket nobody writes to and an epoll set over it: every poll is empty.
struct Quiet {
    socket: UdpSocket,
    epoll: i32,
}

impl Quiet {
    fn open() -> anyhow::Result<Self> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        // SAFETY: plain syscalls; the epoll fd is closed on drop.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            bail!("epoll_create1: {}", std::io::Error::last_os_error());
        }
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: valid fds and event.
        if unsafe { libc::epoll_ctl(epoll, libc::EPOLL_CTL_ADD, socket.as_raw_fd(), &mut ev) } != 0
        {
            bail!("epoll_ctl: {}", std::io::Error::last_os_error());
        }
        Ok(Self { socket, epoll })
    }

    fn call(&self, call: Call) {
        // SAFETY: plain syscalls on fds this struct owns, with valid buffers.
        unsafe {
            match call {
                Call::Poll => {
                    let mut fd = libc::pollfd {
                        fd: self.socket.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    libc::poll(&mut fd, 1, 0);
                }
                Call::EpollWait => {
                    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
                    libc::epoll_wait(self.epoll, ev.as_mut_ptr(), 4, 0);
                }
                Call::SchedYield => {
                    libc::sched_yield();
                }
                Call::Getppid => {
                    libc::getppid();
                }
            }
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        // SAFETY: our own fd, closed once.
        unsafe { libc::close(self.epoll) };
    }
}
