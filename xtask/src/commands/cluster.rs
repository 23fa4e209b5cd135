//! `cargo xtask cluster up|status|down|exec`.

use std::{ffi::OsString, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use clap::Subcommand;
use cosched_proto::control::{Client, Reply, Request};
use xtask::{
    cluster::{self, AgentCommand, Cluster, CoordinatorOptions, DEFAULT_METRICS_PORT, UpOptions},
    mpi::{self, Library},
    process,
    progress::say,
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
    /// Run a real MPI job across the nodes with the library's own launcher
    /// (`mpirun.openmpi` or `mpiexec.hydra`), one rank per node unless
    /// `--np` says more. PROG is one of the bundled benchmarks (pingpong,
    /// allreduce, halo, testloop; built for the library), `hpcc`, or any
    /// MPI program.
    Mpirun(MpirunArgs),
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
    /// Also run Slurm: slurmctld on the bridge, a slurmd in every node
    /// (Slurm node name = node name); with `--coordinator`, every `srun`
    /// step becomes a coscheduled job. Installs slurm-wlm and munge when
    /// missing. Use it with `export SLURM_CONF=/run/cosched-cluster/slurm/slurm.conf`.
    #[arg(long)]
    slurm: bool,
    /// Also start a Prometheus (Debian's `prometheus`, installed when
    /// missing) scraping every agent and the coordinator with the rules of
    /// configs/prometheus/; `cluster status` prints its URL.
    #[arg(long)]
    prometheus: bool,
    /// Give every node an exclusive cgroup-v1 cpuset, so its CPU is a root
    /// domain of its own and pinned tasks may use SCHED_DEADLINE (the
    /// agents' `[classes] edf = "deadline"`). While up, the cpuset root does
    /// not load-balance (tasks outside the nodes stay where they are); `down`
    /// undoes it. Needs one CPU per node.
    #[arg(long)]
    exclusive_cpusets: bool,
    /// A shell command to run instead of the agent, for testing the cluster
    /// plumbing (gets `--config PATH`, COSCHED_NODE and COSCHED_CONTROL_SOCKET;
    /// must create the control socket path).
    #[arg(long, hide = true, env = "COSCHED_AGENT_CMD")]
    agent_cmd: Option<String>,
}

#[derive(Debug, clap::Args)]
struct MpirunArgs {
    #[arg(long, value_enum, default_value = "openmpi")]
    lib: Library,
    /// Ranks in all (a multiple of the number of nodes) [default: one per node].
    #[arg(long)]
    np: Option<usize>,
    /// The library's yield mode (OpenMPI's `mpi_yield_when_idle`).
    #[arg(long)]
    yield_when_idle: bool,
    /// Hand the ranks to the node agents as this job id (adopted), and
    /// print what the agents saw of the job.
    #[arg(long, value_name = "JOB_ID")]
    adopt: Option<u32>,
    /// The program and its arguments (after `--`).
    #[arg(required = true, last = true)]
    command: Vec<String>,
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
                    classes: None,
                    paired_schedule_ahead: false,
                }),
                slurm: args.slurm,
                prometheus: args.prometheus,
                exclusive_cpusets: args.exclusive_cpusets,
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
        ClusterCommand::Mpirun(args) => return mpirun(workspace, &args),
    }
    Ok(ExitCode::SUCCESS)
}

fn mpirun(workspace: &Workspace, args: &MpirunArgs) -> Result<ExitCode> {
    let cluster = Cluster::load()?;
    let nodes = mpi::launch::Nodes::of_cluster(&cluster);
    let np = args.np.unwrap_or(nodes.nodes.len());
    if np == 0 || !np.is_multiple_of(nodes.nodes.len()) {
        anyhow::bail!(
            "--np must be a positive multiple of the {} nodes",
            nodes.nodes.len()
        );
    }
    let (name, rest) = args.command.split_first().context("no program given")?;
    let program = mpi::programs::resolve(workspace, args.lib, name)?;
    let dir = std::env::temp_dir().join(format!("cosched-mpirun-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // The job's directory goes whatever happens to the job.
    let result = mpirun_in(&cluster, &nodes, args, &program, np, rest, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn mpirun_in(
    cluster: &Cluster,
    nodes: &mpi::launch::Nodes,
    args: &MpirunArgs,
    program: &str,
    np: usize,
    rest: &[String],
    dir: &std::path::Path,
) -> Result<ExitCode> {
    let agent_script = dir.join("launch-agent.sh");
    nodes.write_launch_agent(&agent_script)?;
    mpi::programs::prepare_workdir(program, np, dir)?;
    let job_name = format!("mpirun-{}", std::process::id());
    let launch = mpi::launch::JobLaunch {
        lib: args.lib,
        nodes,
        launch_agent: &agent_script,
        ranks_per_node: np / nodes.nodes.len(),
        job: &job_name,
        yield_when_idle: args.yield_when_idle,
        program,
        args: rest,
        workdir: dir,
        attach: None,
    };
    say("mpirun", process::describe(&launch.command()?));
    let mut job = mpi::job::MpiJob::start(&launch)?;
    let sockets: Vec<_> = cluster
        .nodes
        .iter()
        .map(|n| n.control_socket.clone())
        .collect();
    if let Some(job_id) = args.adopt {
        let ranks = mpi::handoff::adopt_ranks(&mut job, &sockets, job_id, &job_name)?;
        say("mpirun", format!("adopted ranks {ranks:?} as job {job_id}"));
    }
    let finished = job.wait(Duration::from_secs(24 * 3600));
    drop(job);
    let finished = finished?;
    print!("{}", finished.stdout);
    eprint!("{}", finished.stderr);
    if let Ok(text) = std::fs::read_to_string(dir.join("hpccoutf.txt")) {
        let kernels = mpi::output::hpcc_kernel_seconds(&text)?;
        println!(
            "hpcc: timed kernels {kernels:.3} s, whole run {:.3} s",
            finished.wall_s
        );
    }
    if let Some(job_id) = args.adopt {
        for (node, socket) in cluster.nodes.iter().zip(&sockets) {
            let request = Request::Wait {
                job_id,
                timeout_ms: 10_000,
            };
            let reply = Client::connect(socket)?.call(&request, Duration::from_secs(15))?;
            if let Reply::Job { job } = reply {
                println!("{}: {}", node.name, serde_json::to_string(&job.stats)?);
            }
            let forget = Request::Forget { job_id };
            let _ = Client::connect(socket)?.call(&forget, Duration::from_secs(5));
        }
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
