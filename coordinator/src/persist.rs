//! The state file: JSON of [`PersistedState`], replaced atomically (written
//! to a temporary file in the same directory, synced, renamed over the old
//! one, directory synced), so a crash leaves either the old or the new state,
//! never a torn one.
//!
//! Writes happen on a thread of their own ([`Persister`]) so a slow disk never
//! delays a slice switch; when several states queue up, only the newest is
//! written.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::mpsc,
    thread::JoinHandle,
};

use crate::core::PersistedState;

#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot read state file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("state file {path} is corrupt ({message}); move it away to start with an empty matrix")]
    Corrupt { path: String, message: String },
    #[error("cannot write state file {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// The persisted state, or `None` when there is no state file yet.
pub fn load(path: &Path) -> Result<Option<PersistedState>, PersistError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(PersistError::Read {
                path: path.display().to_string(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| PersistError::Corrupt {
            path: path.display().to_string(),
            message: error.to_string(),
        })
}

pub fn encode(state: &PersistedState) -> Vec<u8> {
    serde_json::to_vec_pretty(state).expect("the state serialises")
}

/// Replaces `path` with `bytes` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let fail = |source| PersistError::Write {
        path: path.display().to_string(),
        source,
    };
    let dir = path
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut file = std::fs::File::create(&temporary).map_err(fail)?;
    file.write_all(bytes).map_err(fail)?;
    file.sync_all().map_err(fail)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(fail)?;
    std::fs::File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(fail)?;
    Ok(())
}

/// Writes states in the background, newest wins.
pub struct Persister {
    sender: Option<mpsc::Sender<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

impl Persister {
    pub fn start(path: PathBuf, on_error: impl Fn(&PersistError) + Send + 'static) -> Self {
        let (sender, receiver) = mpsc::channel::<Vec<u8>>();
        let thread = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || {
                while let Ok(mut bytes) = receiver.recv() {
                    while let Ok(newer) = receiver.try_recv() {
                        bytes = newer;
                    }
                    if let Err(error) = write_atomic(&path, &bytes) {
                        on_error(&error);
                    }
                }
            })
            .expect("spawning the state writer");
        Self {
            sender: Some(sender),
            thread: Some(thread),
        }
    }

    pub fn save(&self, state: &PersistedState) {
        if let Some(sender) = &self.sender {
            let _ = sender.send(encode(state));
        }
    }

    /// Writes what is queued and stops the writer.
    pub fn finish(mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Persister {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Core, CoreConfig};
    use crate::policy::GlobalPolicy;

    fn core() -> Core {
        Core::new(CoreConfig {
            nodes: vec!["n0".into(), "n1".into()],
            policy: GlobalPolicy::Gang,
            max_rows: 2,
            allocation: Default::default(),
            queue: Default::default(),
            pairing: Default::default(),
            job_port_base: 20000,
            job_port_count: 10,
            finished_retention: 10,
            check_timeout_ns: 1_000_000_000,
            slice_ns: 100_000_000,
            classes: Default::default(),
            schedule_ahead: true,
            paired_schedule_ahead: false,
            one_gs_schedule_ahead: false,
            schedule_clock: Default::default(),
        })
        .unwrap()
    }

    #[test]
    fn state_survives_a_write_and_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/state.json");
        let state = core().snapshot();
        write_atomic(&path, &encode(&state)).unwrap();
        assert_eq!(load(&path).unwrap(), Some(state));
        assert!(!dir.path().join("sub/state.json.tmp").exists());
    }

    #[test]
    fn a_missing_file_is_no_state_and_a_corrupt_one_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(load(&path).unwrap(), None);
        std::fs::write(&path, "{\"version\": 1, \"matrix\": ").unwrap();
        let error = load(&path).unwrap_err();
        assert!(error.to_string().contains("move it away"), "{error}");
    }

    #[test]
    fn the_background_writer_leaves_the_newest_state() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let persister = Persister::start(path.clone(), |error| panic!("{error}"));
        let mut state = core().snapshot();
        for epoch in 1..=20 {
            state.epoch = epoch;
            persister.save(&state);
        }
        persister.finish();
        assert_eq!(load(&path).unwrap().unwrap().epoch, 20);
    }
}
