//! The C ABI (include/cosched_rt.h documents it for C callers). Thin
//! wrappers: the behaviour is the Rust API's.

use std::ffi::c_int;
use std::io;

/// 0, or the negative errno of `err` (EIO if it has none).
fn code(result: io::Result<()>) -> c_int {
    match result {
        Ok(()) => 0,
        Err(err) => -err.raw_os_error().unwrap_or(libc::EIO),
    }
}

/// See `cosched_rt_frame_done` in cosched_rt.h.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_rt_frame_done() -> c_int {
    code(crate::frame_done())
}

/// See `cosched_rt_init` in cosched_rt.h.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_rt_init() -> c_int {
    code(crate::init())
}

/// See `cosched_rt_frames` in cosched_rt.h.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_rt_frames() -> u64 {
    crate::frames()
}

/// See `cosched_rt_first_frame_ns` in cosched_rt.h.
#[unsafe(no_mangle)]
pub extern "C" fn cosched_rt_first_frame_ns() -> u64 {
    crate::first_frame_gate_ns().unwrap_or(0)
}
