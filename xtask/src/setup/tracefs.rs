//! tracefs, which the agent's tracepoints need; some machines boot without it.

use std::{path::Path, process::Command};

use anyhow::{Context as _, Result};

use crate::{process, progress::say};

/// The usual mount point of tracefs.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs at [`TRACEFS`] unless its `events` directory is already there.
pub fn ensure() -> Result<()> {
    let events = Path::new(TRACEFS).join("events");
    if events.is_dir() {
        say("setup", format!("tracefs at {TRACEFS} (mounted)"));
        return Ok(());
    }
    process::capture(Command::new("mount").args(["-t", "tracefs", "nodev", TRACEFS]))
        .with_context(|| format!("could not mount tracefs at {TRACEFS} (are you root?)"))?;
    say("setup", format!("tracefs at {TRACEFS} (mounted now)"));
    Ok(())
}
