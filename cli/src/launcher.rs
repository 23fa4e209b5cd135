//! The commands that run processes or talk to a node's agent: `attach`,
//! `join` and `node ...`.

use std::{
    os::unix::process::CommandExt as _,
    path::Path,
    process::{Command, ExitCode},
    sync::atomic::{AtomicI32, Ordering},
    time::Duration,
};

use cosched::{attach, node, tables};
use cosched_coordinator::admin::{
    client::Client,
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
    let coordinator = |request: &Request| {
        Client::connect(socket).and_then(|mut client| client.call(request, timeout))
    };
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
        Err(control::ClientError::Refused(why)) => return fail(why),
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
        other => println!("{other:?}"),
    }
    ExitCode::SUCCESS
}
