//! A task that checks for a message once and then computes, over and over
//! (as an application that tests a request and goes on with its work):
//! `poll(fd, 1, 0)` on a socket nobody writes to, then `COMPUTE_MS` of CPU
//! time. Runs until killed. Pinned to the CPU given as its first argument.
use std::{
    net::UdpSocket,
    os::fd::AsRawFd,
    time::{Duration, Instant},
};

fn main() {
    let mut args = std::env::args().skip(1);
    let cpu: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let compute = Duration::from_millis(args.next().and_then(|a| a.parse().ok()).unwrap_or(20));
    // SAFETY: cpu_set_t is plain data; the set outlives the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let quiet = UdpSocket::bind("127.0.0.1:0").expect("bind a UDP socket");
    println!("ready");
    loop {
        let mut fd = libc::pollfd {
            fd: quiet.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut fd, 1, 0) };
        assert_eq!(ready, 0, "nobody writes to this socket");
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < compute {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
