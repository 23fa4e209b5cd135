//! Creating a process's counter file and mapping it.
//!
//! `<dir>/<tgid>.frames` is created with `O_CREAT | O_EXCL | O_NOFOLLOW`
//! relative to the opened directory, so a symlink or a file planted under
//! the name is never followed or reused. A file already there is the
//! leftover of an earlier process with the same pid (or of this process
//! before an exec): it is removed and created afresh when it belongs to this
//! user, and left alone (`EEXIST`) otherwise. The file is sized, mapped
//! shared and closed; the mapping stays for the life of the process.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use cosched_agent_common::rt_frames::{FILE_MODE, FILE_SUFFIX, FrameCounter, SIZE};

/// A counter file of this process, mapped.
#[derive(Debug)]
pub struct SharedCounter {
    counter: NonNull<FrameCounter>,
    path: PathBuf,
}

// SAFETY: the mapping is only ever accessed through the counter's atomics.
unsafe impl Send for SharedCounter {}
// SAFETY: as above; every method takes `&self` and uses atomics only.
unsafe impl Sync for SharedCounter {}

impl SharedCounter {
    /// Creates and publishes the counter of process `pid` in `dir`, owned
    /// by `euid`. `now_ns` and `cpu_ns` give the creation time and the CPU
    /// baseline the first frame's work is measured from.
    pub fn create(dir: &Path, pid: u32, euid: u32, now_ns: u64, cpu_ns: u64) -> io::Result<Self> {
        let dir_fd = open_dir(dir)?;
        let name = format!("{pid}{FILE_SUFFIX}");
        let c_name = CString::new(name.as_bytes()).map_err(|_| invalid())?;
        let file = match create_file(&dir_fd, &c_name) {
            Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {
                remove_leftover(&dir_fd, &c_name, euid)?;
                create_file(&dir_fd, &c_name)?
            }
            other => other?,
        };
        let mapped = size_and_map(&file).inspect_err(|_| {
            // Leave no half-made file behind for the agent to puzzle over.
            // SAFETY: valid directory fd and NUL-terminated name.
            unsafe { libc::unlinkat(dir_fd.as_raw_fd(), c_name.as_ptr(), 0) };
        })?;
        // SAFETY: `mapped` is a fresh, page-aligned, zero-filled shared
        // mapping of SIZE bytes, valid until `Drop` unmaps it; FrameCounter
        // is all atomics, for which zero bytes are valid values.
        let counter = unsafe { mapped.cast::<FrameCounter>().as_ref() };
        counter.publish(pid, now_ns);
        counter.sample_cpu(now_ns, || cpu_ns);
        Ok(SharedCounter {
            counter: mapped.cast(),
            path: dir.join(name),
        })
    }

    pub fn counter(&self) -> &FrameCounter {
        // SAFETY: mapped in `create`, unmapped only by `Drop` or `unmap`.
        unsafe { self.counter.as_ref() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The mapping's address, for the process-wide state's fast path.
    pub fn as_ptr(&self) -> *mut FrameCounter {
        self.counter.as_ptr()
    }

    /// Unmaps a counter whose `SharedCounter` is gone (leaked on purpose),
    /// e.g. the parent's counter in a forked child.
    ///
    /// # Safety
    /// `counter` came from [`SharedCounter::as_ptr`] of a leaked value and
    /// nothing uses it any more.
    pub unsafe fn unmap(counter: *mut FrameCounter) {
        // SAFETY: the caller promises a live mapping of SIZE bytes no one uses.
        unsafe { libc::munmap(counter.cast(), SIZE) };
    }
}

impl Drop for SharedCounter {
    fn drop(&mut self) {
        // SAFETY: our own mapping; `&self` borrows of it ended with `self`.
        unsafe { Self::unmap(self.counter.as_ptr()) };
    }
}

fn invalid() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let c_dir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| invalid())?;
    // SAFETY: NUL-terminated path; the fd returned is owned below.
    let fd = cvt(unsafe {
        libc::open(
            c_dir.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn create_file(dir: &OwnedFd, name: &CString) -> io::Result<OwnedFd> {
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: valid directory fd, NUL-terminated name; the fd is owned below.
    let fd = cvt(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, FILE_MODE) })?;
    // SAFETY: a fresh fd nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Removes a leftover file under our name if this user owns it; another
/// user's file (or a directory) is not ours to remove.
fn remove_leftover(dir: &OwnedFd, name: &CString, euid: u32) -> io::Result<()> {
    // SAFETY: all-zero is a valid `stat`; fstatat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, NUL-terminated name, writable stat.
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    if st.st_uid != euid || st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::EEXIST));
    }
    // SAFETY: valid fd and NUL-terminated name.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
    Ok(())
}

fn size_and_map(file: &OwnedFd) -> io::Result<NonNull<u8>> {
    // SAFETY: valid fd.
    cvt(unsafe { libc::ftruncate(file.as_raw_fd(), SIZE as libc::off_t) })?;
    // SAFETY: a new shared mapping of an fd we own; the kernel picks the
    // address. The mapping outlives the fd, which is closed by the caller.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(addr.cast()).ok_or_else(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cosched_agent_common::rt_frames::MAGIC;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn euid() -> u32 {
        // SAFETY: no arguments, cannot fail.
        unsafe { libc::geteuid() }
    }

    #[test]
    fn creates_a_published_file_named_after_the_pid() {
        let dir = tempfile::tempdir().unwrap();
        let shared = SharedCounter::create(dir.path(), 77, euid(), 5, 9).unwrap();
        assert_eq!(shared.path(), dir.path().join("77.frames"));
        let meta = fs::metadata(shared.path()).unwrap();
        assert_eq!(meta.len(), SIZE as u64);
        assert_eq!(meta.uid(), euid());
        let record = shared.counter().load();
        assert_eq!(
            (record.magic, record.pid, record.created_ns),
            (MAGIC, 77, 5)
        );
        let sample = record.cpu_sample().unwrap();
        assert_eq!((sample.cpu_ns, sample.frames), (9, 0), "the CPU baseline");
        shared.counter().record_frame(6, || 0);
        let bytes: [u8; SIZE] = fs::read(shared.path()).unwrap().try_into().unwrap();
        assert_eq!(
            cosched_agent_common::rt_frames::FrameRecord::from_bytes(&bytes).frames,
            1,
            "the file shows what the mapping wrote"
        );
    }

    #[test]
    fn a_leftover_of_this_user_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let old = SharedCounter::create(dir.path(), 12, euid(), 1, 0).unwrap();
        old.counter().record_frame(2, || 0);
        let new = SharedCounter::create(dir.path(), 12, euid(), 3, 0).unwrap();
        assert_eq!(new.counter().load().frames, 0);
        let bytes: [u8; SIZE] = fs::read(new.path()).unwrap().try_into().unwrap();
        let record = cosched_agent_common::rt_frames::FrameRecord::from_bytes(&bytes);
        assert_eq!((record.created_ns, record.frames), (3, 0), "a new file");
        assert_eq!(old.counter().load().frames, 1, "the old one is untouched");
    }

    #[test]
    fn a_file_of_another_user_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("13.frames"), b"theirs").unwrap();
        // Pretend to be someone else rather than needing a second user.
        let err = SharedCounter::create(dir.path(), 13, euid() + 1, 1, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(fs::read(dir.path().join("13.frames")).unwrap(), b"theirs");
    }

    #[test]
    fn a_symlink_under_the_name_is_removed_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, b"keep").unwrap();
        symlink(&target, dir.path().join("14.frames")).unwrap();
        let shared = SharedCounter::create(dir.path(), 14, euid(), 1, 0).unwrap();
        assert!(!fs::symlink_metadata(shared.path()).unwrap().is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn a_missing_or_unusable_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = SharedCounter::create(&missing, 1, euid(), 1, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let file = dir.path().join("plain");
        fs::write(&file, b"").unwrap();
        let err = SharedCounter::create(&file, 1, euid(), 1, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
        fs::create_dir(dir.path().join("15.frames")).unwrap();
        let err = SharedCounter::create(dir.path(), 15, euid(), 1, 0).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    }

    #[test]
    fn an_unwritable_directory_is_an_error_unless_root() {
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        fs::create_dir(&locked).unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
        let made = SharedCounter::create(&locked, 16, euid(), 1, 0);
        if euid() == 0 {
            assert!(made.is_ok(), "root writes anywhere");
        } else {
            assert_eq!(made.unwrap_err().raw_os_error(), Some(libc::EACCES));
        }
    }
}
