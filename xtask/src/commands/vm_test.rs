//! `cargo xtask vm-test [--kernel 7.x|6.12|6.1|all]`.

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
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    let kernels = kernels::choose(&args.kernel)?;
    if !args.no_build {
        let tools = setup::all(workspace)?;
        cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
    }
    vm::check_host()?;
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
