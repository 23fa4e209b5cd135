//! `cargo xtask test`: the whole pipeline CI runs, stopping at the first
//! failing step: setup, release build, fmt, clippy, tests (unit and root
//! lanes in one `cargo test`), cluster tests (the one-machine cluster up
//! and down, real Slurm), then the VM lane (`vm-test` on the newest Debian
//! kernel; `--no-vm` skips it). `--unit` runs the unit lane alone (fmt,
//! clippy, every crate's tests but `integration-tests/`): no root, apt or
//! bpf-linker needed. The steps are data ([`plan`]) so what each lane runs
//! is tested.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use crate::{
    cargo_build::{self, Profile},
    monitoring, process,
    progress::say,
    setup::{self, BuildTools},
    workspace::Workspace,
};

/// Options of the pipeline.
#[derive(Debug, Clone, Copy, Default)]
pub struct TestOptions {
    /// Skip `cargo fmt --check` and clippy.
    pub quick: bool,
    /// Only the unit lane: no root, no apt packages, no bpf-linker.
    pub unit: bool,
    /// Skip the VM lane (QEMU guests).
    pub no_vm: bool,
}

/// One step of the pipeline, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// apt packages (with `prometheus` for the monitoring test), tracefs,
    /// toolchain check, bpf-linker (needs root).
    Setup,
    /// Release build of every binary, eBPF object inside the agent.
    Build,
    Fmt,
    Clippy,
    /// Every crate's tests but the root ones, debug profile, the agent
    /// built without its eBPF object (`AYA_BUILD_SKIP=1`).
    UnitTests,
    /// Every test of the workspace, release profile, against the release
    /// binaries: unit tests and the root lane (real agents on the real
    /// kernel, `integration-tests/`).
    AllTests,
    /// The tests that bring the one-machine cluster up and down
    /// (`xtask/tests/cluster_*.rs`: plumbing, real Slurm), after installing
    /// Slurm. Ignored by a plain `cargo test` because they would take down a
    /// cluster someone is using; here nothing else runs.
    ClusterTests,
    /// `vm-test --kernel 7.x`: the release binaries in three QEMU guests
    /// (about 3 minutes under TCG).
    VmTests,
}

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Build => "build",
            Step::Fmt => "fmt",
            Step::Clippy => "clippy",
            Step::UnitTests => "unit tests",
            Step::AllTests => "tests",
            Step::ClusterTests => "cluster tests",
            Step::VmTests => "vm tests",
        }
    }

    /// Whether the step needs root (eBPF, sched_setattr on other tasks,
    /// network namespaces, apt).
    pub fn needs_root(self) -> bool {
        matches!(self, Step::Setup | Step::AllTests | Step::ClusterTests)
    }
}

/// The steps `options` run, in order.
pub fn plan(options: TestOptions) -> Vec<Step> {
    let mut steps = Vec::new();
    if !options.unit {
        steps.extend([Step::Setup, Step::Build]);
    }
    if !options.quick {
        steps.extend([Step::Fmt, Step::Clippy]);
    }
    if options.unit {
        steps.push(Step::UnitTests);
    } else {
        steps.extend([Step::AllTests, Step::ClusterTests]);
        if !options.no_vm {
            steps.push(Step::VmTests);
        }
    }
    steps
}

/// Runs the pipeline; the error names the step that failed.
pub fn run(workspace: &Workspace, options: TestOptions) -> Result<()> {
    let started = Instant::now();
    let steps = plan(options);
    if let Some(step) = steps.iter().find(|step| step.needs_root()) {
        ensure_root(*step)?;
    }
    let mut tools = None;
    let mut passed = Vec::new();
    for step in steps {
        let mut command = match step {
            Step::Setup => {
                say("test", "[setup]");
                tools = Some(setup::all(workspace).map_err(|error| failed(step, error))?);
                // The root test `monitoring` runs a real Prometheus and promtool.
                monitoring::ensure_installed().map_err(|error| failed(step, error))?;
                passed.push(step.name());
                continue;
            }
            Step::Build => {
                say("test", "[build] release binaries");
                let tools = tools.as_ref().expect("setup runs before the build");
                cargo_build::build_binaries(workspace, tools, Profile::Release)
                    .map_err(|error| failed(step, error))?;
                passed.push(step.name());
                continue;
            }
            Step::Fmt => {
                let mut fmt = workspace.cargo();
                fmt.args(["fmt", "--all", "--check"]);
                fmt
            }
            Step::Clippy => {
                let mut clippy = cargo_command(workspace, tools.as_ref());
                clippy.args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]);
                clippy
            }
            Step::UnitTests => {
                let mut tests = cargo_command(workspace, None);
                tests.args([
                    "test",
                    "--workspace",
                    "--exclude",
                    "cosched-integration-tests",
                ]);
                tests
            }
            Step::VmTests => {
                say("test", "[vm tests] vm-test --kernel 7.x");
                run_vm_tests(workspace).map_err(|error| failed(step, error))?;
                passed.push(step.name());
                continue;
            }
            Step::AllTests => {
                let bin_dir = workspace.profile_dir(Profile::Release.dir_name())?;
                let mut tests = cargo_command(workspace, tools.as_ref());
                tests
                    .args(["test", "--workspace", "--release"])
                    .env("COSCHED_BIN_DIR", &bin_dir);
                tests
            }
            Step::ClusterTests => {
                crate::setup::apt::ensure(crate::cluster::slurm::PACKAGES)
                    .map_err(|error| failed(step, error))?;
                let mut tests = cargo_command(workspace, tools.as_ref());
                tests.args([
                    "test",
                    "-p",
                    "xtask",
                    "--release",
                    "--test",
                    "cluster_plumbing",
                    "--test",
                    "cluster_slurm",
                    "--",
                    "--ignored",
                    "--test-threads=1",
                ]);
                tests
            }
        };
        say(
            "test",
            format!("[{}] {}", step.name(), process::describe(&command)),
        );
        process::run(&mut command).map_err(|error| failed(step, error))?;
        passed.push(step.name());
    }
    let mut skipped = Vec::new();
    if options.quick {
        skipped.push("fmt and clippy skipped (--quick)");
    }
    if options.no_vm && !options.unit {
        skipped.push("VM lane skipped (--no-vm)");
    }
    if options.unit {
        skipped.push("unit lane only: the root lane (integration-tests/) not run (--unit)");
    }
    say(
        "test",
        format!(
            "PASSED {} steps ({}) in {}{}",
            passed.len(),
            passed.join(", "),
            minutes_and_seconds(started.elapsed()),
            skipped.iter().map(|s| format!("; {s}")).collect::<String>()
        ),
    );
    Ok(())
}

/// The VM lane: the newest kernel, which runs every check.
fn run_vm_tests(workspace: &Workspace) -> Result<()> {
    let runs = crate::vm::run(&crate::vm::VmTestOptions {
        kernels: crate::vm::kernels::choose("7.x")?,
        bin_dir: workspace.profile_dir(Profile::Release.dir_name())?,
        out_dir: workspace.profile_dir("vm")?,
        timeout: crate::vm::DEFAULT_TIMEOUT,
    })?;
    if let Some(run) = runs.iter().find(|run| run.failed()) {
        bail!(
            "a VM check failed on kernel {} (consoles in {})",
            run.kernel.choice.key,
            run.log_dir.display()
        );
    }
    Ok(())
}

/// cargo with the set-up bpf-linker, or, without set-up, cargo that builds
/// the agent without its eBPF object (its build script writes an empty one
/// and the agent binary refuses to start; unit tests do not load it).
fn cargo_command(workspace: &Workspace, tools: Option<&BuildTools>) -> Command {
    match tools {
        Some(tools) => cargo_build::cargo(workspace, tools),
        None => {
            let mut command = workspace.cargo();
            command.env("AYA_BUILD_SKIP", "1");
            command
        }
    }
}

/// Fails early, naming what the lane needs and the lane that needs none.
fn ensure_root(step: Step) -> Result<()> {
    // SAFETY: no arguments, cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        bail!(
            "test: step [{}] needs root (apt packages, eBPF, sched_setattr on other tasks, \
             network namespaces); run as root, or run the unit lane alone: \
             `cargo xtask test --unit`",
            step.name()
        );
    }
    Ok(())
}

fn failed(step: Step, error: anyhow::Error) -> anyhow::Error {
    error.context(format!("test: FAILED at step [{}]", step.name()))
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
        let error = failed(Step::Clippy, anyhow::anyhow!("boom"));
        assert_eq!(format!("{error:#}"), "test: FAILED at step [clippy]: boom");
    }

    #[test]
    fn quick_and_unit_are_off_by_default() {
        let default = TestOptions::default();
        assert!(!default.quick && !default.unit && !default.no_vm);
    }

    #[test]
    fn the_default_pipeline_is_everything_ci_runs() {
        use Step::*;
        assert_eq!(
            plan(TestOptions::default()),
            [Setup, Build, Fmt, Clippy, AllTests, ClusterTests, VmTests]
        );
    }

    #[test]
    fn the_unit_lane_needs_neither_root_nor_set_up() {
        for quick in [false, true] {
            let steps = plan(TestOptions {
                quick,
                unit: true,
                ..TestOptions::default()
            });
            assert!(steps.iter().all(|step| !step.needs_root()), "{steps:?}");
            assert!(!steps.contains(&Step::Setup) && !steps.contains(&Step::Build));
            assert_eq!(steps.last(), Some(&Step::UnitTests));
            assert!(!steps.contains(&Step::VmTests));
        }
    }

    #[test]
    fn quick_skips_only_the_lints() {
        let steps = plan(TestOptions {
            quick: true,
            ..TestOptions::default()
        });
        assert_eq!(
            steps,
            [
                Step::Setup,
                Step::Build,
                Step::AllTests,
                Step::ClusterTests,
                Step::VmTests
            ]
        );
    }

    #[test]
    fn no_vm_drops_only_the_vm_lane() {
        let steps = plan(TestOptions {
            no_vm: true,
            ..TestOptions::default()
        });
        assert_eq!(steps.last(), Some(&Step::ClusterTests));
        assert!(!steps.contains(&Step::VmTests));
    }
}
