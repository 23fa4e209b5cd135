//! `cargo xtask vm-test [--kernel 7.x|6.12|6.1|all]`, and
//! `cargo xtask vm-test --scx [--runs N] [--seconds S]` (the sched_ext
//! comparison, not part of `cargo xtask test`).

use std::{process::ExitCode, time::Duration};

use anyhow::Result;
use xtask::{
    cargo_build::{self, Profile},
    progress::say,
    setup,
    vm::{self, VmTestOptions, kernels},
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Debian cloud kernel: 7.x (sid), 6.12 (trixie), 6.1 (bookworm), or all.
    #[arg(long, default_value = "7.x")]
    kernel: String,
    /// Skip setup and the release build (use the binaries already built).
    #[arg(long)]
    no_build: bool,
    /// Longest one kernel's run may take, in seconds.
    #[arg(long, default_value_t = 420)]
    timeout: u64,
    /// Instead of the checks: arrival -> running of the same two jobs under
    /// plain Linux, the agent with DCS and a minimal sched_ext scheduler
    /// (scx/), in one 7.x guest per run (docs/kernels.md).
    #[arg(long)]
    scx: bool,
    /// With --scx: boots (the order of the modes rotates between them).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// With --scx: seconds the jobs run in each mode.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let kernels = kernels::choose(&args.kernel)?;
    if !args.no_build {
        let tools = setup::all(workspace)?;
        cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
    }
    vm::check_host()?;
    if args.scx {
        let [kernel] = kernels[..] else {
            anyhow::bail!("--scx runs on one kernel (7.x: the only one with sched_ext)");
        };
        let boots = vm::scx::run(&vm::scx::ScxOptions {
            kernel,
            root: workspace.root().to_path_buf(),
            bin_dir: workspace.profile_dir("release")?,
            out_dir: workspace.profile_dir("vm")?,
            runs: args.runs,
            seconds: args.seconds,
        })?;
        let complete = boots
            .iter()
            .all(|b| b.values().all(|m| m.probe.is_some() && m.errors.is_empty()));
        return Ok(if complete {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let started = std::time::Instant::now();
    let runs = vm::run(&VmTestOptions {
        kernels,
        bin_dir: workspace.profile_dir("release")?,
        out_dir: workspace.profile_dir("vm")?,
        timeout: Duration::from_secs(args.timeout),
    })?;
    println!();
    for run in &runs {
        let count = |v| run.checks.iter().filter(|c| c.verdict == v).count();
        println!(
            "vm-test {:<5} {:<28} {:>3} pass {:>2} fail {:>2} n/a  {:>4.0} s",
            run.kernel.choice.key,
            run.guests
                .get(vm::report::AGENT_VMS[0])
                .and_then(|g| g.kernel_release())
                .unwrap_or("?"),
            count(vm::report::Verdict::Pass),
            count(vm::report::Verdict::Fail),
            count(vm::report::Verdict::NotApplicable),
            run.seconds
        );
    }
    say(
        "vm-test",
        format!("{:.0} s in all", started.elapsed().as_secs_f64()),
    );
    Ok(if runs.iter().any(|r| r.failed()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
