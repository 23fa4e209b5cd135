//! `cosched-coordinator`: the cluster's coscheduling master.
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use cosched_coordinator::{config::Config, daemon, priority};

#[derive(Parser)]
#[command(
    version,
    about = "cosched coordinator: jobs, the Ousterhout matrix, synchronised gang and paired-gang slices, best-effort and real-time jobs together"
)]
struct Args {
    /// Coordinator config (TOML).
    #[arg(
        long,
        short,
        env = "COSCHED_COORDINATOR_CONFIG",
        default_value = "/etc/cosched/coordinator.toml"
    )]
    config: PathBuf,
    /// Check the config (and the state file) and exit.
    #[arg(long)]
    check_config: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COSCHED_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = Config::load(&args.config)?;
    if args.check_config {
        config.load_secret()?;
        daemon::load_core(&config)?;
        println!("{}: ok", args.config.display());
        return Ok(());
    }
    // The runtime is single-threaded: the event loop runs on this thread.
    if let Err(error) = priority::run_calling_thread_at(config.realtime_priority) {
        tracing::warn!(
            priority = config.realtime_priority,
            "cannot set the coordinator's priority ({error}); slice switches may be announced late on a busy host"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(daemon::run(config, args.config))
}
