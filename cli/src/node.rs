//! `cosched node ...` and `cosched join`: requests to one node's agent over
//! its control socket (root only, mode 0600) or, for a caller that is not
//! root, its user socket, built from arguments so nobody writes JSON by hand.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

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

/// One request to the agent whose control socket is `socket`. A caller
/// that is not root sends the requests users may make (join and leave of
/// its own processes, jobs, status) to the agent's user socket next to it
/// (`agent-user.sock`), where the agent checks them against the caller's
/// peer credentials; the rest goes to the root-only control socket.
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Reply, ClientError> {
    let path = socket_for(socket, request, cosched_proto::jsonl::caller_is_root());
    Client::connect(&path)?.call(request, timeout)
}

/// Where `request` goes: the control socket, or for a caller that is not
/// root and a request users may make, the user socket.
pub fn socket_for(socket: &Path, request: &Request, root: bool) -> PathBuf {
    if !root && request.allowed_for_users() {
        cosched_proto::jsonl::user_socket_path(socket)
    } else {
        socket.to_path_buf()
    }
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
            Err(ClientError::Refused { why, .. })
                if why.contains(&format!("unknown job {job_id}"))
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(ClientError::Refused { why, .. }) if why.contains("unknown job") => {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_joins_through_the_user_socket_and_root_through_the_control_socket() {
        let control = Path::new("/run/cosched/agent.sock");
        let join = Request::Join {
            job_id: 1,
            pid: 2,
            move_to_node: false,
            daemon: false,
        };
        let user = Path::new("/run/cosched/agent-user.sock");
        assert_eq!(socket_for(control, &join, false), user);
        assert_eq!(socket_for(control, &Request::Jobs, false), user);
        assert_eq!(socket_for(control, &join, true), control);
        // What users may not do goes to the control socket, which refuses
        // them (mode 0600) instead of the agent seeing a forged request.
        assert_eq!(socket_for(control, &Request::Reload, false), control);
    }
}
