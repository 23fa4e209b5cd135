//! `cosched`: talk to the coordinator (submit, list, cancel jobs; show the
//! matrix and nodes; switch the global policy), to one node's agent
//! (`node ...`), and run jobs that a launcher starts (`attach`, `join`).
mod launcher;

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Duration};

use cosched_policy::global::OffsetEstimate;

use clap::{Parser, Subcommand};
use cosched::{args, tables};
use cosched_coordinator::{
    admin::{
        client,
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
    /// The coordinator's admin socket (a user who is not root talks to the
    /// user socket next to it, `coordinator-user.sock`: attach, detach and
    /// cancel of their own jobs, and the views).
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
        /// `be` (default) or `rt:<period_ns>:<frames>:<work_ns>` (real-time:
        /// `frames` frames of `work_ns` CPU each per `frames × period_ns`;
        /// only under one-level-gang, 2dcs-tdm or 2dcs-ps, through their
        /// admission control).
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
    /// Run a launcher (mpirun, mpiexec, srun, a script) as a coscheduled job
    /// on the given nodes: `cosched attach --name ring --nodes n0,n1 -- mpirun
    /// ...`. Registers the job with the coordinator, runs the launcher with
    /// an environment that starts each node's daemon under `cosched join`
    /// (OpenMPI automatically; see docs/launchers.md for MPICH and Slurm),
    /// tells the coordinator when the launcher exits, and exits with its code.
    Attach {
        #[arg(long)]
        name: String,
        /// The nodes the launcher runs the job on (coordinator node names).
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        /// `be` (default) or `rt:<period_ns>:<frames>:<work_ns>`.
        #[arg(long, default_value = "be")]
        class: String,
        /// Never pair this job with another (paired gang).
        #[arg(long)]
        exclusive: bool,
        /// The `cosched` the nodes run for `join` (default: this binary's
        /// path, which must then exist on every node).
        #[arg(long)]
        join_command: Option<String>,
        /// The launcher and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        launcher: Vec<String>,
    },
    /// Join this process (and so everything it starts) to attached job JOB
    /// on this node, then exec the command: `cosched join --job 7 -- orted
    /// ...`. With `--pid`, joins that process and its descendants instead
    /// and runs nothing.
    Join {
        #[arg(long)]
        job: u32,
        /// Join this running process (and its descendants) instead.
        #[arg(long, conflicts_with = "command")]
        pid: Option<u32>,
        /// Narrow processes allowed outside the node's CPUs to them.
        #[arg(long)]
        move_to_node: bool,
        /// The command is the launcher's per-node daemon (orted,
        /// hydra_pmi_proxy): followed, so what it starts joins the job, but
        /// never stopped or demoted itself.
        #[arg(long)]
        daemon: bool,
        /// Seconds to wait for the agent to learn about the job.
        #[arg(long, default_value_t = 10.0)]
        wait: f64,
        #[arg(
            long,
            env = "COSCHED_AGENT_SOCKET",
            default_value = cosched::node::DEFAULT_AGENT_SOCKET
        )]
        agent_socket: PathBuf,
        /// The command to exec once joined (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Slurm's SrunProlog, TaskProlog and SrunEpilog (all three run this;
    /// Slurm's `SLURM_SCRIPT_CONTEXT` says which): every `srun` step
    /// becomes a coscheduled job `slurm-<job>.<step>` on the job's nodes,
    /// with each task joined on its node. See docs/launchers.md, "Slurm".
    SlurmHook {
        /// Coschedule only steps run with `COSCHED_SLURM=on` (default:
        /// every step not run with `COSCHED_SLURM=off`).
        #[arg(long)]
        opt_in: bool,
        /// When the coordinator or the agent cannot take the step, fail it
        /// (Slurm aborts the step or the task) instead of warning and
        /// letting it run unmanaged.
        #[arg(long)]
        strict: bool,
        /// Seconds a task waits for its node's agent to learn about the step.
        #[arg(long, default_value_t = 2.0)]
        wait: f64,
        /// Say what the hook did (on stderr).
        #[arg(long, short)]
        verbose: bool,
        #[arg(
            long,
            env = "COSCHED_AGENT_SOCKET",
            default_value = cosched::node::DEFAULT_AGENT_SOCKET
        )]
        agent_socket: PathBuf,
        /// The step's command line (Slurm passes it to the srun prolog).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Record a timeline on several agents at once and draw it, nodes one
    /// above the other on their common clock (CLOCK_MONOTONIC: shared by
    /// the nodes of a one-machine cluster; nodes on separate machines need
    /// `--coordinator-clock`, see docs/timeline.md).
    Timeline {
        /// An agent's control socket (repeat for each node).
        #[arg(long = "agent-socket", required = true)]
        agent_sockets: Vec<PathBuf>,
        /// Move every node's recording onto the coordinator's clock with
        /// the clock offsets the coordinator estimates from heartbeats
        /// (asked through --socket): for agents on separate machines.
        #[arg(long)]
        coordinator_clock: bool,
        #[command(flatten)]
        what: TimelineFlags,
    },
    /// One node's agent, through its control socket (root only; users
    /// who are not root reach its user socket for `jobs` and `leave`).
    Node {
        #[arg(
            long,
            env = "COSCHED_AGENT_SOCKET",
            default_value = cosched::node::DEFAULT_AGENT_SOCKET
        )]
        agent_socket: PathBuf,
        #[command(subcommand)]
        action: NodeAction,
    },
}

#[derive(Subcommand)]
enum NodeAction {
    /// Jobs the agent manages (launched, adopted, attached).
    Jobs,
    /// Manage running processes that something else launched: every task
    /// of a cgroup-v2 directory (now and later), or a process and all its
    /// descendants.
    Adopt {
        /// A cgroup-v2 directory: /sys/fs/cgroup/... or as /proc/PID/cgroup
        /// shows it.
        #[arg(long)]
        cgroup: Option<String>,
        /// A process: it and all its descendants (and their later children).
        #[arg(long)]
        pid: Option<u32>,
        #[arg(long, default_value = "adopted")]
        name: String,
        /// Job id (default: the agent picks a free local one).
        #[arg(long)]
        job_id: Option<u32>,
        /// Narrow processes allowed outside the node's CPUs to them instead
        /// of refusing them.
        #[arg(long)]
        move_to_node: bool,
        /// `be` or `rt:<period_ns>:<frames>:<work_ns>`: the agent counts an
        /// RT job's frames (its processes report them with cosched-rt into
        /// their `COSCHED_RT_DIR`, or /run/cosched/rt) and, in a class mode,
        /// runs it by EDF.
        #[arg(long, default_value = "be")]
        class: String,
    },
    /// Hand a job back: every task gets back what the agent changed; its
    /// processes keep running.
    Release { job: u32 },
    /// Hand one process (its threads, and its descendants in the same job)
    /// back from the attached job holding it; the job keeps the rest. Users
    /// who are not root may do this for their own processes.
    Leave {
        #[arg(long)]
        pid: u32,
    },
    /// Record which job's process held each CPU of the node (and the
    /// agent's boosts, demotions and the coordinator's slices) for a while,
    /// then draw it: `cosched node timeline --seconds 2 --svg out.svg`.
    Timeline {
        #[command(flatten)]
        what: TimelineFlags,
    },
}

#[derive(clap::Args)]
struct TimelineFlags {
    /// How long to record (the agent accepts up to 60 s).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Write the picture here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write the recordings (the agents' JSON) here.
    #[arg(long = "json-file")]
    json_file: Option<PathBuf>,
    /// Stop recording after this many records (default 200000, at most 500000).
    #[arg(long)]
    max_events: Option<u32>,
    /// The picture's title.
    #[arg(long)]
    title: Option<String>,
}

/// Every node's clock offset as the coordinator estimates it now.
fn clock_offsets(
    socket: &std::path::Path,
    timeout: Duration,
) -> Result<BTreeMap<String, Option<OffsetEstimate>>, String> {
    let reply = client::call(socket, &Request::Nodes, timeout).map_err(|e| e.to_string())?;
    let Reply::Nodes { nodes } = reply else {
        return Err(format!("unexpected answer to nodes: {reply:?}"));
    };
    Ok(nodes
        .into_iter()
        .map(|node| {
            let estimate = node.clock_offset_ns.zip(node.clock_uncertainty_ns).map(
                |(offset_ns, uncertainty_ns)| OffsetEstimate {
                    offset_ns,
                    round_trip_ns: uncertainty_ns.saturating_mul(2),
                    uncertainty_ns,
                },
            );
            (node.name, estimate)
        })
        .collect())
}

impl TimelineFlags {
    fn run(
        self,
        sockets: Vec<PathBuf>,
        align: Option<BTreeMap<String, Option<OffsetEstimate>>>,
        json: bool,
    ) -> ExitCode {
        let args = cosched::timeline::TimelineArgs {
            align,
            sockets,
            seconds: self.seconds,
            max_events: self.max_events,
            svg: self.svg,
            json_file: self.json_file,
            title: self.title,
        };
        match cosched::timeline::run(&args) {
            Ok((nodes, summary)) => {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string(&nodes).expect("recordings serialise")
                    );
                } else {
                    print!("{summary}");
                }
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("cosched: {message}");
                ExitCode::FAILURE
            }
        }
    }
}

#[derive(Subcommand)]
enum PolicyAction {
    /// Switch the global policy: fcfs, gang, paired-gang, fcs, or one of the
    /// policies that take real-time jobs: one-level-gang, 2dcs-tdm, 2dcs-ps.
    /// Refused, naming the jobs, when a running job could not keep its nodes
    /// (or its real-time guarantee) under the new policy.
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
        Command::Attach { .. }
        | Command::Join { .. }
        | Command::Node { .. }
        | Command::SlurmHook { .. }
        | Command::Timeline { .. } => {
            unreachable!("main runs these itself")
        }
    })
}

fn render(reply: &Reply, policy_only: bool) -> String {
    match reply {
        Reply::Attached { job } => format!(
            "job {} attached in row {} on {}\n",
            job.id,
            job.row.map_or_else(|| "-".into(), |row| row.to_string()),
            job.nodes.join(",")
        ),
        Reply::Detached { job } => format!("job {} ended ({})\n", job.id, job.state.as_str()),
        Reply::Submitted { job } => match job.queue_position {
            Some(position) if job.admission.is_some() => format!(
                "real-time job {} waiting for its rows (position {position}; evicted if it waits too long)\n",
                job.id
            ),
            Some(position) => format!("job {} queued (position {position})\n", job.id),
            None if job.row.is_none() => format!(
                "job {} running on {}{}\n",
                job.id,
                job.nodes.join(","),
                if job.admission.is_some() {
                    " (admitted)"
                } else {
                    ""
                }
            ),
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
    let timeout = Duration::from_secs_f64(cli.timeout.max(0.1));
    match cli.command {
        Command::Attach {
            name,
            nodes,
            class,
            exclusive,
            join_command,
            launcher,
        } => {
            let job = match args::parse_class(&class) {
                Ok(class) => cosched_coordinator::admin::protocol::Attachment {
                    name,
                    nodes,
                    command: launcher.clone(),
                    class,
                    exclusive,
                },
                Err(message) => {
                    eprintln!("cosched: {message}");
                    return ExitCode::from(2);
                }
            };
            return launcher::attach(&cli.socket, timeout, job, join_command, &launcher);
        }
        Command::Join {
            job,
            pid,
            move_to_node,
            daemon,
            wait,
            agent_socket,
            command,
        } => {
            let wait = Duration::from_secs_f64(wait.max(0.0));
            return launcher::join(
                &agent_socket,
                job,
                pid,
                move_to_node,
                daemon,
                wait,
                &command,
            );
        }
        Command::Node {
            agent_socket,
            action: NodeAction::Timeline { what },
        } => return what.run(vec![agent_socket], None, cli.json),
        Command::Node {
            agent_socket,
            action,
        } => return launcher::node(&agent_socket, timeout, cli.json, action),
        Command::SlurmHook {
            opt_in,
            strict,
            wait,
            verbose,
            agent_socket,
            args,
        } => {
            let hook = launcher::SlurmHook {
                coordinator: &cli.socket,
                agent_socket: &agent_socket,
                timeout,
                mode: if opt_in {
                    cosched::slurm::Mode::OptIn
                } else {
                    cosched::slurm::Mode::All
                },
                on_failure: if strict {
                    cosched::slurm::OnFailure::Fail
                } else {
                    cosched::slurm::OnFailure::RunUnmanaged
                },
                wait: Duration::from_secs_f64(wait.max(0.0)),
                verbose,
            };
            return launcher::slurm_hook(&hook, &args);
        }
        Command::Timeline {
            agent_sockets,
            coordinator_clock,
            what,
        } => {
            let align = if coordinator_clock {
                match clock_offsets(&cli.socket, timeout) {
                    Ok(estimates) => Some(estimates),
                    Err(message) => {
                        eprintln!("cosched: --coordinator-clock: {message}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                None
            };
            return what.run(agent_sockets, align, cli.json);
        }
        _ => {}
    }
    let policy_only = matches!(cli.command, Command::Policy { action: None });
    let request = match request(cli.command) {
        Ok(request) => request,
        Err(message) => {
            eprintln!("cosched: {message}");
            return ExitCode::from(2);
        }
    };
    let result = client::call(&cli.socket, &request, timeout);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_name_parses_for_policy_set() {
        for policy in GlobalPolicy::ALL {
            let cli = Cli::try_parse_from(["cosched", "policy", "set", policy.as_str()]).unwrap();
            let request = request(cli.command).unwrap();
            assert_eq!(request, Request::SetPolicy { policy });
        }
        assert!(Cli::try_parse_from(["cosched", "policy", "set", "2dcs"]).is_err());
    }

    #[test]
    fn a_real_time_submission_carries_its_class() {
        let cli = Cli::try_parse_from([
            "cosched",
            "submit",
            "--name",
            "video",
            "--nodes",
            "2",
            "--class",
            "rt:10000000:2:1000000",
            "--",
            "/bin/video",
        ])
        .unwrap();
        let Request::Submit { job } = request(cli.command).unwrap() else {
            panic!("a submission");
        };
        assert_eq!(
            job.class,
            cosched_proto::wire::JobClass::RealTime {
                period_ns: 10_000_000,
                frames: 2,
                work_ns: 1_000_000
            }
        );
    }
}
