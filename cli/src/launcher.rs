//! The commands that run processes or talk to a node's agent: `attach`,
//! `join` and `node ...`.

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, ExitCode},
    sync::atomic::{AtomicI32, Ordering},
    time::Duration,
};

use cosched::{attach, node, slurm, tables};
use cosched_coordinator::admin::{
    client,
    protocol::{Attachment, Reply, Request},
};
use cosched_proto::control::{self, Reply as AgentReply, Request as AgentRequest};

use crate::NodeAction;

/// The launcher's pid, for the signal handler (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let child = CHILD.load(Ordering::Relaxed);
    if child > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(child, signal);
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP go to the launcher instead of ending this
/// process: it must live to tell the coordinator how the launcher ended.
/// (A handler, not SIG_IGN, so the launcher itself starts with the default
/// dispositions.)
fn forward_signals() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs a handler that only calls kill.
        unsafe {
            libc::signal(signal, forward as *const () as libc::sighandler_t);
        }
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("cosched: {message}");
    ExitCode::FAILURE
}

pub fn attach(
    socket: &Path,
    timeout: Duration,
    job: Attachment,
    join_command: Option<String>,
    launcher: &[String],
) -> ExitCode {
    let cosched = match join_command {
        Some(path) => path,
        None => match std::env::current_exe() {
            Ok(path) => path.display().to_string(),
            Err(error) => return fail(format!("finding this program's path: {error}")),
        },
    };
    let coordinator = |request: &Request| client::call(socket, request, timeout);
    let view = match coordinator(&Request::Attach { job }) {
        Ok(Reply::Attached { job }) => job,
        Ok(other) => return fail(format!("unexpected reply: {other:?}")),
        Err(error) => return fail(error),
    };
    eprintln!(
        "cosched: job {} attached in row {} on {}",
        view.id,
        view.row.map_or_else(|| "-".into(), |row| row.to_string()),
        view.nodes.join(",")
    );
    let env = attach::launcher_env(view.id, &cosched, |var| std::env::var(var).ok());
    forward_signals();
    let started = Command::new(&launcher[0])
        .args(&launcher[1..])
        .envs(&env)
        .spawn();
    let code = match started {
        Ok(mut child) => {
            CHILD.store(child.id() as i32, Ordering::Relaxed);
            match child.wait() {
                Ok(status) => attach::exit_code(status),
                Err(error) => {
                    eprintln!("cosched: waiting for {}: {error}", launcher[0]);
                    1
                }
            }
        }
        Err(error) => {
            eprintln!("cosched: cannot start {}: {error}", launcher[0]);
            127
        }
    };
    match coordinator(&Request::Detach { id: view.id, code }) {
        Ok(Reply::Detached { job }) => {
            eprintln!("cosched: job {} {}", job.id, job.state.as_str());
        }
        Ok(_) => {}
        // Its ranks all ended first, or it was cancelled: nothing to do.
        Err(error) if error.to_string().contains("already ended") => {}
        Err(error) => eprintln!(
            "cosched: telling the coordinator job {} ended: {error}",
            view.id
        ),
    }
    ExitCode::from(code.clamp(0, 255) as u8)
}

pub fn join(
    socket: &Path,
    job: u32,
    pid: Option<u32>,
    move_to_node: bool,
    daemon: bool,
    wait: Duration,
    command: &[String],
) -> ExitCode {
    let target = pid.unwrap_or_else(std::process::id);
    if pid.is_none() && command.is_empty() {
        return fail("nothing to run: `cosched join --job J -- COMMAND ...` (or --pid PID)");
    }
    if let Err(error) = node::join(socket, job, target, move_to_node, daemon, wait) {
        return fail(format!("joining job {job}: {error}"));
    }
    if pid.is_some() {
        return ExitCode::SUCCESS;
    }
    // Same pid from here on: the command is the joined process.
    let error = Command::new(&command[0]).args(&command[1..]).exec();
    eprintln!("cosched: cannot run {}: {error}", command[0]);
    ExitCode::from(127)
}

pub fn node(socket: &Path, timeout: Duration, json: bool, action: NodeAction) -> ExitCode {
    let request = match action {
        NodeAction::Jobs => AgentRequest::Jobs,
        NodeAction::Release { job } => AgentRequest::Release { job_id: job },
        NodeAction::Leave { pid } => AgentRequest::Leave { pid },
        NodeAction::Timeline { .. } => unreachable!("main records timelines itself"),
        NodeAction::Adopt {
            cgroup,
            pid,
            name,
            job_id,
            move_to_node,
            class,
        } => match node::attach_target(cgroup, pid)
            .and_then(|target| Ok((target, cosched_proto::class::parse_class(&class)?)))
        {
            Ok((target, class)) => AgentRequest::Attach {
                job_id,
                name,
                target,
                sched: None,
                move_to_node,
                class,
            },
            Err(message) => {
                eprintln!("cosched: {message}");
                return ExitCode::from(2);
            }
        },
    };
    let reply = match node::call(socket, &request, timeout) {
        Ok(reply) => reply,
        Err(control::ClientError::Refused { why, .. }) => return fail(why),
        Err(error) => return fail(error),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&reply).expect("replies serialise")
        );
        return ExitCode::SUCCESS;
    }
    match reply {
        AgentReply::Jobs { jobs } => print!("{}", tables::agent_jobs(&jobs)),
        AgentReply::Attached { job_id, tasks } => {
            println!("job {job_id} adopted ({tasks} tasks)");
        }
        AgentReply::Released { job_id, tasks } => {
            println!("job {job_id} released ({tasks} tasks handed back)");
        }
        AgentReply::Left { job_id, tasks } => {
            println!("left job {job_id} ({tasks} tasks handed back)");
        }
        other => println!("{other:?}"),
    }
    ExitCode::SUCCESS
}

/// How `slurm-hook` was configured (the admin's wrapper script's flags).
pub struct SlurmHook<'a> {
    pub coordinator: &'a Path,
    pub agent_socket: &'a Path,
    pub timeout: Duration,
    pub mode: slurm::Mode,
    pub on_failure: slurm::OnFailure,
    /// How long a task waits for its node's agent to learn about the step.
    pub wait: Duration,
    pub verbose: bool,
}

/// `cosched slurm-hook`: see [`slurm`]. Whatever goes wrong with cosched
/// is reported on stderr (which Slurm passes to srun's stderr); with
/// `OnFailure::RunUnmanaged` the hook then exits 0, so the step or task
/// runs, unmanaged.
pub fn slurm_hook(hook: &SlurmHook, args: &[String]) -> ExitCode {
    let context = std::env::var("SLURM_SCRIPT_CONTEXT").ok();
    let action = match slurm::decide(hook.mode, |var| std::env::var(var).ok(), args) {
        Ok(action) => action,
        // Not run by Slurm: a usage error.
        Err(message) if context.is_none() => return fail(format!("slurm-hook: {message}")),
        Err(message) => {
            return unmanaged_or_fail(hook, context.as_deref(), "slurm-hook", &message);
        }
    };
    let (what, result) = match &action {
        slurm::Action::Skip(why) => {
            if hook.verbose {
                eprintln!("cosched: slurm-hook: {why}");
            }
            return ExitCode::SUCCESS;
        }
        slurm::Action::Attach {
            name,
            nodes,
            command,
        } => (
            format!("attaching step {name} on {}", nodes.join(",")),
            slurm_attach(hook, name, nodes, command),
        ),
        slurm::Action::Join { job, pid } => (
            format!("joining task pid {pid} to {job}"),
            slurm_join(hook, job, *pid),
        ),
        slurm::Action::Detach { name } => {
            (format!("detaching step {name}"), slurm_detach(hook, name))
        }
    };
    match result {
        Ok(done) => {
            if hook.verbose {
                eprintln!("cosched: {done}");
            }
            ExitCode::SUCCESS
        }
        // Cleanup after the step: nothing left to protect, never an error
        // (srun would report "srun epilog failed").
        Err(error) if matches!(action, slurm::Action::Detach { .. }) => {
            eprintln!("cosched: warning: {what}: {error}");
            ExitCode::SUCCESS
        }
        Err(error) => unmanaged_or_fail(hook, context.as_deref(), &what, &error),
    }
}

/// The hook could not do its part: with `RunUnmanaged`, warn and exit 0
/// (the step or task runs, not coscheduled); else fail it. A task prolog's
/// stderr reaches nobody, so its warning also goes to the task's output
/// (Slurm prints a TaskProlog's `print ...` lines there).
fn unmanaged_or_fail(hook: &SlurmHook, context: Option<&str>, what: &str, error: &str) -> ExitCode {
    match hook.on_failure {
        slurm::OnFailure::RunUnmanaged => {
            let warning = format!(
                "cosched: warning: {what}: {error}: the step runs UNMANAGED (not coscheduled)"
            );
            if context == Some("prolog_task") {
                println!("print {warning}");
            }
            eprintln!("{warning}");
            ExitCode::SUCCESS
        }
        slurm::OnFailure::Fail => fail(format!("{what}: {error}")),
    }
}

fn slurm_attach(
    hook: &SlurmHook,
    name: &str,
    nodes: &[String],
    command: &[String],
) -> Result<String, String> {
    let job = Attachment {
        name: name.to_string(),
        nodes: nodes.to_vec(),
        command: command.to_vec(),
        class: cosched_proto::class::parse_class("be")?,
        exclusive: false,
    };
    let reply = client::call(hook.coordinator, &Request::Attach { job }, hook.timeout)
        .map_err(|error| error.to_string())?;
    match reply {
        Reply::Attached { job } => Ok(format!(
            "step {name} is job {} in row {} on {}",
            job.id,
            job.row.map_or_else(|| "-".into(), |row| row.to_string()),
            job.nodes.join(",")
        )),
        other => Err(format!("unexpected reply: {other:?}")),
    }
}

fn slurm_join(hook: &SlurmHook, job: &slurm::JobRef, pid: u32) -> Result<String, String> {
    let deadline = std::time::Instant::now() + hook.wait;
    let id = match job {
        slurm::JobRef::Id(id) => *id,
        slurm::JobRef::Name(name) => loop {
            let jobs = match node::call(hook.agent_socket, &AgentRequest::Jobs, hook.timeout) {
                Ok(AgentReply::Jobs { jobs }) => jobs,
                Ok(other) => return Err(format!("unexpected reply from the agent: {other:?}")),
                Err(error) => return Err(error.to_string()),
            };
            let found = jobs
                .iter()
                .filter(|j| j.name == *name && j.state == control::JobState::Running)
                .map(|j| j.job_id)
                .max();
            if let Some(id) = found {
                break id;
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!(
                    "the agent at {} has no job named {name:?} after {:.1} s (the srun prolog did not attach the step, or this node is not among its nodes)",
                    hook.agent_socket.display(),
                    hook.wait.as_secs_f64()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        },
    };
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    let tasks = node::join(hook.agent_socket, id, pid, false, false, left)?;
    Ok(format!("task pid {pid} joined job {id} ({tasks} tasks)"))
}

fn slurm_detach(hook: &SlurmHook, name: &str) -> Result<String, String> {
    let coordinator = |request: &Request| {
        client::call(hook.coordinator, request, hook.timeout).map_err(|error| error.to_string())
    };
    let jobs = match coordinator(&Request::Jobs { all: false })? {
        Reply::Jobs { jobs } => jobs,
        other => return Err(format!("unexpected reply: {other:?}")),
    };
    let Some(job) = jobs
        .iter()
        .filter(|j| j.name == name && j.attached)
        .max_by_key(|j| j.id)
    else {
        return Ok(format!(
            "step {name}: no active job (it ended with its ranks)"
        ));
    };
    match coordinator(&Request::Detach {
        id: job.id,
        code: 0,
    }) {
        Ok(_) => Ok(format!("step {name}: job {} detached", job.id)),
        Err(error) if error.contains("already ended") => Ok(format!("step {name}: ended")),
        Err(error) => Err(error),
    }
}
