//! `cosched`: talk to the coordinator (submit, list, cancel jobs; show the
//! matrix and nodes; switch the global policy).
use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};
use cosched::{args, tables};
use cosched_coordinator::{
    admin::{
        client::Client,
        protocol::{Reply, Request, Submission},
    },
    policy::GlobalPolicy,
};

#[derive(Parser)]
#[command(
    version,
    about = "cosched: jobs, the Ousterhout matrix and policies of a coscheduled cluster"
)]
struct Cli {
    /// The coordinator's admin socket.
    #[arg(
        long,
        env = "COSCHED_COORDINATOR_SOCKET",
        default_value = "/run/cosched/coordinator.sock"
    )]
    socket: PathBuf,
    /// Print the coordinator's JSON answer instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Seconds to wait for the coordinator's answer.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Submit a job: `cosched submit --name ring --nodes 2 -- /usr/bin/prog args...`.
    /// The agents of the nodes it would run on first check that the program
    /// can start there (a path, or a name in the job's or the agent's PATH);
    /// if one cannot, the job is refused with the node and the reason.
    Submit {
        #[arg(long)]
        name: String,
        /// Nodes (ranks) the job needs.
        #[arg(long, default_value_t = 1)]
        nodes: usize,
        /// The program; without it, the first word after `--` is.
        #[arg(long)]
        command: Option<String>,
        /// `be` (default) or `rt:<period_ns>:<frames>:<work_ns>`.
        #[arg(long, default_value = "be")]
        class: String,
        /// Never pair this job with another (paired gang).
        #[arg(long)]
        exclusive: bool,
        /// Environment variable for the ranks, KEY=VALUE (repeatable).
        #[arg(long = "env")]
        env: Vec<String>,
        /// The program's arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Active jobs (squeue-like).
    Jobs {
        /// Recently finished jobs too.
        #[arg(long)]
        all: bool,
    },
    /// One job in detail.
    Job { id: u32 },
    /// Cancel a queued or running job.
    Cancel { id: u32 },
    /// The Ousterhout matrix (rows = time slots, columns = nodes).
    Matrix,
    /// The cluster's nodes.
    Nodes,
    /// Policy, slicing and switch skew.
    Status,
    /// Show or switch the global policy.
    Policy {
        #[command(subcommand)]
        action: Option<PolicyAction>,
    },
}

#[derive(Subcommand)]
enum PolicyAction {
    /// Switch the global policy: fcfs, gang, paired-gang or fcs.
    Set { policy: GlobalPolicy },
}

fn request(command: Command) -> Result<Request, String> {
    Ok(match command {
        Command::Submit {
            name,
            nodes,
            command,
            class,
            exclusive,
            env,
            args: trailing,
        } => {
            let (command, args) = args::command_line(command, trailing)?;
            Request::Submit {
                job: Submission {
                    name,
                    nodes,
                    command,
                    args,
                    env: args::parse_env(&env)?,
                    class: args::parse_class(&class)?,
                    exclusive,
                },
            }
        }
        Command::Jobs { all } => Request::Jobs { all },
        Command::Job { id } => Request::Job { id },
        Command::Cancel { id } => Request::Cancel { id },
        Command::Matrix => Request::Matrix,
        Command::Nodes => Request::Nodes,
        Command::Status | Command::Policy { action: None } => Request::Status,
        Command::Policy {
            action: Some(PolicyAction::Set { policy }),
        } => Request::SetPolicy { policy },
    })
}

fn render(reply: &Reply, policy_only: bool) -> String {
    match reply {
        Reply::Submitted { job } => match job.queue_position {
            Some(position) => format!("job {} queued (position {position})\n", job.id),
            None => format!(
                "job {} running in row {} on {}\n",
                job.id,
                job.row.map_or_else(|| "-".into(), |row| row.to_string()),
                job.nodes.join(",")
            ),
        },
        Reply::Jobs { jobs } => tables::jobs(jobs),
        Reply::Job { job } => tables::job(job),
        Reply::Cancelled { job } => format!("job {} cancelled\n", job.id),
        Reply::Matrix { matrix } => tables::matrix(matrix),
        Reply::Nodes { nodes } => tables::nodes(nodes),
        Reply::Policy { policy } => format!("policy: {policy}\n"),
        Reply::Status { status } if policy_only => format!("policy: {}\n", status.policy),
        Reply::Status { status } => tables::status(status),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let policy_only = matches!(cli.command, Command::Policy { action: None });
    let request = match request(cli.command) {
        Ok(request) => request,
        Err(message) => {
            eprintln!("cosched: {message}");
            return ExitCode::from(2);
        }
    };
    let timeout = Duration::from_secs_f64(cli.timeout.max(0.1));
    let result = Client::connect(&cli.socket).and_then(|mut client| client.call(&request, timeout));
    match result {
        Ok(reply) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string(&reply).expect("replies serialise")
                );
            } else {
                print!("{}", render(&reply, policy_only));
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("cosched: {error}");
            ExitCode::FAILURE
        }
    }
}
