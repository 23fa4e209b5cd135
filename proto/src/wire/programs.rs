//! Whether a job's program can start on a node (protocol 1.1): coordinator →
//! agent `CheckProgram` while a submission waits for its answer, agent →
//! coordinator `ProgramChecked`.

use serde::{Deserialize, Serialize};

use super::kind::MessageKind;
use super::payload::Payload;

/// Can the agent start `command` the way it launches a rank: an absolute
/// path, a path relative to the agent's working directory (it contains a
/// `/`), or a name looked up in `search_path` (the job's `PATH`; `None`: the
/// agent's own)?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckProgram {
    /// Echoed in the answer.
    pub check_id: u64,
    pub command: String,
    pub search_path: Option<String>,
}

impl Payload for CheckProgram {
    const KIND: MessageKind = MessageKind::CheckProgram;

    fn check(&self) -> Result<(), String> {
        if self.command.is_empty() {
            return Err("empty command".into());
        }
        Ok(())
    }
}

/// What the agent found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ProgramCheck {
    /// An executable file at `path`.
    Runnable { path: String },
    /// Nothing the agent could start, and why (e.g. "not found in PATH
    /// /usr/bin:/bin", "/opt/x: not executable").
    NotRunnable { reason: String },
}

/// The answer to a [`CheckProgram`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramChecked {
    pub check_id: u64,
    pub outcome: ProgramCheck,
}

impl Payload for ProgramChecked {
    const KIND: MessageKind = MessageKind::ProgramChecked;
}
