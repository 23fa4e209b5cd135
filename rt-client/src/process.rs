//! The one counter of this process: made by the first frame (or `init`),
//! found by every later one with a single atomic load.
//!
//! When no file can be made the frames still count, in a counter in this
//! process's memory that only the process sees: the application keeps
//! running and `frames()` keeps working, the failure is reported once.
//! A forked child starts over with a counter of its own (a `pthread_atfork`
//! handler): otherwise its frames would land in its parent's file.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use cosched_agent_common::rt_frames::{DEFAULT_DIR, DIR_ENV, FrameCounter};

use crate::clock::{monotonic_ns, process_cpu_ns};
use crate::file::SharedCounter;

/// Where frames go: the shared file's mapping or [`LOCAL`]; null until made.
static COUNTER: AtomicPtr<FrameCounter> = AtomicPtr::new(null_mut());
/// The shared file (a leaked box), when there is one.
static SHARED: AtomicPtr<SharedCounter> = AtomicPtr::new(null_mut());
/// The in-process counter used when no file could be made.
static LOCAL: FrameCounter = FrameCounter::zeroed();
/// errno of the failed attempt while frames go to [`LOCAL`], else 0.
static FAILURE: AtomicI32 = AtomicI32::new(0);
/// Held while the counter is made, and across `fork` so a child never
/// inherits a half-made state. A spin lock, not a mutex: the fork handlers
/// must be able to take and reset it.
static MAKING: AtomicBool = AtomicBool::new(false);
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);

/// The process's counter, made now if needed. The error comes only from
/// the call that tried to make the file and failed; frames then go to the
/// in-process counter.
#[inline]
pub fn current() -> (&'static FrameCounter, Option<io::Error>) {
    let counter = COUNTER.load(Ordering::Acquire);
    if counter.is_null() {
        return make();
    }
    // SAFETY: COUNTER holds null, &LOCAL, or a mapping that stays until a
    // forked child replaces it, and a child has a single thread then.
    (unsafe { &*counter }, None)
}

/// Frames reported so far (0 before the first).
pub fn frames() -> u64 {
    let counter = COUNTER.load(Ordering::Acquire);
    if counter.is_null() {
        return 0;
    }
    // SAFETY: as in `current`.
    unsafe { &*counter }.frames.load(Ordering::Relaxed)
}

/// Whether frames reach a shared file; the reason (the same every time) if not.
pub fn status() -> io::Result<()> {
    match FAILURE.load(Ordering::Relaxed) {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// The shared file, if frames go to one.
pub fn path() -> Option<PathBuf> {
    let shared = SHARED.load(Ordering::Acquire);
    // SAFETY: a leaked box, never freed.
    (!shared.is_null()).then(|| unsafe { &*shared }.path().to_path_buf())
}

#[cold]
fn make() -> (&'static FrameCounter, Option<io::Error>) {
    let _making = Making::lock();
    let counter = COUNTER.load(Ordering::Acquire);
    if !counter.is_null() {
        // SAFETY: as in `current`; another thread made it first.
        return (unsafe { &*counter }, None);
    }
    install_fork_handlers();
    // SAFETY: no arguments, cannot fail.
    let (pid, euid) = unsafe { (libc::getpid() as u32, libc::geteuid()) };
    let now = monotonic_ns();
    match SharedCounter::create(&dir(), pid, euid, now, process_cpu_ns()) {
        Ok(shared) => {
            let shared: &'static SharedCounter = Box::leak(Box::new(shared));
            SHARED.store(ptr::from_ref(shared).cast_mut(), Ordering::Release);
            COUNTER.store(shared.as_ptr(), Ordering::Release);
            (shared.counter(), None)
        }
        Err(err) => {
            FAILURE.store(err.raw_os_error().unwrap_or(libc::EIO), Ordering::Relaxed);
            LOCAL.publish(pid, now);
            COUNTER.store(ptr::from_ref(&LOCAL).cast_mut(), Ordering::Release);
            (&LOCAL, Some(err))
        }
    }
}

/// `$COSCHED_RT_DIR`, or the default when unset or empty. Read with
/// `getenv`, not `std::env`, whose lock a forked child may find held.
pub fn dir() -> PathBuf {
    let name = c"COSCHED_RT_DIR";
    debug_assert_eq!(name.to_bytes(), DIR_ENV.as_bytes());
    // SAFETY: NUL-terminated name; the value is copied before returning.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if !value.is_null() {
        // SAFETY: getenv returns a NUL-terminated string.
        let bytes = unsafe { CStr::from_ptr(value) }.to_bytes();
        if !bytes.is_empty() {
            return PathBuf::from(OsStr::from_bytes(bytes));
        }
    }
    Path::new(DEFAULT_DIR).to_path_buf()
}

struct Making;

impl Making {
    fn lock() -> Making {
        acquire();
        Making
    }
}

impl Drop for Making {
    fn drop(&mut self) {
        MAKING.store(false, Ordering::Release);
    }
}

fn acquire() {
    while MAKING
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
}

fn install_fork_handlers() {
    if !FORK_HANDLERS.swap(true, Ordering::Relaxed) {
        // SAFETY: three plain functions that stay loaded with this code.
        // A failure (ENOMEM) only loses the child's reset.
        unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork_parent), Some(in_child)) };
    }
}

extern "C" fn before_fork() {
    acquire();
}

extern "C" fn after_fork_parent() {
    MAKING.store(false, Ordering::Release);
}

/// The child is a new process: its frames need a file of their own, made
/// by its first frame. The parent's mapping goes (the file stays the
/// parent's), the in-process counter restarts.
extern "C" fn in_child() {
    COUNTER.store(null_mut(), Ordering::Relaxed);
    let shared = SHARED.swap(null_mut(), Ordering::Relaxed);
    if !shared.is_null() {
        // SAFETY: the parent's leaked counter; nothing in this one-thread
        // child uses it once COUNTER is null. The box itself stays leaked.
        unsafe { SharedCounter::unmap((*shared).as_ptr()) };
    }
    clear(&LOCAL);
    crate::gate::reset_in_child();
    FAILURE.store(0, Ordering::Relaxed);
    MAKING.store(false, Ordering::Release);
}

fn clear(counter: &FrameCounter) {
    let zero64 = |field: &AtomicU64| field.store(0, Ordering::Relaxed);
    let zero32 = |field: &AtomicU32| field.store(0, Ordering::Relaxed);
    zero64(&counter.magic);
    zero32(&counter.version);
    zero32(&counter.size);
    zero32(&counter.pid);
    zero64(&counter.created_ns);
    zero64(&counter.frames);
    zero64(&counter.last_frame_ns);
    zero64(&counter.cpu_seq);
    zero64(&counter.cpu_ns);
    zero64(&counter.cpu_frames);
    zero64(&counter.cpu_at_ns);
}
