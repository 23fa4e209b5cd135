//! `cargo xtask cluster up|status|down|exec`.

use std::{ffi::OsString, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use clap::Subcommand;
use xtask::{
    cluster::{self, AgentCommand, Cluster, CoordinatorOptions, DEFAULT_METRICS_PORT, UpOptions},
    process,
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
enum ClusterCommand {
    /// Start N nodes (namespace, veth, CPU, agent each) on this machine.
    Up(UpArgs),
    /// Show the nodes and whether their agents run.
    Status {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Stop the agents and remove everything a cluster created (idempotent,
    /// also cleans up after a crashed run).
    Down,
    /// Run a command inside a node: in its network namespace, pinned to its CPU.
    Exec {
        /// The node (n0, n1, ...).
        node: String,
        /// The command and its arguments (after `--`).
        #[arg(required = true, last = true)]
        command: Vec<OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Number of nodes; node i gets CPU i mod the number of CPUs.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// The agents' local policy.
    #[arg(long, default_value = "local")]
    policy: String,
    /// The agents' metrics port (the same in every namespace).
    #[arg(long, default_value_t = DEFAULT_METRICS_PORT)]
    base_port: u16,
    /// Rebuild the workspace even if the agent binary exists.
    #[arg(long)]
    build: bool,
    /// Seconds an agent may take to create its control socket.
    #[arg(long, default_value_t = 30)]
    startup_timeout: u64,
    /// Also start a coordinator (in n0's namespace) with this global policy
    /// (fcfs, gang, paired-gang, fcs) and join every agent to it; drive it
    /// with `cosched --socket /run/cosched-cluster/coordinator/coordinator.sock`.
    #[arg(long, value_name = "POLICY")]
    coordinator: Option<String>,
    /// The coordinator's time slice in ms (at least 10).
    #[arg(long, default_value_t = 100, requires = "coordinator")]
    slice_ms: u64,
    /// Outside their slice, demote other jobs (into each node's idle cgroup
    /// when the cgroup-v1 cpu controller allows, else SCHED_IDLE) instead of
    /// stopping them (SIGSTOP).
    #[arg(long, requires = "coordinator")]
    demote_inactive: bool,
    /// A shell command to run instead of the agent, for testing the cluster
    /// plumbing (gets `--config PATH`, COSCHED_NODE and COSCHED_CONTROL_SOCKET;
    /// must create the control socket path).
    #[arg(long, hide = true, env = "COSCHED_AGENT_CMD")]
    agent_cmd: Option<String>,
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    match args.command {
        ClusterCommand::Up(args) => {
            let options = UpOptions {
                nodes: args.nodes,
                policy: args.policy,
                metrics_port: args.base_port,
                agent: args.agent_cmd.map(AgentCommand::Shell),
                rebuild: args.build,
                startup_timeout: Duration::from_secs(args.startup_timeout),
                coordinator: args.coordinator.map(|policy| CoordinatorOptions {
                    policy,
                    slice_ms: args.slice_ms,
                    stop_inactive: !args.demote_inactive,
                    bin_dir: None,
                }),
            };
            cluster::up(workspace, &options)?;
            print!("{}", cluster::status()?.table());
        }
        ClusterCommand::Status { json } => {
            let status = cluster::status()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print!("{}", status.table());
            }
        }
        ClusterCommand::Down => {
            cluster::down()?;
        }
        ClusterCommand::Exec { node, command } => return exec(&node, &command),
    }
    Ok(ExitCode::SUCCESS)
}

fn exec(node: &str, command: &[OsString]) -> Result<ExitCode> {
    let cluster = Cluster::load()?;
    let node = cluster.node(node)?;
    let (program, args) = command.split_first().context("no command given")?;
    let mut command = node.command(program);
    command.args(args);
    let status = command
        .status()
        .with_context(|| format!("could not start `{}`", process::describe(&command)))?;
    Ok(status
        .code()
        .and_then(|code| u8::try_from(code).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from))
}
