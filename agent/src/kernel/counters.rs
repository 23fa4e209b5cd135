//! What counting the frames of real-time processes needs from the system:
//! their counter files (docs/rt-frames.md), who owns them, and the counter
//! directories the agent makes for the RT jobs it launches.
use std::{
    fs, io,
    os::unix::fs::{DirBuilderExt as _, MetadataExt as _},
    path::{Path, PathBuf},
};

use cosched_agent_common::first_frame::{FILE_NAME as FIRST_FRAME_FILE, FirstFrameGate};
use cosched_agent_common::rt_frames::DIR_ENV;

use crate::rt_frames::{CounterFiles, LinuxCounterFiles};

/// The open counter file type of a kernel's [`FrameCounters::Files`].
pub type CounterFileOf<K> = <<K as FrameCounters>::Files as CounterFiles>::File;

pub trait FrameCounters {
    type Files: CounterFiles;

    /// Opens counter files (see [`crate::rt_frames::FrameReader::open`]).
    fn counter_files(&self) -> &Self::Files;
    /// The effective uid of process `pid` (the owner of `/proc/<pid>`):
    /// the only user whose counter file is believed for it.
    fn process_uid(&self, pid: u32) -> io::Result<u32>;
    /// `COSCHED_RT_DIR` as process `pid` was started with (None: unset or
    /// empty; the client library then uses its default directory).
    fn process_rt_dir(&self, pid: u32) -> io::Result<Option<PathBuf>>;
    /// Makes an RT job's counter directory (mode 0755, the agent's user,
    /// who is also the user of the processes it launches), its parents if
    /// needed; a leftover of the same name (an earlier agent's, which died
    /// before removing it) is replaced.
    fn create_counter_dir(&mut self, dir: &Path) -> io::Result<()>;
    /// Removes a counter directory and the counters in it; nothing to do
    /// when it is gone.
    fn remove_counter_dir(&mut self, dir: &Path) -> io::Result<()>;
    /// Publishes an RT job's first-frame gate in its counter directory
    /// (`<dir>/first-frame`, mode 0644), replacing any earlier one whole:
    /// a reader sees the old record or the new one, never a mix.
    fn write_first_frame_gate(&mut self, dir: &Path, gate: &FirstFrameGate) -> io::Result<()>;
}

pub(super) fn write_first_frame_gate(dir: &Path, gate: &FirstFrameGate) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = dir.join(format!(".{FIRST_FRAME_FILE}.tmp"));
    let _ = fs::remove_file(&tmp);
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    file.write_all(&gate.encode())?;
    drop(file);
    fs::rename(&tmp, dir.join(FIRST_FRAME_FILE))
}

/// The real filesystem and `/proc`.
pub(super) fn process_uid(pid: u32) -> io::Result<u32> {
    Ok(fs::metadata(format!("/proc/{pid}"))?.uid())
}

pub(super) fn process_rt_dir(pid: u32) -> io::Result<Option<PathBuf>> {
    let environ = fs::read(format!("/proc/{pid}/environ"))?;
    Ok(rt_dir_in(&environ))
}

/// `COSCHED_RT_DIR` in the NUL-separated text of `/proc/<pid>/environ`.
pub fn rt_dir_in(environ: &[u8]) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let key = format!("{DIR_ENV}=");
    environ
        .split(|&b| b == 0)
        .filter_map(|entry| entry.strip_prefix(key.as_bytes()))
        .next_back()
        .filter(|value| !value.is_empty())
        .map(|value| PathBuf::from(std::ffi::OsStr::from_bytes(value)))
}

pub(super) fn create_counter_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::DirBuilder::new().mode(0o755).create(dir)?;
    // Whatever the agent's umask: readable by all, like the library's files.
    fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
}

pub(super) fn remove_counter_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The counter files of the real filesystem.
pub(super) const LINUX_FILES: LinuxCounterFiles = LinuxCounterFiles;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rt_dir_is_read_from_the_environment_block() {
        let env = b"PATH=/bin\0COSCHED_RT_DIR=/var/lib/cosched/rt/7\0HOME=/root\0";
        assert_eq!(rt_dir_in(env), Some(PathBuf::from("/var/lib/cosched/rt/7")));
        assert_eq!(rt_dir_in(b"COSCHED_RT_DIR=\0"), None, "empty: the default");
        assert_eq!(rt_dir_in(b"XCOSCHED_RT_DIR=/x\0"), None);
    }

    #[test]
    fn a_counter_dir_replaces_a_leftover_and_goes_with_its_counters() {
        let root = std::env::temp_dir().join(format!("cosched-rtdir-{}", std::process::id()));
        let dir = root.join("rt/7");
        create_counter_dir(&dir).unwrap();
        fs::write(dir.join("1.frames"), b"old").unwrap();
        create_counter_dir(&dir).unwrap();
        assert!(!dir.join("1.frames").exists(), "a leftover is replaced");
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o755);
        fs::write(dir.join("2.frames"), b"x").unwrap();
        remove_counter_dir(&dir).unwrap();
        assert!(!dir.exists());
        create_counter_dir(&dir).unwrap();
        write_first_frame_gate(&dir, &FirstFrameGate::pending(9)).unwrap();
        write_first_frame_gate(&dir, &FirstFrameGate::at(7, 9)).unwrap();
        let bytes = fs::read(dir.join(FIRST_FRAME_FILE)).unwrap();
        assert_eq!(
            FirstFrameGate::decode(&bytes),
            Ok(FirstFrameGate::at(7, 9)),
            "the newer gate, whole"
        );
        assert_eq!(
            fs::metadata(dir.join(FIRST_FRAME_FILE)).unwrap().mode() & 0o777,
            0o644
        );
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temporary left");
        remove_counter_dir(&dir).unwrap();
        remove_counter_dir(&dir).unwrap();
        fs::remove_dir_all(root).unwrap();
    }
}
