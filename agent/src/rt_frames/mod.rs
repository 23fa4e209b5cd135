//! Reading the frame counters of real-time processes (docs/rt-frames.md).
//!
//! An RT process reports its frames through the `cosched-rt` client
//! library into `<dir>/<tgid>.frames` (layout and protocol:
//! [`cosched_agent_common::rt_frames`]). Here the agent opens such a file
//! for one process ([`FrameReader::open`]: a regular file of the process's
//! user, opened without following symlinks or blocking), copies it out at
//! each [`FrameReader::read`] (checked again: magic, version, size, pid) and
//! turns successive readings into frames done ([`FrameTracker`]: a count
//! that goes back, or another file, is a restart).
//!
//! The engine reads every RT process's counter at its RT tick
//! (`engine/rt.rs`) and credits the frames to the process's windows
//! (`classes::rt_job`).

mod check;
mod files;
mod track;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use cosched_agent_common::rt_frames::{CpuSample, FILE_SUFFIX, FrameRecord, SIZE};

pub use check::{Expected, RtFramesError, check_file, check_record};
pub use files::{CounterFile, CounterFiles, FileMeta, LinuxCounterFile, LinuxCounterFiles};
pub use track::{FrameTracker, Progress};

/// How many copies [`FrameReader::read`] makes, at most, looking for two
/// consecutive ones that agree.
pub const READ_ATTEMPTS: usize = 8;

/// `<dir>/<pid>.frames`.
pub fn counter_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}{FILE_SUFFIX}"))
}

/// Which counter a reading came from: another file, or another incarnation
/// of one, is a new count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterIdentity {
    pub dev: u64,
    pub ino: u64,
    /// When the writer created the counter (CLOCK_MONOTONIC ns).
    pub created_ns: u64,
}

/// One consistent reading of a process's counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameReading {
    pub identity: CounterIdentity,
    /// Frames the process reported so far.
    pub frames: u64,
    /// CLOCK_MONOTONIC ns of its latest frame (0 before the first).
    pub last_frame_ns: u64,
    /// Its CPU time at a recent frame, if the writer has taken one.
    pub cpu: Option<CpuSample>,
}

/// One process's counter file, open.
#[derive(Debug)]
pub struct FrameReader<F> {
    file: F,
    meta: FileMeta,
    expected: Expected,
}

impl<F: CounterFile> FrameReader<F> {
    /// Opens the counter of `expected.pid` in `dir` and checks the file
    /// (see [`check_file`]); its content is checked at each read.
    pub fn open<S>(files: &S, dir: &Path, expected: Expected) -> Result<Self, RtFramesError>
    where
        S: CounterFiles<File = F>,
    {
        let file = files
            .open(&counter_path(dir, expected.pid))
            .map_err(RtFramesError::Open)?;
        let meta = file.meta().map_err(RtFramesError::Read)?;
        check_file(&meta, &expected)?;
        Ok(FrameReader {
            file,
            meta,
            expected,
        })
    }

    /// Copies the counter until two consecutive copies agree (see
    /// [`FrameRecord::settled`]), then checks it.
    pub fn read(&self) -> Result<FrameReading, RtFramesError> {
        let mut previous = self.copy()?;
        for _ in 1..READ_ATTEMPTS {
            let current = self.copy()?;
            if let Some(record) = FrameRecord::settled(&previous, &current) {
                check_record(&record, &self.expected)?;
                return Ok(FrameReading {
                    identity: CounterIdentity {
                        dev: self.meta.dev,
                        ino: self.meta.ino,
                        created_ns: record.created_ns,
                    },
                    frames: record.frames,
                    last_frame_ns: record.last_frame_ns,
                    cpu: record.cpu_sample(),
                });
            }
            previous = current;
        }
        Err(RtFramesError::Unsettled)
    }

    fn copy(&self) -> Result<FrameRecord, RtFramesError> {
        let mut bytes = [0; SIZE];
        let got = self
            .file
            .read_record(&mut bytes)
            .map_err(RtFramesError::Read)?;
        if got < SIZE {
            // Truncated by its writer since it was opened.
            return Err(RtFramesError::Short { len: got as u64 });
        }
        Ok(FrameRecord::from_bytes(&bytes))
    }
}
