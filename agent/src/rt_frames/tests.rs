//! The reader against fake files (every way a file can be wrong) and a few
//! real ones (symlink, FIFO, owner), and the tracker's arithmetic.

use std::cell::Cell;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use cosched_agent_common::rt_frames::{CpuSample, FrameRecord, MAGIC, SIZE, VERSION};

use super::*;

const DIR: &str = "/run/cosched/rt";
const PID: u32 = 321;
const UID: u32 = 1000;
const EXPECTED: Expected = Expected { pid: PID, uid: UID };

fn record(frames: u64) -> FrameRecord {
    FrameRecord {
        magic: MAGIC,
        version: VERSION,
        size: SIZE as u32,
        pid: PID,
        created_ns: 5,
        frames,
        last_frame_ns: 100 + frames,
        cpu_seq: 2,
        cpu_ns: 1_000 * frames,
        cpu_frames: frames,
        cpu_at_ns: 100 + frames,
    }
}

fn meta() -> FileMeta {
    FileMeta {
        regular: true,
        owner_uid: UID,
        len: SIZE as u64,
        dev: 1,
        ino: 2,
    }
}

/// A file whose successive reads return `copies` in order, the last one
/// from then on (a writer at work between reads).
#[derive(Debug)]
struct FakeFile {
    meta: FileMeta,
    copies: Vec<Vec<u8>>,
    reads: Cell<usize>,
}

impl CounterFile for FakeFile {
    fn meta(&self) -> io::Result<FileMeta> {
        Ok(self.meta)
    }

    fn read_record(&self, buf: &mut [u8; SIZE]) -> io::Result<usize> {
        let at = self.reads.get().min(self.copies.len() - 1);
        self.reads.set(self.reads.get() + 1);
        let copy = &self.copies[at];
        buf[..copy.len()].copy_from_slice(copy);
        Ok(copy.len())
    }
}

#[derive(Default)]
struct FakeFiles {
    files: HashMap<PathBuf, (FileMeta, Vec<Vec<u8>>)>,
}

impl FakeFiles {
    fn with(meta: FileMeta, copies: Vec<Vec<u8>>) -> Self {
        let mut files = FakeFiles::default();
        files
            .files
            .insert(counter_path(Path::new(DIR), PID), (meta, copies));
        files
    }

    fn holding(records: &[FrameRecord]) -> Self {
        Self::with(
            meta(),
            records.iter().map(|r| r.to_bytes().to_vec()).collect(),
        )
    }
}

impl CounterFiles for FakeFiles {
    type File = FakeFile;

    fn open(&self, path: &Path) -> io::Result<FakeFile> {
        let (meta, copies) = self
            .files
            .get(path)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        Ok(FakeFile {
            meta: *meta,
            copies: copies.clone(),
            reads: Cell::new(0),
        })
    }
}

fn read(files: &FakeFiles) -> Result<FrameReading, RtFramesError> {
    FrameReader::open(files, Path::new(DIR), EXPECTED)?.read()
}

#[test]
fn a_good_counter_reads_back_what_its_writer_stored() {
    let reading = read(&FakeFiles::holding(&[record(7)])).unwrap();
    assert_eq!(
        reading,
        FrameReading {
            identity: CounterIdentity {
                dev: 1,
                ino: 2,
                created_ns: 5
            },
            frames: 7,
            last_frame_ns: 107,
            cpu: Some(CpuSample {
                cpu_ns: 7_000,
                frames: 7,
                at_ns: 107
            }),
        }
    );
}

#[test]
fn the_file_is_named_after_the_pid() {
    assert_eq!(
        counter_path(Path::new("/d"), 42),
        PathBuf::from("/d/42.frames")
    );
    let err = FrameReader::open(
        &FakeFiles::holding(&[record(1)]),
        Path::new(DIR),
        Expected { pid: 9, uid: UID },
    )
    .unwrap_err();
    assert!(matches!(err, RtFramesError::Open(e) if e.raw_os_error() == Some(libc::ENOENT)));
}

#[test]
fn wrong_content_is_named() {
    let mut wrong_magic = record(1);
    wrong_magic.magic = u64::from_le_bytes(*b"NOTFRAME");
    assert!(matches!(
        read(&FakeFiles::holding(&[wrong_magic])),
        Err(RtFramesError::Magic(m)) if m == wrong_magic.magic
    ));
    let mut unpublished = record(0);
    unpublished.magic = 0;
    assert!(matches!(
        read(&FakeFiles::holding(&[unpublished])),
        Err(RtFramesError::Unpublished)
    ));
    let mut version = record(1);
    version.version = VERSION + 1;
    assert!(matches!(
        read(&FakeFiles::holding(&[version])),
        Err(RtFramesError::Version { found }) if found == VERSION + 1
    ));
    let mut size = record(1);
    size.size = 64;
    assert!(matches!(
        read(&FakeFiles::holding(&[size])),
        Err(RtFramesError::Size { found: 64 })
    ));
}

#[test]
fn a_counter_naming_another_pid_does_not_count() {
    let mut other = record(3);
    other.pid = PID + 1;
    assert!(matches!(
        read(&FakeFiles::holding(&[other])),
        Err(RtFramesError::Pid { found, expected: PID }) if found == PID + 1
    ));
}

#[test]
fn a_file_of_another_user_does_not_count() {
    let theirs = FileMeta {
        owner_uid: 0,
        ..meta()
    };
    let files = FakeFiles::with(theirs, vec![record(1).to_bytes().to_vec()]);
    assert!(matches!(
        read(&files),
        Err(RtFramesError::Owner {
            owner: 0,
            expected: UID
        })
    ));
}

#[test]
fn only_a_regular_file_counts() {
    let fifo = FileMeta {
        regular: false,
        ..meta()
    };
    let files = FakeFiles::with(fifo, vec![record(1).to_bytes().to_vec()]);
    assert!(matches!(read(&files), Err(RtFramesError::NotRegular)));
}

#[test]
fn a_short_file_is_refused_at_open_and_a_truncated_one_at_read() {
    let short = FileMeta { len: 64, ..meta() };
    let files = FakeFiles::with(short, vec![vec![0; 64]]);
    assert!(matches!(
        read(&files),
        Err(RtFramesError::Short { len: 64 })
    ));

    // Full when opened, cut by its writer afterwards.
    let files = FakeFiles::with(meta(), vec![record(1).to_bytes()[..16].to_vec()]);
    let reader = FrameReader::open(&files, Path::new(DIR), EXPECTED).unwrap();
    assert!(matches!(
        reader.read(),
        Err(RtFramesError::Short { len: 16 })
    ));
}

#[test]
fn a_copy_torn_by_a_writer_is_read_again() {
    // The first copy mixes two counts; the next two agree.
    let mut torn = record(0x1_0000_0000).to_bytes();
    torn[32..36].copy_from_slice(&0xffff_ffffu32.to_ne_bytes());
    let files = FakeFiles::with(
        meta(),
        vec![
            torn.to_vec(),
            record(0x1_0000_0000).to_bytes().to_vec(),
            record(0x1_0000_0000).to_bytes().to_vec(),
        ],
    );
    assert_eq!(read(&files).unwrap().frames, 0x1_0000_0000);
}

#[test]
fn a_counter_that_changes_at_every_copy_is_unsettled() {
    let copies: Vec<FrameRecord> = (0..READ_ATTEMPTS as u64 + 1).map(record).collect();
    assert!(matches!(
        read(&FakeFiles::holding(&copies)),
        Err(RtFramesError::Unsettled)
    ));
    // One agreeing pair within the attempts is enough.
    let mut copies: Vec<FrameRecord> = (0..READ_ATTEMPTS as u64 - 1).map(record).collect();
    copies.push(record(READ_ATTEMPTS as u64 - 2));
    assert_eq!(
        read(&FakeFiles::holding(&copies)).unwrap().frames,
        READ_ATTEMPTS as u64 - 2
    );
}

#[test]
fn a_half_written_cpu_sample_leaves_the_frames_readable() {
    let mut sampling = record(4);
    sampling.cpu_seq = 3;
    let reading = read(&FakeFiles::holding(&[sampling])).unwrap();
    assert_eq!((reading.frames, reading.cpu), (4, None));
}

fn reading(frames: u64, created_ns: u64) -> FrameReading {
    FrameReading {
        identity: CounterIdentity {
            dev: 1,
            ino: 2,
            created_ns,
        },
        frames,
        last_frame_ns: frames,
        cpu: Some(CpuSample {
            cpu_ns: 500 * frames,
            frames,
            at_ns: frames,
        }),
    }
}

#[test]
fn the_tracker_counts_new_frames_and_the_work_per_frame() {
    let mut tracker = FrameTracker::new();
    assert_eq!(
        tracker.observe(reading(10, 5)),
        Progress::First { frames: 10 }
    );
    assert_eq!(
        tracker.observe(reading(14, 5)),
        Progress::Advanced {
            new_frames: 4,
            new_cpu_ns: Some(2_000),
            work_per_frame_ns: Some(500)
        }
    );
    let mut no_sample = reading(14, 5);
    no_sample.cpu = None;
    assert_eq!(
        tracker.observe(no_sample),
        Progress::Advanced {
            new_frames: 0,
            new_cpu_ns: None,
            work_per_frame_ns: None
        }
    );
    assert_eq!(tracker.last().unwrap().frames, 14);
}

#[test]
fn a_counter_that_goes_back_or_is_another_file_is_a_restart() {
    let mut tracker = FrameTracker::new();
    tracker.observe(reading(10, 5));
    assert_eq!(
        tracker.observe(reading(3, 5)),
        Progress::Restarted { frames: 3 }
    );
    assert_eq!(
        tracker.observe(reading(5, 5)),
        Progress::Advanced {
            new_frames: 2,
            new_cpu_ns: Some(1_000),
            work_per_frame_ns: Some(500)
        }
    );
    // Same count, new incarnation (an exec, or a reused pid).
    assert_eq!(
        tracker.observe(reading(5, 6)),
        Progress::Restarted { frames: 5 }
    );
    let mut other_inode = reading(9, 6);
    other_inode.identity.ino = 3;
    assert_eq!(
        tracker.observe(other_inode),
        Progress::Restarted { frames: 9 }
    );
}

mod real_files {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, symlink};

    fn uid() -> u32 {
        // SAFETY: no arguments, cannot fail.
        unsafe { libc::geteuid() }
    }

    fn write_counter(dir: &Path, pid: u32, frames: u64) -> PathBuf {
        let mut counter = record(frames);
        counter.pid = pid;
        let path = counter_path(dir, pid);
        fs::write(&path, counter.to_bytes()).unwrap();
        path
    }

    #[test]
    fn a_real_counter_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_counter(dir.path(), 77, 12);
        let expected = Expected {
            pid: 77,
            uid: uid(),
        };
        let reader = FrameReader::open(&LinuxCounterFiles, dir.path(), expected).unwrap();
        let reading = reader.read().unwrap();
        assert_eq!(reading.frames, 12);
        assert_eq!(reading.identity.ino, fs::metadata(&path).unwrap().ino());
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = write_counter(dir.path(), 78, 1);
        symlink(&real, counter_path(dir.path(), 79)).unwrap();
        let expected = Expected {
            pid: 79,
            uid: uid(),
        };
        let err = FrameReader::open(&LinuxCounterFiles, dir.path(), expected).unwrap_err();
        assert!(
            matches!(&err, RtFramesError::Open(e) if e.raw_os_error() == Some(libc::ELOOP)),
            "{err}"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = counter_path(dir.path(), 80);
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        let expected = Expected {
            pid: 80,
            uid: uid(),
        };
        let err = FrameReader::open(&LinuxCounterFiles, dir.path(), expected).unwrap_err();
        assert!(matches!(err, RtFramesError::NotRegular), "{err}");
    }

    #[test]
    fn the_owner_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        write_counter(dir.path(), 81, 1);
        let expected = Expected {
            pid: 81,
            uid: uid() + 1,
        };
        let err = FrameReader::open(&LinuxCounterFiles, dir.path(), expected).unwrap_err();
        assert!(matches!(err, RtFramesError::Owner { .. }), "{err}");
    }

    #[test]
    fn a_file_truncated_after_opening_is_short_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_counter(dir.path(), 82, 1);
        let expected = Expected {
            pid: 82,
            uid: uid(),
        };
        let reader = FrameReader::open(&LinuxCounterFiles, dir.path(), expected).unwrap();
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        assert!(matches!(
            reader.read(),
            Err(RtFramesError::Short { len: 0 })
        ));
    }
}
