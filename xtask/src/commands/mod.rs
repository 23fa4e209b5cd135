//! The command line: one module per subcommand, each with its arguments and a
//! `run` that calls into the library. To add a subcommand (demo, bench), add a
//! module with `Args` and `run`, and a variant to [`Command`].

mod bench;
mod build;
mod cluster;
mod demo;
mod setup;
mod test;
mod vm_test;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use xtask::workspace::Workspace;

/// cosched build orchestration.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install what the build and the cluster need (idempotent): toolchain
    /// check, apt packages, tracefs, bpf-linker.
    Setup(setup::Args),
    /// Setup, then build all binaries of the workspace.
    Build(build::Args),
    /// A local cluster: nodes are network namespaces on one machine.
    Cluster(cluster::Args),
    /// The CI pipeline: setup, release build, fmt, clippy, tests.
    Test(test::Args),
    /// Build, bring up a 2-node cluster, run a fine-grain job dedicated and
    /// two together, print what each did and what the agents saw, tear down.
    Demo(demo::Args),
    /// Benchmarks (eBPF overhead, policies).
    Bench(bench::Args),
    /// The release binaries in three QEMU guests (TCG) on Debian kernels:
    /// coordinator in one, agents in two, a virtio network between them.
    VmTest(vm_test::Args),
}

/// Runs the chosen subcommand; the exit code is the command's own for
/// commands that run another program (`cluster exec`).
pub fn run(cli: Cli) -> Result<ExitCode> {
    let workspace = Workspace::locate()?;
    match cli.command {
        Command::Setup(args) => setup::run(&workspace, args),
        Command::Build(args) => build::run(&workspace, args),
        Command::Cluster(args) => cluster::run(&workspace, args),
        Command::Test(args) => test::run(&workspace, args),
        Command::Demo(args) => demo::run(&workspace, args),
        Command::Bench(args) => bench::run(&workspace, args),
        Command::VmTest(args) => vm_test::run(&workspace, args),
    }
}
