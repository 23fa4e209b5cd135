//! Which processes the agent may take over. Pure: the facts come from the
//! kernel seam ([`ProcessInfo`]), the verdict is here.
//!
//! The agent changes the scheduling of what it manages, stops it in strict
//! gang slices and kills it on `cancel`; taking the wrong process is how a
//! node is lost: the agent itself (stopped by its own gang slice), its
//! guardian (then nothing restores after a crash), init, a kernel thread
//! (SCHED_IDLE on kthreadd), another cosched daemon, or a task another job
//! already holds (two policies fighting over it).
use std::path::Path;

use cosched_proto::job::JobId;

use crate::kernel::{ProcessInfo, Uids};

/// Programs of cosched's own daemons (matched by file name).
const COSCHED_DAEMONS: [&str; 2] = ["cosched-agent", "cosched-coordinator"];

/// Why a process is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("pid {0} is init (pid 1): never adopted")]
    Init(u32),
    #[error("pid {0} is a kernel thread: only user processes can be adopted")]
    KernelThread(u32),
    #[error("pid {0} has exited (zombie): nothing to schedule")]
    Zombie(u32),
    #[error("pid {0} is this agent")]
    Agent(u32),
    #[error("pid {0} is this agent's guardian, which restores tasks if the agent dies")]
    Guardian(u32),
    #[error("pid {pid} is a cosched daemon ({program}): never adopted")]
    CoschedDaemon { pid: u32, program: String },
    #[error("pid {pid} is already managed as part of job {job}")]
    OtherJob { pid: u32, job: JobId },
    #[error(
        "pid {pid} belongs to user {owner:?}, not to you (uid {caller}): only your own processes can join a job through the user socket"
    )]
    NotYours { pid: u32, owner: Uids, caller: u32 },
    #[error(
        "pid {pid} may run on CPUs {allowed:?}, outside this node's CPUs {node:?}: pin it to the node first (e.g. taskset -a -p -c {node_list} {pid}) or adopt with \"move_to_node\": true"
    )]
    OutsideNode {
        pid: u32,
        allowed: Vec<u32>,
        node: Vec<u32>,
        node_list: String,
    },
}

/// Whether every CPU of `allowed` is one of the node's.
pub fn within(allowed: &[u32], node_cpus: &[u32]) -> bool {
    allowed.iter().all(|c| node_cpus.contains(c))
}

/// Processes that are never adopted, besides what [`ProcessInfo`] tells.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Protected {
    pub agent: u32,
    pub guardian: Option<u32>,
}

/// May the agent adopt the process `info` describes into a job, on a node
/// with `node_cpus`? `managed_by`: the job that already manages it, if any;
/// `may_move`: a process allowed outside the node will be narrowed to it.
pub fn check(
    info: &ProcessInfo,
    protected: &Protected,
    node_cpus: &[u32],
    managed_by: Option<JobId>,
    may_move: bool,
) -> Result<(), Refusal> {
    let pid = info.pid;
    if pid == 1 {
        return Err(Refusal::Init(pid));
    }
    if info.kernel_thread {
        return Err(Refusal::KernelThread(pid));
    }
    if matches!(info.state, 'Z' | 'X' | 'x') {
        return Err(Refusal::Zombie(pid));
    }
    if pid == protected.agent {
        return Err(Refusal::Agent(pid));
    }
    if Some(pid) == protected.guardian {
        return Err(Refusal::Guardian(pid));
    }
    if let Some(program) = info
        .exe
        .as_deref()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .filter(|n| COSCHED_DAEMONS.iter().any(|d| n.starts_with(d)))
    {
        return Err(Refusal::CoschedDaemon {
            pid,
            program: program.to_string(),
        });
    }
    if let Some(job) = managed_by {
        return Err(Refusal::OtherJob { pid, job });
    }
    if !may_move && !within(&info.allowed_cpus, node_cpus) {
        return Err(Refusal::OutsideNode {
            pid,
            allowed: info.allowed_cpus.clone(),
            node: node_cpus.to_vec(),
            node_list: node_cpus
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
        });
    }
    Ok(())
}

/// May a caller with user id `caller` (from the socket's peer credentials)
/// hand the process `info` describes to a job? Only when the process is
/// wholly the caller's: real, effective and saved user ids all the
/// caller's, so neither another user's process nor a set-user-ID program
/// the caller started (which the caller could not stop or renice itself)
/// can be put under cosched's control by an unprivileged user.
pub fn check_owner(info: &ProcessInfo, caller: u32) -> Result<(), Refusal> {
    if info.uids == Uids::of(caller) {
        Ok(())
    } else {
        Err(Refusal::NotYours {
            pid: info.pid,
            owner: info.uids,
            caller,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    const AGENT: u32 = 50;
    const GUARDIAN: u32 = 51;

    fn protected() -> Protected {
        Protected {
            agent: AGENT,
            guardian: Some(GUARDIAN),
        }
    }

    fn process(pid: u32) -> ProcessInfo {
        ProcessInfo {
            pid,
            state: 'R',
            kernel_thread: false,
            exe: Some(PathBuf::from("/usr/bin/mpi-app")),
            allowed_cpus: vec![0],
            uids: Default::default(),
        }
    }

    fn verdict(info: &ProcessInfo) -> Result<(), Refusal> {
        check(info, &protected(), &[0], None, false)
    }

    #[test]
    fn user_process_on_the_node_is_adopted() {
        assert_eq!(verdict(&process(100)), Ok(()));
        let stopped = ProcessInfo {
            state: 'T',
            ..process(100)
        };
        assert_eq!(verdict(&stopped), Ok(()), "a stopped process is still one");
    }

    #[test]
    fn init_kernel_threads_and_zombies_are_refused() {
        assert_eq!(verdict(&process(1)), Err(Refusal::Init(1)));
        let kthreadd = ProcessInfo {
            kernel_thread: true,
            exe: None,
            ..process(2)
        };
        assert_eq!(verdict(&kthreadd), Err(Refusal::KernelThread(2)));
        let zombie = ProcessInfo {
            state: 'Z',
            ..process(100)
        };
        assert_eq!(verdict(&zombie), Err(Refusal::Zombie(100)));
    }

    #[test]
    fn the_agent_its_guardian_and_other_cosched_daemons_are_refused() {
        assert_eq!(verdict(&process(AGENT)), Err(Refusal::Agent(AGENT)));
        assert_eq!(
            verdict(&process(GUARDIAN)),
            Err(Refusal::Guardian(GUARDIAN))
        );
        for program in ["/usr/local/bin/cosched-agent", "/opt/cosched-coordinator"] {
            let other = ProcessInfo {
                exe: Some(PathBuf::from(program)),
                ..process(300)
            };
            assert!(
                matches!(
                    verdict(&other),
                    Err(Refusal::CoschedDaemon { pid: 300, .. })
                ),
                "{program}"
            );
        }
    }

    #[test]
    fn a_users_own_process_may_join_for_that_user_only() {
        let mine = ProcessInfo {
            uids: Uids::of(1000),
            ..process(100)
        };
        assert_eq!(check_owner(&mine, 1000), Ok(()));
        assert!(matches!(
            check_owner(&mine, 1001),
            Err(Refusal::NotYours {
                pid: 100,
                caller: 1001,
                ..
            })
        ));
        let roots = process(101);
        let e = check_owner(&roots, 1000).unwrap_err();
        assert!(e.to_string().contains("not to you (uid 1000)"), "{e}");
    }

    #[test]
    fn a_set_user_id_program_the_user_started_is_not_the_users() {
        let setuid = ProcessInfo {
            uids: Uids {
                real: 1000,
                effective: 0,
                saved: 0,
            },
            ..process(100)
        };
        assert!(check_owner(&setuid, 1000).is_err());
        let dropped_back = ProcessInfo {
            uids: Uids {
                real: 1000,
                effective: 1000,
                saved: 0,
            },
            ..process(100)
        };
        assert!(
            check_owner(&dropped_back, 1000).is_err(),
            "it can become root again"
        );
    }

    #[test]
    fn a_task_of_another_job_is_refused() {
        assert_eq!(
            check(&process(100), &protected(), &[0], Some(7), false),
            Err(Refusal::OtherJob { pid: 100, job: 7 })
        );
    }

    #[test]
    fn a_process_allowed_outside_the_node_cpus_is_refused_with_the_fix() {
        let everywhere = ProcessInfo {
            allowed_cpus: vec![0, 1],
            uids: Default::default(),
            ..process(100)
        };
        let e = verdict(&everywhere).unwrap_err();
        assert!(matches!(e, Refusal::OutsideNode { .. }));
        assert!(e.to_string().contains("taskset -a -p -c 0 100"), "{e}");
        assert_eq!(
            check(&everywhere, &protected(), &[0, 1], None, false),
            Ok(())
        );
        assert_eq!(
            check(&everywhere, &protected(), &[0], None, true),
            Ok(()),
            "asked to move it onto the node"
        );
    }
}
