//! What an unprivileged user may ask on the coordinator's user socket.
//!
//! Slurm's SrunProlog/SrunEpilog and a user's own `cosched attach -- mpirun
//! …` run as that user, not root; the admin socket is root-only (mode
//! 0600). The user socket (mode 0666, `coordinator-user.sock` next to the
//! admin socket) takes their requests, and this module judges each against
//! the caller's uid as the kernel reported it at connect (`SO_PEERCRED`):
//! users attach jobs (which they then own), detach and cancel only their
//! own, and read every view; submitting (the agents start the program as
//! root) and switching the policy stay root's. Pure: the owner of a job
//! is looked up through a closure.

use super::protocol::Request;

/// The verdict on one request from user `uid` (never 0: root's requests
/// skip this check).
pub fn authorize(
    request: &Request,
    uid: u32,
    owner_of: impl Fn(u32) -> Option<Option<u32>>,
    admin_socket: &str,
) -> Result<(), String> {
    if !request.allowed_for_users() {
        return Err(format!(
            "op {:?} is not allowed on the user socket (uid {uid}): it needs root on the admin socket {admin_socket}; users may attach jobs they launch themselves (`cosched attach -- mpirun …`), detach or cancel their own jobs, and read jobs, matrix, nodes and status",
            request.op()
        ));
    }
    let (Request::Detach { id, .. } | Request::Cancel { id }) = request else {
        return Ok(());
    };
    match owner_of(*id) {
        // Not active: the coordinator answers "unknown" or "already
        // ended" itself, which reveals nothing a `jobs --all` would not.
        None => Ok(()),
        Some(Some(owner)) if owner == uid => Ok(()),
        Some(Some(owner)) => Err(format!(
            "job {id} belongs to user {owner}, not to you (uid {uid}): only its owner or root may {} it",
            request.op()
        )),
        Some(None) => Err(format!(
            "job {id} was submitted or attached by root: only root may {} it",
            request.op()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::protocol::{Attachment, Submission};

    const ALICE: u32 = 1000;
    const BOB: u32 = 1001;

    /// Job 1 is Alice's, job 2 root's, nothing else is active.
    fn owners(id: u32) -> Option<Option<u32>> {
        match id {
            1 => Some(Some(ALICE)),
            2 => Some(None),
            _ => None,
        }
    }

    fn judge(request: &Request, uid: u32) -> Result<(), String> {
        authorize(request, uid, owners, "/run/cosched/coordinator.sock")
    }

    fn attach() -> Request {
        Request::Attach {
            job: Attachment {
                name: "lammps".into(),
                nodes: vec!["n0".into(), "n1".into()],
                command: vec!["mpirun".into()],
                class: cosched_proto::wire::JobClass::BestEffort,
                exclusive: false,
            },
        }
    }

    #[test]
    fn a_user_attaches_a_job_they_launch_themselves() {
        assert_eq!(judge(&attach(), BOB), Ok(()));
    }

    #[test]
    fn a_user_detaches_and_cancels_their_own_job() {
        assert_eq!(judge(&Request::Detach { id: 1, code: 0 }, ALICE), Ok(()));
        assert_eq!(judge(&Request::Cancel { id: 1 }, ALICE), Ok(()));
    }

    #[test]
    fn another_users_job_cannot_be_detached_or_cancelled() {
        let error = judge(&Request::Cancel { id: 1 }, BOB).unwrap_err();
        assert!(error.contains("belongs to user 1000"), "{error}");
        let error = judge(&Request::Detach { id: 1, code: 0 }, BOB).unwrap_err();
        assert!(error.contains("not to you (uid 1001)"), "{error}");
    }

    #[test]
    fn roots_jobs_are_out_of_a_users_reach() {
        let error = judge(&Request::Cancel { id: 2 }, ALICE).unwrap_err();
        assert!(error.contains("only root may cancel"), "{error}");
    }

    #[test]
    fn an_unknown_job_is_left_to_the_coordinators_own_answer() {
        assert_eq!(judge(&Request::Cancel { id: 9 }, ALICE), Ok(()));
    }

    #[test]
    fn submit_and_set_policy_need_the_admin_socket() {
        let submit = Request::Submit {
            job: Submission {
                name: "x".into(),
                nodes: 1,
                command: "/bin/true".into(),
                args: Vec::new(),
                env: Default::default(),
                class: cosched_proto::wire::JobClass::BestEffort,
                exclusive: false,
            },
        };
        let error = judge(&submit, ALICE).unwrap_err();
        assert!(
            error.contains("\"submit\"") && error.contains("coordinator.sock"),
            "{error}"
        );
        let policy = Request::SetPolicy {
            policy: crate::policy::GlobalPolicy::Gang,
        };
        assert!(judge(&policy, ALICE).is_err());
    }

    #[test]
    fn every_view_is_open_to_users() {
        for request in [
            Request::Jobs { all: true },
            Request::Job { id: 2 },
            Request::Matrix,
            Request::Nodes,
            Request::Status,
        ] {
            assert_eq!(judge(&request, BOB), Ok(()), "{request:?}");
        }
    }
}
