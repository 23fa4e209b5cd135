//! `cosched attach -- LAUNCHER ...`: the launcher runs with an environment
//! that makes each node's daemon start under `cosched join --job J`, so a
//! user's own command line becomes a coscheduled job.
//!
//! - OpenMPI 4 (`mpirun`/`orterun`): `OMPI_MCA_orte_launch_agent`, the
//!   command its rsh/ssh launcher runs on each node instead of `orted`,
//!   becomes `cosched join --job J --daemon -- orted` (an existing value is wrapped
//!   instead). OpenMPI 5 / PRRTE read `PRTE_MCA_prte_launch_agent`
//!   (`prted`), set the same way.
//! - Everything else (MPICH hydra's `-launcher-exec` script, a Slurm
//!   TaskProlog, a plain ssh loop) reads `COSCHED_ATTACHED_JOB`,
//!   `COSCHED_JOIN` (the prefix to put before a rank's command) and
//!   `COSCHED_JOIN_DAEMON` (before a per-node daemon's) from the
//!   environment; see docs/launchers.md.

use std::collections::BTreeMap;

/// The attached job's id, for scripts the launcher runs.
pub const JOB_ENV: &str = "COSCHED_ATTACHED_JOB";
/// The prefix that joins a command to the job: `cosched join --job J --`.
pub const JOIN_ENV: &str = "COSCHED_JOIN";
/// The prefix for a launcher's per-node daemon (followed, never stopped):
/// `cosched join --job J --daemon --`.
pub const JOIN_DAEMON_ENV: &str = "COSCHED_JOIN_DAEMON";
/// OpenMPI 4's launch agent (default `orted`).
pub const OMPI_LAUNCH_AGENT: &str = "OMPI_MCA_orte_launch_agent";
/// OpenMPI 5 / PRRTE's launch agent (default `prted`).
pub const PRTE_LAUNCH_AGENT: &str = "PRTE_MCA_prte_launch_agent";

/// The variables to add to the launcher's environment, given the current
/// one (`get`), the job id and the path of this `cosched` binary (the same
/// path must exist on every node).
pub fn launcher_env(
    job: u32,
    cosched: &str,
    get: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let join = format!("{cosched} join --job {job} --");
    let daemon = format!("{cosched} join --job {job} --daemon --");
    let mut env = BTreeMap::new();
    env.insert(JOB_ENV.to_string(), job.to_string());
    env.insert(JOIN_ENV.to_string(), join);
    env.insert(JOIN_DAEMON_ENV.to_string(), daemon.clone());
    for (var, default) in [(OMPI_LAUNCH_AGENT, "orted"), (PRTE_LAUNCH_AGENT, "prted")] {
        let agent = get(var)
            .filter(|value| !value.trim().is_empty())
            .unwrap_or_else(|| default.to_string());
        env.insert(var.to_string(), format!("{daemon} {agent}"));
    }
    env
}

/// The exit code a shell would report for a child's status.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmpi_daemons_start_under_join_and_scripts_get_the_prefix() {
        let env = launcher_env(7, "/usr/bin/cosched", |_| None);
        assert_eq!(env[JOB_ENV], "7");
        assert_eq!(env[JOIN_ENV], "/usr/bin/cosched join --job 7 --");
        assert_eq!(
            env[OMPI_LAUNCH_AGENT],
            "/usr/bin/cosched join --job 7 --daemon -- orted"
        );
        assert_eq!(
            env[PRTE_LAUNCH_AGENT],
            "/usr/bin/cosched join --job 7 --daemon -- prted"
        );
    }

    #[test]
    fn a_launch_agent_the_user_set_is_wrapped_not_replaced() {
        let env = launcher_env(7, "cosched", |var| {
            (var == OMPI_LAUNCH_AGENT).then(|| "/opt/ompi/bin/orted --debug".to_string())
        });
        assert_eq!(
            env[OMPI_LAUNCH_AGENT],
            "cosched join --job 7 --daemon -- /opt/ompi/bin/orted --debug"
        );
    }
}
