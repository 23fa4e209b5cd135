//! The restore journal's file: an append-only log of JSON lines that replays
//! into the ledger's entries.
//!
//! One line per [`Record`]: the first names the boot it was written in, then
//! a task's originals (`original`, at adoption and at fork), that the agent
//! may stop tasks (`may_stop`), an autogroup nice learnt late (`group_nice`),
//! and tasks with nothing left to restore (`forget`). Recording a task is one
//! `write(2)` of one line, whatever the number of tasks already journaled.
//!
//! **Write-ahead, without fsync.** A line is in the file before the change it
//! protects is made: `write(2)` returns once the bytes are in the page cache,
//! and the page cache belongs to the kernel, not to the agent. A SIGKILLed,
//! OOM-killed or panicking agent cannot lose what it wrote; the guardian and
//! the next agent read through that same page cache. Only a machine crash
//! loses unwritten-back pages, and then no task the journal names survives
//! either: after the reboot the `boot` line no longer matches the running
//! kernel's boot id and the whole journal is set aside (a tid and start time
//! could otherwise name an unrelated task of the new boot). An fsync would
//! wait for the disk on the agent's real-time event loop for no task it
//! could save.
//!
//! **Torn last line.** An agent killed inside a `write(2)` may leave half a
//! line at the end. It is ignored: the change it was to protect was not made
//! yet, because the write had not returned. A bad line anywhere else is
//! corruption and an error naming the file: nothing is silently dropped.
//!
//! **Compaction.** Lines of exited tasks and superseded facts pile up, so
//! when the file mentions tasks more than [`COMPACT_FACTOR`] times as often
//! as there are live entries (plus [`COMPACT_SLACK`]), it is rewritten with
//! just the live entries: written to a temporary file, then renamed over the
//! journal, so a reader sees the old or the new file, never half of one. The
//! ledger only compacts from [`flush`](super::RestoreLedger::flush) (the
//! agent's periodic poll), never while recording a task; amortised over the
//! appends since the previous compaction it costs O(1) per append.
//!
//! **Handing over between agents.** A journal is only appended to by the
//! ledger that wrote it whole (its first write is a compaction). A journal
//! read from a dead agent is never appended to; once its tasks are restored it
//! is truncated, but only while the path still names that file: the dead
//! agent's guardian and a new agent may both restore it, and the guardian must
//! not empty a journal the new agent has started since.
use std::{
    collections::BTreeMap,
    fs::{self, File, OpenOptions},
    io::{self, Read as _, Write as _},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use serde::{Deserialize, Serialize};

use super::Entry;
use crate::kernel::TaskId;

/// The ledger's entries by tid.
pub type Entries = BTreeMap<u32, Entry>;

/// Compact when the file mentions tasks more than this many times as often as
/// there are live entries...
pub const COMPACT_FACTOR: usize = 2;
/// ... plus this many mentions (so a small ledger is not rewritten for every
/// few exits: a mention is one line of at most a few hundred bytes).
pub const COMPACT_SLACK: usize = 1024;

/// One line of the journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// First line: the boot (`/proc/sys/kernel/random/boot_id`) the journal
    /// was written in.
    Boot { boot_id: String },
    /// What to restore a task to.
    Original(Entry),
    /// The agent may stop these tasks: restoring them sends SIGCONT.
    MayStop { tids: Vec<u32> },
    /// The nice of the task's autogroup before the agent first changed it.
    GroupNice { tid: u32, nice: i32 },
    /// Nothing is left to restore on these tasks (exited, or restored). A
    /// later task with the same tid is a different task and stays.
    Forget { tasks: Vec<TaskId> },
}

impl Record {
    fn apply(self, entries: &mut Entries) {
        match self {
            Record::Boot { .. } => {}
            Record::Original(e) => {
                entries.insert(e.task.tid, e);
            }
            Record::MayStop { tids } => {
                for tid in tids {
                    if let Some(e) = entries.get_mut(&tid) {
                        e.ever_stopped = true;
                    }
                }
            }
            Record::GroupNice { tid, nice } => {
                if let Some(e) = entries.get_mut(&tid) {
                    e.group_nice = Some(nice);
                }
            }
            Record::Forget { tasks } => {
                for task in tasks {
                    if entries.get(&task.tid).is_some_and(|e| e.task == task) {
                        entries.remove(&task.tid);
                    }
                }
            }
        }
    }

    /// How many tasks the line names (what compaction weighs).
    fn mentions(&self) -> usize {
        match self {
            Record::Boot { .. } => 0,
            Record::Original(_) | Record::GroupNice { .. } => 1,
            Record::MayStop { tids } => tids.len(),
            Record::Forget { tasks } => tasks.len(),
        }
    }
}

/// The journal file of one ledger.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// The file this journal last read or wrote whole.
    file: Option<File>,
    /// Records may be appended to `file`: this journal wrote it whole.
    appending: bool,
    /// Tasks named by the lines of `file` (while `appending`).
    mentions: usize,
}

/// What a journal file replays to.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Replay {
    pub entries: Entries,
    /// The last line was cut short (and ignored).
    pub torn_tail: bool,
    /// The journal was written in another boot (and ignored): its boot id.
    pub other_boot: Option<String>,
}

impl Journal {
    /// A journal at `path` that replaces whatever is there at its first write.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            appending: false,
            mentions: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the journal at `path` (a missing file is an empty one).
    pub fn load(path: &Path) -> io::Result<(Self, Replay)> {
        let mut journal = Self::new(path.to_path_buf());
        let mut bytes = Vec::new();
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes)?;
                journal.file = Some(f);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let replay = replay(&bytes, current_boot_id()).map_err(|e| {
            io::Error::other(format!("corrupt restore journal {}: {e}", path.display()))
        })?;
        Ok((journal, replay))
    }

    /// Appends `record` (one write). `entries` is the ledger's state with
    /// the record already applied: when this journal has not written its
    /// file yet, or a write failed, it writes that state whole instead.
    pub fn append(&mut self, record: &Record, entries: &Entries) -> io::Result<()> {
        let file = match &mut self.file {
            Some(f) if self.appending => f,
            _ => return self.compact(entries),
        };
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        if let Err(e) = file.write_all(&line) {
            // Part of the line may be in the file: the next write rewrites
            // it whole rather than append after a torn line.
            self.appending = false;
            return Err(e);
        }
        self.mentions += record.mentions();
        Ok(())
    }

    /// Rewrites the journal with just `entries` if it has grown past its
    /// bound relative to them.
    pub fn compact_if_grown(&mut self, entries: &Entries) -> io::Result<()> {
        if self.appending && self.mentions > COMPACT_FACTOR * entries.len() + COMPACT_SLACK {
            self.compact(entries)?;
        }
        Ok(())
    }

    /// Empties the journal once everything it named is restored — the file
    /// this journal read or wrote, and only while `path` still names it.
    pub fn clear(&mut self) -> io::Result<()> {
        self.appending = false;
        self.mentions = 0;
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let still_ours = match fs::metadata(&self.path) {
            Ok(at_path) => {
                let ours = file.metadata()?;
                (ours.dev(), ours.ino()) == (at_path.dev(), at_path.ino())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        if still_ours {
            file.set_len(0)?;
        }
        Ok(())
    }

    /// Writes `entries` whole: to a temporary file, renamed over the journal.
    fn compact(&mut self, entries: &Entries) -> io::Result<()> {
        let mut text = Vec::new();
        let mut push = |record: &Record| -> io::Result<()> {
            serde_json::to_writer(&mut text, record).map_err(io::Error::other)?;
            text.push(b'\n');
            Ok(())
        };
        if let Some(boot_id) = current_boot_id() {
            push(&Record::Boot {
                boot_id: boot_id.to_string(),
            })?;
        }
        for e in entries.values() {
            push(&Record::Original(e.clone()))?;
        }
        let mut tmp_name = self.path.as_os_str().to_owned();
        tmp_name.push(".tmp");
        let tmp = PathBuf::from(tmp_name);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&text)?;
        fs::rename(&tmp, &self.path)?;
        self.file = Some(file);
        self.appending = true;
        self.mentions = entries.len();
        Ok(())
    }
}

/// Replays a journal's bytes. `boot_id`: the running kernel's, if known.
pub fn replay(bytes: &[u8], boot_id: Option<&str>) -> Result<Replay, String> {
    let mut out = Replay::default();
    if bytes.trim_ascii_start().starts_with(b"[") {
        // An agent from before the log kept one JSON list, rewritten whole.
        let list: Vec<Entry> = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        out.entries = list.into_iter().map(|e| (e.task.tid, e)).collect();
        return Ok(out);
    }
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // The piece after the last newline: empty, or a line cut short.
    let unterminated = lines.len() - 1;
    let mut first = true;
    for (i, line) in lines.into_iter().enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let record: Record = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(_) if i == unterminated => {
                out.torn_tail = true;
                break;
            }
            Err(e) => return Err(format!("line {}: {e}", i + 1)),
        };
        if let (true, Record::Boot { boot_id: written }, Some(now)) = (first, &record, boot_id)
            && written != now
        {
            return Ok(Replay {
                other_boot: Some(written.clone()),
                ..Replay::default()
            });
        }
        first = false;
        record.apply(&mut out.entries);
    }
    Ok(out)
}

/// This boot's id, when the kernel tells it.
fn current_boot_id() -> Option<&'static str> {
    static BOOT_ID: OnceLock<Option<String>> = OnceLock::new();
    BOOT_ID
        .get_or_init(|| {
            fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::SchedAttr;

    fn entry(tid: u32, start_time: u64) -> Entry {
        Entry {
            task: TaskId { tid, start_time },
            original: SchedAttr::other(tid as i32 % 20),
            ever_stopped: false,
            group_nice: None,
            cpu_cgroup: None,
            affinity: None,
        }
    }

    fn line(record: &Record) -> String {
        serde_json::to_string(record).unwrap() + "\n"
    }

    fn journal_in(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("restore.json")
    }

    fn loaded(path: &Path) -> Entries {
        Journal::load(path).unwrap().1.entries
    }

    #[test]
    fn each_kind_of_line_replays_to_its_change() {
        let text = [
            line(&Record::Original(entry(10, 1))),
            line(&Record::Original(entry(11, 1))),
            line(&Record::Original(entry(12, 1))),
            line(&Record::MayStop { tids: vec![10, 13] }),
            line(&Record::GroupNice { tid: 11, nice: 4 }),
            line(&Record::Forget {
                tasks: vec![TaskId {
                    tid: 12,
                    start_time: 1,
                }],
            }),
        ]
        .concat();
        let r = replay(text.as_bytes(), None).unwrap();
        assert_eq!(r.entries.keys().copied().collect::<Vec<_>>(), [10, 11]);
        assert!(r.entries[&10].ever_stopped);
        assert_eq!(r.entries[&11].group_nice, Some(4));
        assert!(!r.torn_tail);
    }

    /// A tid forgotten (lazily) after a new task took it: the new task's
    /// entry stays.
    #[test]
    fn forgetting_a_task_keeps_a_later_task_with_its_tid() {
        let text = [
            line(&Record::Original(entry(10, 1))),
            line(&Record::Original(entry(10, 2))),
            line(&Record::Forget {
                tasks: vec![TaskId {
                    tid: 10,
                    start_time: 1,
                }],
            }),
        ]
        .concat();
        let r = replay(text.as_bytes(), None).unwrap();
        assert_eq!(r.entries[&10].task.start_time, 2);
    }

    /// An agent killed inside a write leaves half a line: ignored, and every
    /// complete line before it counts.
    #[test]
    fn torn_last_line_is_ignored() {
        let full = line(&Record::Original(entry(11, 1)));
        let text = line(&Record::Original(entry(10, 1))) + &full[..full.len() / 2];
        let r = replay(text.as_bytes(), None).unwrap();
        assert!(r.torn_tail);
        assert_eq!(r.entries.keys().copied().collect::<Vec<_>>(), [10]);
    }

    #[test]
    fn bad_line_before_the_last_is_corruption() {
        let text = line(&Record::Original(entry(10, 1)))
            + "{\"original\":{\"tas\n"
            + &line(&Record::Original(entry(11, 1)));
        let e = replay(text.as_bytes(), None).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
    }

    #[test]
    fn journal_of_another_boot_is_set_aside() {
        let text = line(&Record::Boot {
            boot_id: "before-the-crash".into(),
        }) + &line(&Record::Original(entry(10, 1)));
        let r = replay(text.as_bytes(), Some("now")).unwrap();
        assert!(r.entries.is_empty());
        assert_eq!(r.other_boot.as_deref(), Some("before-the-crash"));
        let same = replay(text.as_bytes(), Some("before-the-crash")).unwrap();
        assert_eq!(same.entries.len(), 1);
    }

    #[test]
    fn first_write_writes_the_whole_state_then_lines_are_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_in(&dir);
        fs::write(&path, "left by someone else\n").unwrap();
        let mut j = Journal::new(path.clone());
        let mut state = Entries::new();
        state.insert(10, entry(10, 1));
        j.append(&Record::Original(entry(10, 1)), &state).unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        let size = fs::metadata(&path).unwrap().len();
        state.insert(11, entry(11, 1));
        j.append(&Record::Original(entry(11, 1)), &state).unwrap();
        let after = fs::metadata(&path).unwrap();
        assert_eq!(after.ino(), inode, "an append does not rewrite the file");
        assert_eq!(
            after.len(),
            size + line(&Record::Original(entry(11, 1))).len() as u64,
            "one line appended"
        );
        assert_eq!(loaded(&path), state);
    }

    #[test]
    fn compaction_keeps_the_live_entries_and_bounds_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_in(&dir);
        let mut j = Journal::new(path.clone());
        let mut state = Entries::new();
        let mut largest = 0;
        let mut compactions = 0;
        // Tasks come and go; five stay.
        for n in 0..20 * COMPACT_SLACK as u32 {
            let e = entry(n, 7);
            state.insert(n, e.clone());
            j.append(&Record::Original(e.clone()), &state).unwrap();
            if n % 4 != 0 || n >= 20 {
                state.remove(&n);
                j.append(
                    &Record::Forget {
                        tasks: vec![e.task],
                    },
                    &state,
                )
                .unwrap();
            }
            let inode = fs::metadata(&path).unwrap().ino();
            j.compact_if_grown(&state).unwrap();
            if fs::metadata(&path).unwrap().ino() != inode {
                compactions += 1;
                let lines = fs::read_to_string(&path).unwrap().lines().count();
                assert!(lines <= state.len() + 1, "{lines} lines after compaction");
            }
            largest = largest.max(fs::metadata(&path).unwrap().len());
        }
        assert_eq!(loaded(&path), state);
        assert_eq!(state.len(), 5);
        assert!(compactions > 10, "{compactions} compactions");
        let per_line = line(&Record::Original(entry(99_999, 7))).len();
        let bound = (COMPACT_FACTOR * state.len() + COMPACT_SLACK + 2) * per_line;
        assert!(
            largest <= bound as u64,
            "file grew to {largest} bytes (bound {bound})"
        );
    }

    /// A compaction interrupted before its rename leaves the old journal as
    /// it was.
    #[test]
    fn interrupted_compaction_leaves_the_journal_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_in(&dir);
        let mut j = Journal::new(path.clone());
        let mut state = Entries::new();
        state.insert(10, entry(10, 1));
        j.append(&Record::Original(entry(10, 1)), &state).unwrap();
        // What a compaction killed half-way leaves behind.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        fs::write(&tmp, "{\"boot\":{\"bo").unwrap();
        assert_eq!(loaded(&path), state);
    }

    /// The dead agent's guardian restores after the new agent has started
    /// its own journal: clearing must not empty the new one.
    #[test]
    fn clearing_a_dead_agents_journal_leaves_a_newer_journal_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_in(&dir);
        let mut dead = Journal::new(path.clone());
        let mut old = Entries::new();
        old.insert(10, entry(10, 1));
        dead.append(&Record::Original(entry(10, 1)), &old).unwrap();
        let (mut guardian, g) = Journal::load(&path).unwrap();
        let (mut next, n) = Journal::load(&path).unwrap();
        assert_eq!((g.entries.len(), n.entries.len()), (1, 1));
        next.clear().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 0);
        let mut new = Entries::new();
        new.insert(20, entry(20, 1));
        next.append(&Record::Original(entry(20, 1)), &new).unwrap();
        guardian.clear().unwrap();
        assert_eq!(loaded(&path), new);
    }
}
