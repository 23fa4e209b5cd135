//! Handing the memory of freed line buffers back to the system.
//!
//! glibc keeps freed heap memory for reuse, and after a large block is freed
//! it raises its mmap threshold, so later large blocks come from the heap as
//! well: once many connections have held long lines, a daemon's resident
//! memory stays at its peak although every buffer was freed. So when the
//! last large line buffer of the process is freed, `malloc_trim` returns the
//! free pages (at most once per burst of long lines, however many
//! connections held them).
use std::sync::atomic::{AtomicUsize, Ordering};

/// Large line buffers alive in the process.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Held by a line buffer while it is large; drop it after freeing the buffer.
#[derive(Debug)]
pub(crate) struct LargeBuffers(());

impl LargeBuffers {
    pub(crate) fn hold() -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        LargeBuffers(())
    }
}

impl Drop for LargeBuffers {
    fn drop(&mut self) {
        if LIVE.fetch_sub(1, Ordering::AcqRel) == 1 {
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
