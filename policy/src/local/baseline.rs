//! `local`: no intervention, the Linux scheduler alone.
//!
//! The Scheduler Testbed report §2.5: local (uncoordinated) scheduling "is the most
//! straight-forward approach", used "as a base case to compare the performance
//! of the different coscheduling methods". It never emits an action.

use super::action::{Action, Level};
use super::event::Event;
use super::ids::TaskId;
use super::policy::{LocalPolicy, PolicyKind};

/// The baseline policy: observes nothing, changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalBaseline;

impl LocalPolicy for LocalBaseline {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Local
    }

    fn on_event(&mut self, _event: &Event<'_>, _actions: &mut Vec<Action>) {}

    fn next_wakeup(&self) -> Option<u64> {
        None
    }

    fn forget(&mut self, _task: TaskId) {}

    fn release_all(&mut self, _actions: &mut Vec<Action>) {}

    fn level_of(&self, _task: TaskId) -> Level {
        Level::Normal
    }
}
