//! Handing the memory of freed line buffers back to the system.
//!
//! glibc keeps freed heap memory for reuse, and after a large block is freed
//! it raises its mmap threshold, so later large blocks come from the heap as
//! well: once connections have held long lines, their freed buffers stay in
//! the daemon's resident memory as long as anything newer sits above them in
//! the heap (one connection still open is enough). So freeing a large line
//! buffer schedules a `malloc_trim`, which returns free pages from anywhere
//! in the heap; one trim serves a whole burst of closing connections.
use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

/// How long after a large buffer is freed the trim runs, so that the
/// buffers of connections closing together are freed by then.
const TRIM_DELAY: Duration = Duration::from_millis(100);

/// A trim is scheduled and has not run yet.
static TRIM_DUE: AtomicBool = AtomicBool::new(false);

/// Frees `buffer` and makes sure a trim follows shortly.
pub(crate) fn free_large(buffer: Vec<u8>) {
    drop(buffer);
    if TRIM_DUE.swap(true, Ordering::AcqRel) {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async {
                tokio::time::sleep(TRIM_DELAY).await;
                TRIM_DUE.store(false, Ordering::Release);
                return_free_memory();
            });
        }
        Err(_) => {
            TRIM_DUE.store(false, Ordering::Release);
            return_free_memory();
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_free_memory() {
    // SAFETY: malloc_trim only releases free pages of the allocator's own
    // arenas; it is safe to call at any time from any thread.
    unsafe { libc::malloc_trim(0) };
}

/// Other allocators (musl's) unmap large blocks when they are freed.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_free_memory() {}
