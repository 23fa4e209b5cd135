//! The job stream: jobs, a statistical generator and Standard Workload Format
//! traces.

pub mod job;
pub mod swf;
pub mod synthetic;

pub use job::{JobSpec, Pattern, RecvMode};
pub use swf::{SwfError, SwfJob, SwfTrace, parse_swf};
pub use synthetic::{JobShape, StreamParams, generate, shape_jobs};
