//! The agent's lifeline: a robust, process-shared mutex in a shared memory
//! page, locked by the agent's event-loop thread and never unlocked, so that
//! the guardian, blocked locking it too, learns the moment that thread dies.
//!
//! When a thread exits, however it exits (SIGKILL, OOM kill, panic, abort),
//! the kernel first walks the thread's list of robust mutexes, marks each one
//! it holds as abandoned and wakes a waiter: that is the start of the exit
//! (`exit_mm`), before the exit closes the agent's files. Closing them is
//! what takes long: detaching the eBPF programs waits for RCU grace periods,
//! which are slow to come while a real-time job holds a CPU. Everything
//! else that tells of a death comes after that: a pipe closes when its fd is
//! released, a pidfd and the parent-death signal at the very end.
use std::{
    io,
    os::fd::{AsFd, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
    ptr::NonNull,
};

// glibc's (and musl's) values, which the libc crate does not export.
const PTHREAD_PROCESS_SHARED: libc::c_int = 1;
const PTHREAD_MUTEX_ROBUST: libc::c_int = 1;

const SIZE: usize = std::mem::size_of::<libc::pthread_mutex_t>();

/// The agent's end: the lifeline, held by the thread that made it.
#[derive(Debug)]
pub struct Lifeline {
    memfd: OwnedFd,
}

impl Lifeline {
    /// Makes the lifeline and locks it on the calling thread, whose exit
    /// then releases it. The shared page stays mapped for the rest of the
    /// process's life (the kernel reads the mutex when the thread exits).
    pub fn hold() -> io::Result<Self> {
        // SAFETY: a valid C string; the fd is checked below.
        let fd = unsafe { libc::memfd_create(c"cosched-lifeline".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd owned by nobody else.
        let memfd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on our fd.
        if unsafe { libc::ftruncate(memfd.as_raw_fd(), SIZE as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mutex = map(memfd.as_fd())?;
        // SAFETY: `mutex` points to SIZE zeroed shared bytes, initialised here
        // once, before anyone else maps them.
        let rc = unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, PTHREAD_PROCESS_SHARED);
            libc::pthread_mutexattr_setrobust(&mut attr, PTHREAD_MUTEX_ROBUST);
            let rc = libc::pthread_mutex_init(mutex.as_ptr(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if rc == 0 {
                libc::pthread_mutex_lock(mutex.as_ptr())
            } else {
                rc
            }
        };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Self { memfd })
    }

    /// The shared page, to hand to the guardian.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.memfd.as_fd()
    }
}

/// The guardian's end: blocks until the thread holding the lifeline in
/// `memfd` has exited (at once if it already has).
pub fn wait_for_holder_exit(memfd: BorrowedFd<'_>) -> io::Result<()> {
    let mutex = map(memfd)?;
    // SAFETY: the page holds the mutex the agent initialised.
    let rc = unsafe { libc::pthread_mutex_lock(mutex.as_ptr()) };
    match rc {
        libc::EOWNERDEAD => Ok(()),
        // The holder never unlocks: 0 would mean it was never held.
        0 => Err(io::Error::other("the lifeline was not held")),
        rc => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// Maps the shared page (for the rest of the process's life).
fn map(memfd: BorrowedFd<'_>) -> io::Result<NonNull<libc::pthread_mutex_t>> {
    // SAFETY: a fresh shared mapping of our memfd, never unmapped.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            memfd.as_raw_fd(),
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(page.cast()).ok_or_else(|| io::Error::other("mmap returned null"))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// A thread holding the lifeline exits: a waiter learns it at once.
    #[test]
    fn waiter_learns_when_the_holder_thread_exits() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let lifeline = Lifeline::hold().unwrap();
            tx.send(lifeline.fd().try_clone_to_owned().unwrap())
                .unwrap();
            exit_rx.recv().unwrap();
        });
        let memfd = rx.recv().unwrap();
        let waiter = std::thread::spawn(move || {
            wait_for_holder_exit(memfd.as_fd()).unwrap();
            Instant::now()
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the holder still lives");
        let exited = Instant::now();
        exit_tx.send(()).unwrap();
        holder.join().unwrap();
        let learnt = waiter.join().unwrap();
        assert!(learnt >= exited);
    }
}
