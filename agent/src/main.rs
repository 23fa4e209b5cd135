//! `cosched-agent`: the per-node cosched daemon.
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use cosched_agent::{config::Config, daemon, guardian, launch, threads};

#[derive(Parser)]
#[command(
    version,
    about = "cosched per-node agent: eBPF observation and local coscheduling"
)]
struct Args {
    /// Agent config (TOML).
    #[arg(
        long,
        short,
        env = "COSCHED_AGENT_CONFIG",
        default_value = "/etc/cosched/agent.toml"
    )]
    config: PathBuf,
    /// Check the config and exit.
    #[arg(long)]
    check_config: bool,
    #[command(subcommand)]
    internal: Option<Internal>,
}

#[derive(clap::Subcommand)]
enum Internal {
    /// (internal) enter the rank's cgroup, wait for the agent's go byte on
    /// fd 3, then exec the command.
    #[command(name = "__gate", hide = true)]
    Gate {
        /// The cgroup v2 directory to move into first.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// (internal) restore the journal's tasks when the agent dies.
    #[command(name = "__guardian", hide = true)]
    Guardian {
        journal: PathBuf,
        /// fd 4 is the agent's lifeline (else fd 3 is its pipe).
        #[arg(long)]
        lifeline: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.internal {
        Some(Internal::Gate { cgroup, command }) => {
            return launch::run_gate(cgroup.as_deref(), &command);
        }
        Some(Internal::Guardian { journal, lifeline }) => {
            return guardian::run(&journal, lifeline);
        }
        None => {}
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COSCHED_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cfg = Config::load(&args.config)?;
    if args.check_config {
        println!("{}: ok", args.config.display());
        return Ok(());
    }
    if cfg.pin_self {
        // Before the runtime starts, so every agent thread inherits it.
        daemon::pin_to(&cfg.node_cpus(daemon::online_cpus()))
            .context("pinning the agent to its node CPUs")?;
    }
    let helper_priority = cfg.agent_priority;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // The event loop runs on this thread; a thread tokio starts (its
        // blocking pool, e.g. for a name lookup) must not starve.
        .on_thread_start(move || threads::run_helper_at(helper_priority))
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(daemon::run(args.config, cfg))
}
