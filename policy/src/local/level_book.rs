//! The levels a policy has set, so that it emits only changes and can hand
//! every task back with `release_all`.

use super::action::{Action, Level, Reason};
use super::ids::TaskId;
use std::collections::BTreeMap;

/// Remembers each task's last emitted level (only tasks not at `Normal`).
#[derive(Debug, Default, Clone)]
pub(crate) struct LevelBook {
    changed: BTreeMap<TaskId, Level>,
}

impl LevelBook {
    /// The level last set for `task`.
    pub fn get(&self, task: TaskId) -> Level {
        self.changed.get(&task).copied().unwrap_or(Level::Normal)
    }

    /// Sets `task` to `level`, emitting an action only if it changes.
    pub fn set(&mut self, task: TaskId, level: Level, reason: Reason, out: &mut Vec<Action>) {
        if self.get(task) == level {
            return;
        }
        if level.is_normal() {
            self.changed.remove(&task);
        } else {
            self.changed.insert(task, level);
        }
        out.push(Action::SetLevel {
            task,
            level,
            reason,
        });
    }

    /// Drops `task` silently.
    pub fn forget(&mut self, task: TaskId) {
        self.changed.remove(&task);
    }

    /// Emits `Normal` for every changed task and empties the book.
    pub fn release_all(&mut self, out: &mut Vec<Action>) {
        for (task, _) in std::mem::take(&mut self.changed) {
            out.push(Action::SetLevel {
                task,
                level: Level::Normal,
                reason: Reason::Released,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_only_changes_and_releases_everything() {
        let mut book = LevelBook::default();
        let mut out = Vec::new();
        let t = TaskId(7);
        book.set(t, Level::Normal, Reason::Released, &mut out);
        assert!(out.is_empty());
        book.set(t, Level::Demote, Reason::SpinThresholdYield, &mut out);
        book.set(t, Level::Demote, Reason::SpinThresholdYield, &mut out);
        assert_eq!(out.len(), 1);
        book.release_all(&mut out);
        assert_eq!(
            out.last(),
            Some(&Action::SetLevel {
                task: t,
                level: Level::Normal,
                reason: Reason::Released
            })
        );
        assert_eq!(book.get(t), Level::Normal);
    }
}
