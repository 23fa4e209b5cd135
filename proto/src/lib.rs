//! Messages exchanged by cosched components.
//!
//! - [`class`]: the text form of job classes (`be`, `rt:<period_ns>:<frames>:<work_ns>`).
//! - [`job`]: the job spec an agent launches processes from.
//! - [`control`]: the agent's local control socket (JSON lines over a Unix socket, [`jsonl`]).
//! - [`timeline`]: a node's timeline recording (the `timeline` control request).
//! - [`strict`]: refusing unknown keys where `deny_unknown_fields` does not reach.
//! - [`wire`]: the coordinator <-> agent protocol (versioned, length-framed, authenticated).
pub mod class;
pub mod control;
pub mod job;
pub mod jsonl;
pub mod range;
pub mod strict;
pub mod timeline;
pub mod wire;
