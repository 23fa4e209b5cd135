//! Small helpers the class scenarios share.

use crate::classes::{FrameState, RtTask};
use crate::local::TaskId;

pub const MS: u64 = 1_000_000;

pub fn ms(n: u64) -> u64 {
    n * MS
}

/// A ready task with a frame due at `deadline_ns`.
pub fn due(id: u32, deadline_ns: u64) -> RtTask {
    RtTask::new(TaskId(id), true, FrameState::Due { deadline_ns })
}

/// A ready task that has done its frames until `until_ns`.
pub fn satisfied(id: u32, until_ns: u64, next_deadline_ns: u64) -> RtTask {
    RtTask::new(
        TaskId(id),
        true,
        FrameState::Satisfied {
            until_ns,
            next_deadline_ns,
        },
    )
}

/// The same task, blocked.
pub fn blocked(task: RtTask) -> RtTask {
    RtTask {
        ready: false,
        ..task
    }
}
