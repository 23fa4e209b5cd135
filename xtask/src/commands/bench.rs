//! `cargo xtask bench overhead|idle|local|gang|mpi|mpi-pool|rt|scale`.
use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context as _, Result};
use clap::Subcommand;
use xtask::{
    bench::{
        common::BenchBinaries,
        gang::{self, GangOptions, modes::Mode, workloads::GangWorkload},
        idle::{self, IdleOptions},
        local::{self, LocalOptions, workloads::Workload},
        mpi::{self, MpiOptions, workloads::MpiWorkload},
        overhead,
        rt::{
            self, RtOptions,
            columns::{Admission, Column},
            stream::Mix,
        },
    },
    cargo_build::{self, Profile},
    mpi::Library,
    progress::say,
    setup,
    workspace::Workspace,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// ns added per context switch by the eBPF programs (attached vs not,
    /// interleaved in one run).
    Overhead {
        #[arg(long, default_value_t = 7)]
        repetitions: usize,
        #[arg(long, default_value_t = 200_000)]
        round_trips: u64,
        /// CPU the ping-pong runs on.
        #[arg(long, default_value_t = 0)]
        cpu: usize,
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// What an agent with nothing to react to costs: CPU share and
    /// wake-ups per second of its threads, with no job and with sleeping
    /// jobs, per policy.
    Idle(IdleArgs),
    /// Every local policy against plain Linux: per workload and MPL, each
    /// job's slowdown vs its dedicated run, spinning, boosts, reaction
    /// latency, ClusterSchedSim's metrics and agent CPU (medians over repetitions).
    Local(LocalArgs),
    /// Coordinator policies (gang, paired gang, FCS) against plain Linux and
    /// the best local policy: communication- and I/O-intensive jobs and
    /// Paired Gang Scheduling's mixes, per slice length; switch skew; the targets.
    Gang(GangArgs),
    /// Real MPI programs (OpenMPI and MPICH with their own launchers):
    /// dedicated, plain Linux, the library's yield mode, every local policy,
    /// gang and paired gang at MPL 2 and 3; slowdown = time ÷ dedicated time.
    Mpi(MpiArgs),
    /// Several `bench mpi` reports (JSON) pooled into one: every run of a
    /// cell from every report, slowdowns against the median of every
    /// dedicated run, issue 12's targets judged on that.
    MpiPool(MpiPoolArgs),
    /// Best-effort and real-time jobs together (the BE/RT paper's §5, scaled
    /// down): Poisson arrivals in proportions 2:1, 9:1, 1:9 at a few rates,
    /// without and (9:1) with admission control; columns 1GS, 2DCS-TDM,
    /// 2DCS-PS, plain Linux with RT at SCHED_FIFO and at SCHED_DEADLINE;
    /// BE response and throughput, RT miss and rejection rates.
    Rt(RtArgs),
    /// The real coordinator driving many stand-in agents (cosched-scale):
    /// registration, jobs spanning every node, slice switches (the
    /// coordinator's skew and the agents'), heartbeats, coordinator CPU and
    /// memory per agent, links broken at once and their rejoin.
    Scale(ScaleArgs),
}

#[derive(Debug, clap::Args)]
struct ScaleArgs {
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    #[arg(long, default_value_t = 10)]
    slice_ms: u64,
    /// Links broken at once in the drop phase.
    #[arg(long, default_value_t = 100)]
    drop_agents: usize,
    /// Where to write the report (default docs/results/scale-<agents>.json).
    #[arg(long)]
    json: Option<PathBuf>,
    /// More `cosched-scale` options (after `--`), e.g. `-- --window-s 30`.
    #[arg(last = true)]
    extra: Vec<String>,
}

/// What every policy bench writes and how it builds.
#[derive(Debug, clap::Args)]
struct OutputArgs {
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write a bar chart of slowdown by policy and workload here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Smoke run: 1 short repetition, the smallest settings (overrides
    /// those flags).
    #[arg(long)]
    quick: bool,
    /// Use the binaries already in target/release instead of building.
    #[arg(long)]
    no_build: bool,
}

/// The list given on the command line, or the default when none was.
fn or_default<T>(given: Vec<T>, default: Vec<T>) -> Vec<T> {
    if given.is_empty() { default } else { given }
}

#[derive(Debug, clap::Args)]
struct IdleArgs {
    /// Policies, comma-separated [default: local,dcs].
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Numbers of sleeping jobs (adopted `sleep` processes), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [0, 60])]
    sleeping_jobs: Vec<u32>,
    /// Measured seconds of each row.
    #[arg(long, default_value_t = 5.0)]
    window: f64,
    /// Write the rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Use the binaries already in target/release instead of building.
    #[arg(long)]
    no_build: bool,
}

impl IdleArgs {
    fn options(&self) -> IdleOptions {
        let defaults = IdleOptions::default();
        let mut sleeping_jobs = self.sleeping_jobs.clone();
        sleeping_jobs.sort_unstable();
        IdleOptions {
            policies: or_default(self.policies.clone(), defaults.policies),
            sleeping_jobs,
            window: Duration::from_secs_f64(self.window),
            ..defaults
        }
    }
}

#[derive(Debug, clap::Args)]
struct LocalArgs {
    /// Nodes of the cluster; every job has one rank on each.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Multiprogramming levels (jobs per node), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 3])]
    mpl: Vec<u32>,
    /// Repetitions per cell; each number is their median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Policies, comma-separated [default: local,dcs,sb,sy,pb,pb-sb,dcs-sb,fcs].
    /// A variant `name:key=value+key=value` runs policy `name` with those
    /// agent config keys set (dotted paths, TOML values), e.g.
    /// `dcs:dcs.boost_computing=true`.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Workloads, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    workloads: Vec<Workload>,
    /// How the spinning jobs wait (cosched-synth --wait): recv (non-blocking
    /// receives, the default), poll (OpenMPI 4), epoll (OpenMPI 5, UCX),
    /// yield (MPICH).
    #[arg(long, value_enum)]
    wait: Option<local::SpinWait>,
    #[command(flatten)]
    out: OutputArgs,
}

impl LocalArgs {
    fn options(self) -> LocalOptions {
        let defaults = LocalOptions::default();
        let options = LocalOptions {
            nodes: self.nodes,
            mpls: self.mpl,
            reps: self.reps,
            duration_s: self.duration,
            policies: or_default(self.policies, defaults.policies),
            workloads: or_default(self.workloads, defaults.workloads),
            wait: self.wait,
            json: self.out.json,
            svg: self.out.svg,
            build: !self.out.no_build,
        };
        if self.out.quick {
            options.quick()
        } else {
            options
        }
    }
}

#[derive(Debug, clap::Args)]
struct GangArgs {
    /// Repetitions per cell; each number is their median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measured seconds of each run.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// The coordinator's slice lengths in ms, comma-separated [default: 10,50].
    #[arg(long, value_delimiter = ',')]
    slice_ms: Vec<u64>,
    /// The local policy of the `best-local` column.
    #[arg(long, default_value = gang::DEFAULT_BEST_LOCAL)]
    local_policy: String,
    /// Workloads, comma-separated [default: comm,io,mix1,mix2,mix3].
    #[arg(long, value_delimiter = ',', value_enum)]
    workloads: Vec<GangWorkload>,
    /// Columns, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    modes: Vec<Mode>,
    /// Outside its slice, demote a job (idle cgroup, see `cluster up
    /// --demote-inactive`) instead of stopping it.
    #[arg(long)]
    demote_inactive: bool,
    #[command(flatten)]
    out: OutputArgs,
}

impl GangArgs {
    fn options(self) -> GangOptions {
        let defaults = GangOptions::default();
        let options = GangOptions {
            reps: self.reps,
            duration_s: self.duration,
            slices_ms: or_default(self.slice_ms, defaults.slices_ms),
            best_local: self.local_policy,
            workloads: or_default(self.workloads, defaults.workloads),
            modes: or_default(self.modes, defaults.modes),
            stop_inactive: !self.demote_inactive,
            json: self.out.json,
            svg: self.out.svg,
            build: !self.out.no_build,
            timeline: None,
        };
        if self.out.quick {
            options.quick()
        } else {
            options
        }
    }
}

#[derive(Debug, clap::Args)]
struct MpiArgs {
    /// Libraries, comma-separated [default: openmpi,mpich].
    #[arg(long, value_delimiter = ',', value_enum)]
    libs: Vec<Library>,
    /// Workloads, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    workloads: Vec<MpiWorkload>,
    /// Multiprogramming levels (copies of the job at once), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 3])]
    mpl: Vec<u32>,
    /// Columns, comma-separated [default: local,yield, every local policy,
    /// gang,paired-gang]; local policies may be variants as in `bench local`.
    #[arg(long, value_delimiter = ',')]
    columns: Vec<String>,
    /// The coordinator columns' slice length, ms.
    #[arg(long, default_value_t = mpi::DEFAULT_SLICE_MS)]
    slice_ms: u64,
    /// Repetitions per cell; each number is their median.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Timed seconds of each run of the bundled benchmarks (they stop at
    /// this time; HPCC runs its fixed problem).
    #[arg(long, default_value_t = 0.75)]
    seconds: f64,
    #[command(flatten)]
    out: OutputArgs,
}

impl MpiArgs {
    fn options(self) -> MpiOptions {
        let defaults = MpiOptions::default();
        let options = MpiOptions {
            libs: or_default(self.libs, defaults.libs),
            workloads: or_default(self.workloads, defaults.workloads),
            mpls: self.mpl,
            columns: or_default(self.columns, defaults.columns),
            slice_ms: self.slice_ms,
            reps: self.reps,
            seconds: self.seconds,
            json: self.out.json,
            svg: self.out.svg,
            build: !self.out.no_build,
        };
        if self.out.quick {
            options.quick()
        } else {
            options
        }
    }
}

#[derive(Debug, clap::Args)]
struct MpiPoolArgs {
    /// The reports (`bench mpi --json`), at least two.
    #[arg(required = true, num_args = 2..)]
    reports: Vec<PathBuf>,
    /// Write the pooled rows as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the pooled slowdown chart here.
    #[arg(long)]
    svg: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RtArgs {
    /// Mixes RT:BE measured without admission control [default: 2:1,9:1,1:9].
    #[arg(long, value_delimiter = ',', value_parser = Mix::parse)]
    mixes: Vec<Mix>,
    /// Mixes measured with admission control [default: 9:1].
    #[arg(long, value_delimiter = ',', value_parser = Mix::parse)]
    admission_mixes: Vec<Mix>,
    /// Arrival rates, jobs per second, comma-separated [default: 1,2.5,4].
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    /// Columns, comma-separated [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    columns: Vec<Column>,
    /// Admission settings, comma-separated [default: none,deterministic,statistical;
    /// also: probabilistic].
    #[arg(long, value_delimiter = ',', value_enum)]
    admission: Vec<Admission>,
    /// Seconds of arrivals per cell.
    #[arg(long, default_value_t = 6.0)]
    window: f64,
    /// Seed of the arrival stream (every column replays the same stream).
    #[arg(long, default_value_t = rt::DEFAULT_SEED)]
    seed: u64,
    /// Statistical admission's utilization bound, percent of the RT share
    /// (above 100 overbooks).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=1000))]
    statistical_bound_percent: u64,
    /// Record both agents' timelines (slice switches, context switches) for
    /// each coordinator cell into DIR/<cell>.json (`cosched timeline`; at
    /// most 60 s each).
    #[arg(long, value_name = "DIR")]
    timeline: Option<std::path::PathBuf>,
    /// Keep every RT rank's frame done times (`done_us`) in the JSON, not
    /// only those of jobs that missed frames.
    #[arg(long)]
    frame_times: bool,
    /// Join the rows of this earlier `--json` report (cells measured again
    /// take the new rows): a sweep split over several invocations, written
    /// whole with --json/--svg by the last one.
    #[arg(long, value_name = "JSON")]
    merge: Option<std::path::PathBuf>,
    /// Give each node an exclusive cpuset (its CPU its own root domain, as
    /// `cluster up --exclusive-cpusets`), so the kernel accepts
    /// SCHED_DEADLINE for pinned ranks: what `2dcs-tdm-deadline` needs; the
    /// `deadline` column then runs partitioned EDF, one domain per node.
    #[arg(long)]
    exclusive_cpusets: bool,
    #[command(flatten)]
    out: OutputArgs,
}

impl RtArgs {
    fn options(self) -> RtOptions {
        let defaults = RtOptions::default();
        let options = RtOptions {
            mixes: or_default(self.mixes, defaults.mixes),
            admission_mixes: or_default(self.admission_mixes, defaults.admission_mixes),
            rates: or_default(self.rates, defaults.rates),
            columns: or_default(self.columns, defaults.columns),
            admissions: or_default(self.admission, defaults.admissions),
            window_s: self.window,
            seed: self.seed,
            statistical_bound_percent: self.statistical_bound_percent,
            timeline_dir: self.timeline,
            frame_times: self.frame_times,
            merge: self.merge,
            json: self.out.json,
            svg: self.out.svg,
            build: !self.out.no_build,
            exclusive_cpusets: self.exclusive_cpusets,
            ..defaults
        };
        if self.out.quick {
            options.quick()
        } else {
            options
        }
    }
}

pub fn run(workspace: &Workspace, args: Args) -> Result<ExitCode> {
    match args.command {
        BenchCommand::Overhead {
            repetitions,
            round_trips,
            cpu,
            json,
        } => {
            let tools = setup::all(workspace)?;
            cargo_build::build_binaries(workspace, &tools, Profile::Release)?;
            let agent = workspace.profile_dir("release")?.join("cosched-agent");
            say(
                "bench",
                format!(
                    "eBPF overhead: {repetitions} x {round_trips} ping-pong round trips per mode on CPU {cpu}"
                ),
            );
            let r = overhead::run(&agent, repetitions, round_trips, cpu)?;
            println!(
                "median ns per context switch: baseline {:.0}, programs attached {:.0} (+{:.0}), task managed {:.0} (+{:.0}), managed and recording a timeline {:.0} (+{:.0}, {:.0} switches recorded); kernel BPF stats: sched_switch {:.0} ns per run",
                r.baseline_ns_per_switch,
                r.attached_ns_per_switch,
                r.added_ns_attached,
                r.managed_ns_per_switch,
                r.added_ns_managed,
                r.recording_ns_per_switch,
                r.added_ns_recording,
                r.recorded_switches,
                r.kernel_sched_switch_ns_per_run
            );
            println!("median ns per system call (waiting detectors; getppid is watched by none):");
            for c in &r.syscalls {
                println!(
                    "  {:<14} baseline {:.0}, programs attached {:.0} (+{:.0}), task managed {:.0} (+{:.0})",
                    c.call.as_str(),
                    c.baseline_ns,
                    c.attached_ns,
                    c.added_ns_attached,
                    c.managed_ns,
                    c.added_ns_managed
                );
            }
            if let Some(path) = json {
                std::fs::write(&path, serde_json::to_string_pretty(&r)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        BenchCommand::Idle(args) => {
            let binaries = BenchBinaries::snapshot(workspace, !args.no_build, &["cosched-agent"])?;
            let options = args.options();
            say(
                "bench",
                format!(
                    "idle agent: policies {:?}, sleeping jobs {:?}, {:?} per row",
                    options.policies, options.sleeping_jobs, options.window
                ),
            );
            let rows = idle::run(&binaries.path("cosched-agent"), &options)?;
            println!("policy  sleeping jobs  context switches/s  of which preempted  agent CPU %");
            for row in &rows {
                println!(
                    "{:<7} {:>13} {:>19.1} {:>19.1} {:>12.2}",
                    row.policy,
                    row.sleeping_jobs,
                    row.switches_per_s,
                    row.involuntary_per_s,
                    row.cpu_percent
                );
            }
            if let Some(path) = &args.json {
                std::fs::write(path, serde_json::to_string_pretty(&rows)?)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        BenchCommand::Local(args) => {
            let report = local::run(workspace, &args.options())?;
            return Ok(exit_code(
                report.interrupted,
                report.failed_rows(),
                report.rows.len(),
            ));
        }
        BenchCommand::Mpi(args) => {
            let report = mpi::run(workspace, &args.options())?;
            return Ok(exit_code(
                report.interrupted,
                report.failed_rows(),
                report.rows.len(),
            ));
        }
        BenchCommand::MpiPool(args) => {
            let report =
                mpi::pool_reports(&args.reports, args.json.as_deref(), args.svg.as_deref())?;
            return Ok(exit_code(false, report.failed_rows(), report.rows.len()));
        }
        BenchCommand::Rt(args) => {
            let report = rt::run(workspace, &args.options())?;
            return Ok(exit_code(
                report.interrupted,
                report.failed_rows(),
                report.rows.len(),
            ));
        }
        BenchCommand::Scale(args) => {
            let mut build = workspace.cargo();
            build.args([
                "build",
                "--release",
                "-p",
                "cosched-coordinator",
                "-p",
                "cosched-scale",
            ]);
            say("build", xtask::process::describe(&build));
            xtask::process::run(&mut build).context("building the scale harness")?;
            let dir = workspace.profile_dir("release")?;
            let json = args.json.unwrap_or_else(|| {
                workspace
                    .root()
                    .join(format!("docs/results/scale-{}.json", args.agents))
            });
            let mut command = std::process::Command::new(dir.join("cosched-scale"));
            command
                .arg("--coordinator")
                .arg(dir.join("cosched-coordinator"))
                .args(["--agents", &args.agents.to_string()])
                .args(["--slice-ms", &args.slice_ms.to_string()])
                .args(["--drop-agents", &args.drop_agents.to_string()])
                .arg("--output")
                .arg(&json)
                .args(&args.extra);
            say("bench", xtask::process::describe(&command));
            xtask::process::run(&mut command).context("the scale scenario failed")?;
            return Ok(ExitCode::SUCCESS);
        }
        BenchCommand::Gang(args) => {
            let report = gang::run(workspace, &args.options())?;
            return Ok(exit_code(
                report.interrupted,
                report.failed_rows(),
                report.rows.len(),
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// 130 after Ctrl-C, failure when rows failed (they are marked `error`).
fn exit_code(interrupted: bool, failed: usize, rows: usize) -> ExitCode {
    if interrupted {
        say("bench", "interrupted: the rows above are what was measured");
        return ExitCode::from(130);
    }
    if failed > 0 {
        say(
            "bench",
            format!("{failed} of {rows} rows failed (marked error)"),
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
