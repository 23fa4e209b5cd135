//! `cargo xtask test`: the whole pipeline CI runs, stopping at the first
//! failing step: setup, release build, fmt, clippy, tests.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Result;

use crate::{
    cargo_build::{self, Profile},
    process,
    progress::say,
    setup,
    workspace::Workspace,
};

/// Options of the pipeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestOptions {
    /// Skip `cargo fmt --check` and clippy.
    pub quick: bool,
}

/// Runs the pipeline; the error names the step that failed.
pub fn run(workspace: &Workspace, options: TestOptions) -> Result<()> {
    let started = Instant::now();
    let mut passed = Vec::new();

    say("test", "[setup]");
    let tools = setup::all(workspace).map_err(|error| failed("setup", error))?;
    passed.push("setup");

    say("test", "[build] release binaries");
    cargo_build::build_binaries(workspace, &tools, Profile::Release)
        .map_err(|error| failed("build", error))?;
    passed.push("build");

    let bin_dir = workspace.profile_dir(Profile::Release.dir_name())?;
    let mut checks: Vec<(&str, Command)> = Vec::new();
    if !options.quick {
        let mut fmt = cargo_build::cargo(workspace, &tools);
        fmt.args(["fmt", "--all", "--check"]);
        checks.push(("fmt", fmt));
        let mut clippy = cargo_build::cargo(workspace, &tools);
        clippy.args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]);
        checks.push(("clippy", clippy));
    }
    let mut tests = cargo_build::cargo(workspace, &tools);
    tests
        .args(["test", "--workspace", "--release"])
        .env("COSCHED_BIN_DIR", &bin_dir);
    checks.push(("tests", tests));

    for (name, mut command) in checks {
        say("test", format!("[{name}] {}", process::describe(&command)));
        process::run(&mut command).map_err(|error| failed(name, error))?;
        passed.push(name);
    }
    say(
        "test",
        format!(
            "PASSED {} steps ({}) in {}{}",
            passed.len(),
            passed.join(", "),
            minutes_and_seconds(started.elapsed()),
            if options.quick {
                "; fmt and clippy skipped (--quick)"
            } else {
                ""
            }
        ),
    );
    Ok(())
}

fn failed(step: &str, error: anyhow::Error) -> anyhow::Error {
    error.context(format!("test: FAILED at step [{step}]"))
}

fn minutes_and_seconds(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{}m{:02}s", seconds / 60, seconds % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations() {
        assert_eq!(minutes_and_seconds(Duration::from_secs(125)), "2m05s");
    }

    #[test]
    fn failures_name_the_step() {
        let error = failed("clippy", anyhow::anyhow!("boom"));
        assert_eq!(format!("{error:#}"), "test: FAILED at step [clippy]: boom");
    }

    #[test]
    fn quick_is_off_by_default() {
        assert!(!TestOptions::default().quick);
    }
}
