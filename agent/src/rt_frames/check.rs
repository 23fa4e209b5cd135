//! Whether a counter file may be believed (pure).
//!
//! The file is named after the process, but anyone who can write the
//! directory can put a file there: it counts only if it is a regular file
//! of the process's own user (so one user cannot report frames for
//! another's process; within one user, processes can already ptrace and
//! signal each other) and carries the counter layout of this version with
//! the process's pid inside.

use cosched_agent_common::rt_frames::{FrameRecord, MAGIC, SIZE, VERSION};
use thiserror::Error;

use super::files::FileMeta;

/// The process a counter file is read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Its thread-group id (the file is `<pid>.frames`).
    pub pid: u32,
    /// Its effective uid (the owner of `/proc/<pid>`): the user whose
    /// files it creates.
    pub uid: u32,
}

/// Why a counter file was not read.
#[derive(Debug, Error)]
pub enum RtFramesError {
    /// Includes ENOENT (the process has not reported yet, or not in this
    /// directory) and ELOOP (a symlink under the name).
    #[error("cannot open the frame counter: {0}")]
    Open(std::io::Error),
    #[error("cannot read the frame counter: {0}")]
    Read(std::io::Error),
    #[error("the frame counter is not a regular file")]
    NotRegular,
    #[error("the frame counter belongs to uid {owner}, the process runs as uid {expected}")]
    Owner { owner: u32, expected: u32 },
    #[error("the frame counter file has {len} bytes, a counter needs {SIZE}")]
    Short { len: u64 },
    #[error("the frame counter is not published yet (its writer is creating it)")]
    Unpublished,
    #[error("not a frame counter (magic {0:#018x})")]
    Magic(u64),
    #[error("frame counter version {found}, this agent reads version {VERSION}")]
    Version { found: u32 },
    #[error("the frame counter says it has {found} bytes, this version has {SIZE}")]
    Size { found: u32 },
    #[error("the frame counter is process {found}'s, not {expected}'s")]
    Pid { found: u32, expected: u32 },
    #[error("the frame counter changed during every read (frames faster than the reads)")]
    Unsettled,
}

/// The file itself: checked once, when it is opened.
pub fn check_file(meta: &FileMeta, expected: &Expected) -> Result<(), RtFramesError> {
    if !meta.regular {
        return Err(RtFramesError::NotRegular);
    }
    if meta.owner_uid != expected.uid {
        return Err(RtFramesError::Owner {
            owner: meta.owner_uid,
            expected: expected.uid,
        });
    }
    if meta.len < SIZE as u64 {
        return Err(RtFramesError::Short { len: meta.len });
    }
    Ok(())
}

/// What it holds: checked at every read (its writer may rewrite anything).
pub fn check_record(record: &FrameRecord, expected: &Expected) -> Result<(), RtFramesError> {
    match record.magic {
        MAGIC => {}
        0 => return Err(RtFramesError::Unpublished),
        other => return Err(RtFramesError::Magic(other)),
    }
    if record.version != VERSION {
        return Err(RtFramesError::Version {
            found: record.version,
        });
    }
    if record.size != SIZE as u32 {
        return Err(RtFramesError::Size { found: record.size });
    }
    if record.pid != expected.pid {
        return Err(RtFramesError::Pid {
            found: record.pid,
            expected: expected.pid,
        });
    }
    Ok(())
}
