//! The frame counter of a real-time process (see docs/rt-frames.md).
//!
//! An RT process reports every frame it completes through the `cosched-rt`
//! client library, which keeps one [`FrameCounter`] in a small shared file,
//! `<dir>/<tgid>.frames` ([`DIR_ENV`], [`DEFAULT_DIR`]); the agent reads it to
//! count frames per window and deadline misses.
//!
//! Writer side (the client library, one per process, any thread):
//! [`FrameCounter::publish`] once, then [`FrameCounter::record_frame`] per
//! frame: an atomic add, an atomic max and one load, plus, at most once per
//! [`CPU_SAMPLE_INTERVAL_NS`], a CPU-time sample under a sequence counter.
//! Reader side: the agent copies the bytes out of the file (it never maps
//! it: a process could truncate its own file under the mapping and kill the
//! reader with SIGBUS) and keeps a copy only when two consecutive copies
//! agree ([`FrameRecord::settled`]); a reader that maps the record (the
//! library itself, tests) uses [`FrameCounter::load`].
//!
//! Every field is an atomic of fixed width (same size and layout as the
//! integer), `#[repr(C)]`, with explicit padding and a size assertion, so the
//! file has the same bytes for every writer and reader on the machine.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// First field of a published counter ("CSRTFRMS" little-endian). Written
/// last at creation, so a reader that sees it sees the header.
pub const MAGIC: u64 = u64::from_le_bytes(*b"CSRTFRMS");
/// Layout version; a reader refuses others. New fields go into the reserved
/// tail and bump it.
pub const VERSION: u32 = 1;
/// Bytes of one counter, and of its file.
pub const SIZE: usize = 128;
/// Environment variable naming the directory of the counter files (the
/// agent sets it for the RT jobs it launches).
pub const DIR_ENV: &str = "COSCHED_RT_DIR";
/// Directory used when [`DIR_ENV`] is unset or empty.
pub const DEFAULT_DIR: &str = "/run/cosched/rt";
/// A process's counter file is `<tgid><FILE_SUFFIX>` in the directory.
pub const FILE_SUFFIX: &str = ".frames";
/// Permission bits of a counter file: the owner writes, anyone may read (a
/// frame count is not secret; the agent checks the owner, not the mode).
pub const FILE_MODE: u32 = 0o644;
/// The CPU-time sample is refreshed by a frame at most this often (ns of
/// CLOCK_MONOTONIC). CPU-time clocks are system calls on Linux (no vDSO;
/// docs/rt-frames.md has the cost): sampling keeps them off the frame path
/// of fast frame rates while periods of a millisecond or more still get a
/// sample per frame.
pub const CPU_SAMPLE_INTERVAL_NS: u64 = 1_000_000;

/// How often [`FrameCounter::load`] retries a CPU sample a writer is
/// changing before it gives up on the sample (the frame count is still read).
const SEQ_RETRIES: u32 = 64;

/// One process's frame counter: the whole content of its counter file.
///
/// All times are CLOCK_MONOTONIC nanoseconds (the clock of
/// `bpf_ktime_get_ns`, so the agent can compare them with eBPF timestamps);
/// CPU time is the process's CLOCK_PROCESS_CPUTIME_ID.
#[repr(C)]
#[derive(Debug)]
pub struct FrameCounter {
    /// [`MAGIC`] once published; 0 while the writer fills the header.
    pub magic: AtomicU64,
    /// [`VERSION`].
    pub version: AtomicU32,
    /// [`SIZE`] (lets a reader check it got the whole record).
    pub size: AtomicU32,
    /// Thread-group id (process id) of the writer.
    pub pid: AtomicU32,
    pub _pad0: AtomicU32,
    /// When the writer created the counter: two incarnations of a pid's file
    /// differ here even if the filesystem reuses the inode.
    pub created_ns: AtomicU64,
    /// Frames reported so far (atomically incremented).
    pub frames: AtomicU64,
    /// Time of the latest frame (atomic max: threads race, it never goes back).
    pub last_frame_ns: AtomicU64,
    /// Sequence counter of the CPU sample below: odd while a writer changes
    /// it, 0 before the first sample.
    pub cpu_seq: AtomicU64,
    /// Process CPU time at the sample.
    pub cpu_ns: AtomicU64,
    /// `frames` when the sample was taken: per-frame work between two
    /// samples is Δcpu_ns / Δcpu_frames.
    pub cpu_frames: AtomicU64,
    /// When the sample was taken.
    pub cpu_at_ns: AtomicU64,
    /// Zero; for later versions.
    pub _reserved: [AtomicU64; 6],
}
const _: () = assert!(core::mem::size_of::<FrameCounter>() == SIZE);
const _: () = assert!(core::mem::align_of::<FrameCounter>() == 8);

/// Byte offsets of the fields, for readers that copy the file.
pub mod offset {
    use super::FrameCounter;
    use core::mem::offset_of;

    pub const MAGIC: usize = offset_of!(FrameCounter, magic);
    pub const VERSION: usize = offset_of!(FrameCounter, version);
    pub const SIZE: usize = offset_of!(FrameCounter, size);
    pub const PID: usize = offset_of!(FrameCounter, pid);
    pub const CREATED_NS: usize = offset_of!(FrameCounter, created_ns);
    pub const FRAMES: usize = offset_of!(FrameCounter, frames);
    pub const LAST_FRAME_NS: usize = offset_of!(FrameCounter, last_frame_ns);
    pub const CPU_SEQ: usize = offset_of!(FrameCounter, cpu_seq);
    pub const CPU_NS: usize = offset_of!(FrameCounter, cpu_ns);
    pub const CPU_FRAMES: usize = offset_of!(FrameCounter, cpu_frames);
    pub const CPU_AT_NS: usize = offset_of!(FrameCounter, cpu_at_ns);

    // The layout is the file format: pin it.
    const _: () = assert!(MAGIC == 0 && VERSION == 8 && SIZE == 12 && PID == 16);
    const _: () = assert!(CREATED_NS == 24 && FRAMES == 32 && LAST_FRAME_NS == 40);
    const _: () = assert!(CPU_SEQ == 48 && CPU_NS == 56 && CPU_FRAMES == 64 && CPU_AT_NS == 72);
}

impl FrameCounter {
    /// An all-zero, unpublished counter (what a fresh file holds).
    pub const fn zeroed() -> Self {
        FrameCounter {
            magic: AtomicU64::new(0),
            version: AtomicU32::new(0),
            size: AtomicU32::new(0),
            pid: AtomicU32::new(0),
            _pad0: AtomicU32::new(0),
            created_ns: AtomicU64::new(0),
            frames: AtomicU64::new(0),
            last_frame_ns: AtomicU64::new(0),
            cpu_seq: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
            cpu_frames: AtomicU64::new(0),
            cpu_at_ns: AtomicU64::new(0),
            _reserved: [const { AtomicU64::new(0) }; 6],
        }
    }

    /// Writer: fills the header of a zeroed counter for process `pid`, then
    /// publishes it (the magic last).
    pub fn publish(&self, pid: u32, created_ns: u64) {
        self.version.store(VERSION, Ordering::Relaxed);
        self.size.store(SIZE as u32, Ordering::Relaxed);
        self.pid.store(pid, Ordering::Relaxed);
        self.created_ns.store(created_ns, Ordering::Relaxed);
        self.magic.store(MAGIC, Ordering::Release);
    }

    /// Writer: one frame is done at `now_ns`; returns the frame count.
    /// `cpu_ns` (the process's CPU time) is called only when a CPU sample
    /// is due. Safe from any number of threads at once.
    #[inline]
    pub fn record_frame(&self, now_ns: u64, cpu_ns: impl FnOnce() -> u64) -> u64 {
        let frames = self.frames.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        self.last_frame_ns.fetch_max(now_ns, Ordering::Relaxed);
        let sampled_at = self.cpu_at_ns.load(Ordering::Relaxed);
        if now_ns.saturating_sub(sampled_at) >= CPU_SAMPLE_INTERVAL_NS {
            self.sample_cpu(now_ns, cpu_ns);
        }
        frames
    }

    /// Writer: records the process's CPU time against the current frame
    /// count. A thread that finds another one sampling skips its sample
    /// rather than wait (the sample is periodic, the frame is not delayed).
    pub fn sample_cpu(&self, now_ns: u64, cpu_ns: impl FnOnce() -> u64) {
        let seq = self.cpu_seq.load(Ordering::Relaxed);
        if seq & 1 == 1
            || self
                .cpu_seq
                .compare_exchange(
                    seq,
                    seq.wrapping_add(1),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        // The odd sequence must be visible before any of the data it guards.
        fence(Ordering::Release);
        let cpu = cpu_ns();
        self.cpu_ns.store(cpu, Ordering::Relaxed);
        self.cpu_frames
            .store(self.frames.load(Ordering::Relaxed), Ordering::Relaxed);
        self.cpu_at_ns.store(now_ns, Ordering::Relaxed);
        self.cpu_seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Reader through a mapping: a copy with a consistent CPU sample (or
    /// none, if a writer kept changing it, or died changing it).
    pub fn load(&self) -> FrameRecord {
        let mut record = FrameRecord {
            magic: self.magic.load(Ordering::Acquire),
            version: self.version.load(Ordering::Relaxed),
            size: self.size.load(Ordering::Relaxed),
            pid: self.pid.load(Ordering::Relaxed),
            created_ns: self.created_ns.load(Ordering::Relaxed),
            frames: self.frames.load(Ordering::Relaxed),
            last_frame_ns: self.last_frame_ns.load(Ordering::Relaxed),
            cpu_seq: 1,
            cpu_ns: 0,
            cpu_frames: 0,
            cpu_at_ns: 0,
        };
        for _ in 0..SEQ_RETRIES {
            let before = self.cpu_seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                core::hint::spin_loop();
                continue;
            }
            let cpu_ns = self.cpu_ns.load(Ordering::Relaxed);
            let cpu_frames = self.cpu_frames.load(Ordering::Relaxed);
            let cpu_at_ns = self.cpu_at_ns.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.cpu_seq.load(Ordering::Relaxed) == before {
                record.cpu_seq = before;
                record.cpu_ns = cpu_ns;
                record.cpu_frames = cpu_frames;
                record.cpu_at_ns = cpu_at_ns;
                break;
            }
        }
        record
    }
}

/// A plain copy of a [`FrameCounter`], as a reader got it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameRecord {
    pub magic: u64,
    pub version: u32,
    pub size: u32,
    pub pid: u32,
    pub created_ns: u64,
    pub frames: u64,
    pub last_frame_ns: u64,
    /// Odd: no consistent CPU sample in this copy.
    pub cpu_seq: u64,
    pub cpu_ns: u64,
    pub cpu_frames: u64,
    pub cpu_at_ns: u64,
}

/// The process's CPU time at one frame count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// CLOCK_PROCESS_CPUTIME_ID, ns.
    pub cpu_ns: u64,
    /// Frames reported when it was read.
    pub frames: u64,
    /// CLOCK_MONOTONIC when it was read.
    pub at_ns: u64,
}

impl FrameRecord {
    /// Decodes the bytes of a counter file (native byte order: the file
    /// never leaves the machine).
    pub fn from_bytes(bytes: &[u8; SIZE]) -> Self {
        let u64_at = |at: usize| {
            let mut field = [0; 8];
            field.copy_from_slice(&bytes[at..at + 8]);
            u64::from_ne_bytes(field)
        };
        let u32_at = |at: usize| {
            let mut field = [0; 4];
            field.copy_from_slice(&bytes[at..at + 4]);
            u32::from_ne_bytes(field)
        };
        FrameRecord {
            magic: u64_at(offset::MAGIC),
            version: u32_at(offset::VERSION),
            size: u32_at(offset::SIZE),
            pid: u32_at(offset::PID),
            created_ns: u64_at(offset::CREATED_NS),
            frames: u64_at(offset::FRAMES),
            last_frame_ns: u64_at(offset::LAST_FRAME_NS),
            cpu_seq: u64_at(offset::CPU_SEQ),
            cpu_ns: u64_at(offset::CPU_NS),
            cpu_frames: u64_at(offset::CPU_FRAMES),
            cpu_at_ns: u64_at(offset::CPU_AT_NS),
        }
    }

    /// The bytes a counter holding this record has (reserved tail zero).
    pub fn to_bytes(&self) -> [u8; SIZE] {
        let mut bytes = [0; SIZE];
        let mut put = |at: usize, field: &[u8]| bytes[at..at + field.len()].copy_from_slice(field);
        put(offset::MAGIC, &self.magic.to_ne_bytes());
        put(offset::VERSION, &self.version.to_ne_bytes());
        put(offset::SIZE, &self.size.to_ne_bytes());
        put(offset::PID, &self.pid.to_ne_bytes());
        put(offset::CREATED_NS, &self.created_ns.to_ne_bytes());
        put(offset::FRAMES, &self.frames.to_ne_bytes());
        put(offset::LAST_FRAME_NS, &self.last_frame_ns.to_ne_bytes());
        put(offset::CPU_SEQ, &self.cpu_seq.to_ne_bytes());
        put(offset::CPU_NS, &self.cpu_ns.to_ne_bytes());
        put(offset::CPU_FRAMES, &self.cpu_frames.to_ne_bytes());
        put(offset::CPU_AT_NS, &self.cpu_at_ns.to_ne_bytes());
        bytes
    }

    /// Two copies read one after the other, from a reader that copies the
    /// file: the second if they agree, else `None` (read again).
    ///
    /// A copy made by the kernel (`pread`) is not promised to read each
    /// 8-byte field in one access, so one copy may mix old and new bytes of
    /// a field a writer changed meanwhile. Fields only grow and the CPU
    /// sample changes with its sequence, so two equal consecutive copies
    /// hold values the writer really stored; an odd sequence in both means a
    /// writer died while sampling, and the record is kept without a sample.
    pub fn settled(first: &FrameRecord, second: &FrameRecord) -> Option<FrameRecord> {
        (first == second).then_some(*second)
    }

    /// The CPU sample, if this copy has a consistent one.
    pub fn cpu_sample(&self) -> Option<CpuSample> {
        (self.cpu_seq != 0 && self.cpu_seq & 1 == 0).then_some(CpuSample {
            cpu_ns: self.cpu_ns,
            frames: self.cpu_frames,
            at_ns: self.cpu_at_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use std::sync::Arc;
    use std::thread;
    use std::vec::Vec;

    const PID: u32 = 4242;

    fn published(at: u64) -> FrameCounter {
        let counter = FrameCounter::zeroed();
        counter.publish(PID, at);
        counter
    }

    #[test]
    fn a_fresh_counter_is_unpublished_and_publishing_writes_the_header() {
        let counter = FrameCounter::zeroed();
        assert_eq!(counter.load().magic, 0);
        counter.publish(PID, 7);
        let record = counter.load();
        assert_eq!(
            (
                record.magic,
                record.version,
                record.size,
                record.pid,
                record.created_ns
            ),
            (MAGIC, VERSION, SIZE as u32, PID, 7)
        );
        assert_eq!(record.frames, 0);
        assert_eq!(record.cpu_sample(), None, "never sampled");
    }

    #[test]
    fn frames_count_and_the_last_frame_time_never_goes_back() {
        let counter = published(0);
        assert_eq!(counter.record_frame(100, || 5), 1);
        assert_eq!(counter.record_frame(300, || 5), 2);
        // A thread that read its clock earlier reports later.
        assert_eq!(counter.record_frame(200, || 5), 3);
        let record = counter.load();
        assert_eq!((record.frames, record.last_frame_ns), (3, 300));
    }

    #[test]
    fn the_cpu_sample_is_taken_at_most_once_per_interval() {
        let counter = published(0);
        let mut reads = 0;
        let mut cpu = |value: u64| {
            reads += 1;
            move || value
        };
        let start = CPU_SAMPLE_INTERVAL_NS;
        counter.record_frame(start, cpu(10));
        counter.record_frame(start + 1, cpu(11));
        counter.record_frame(start + CPU_SAMPLE_INTERVAL_NS - 1, cpu(12));
        assert_eq!(
            counter.load().cpu_sample(),
            Some(CpuSample {
                cpu_ns: 10,
                frames: 1,
                at_ns: start
            })
        );
        counter.record_frame(start + CPU_SAMPLE_INTERVAL_NS, cpu(40));
        assert_eq!(
            counter.load().cpu_sample(),
            Some(CpuSample {
                cpu_ns: 40,
                frames: 4,
                at_ns: start + CPU_SAMPLE_INTERVAL_NS
            })
        );
    }

    #[test]
    fn cpu_clock_is_only_read_when_a_sample_is_due() {
        let counter = published(0);
        counter.sample_cpu(1_000, || 1);
        let mut called = false;
        counter.record_frame(1_001, || {
            called = true;
            2
        });
        assert!(!called);
    }

    #[test]
    fn a_sample_half_written_is_not_read_and_not_overwritten() {
        let counter = published(0);
        counter.sample_cpu(1, || 9);
        // A writer died (or is preempted) inside its sample.
        counter.cpu_seq.fetch_add(1, Ordering::Relaxed);
        assert_eq!(counter.load().cpu_sample(), None);
        counter.sample_cpu(2 * CPU_SAMPLE_INTERVAL_NS, || 99);
        assert_eq!(
            counter.cpu_ns.load(Ordering::Relaxed),
            9,
            "skipped, not waited"
        );
    }

    #[test]
    fn bytes_round_trip_at_the_pinned_offsets() {
        let counter = published(11);
        counter.record_frame(CPU_SAMPLE_INTERVAL_NS, || 77);
        let record = counter.load();
        let bytes = record.to_bytes();
        assert_eq!(&bytes[..8], b"CSRTFRMS");
        assert_eq!(FrameRecord::from_bytes(&bytes), record);
        assert!(bytes[80..].iter().all(|&b| b == 0), "reserved tail");
    }

    #[test]
    fn a_record_is_settled_only_when_two_copies_agree() {
        let counter = published(0);
        let first = counter.load();
        assert_eq!(FrameRecord::settled(&first, &counter.load()), Some(first));
        counter.record_frame(5, || 0);
        assert_eq!(FrameRecord::settled(&first, &counter.load()), None);
    }

    #[test]
    fn threads_lose_no_frame() {
        let counter = Arc::new(published(0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let counter = Arc::clone(&counter);
                thread::spawn(move || {
                    for i in 0..10_000u64 {
                        counter.record_frame(t * 1_000_000_000 + i * 1_000, || i);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let record = counter.load();
        assert_eq!(record.frames, 40_000);
        assert_eq!(record.last_frame_ns, 3 * 1_000_000_000 + 9_999 * 1_000);
        assert!(record.cpu_sample().is_some());
    }
}
