//! `cosched node ...` and `cosched join`: requests to one node's agent over
//! its control socket (root only, mode 0600), built from arguments so nobody
//! writes JSON by hand.

use std::{path::Path, time::Duration};

use cosched_proto::control::{AttachTarget, Client, ClientError, Reply, Request};

/// The agent's default control socket (its config's `control_socket`).
pub const DEFAULT_AGENT_SOCKET: &str = "/run/cosched/agent.sock";

/// What to adopt: exactly one of a cgroup or a pid tree.
pub fn attach_target(cgroup: Option<String>, pid: Option<u32>) -> Result<AttachTarget, String> {
    match (cgroup, pid) {
        (Some(path), None) => Ok(AttachTarget::Cgroup(path)),
        (None, Some(pid)) => Ok(AttachTarget::PidTree(pid)),
        (Some(_), Some(_)) => Err("give either --cgroup or --pid, not both".into()),
        (None, None) => Err("nothing to adopt: give --cgroup PATH or --pid PID".into()),
    }
}

/// One request to the agent at `socket`.
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Reply, ClientError> {
    Client::connect(socket)?.call(request, timeout)
}

/// Asks the agent to add `pid` (and its descendants) to `job`, retrying
/// while the agent does not know the job yet: the coordinator's
/// `ExpectJob` may still be on its way when a launcher starts the node's
/// daemon right after `cosched attach` registered the job.
pub fn join(
    socket: &Path,
    job_id: u32,
    pid: u32,
    move_to_node: bool,
    daemon: bool,
    wait: Duration,
) -> Result<u32, String> {
    let deadline = std::time::Instant::now() + wait;
    let request = Request::Join {
        job_id,
        pid,
        move_to_node,
        daemon,
    };
    loop {
        match call(socket, &request, Duration::from_secs(10)) {
            Ok(Reply::Joined { tasks, .. }) => return Ok(tasks),
            Ok(other) => return Err(format!("unexpected reply from the agent: {other:?}")),
            Err(ClientError::Refused(why))
                if why.contains(&format!("unknown job {job_id}"))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(ClientError::Refused(why)) if why.contains("unknown job") => {
                return Err(format!(
                    "{why}: the agent at {} was not told to expect job {job_id} within {:.0} s (is it attached, with this node among its --nodes?)",
                    socket.display(),
                    wait.as_secs_f64()
                ));
            }
            Err(error) => return Err(error.to_string()),
        }
    }
}
