//! One-line progress messages, so long runs show which step they are in.
//!
//! They go to stderr: stdout is kept for results that scripts read
//! (`cluster status --json`, the list of built binaries).

use std::fmt::Display;

/// Prints `<scope>: <message>` as one line on stderr.
pub fn say(scope: &str, message: impl Display) {
    eprintln!("{scope}: {message}");
}
