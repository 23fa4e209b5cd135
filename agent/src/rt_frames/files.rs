//! The file I/O of the frame reader, behind a seam so tests can fake it.
//!
//! The real files are read with `pread`, never mapped: the writer owns its
//! file and could truncate it under a mapping, and the agent's next read
//! of the mapping would die of SIGBUS. A copy of 128 bytes costs one
//! system call and cannot fault.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use cosched_agent_common::rt_frames::SIZE;

/// What `fstat` says about an open counter file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub regular: bool,
    pub owner_uid: u32,
    pub len: u64,
    pub dev: u64,
    pub ino: u64,
}

/// Opens counter files.
pub trait CounterFiles {
    type File: CounterFile;

    /// Opens `path` for reading: not through a symlink, and without
    /// blocking (a FIFO planted under the name must not hang the agent).
    fn open(&self, path: &Path) -> io::Result<Self::File>;
}

/// One open counter file.
pub trait CounterFile {
    fn meta(&self) -> io::Result<FileMeta>;

    /// Copies the first [`SIZE`] bytes of the file into `buf`; returns how
    /// many there were.
    fn read_record(&self, buf: &mut [u8; SIZE]) -> io::Result<usize>;
}

/// The real filesystem.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxCounterFiles;

/// A counter file opened by [`LinuxCounterFiles`].
#[derive(Debug)]
pub struct LinuxCounterFile {
    fd: OwnedFd,
}

impl CounterFiles for LinuxCounterFiles {
    type File = LinuxCounterFile;

    fn open(&self, path: &Path) -> io::Result<LinuxCounterFile> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: NUL-terminated path; the fd is owned below.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nothing else owns.
        Ok(LinuxCounterFile {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }
}

impl CounterFile for LinuxCounterFile {
    fn meta(&self) -> io::Result<FileMeta> {
        // SAFETY: all-zero is a valid `stat`; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and a writable stat.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FileMeta {
            regular: st.st_mode & libc::S_IFMT == libc::S_IFREG,
            owner_uid: st.st_uid,
            len: st.st_size.max(0) as u64,
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }

    fn read_record(&self, buf: &mut [u8; SIZE]) -> io::Result<usize> {
        // SAFETY: valid fd; `buf` is writable for SIZE bytes.
        let got = unsafe { libc::pread(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), SIZE, 0) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(got as usize)
    }
}
