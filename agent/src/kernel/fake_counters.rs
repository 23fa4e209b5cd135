//! Counter files in memory, for tests: a test writes a process's frame
//! record under its path; readers the agent opened keep reading the same
//! "inode" until a test replaces the file with a new one.
use std::{
    collections::{BTreeMap, BTreeSet},
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use cosched_agent_common::rt_frames::{FrameRecord, MAGIC, SIZE, VERSION};

use crate::rt_frames::{CounterFile, CounterFiles, FileMeta};

#[derive(Debug)]
struct Inode {
    meta: FileMeta,
    bytes: [u8; SIZE],
}

#[derive(Debug, Default)]
struct Fs {
    files: BTreeMap<PathBuf, Arc<Mutex<Inode>>>,
    dirs: BTreeSet<PathBuf>,
    next_ino: u64,
}

/// The fake kernel's counter files and directories (cheap to clone: the
/// clones share them).
#[derive(Clone, Debug, Default)]
pub struct FakeCounters {
    fs: Arc<Mutex<Fs>>,
}

/// A counter file a reader opened.
#[derive(Debug)]
pub struct FakeCounterFile {
    inode: Arc<Mutex<Inode>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A published record of process `pid`: `frames` reported, CPU time
/// `cpu_ns` sampled at the last one, created at `created_ns`.
pub fn record(pid: u32, created_ns: u64, frames: u64, cpu_ns: u64) -> FrameRecord {
    FrameRecord {
        magic: MAGIC,
        version: VERSION,
        size: SIZE as u32,
        pid,
        created_ns,
        frames,
        last_frame_ns: created_ns,
        cpu_seq: 2,
        cpu_ns,
        cpu_frames: frames,
        cpu_at_ns: created_ns,
    }
}

impl FakeCounters {
    /// Writes `record` into the file at `path` owned by `uid`, creating it
    /// (a new inode) if there is none.
    pub fn write(&self, path: &Path, uid: u32, record: &FrameRecord) {
        let mut fs = lock(&self.fs);
        if let Some(inode) = fs.files.get(path) {
            lock(inode).bytes = record.to_bytes();
            return;
        }
        fs.next_ino += 1;
        let meta = FileMeta {
            regular: true,
            owner_uid: uid,
            len: SIZE as u64,
            dev: 1,
            ino: fs.next_ino,
        };
        let inode = Inode {
            meta,
            bytes: record.to_bytes(),
        };
        fs.files
            .insert(path.to_path_buf(), Arc::new(Mutex::new(inode)));
    }

    pub fn file_exists(&self, path: &Path) -> bool {
        lock(&self.fs).files.contains_key(path)
    }

    pub fn dir_exists(&self, dir: &Path) -> bool {
        lock(&self.fs).dirs.contains(dir)
    }

    pub(super) fn create_dir(&self, dir: &Path) {
        let mut fs = lock(&self.fs);
        fs.files.retain(|path, _| !path.starts_with(dir));
        fs.dirs.insert(dir.to_path_buf());
    }

    pub(super) fn remove_dir(&self, dir: &Path) {
        let mut fs = lock(&self.fs);
        fs.files.retain(|path, _| !path.starts_with(dir));
        fs.dirs.remove(dir);
    }
}

impl CounterFiles for FakeCounters {
    type File = FakeCounterFile;

    fn open(&self, path: &Path) -> io::Result<FakeCounterFile> {
        let fs = lock(&self.fs);
        let inode = fs
            .files
            .get(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        Ok(FakeCounterFile {
            inode: Arc::clone(inode),
        })
    }
}

impl CounterFile for FakeCounterFile {
    fn meta(&self) -> io::Result<FileMeta> {
        Ok(lock(&self.inode).meta)
    }

    fn read_record(&self, buf: &mut [u8; SIZE]) -> io::Result<usize> {
        *buf = lock(&self.inode).bytes;
        Ok(SIZE)
    }
}
