//! Jobs launched by something else, attached on the launcher's nodes: placed
//! where those nodes are free, expected (not launched) on their agents,
//! sliced like any job, ended by their ranks or their launcher.

use cosched_proto::wire::ExpectJob;

use super::*;
use crate::admin::protocol::Attachment;

fn attachment(name: &str, nodes: &[&str]) -> Attachment {
    Attachment {
        name: name.into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        command: vec!["mpirun".into(), "-n".into(), "2".into()],
        class: JobClass::BestEffort,
        exclusive: false,
    }
}

fn expects(effects: &[Effect]) -> Vec<(usize, ExpectJob)> {
    sent_of!(effects, Message::ExpectJob)
}

#[test]
fn an_mpirun_job_on_two_nodes_is_expected_by_both_agents_and_never_launched() {
    let mut core = cluster(3, GlobalPolicy::Gang);
    let view = core.attach(attachment("ring", &["n2", "n0"]), 5).unwrap();
    assert!(view.attached);
    assert_eq!(view.state, JobStateView::Running);
    assert_eq!(view.nodes, vec!["n0", "n2"], "ranks follow the node order");
    assert_eq!(view.port, None, "its processes find each other themselves");
    let effects = core.take_effects();
    assert!(launches(&effects).is_empty());
    let expected = expects(&effects);
    assert_eq!(
        expected,
        vec![
            (
                0,
                ExpectJob {
                    job_id: view.id,
                    name: "ring".into(),
                    rank: 0,
                    size: 2,
                    owner: None,
                }
            ),
            (
                2,
                ExpectJob {
                    job_id: view.id,
                    name: "ring".into(),
                    rank: 1,
                    size: 2,
                    owner: None,
                }
            ),
        ]
    );
    let view = core.job_view(view.id).unwrap();
    assert_eq!(view.ranks[0].state, "expected");
}

#[test]
fn an_attached_job_goes_to_the_row_where_its_nodes_are_free_and_is_sliced() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let submitted = submit(&mut core, job("compute", 2)).id;
    let attached = core.attach(attachment("mpi", &["n0", "n1"]), 5).unwrap();
    assert_eq!(attached.row, Some(1), "row 0 is the submitted job's");
    core.take_effects();
    let mut active = Vec::new();
    for slice in 0..4 {
        core.plan_slice(NOW_NS + slice * 10_000_000);
        for (_, switch) in switches(&core.take_effects()) {
            active.push(switch.active_jobs.clone());
        }
    }
    assert!(active.contains(&vec![submitted]), "{active:?}");
    assert!(active.contains(&vec![attached.id]), "{active:?}");
}

#[test]
fn attaching_where_no_row_has_the_nodes_free_is_refused_and_changes_nothing() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    submit(&mut core, job("a", 2));
    submit(&mut core, job("b", 1));
    core.take_effects();
    let before = core.matrix().clone();
    let error = core
        .attach(attachment("mpi", &["n0", "n1"]), 5)
        .unwrap_err();
    assert!(error.contains("taken in every row"), "{error}");
    assert_eq!(core.matrix(), &before);
    assert!(sent(&core.take_effects()).is_empty());
}

#[test]
fn attaching_to_unknown_repeated_or_disconnected_nodes_is_refused() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    core.disconnected(1, 2);
    for (nodes, why) in [
        (vec!["n0", "n7"], "unknown node \"n7\""),
        (vec!["n0", "n0"], "named twice"),
        (vec!["n1"], "no connected agent"),
        (vec![], "at least one node"),
    ] {
        let error = core.attach(attachment("mpi", &nodes), 5).unwrap_err();
        assert!(error.contains(why), "{nodes:?}: {error}");
    }
    assert!(core.matrix().has_no_placed_jobs());
    assert!(core.jobs_view(true).is_empty());
}

#[test]
fn a_users_job_is_expected_as_theirs_by_agents_that_understand_owners_only() {
    let mut core = Core::new(config(2, GlobalPolicy::Gang)).unwrap();
    register(&mut core, 0, 1);
    register_speaking(&mut core, 1, 2, ProtocolVersion { major: 1, minor: 3 });
    inventory(&mut core, 0, &[]);
    inventory(&mut core, 1, &[]);
    let view = core
        .attach_as(attachment("slurm-5.0", &["n0", "n1"]), Some(65534), 5)
        .unwrap();
    assert_eq!(view.owner, Some(65534));
    assert_eq!(core.owner_of(view.id), Some(Some(65534)));
    let owners: Vec<(usize, Option<u32>)> = expects(&core.take_effects())
        .into_iter()
        .map(|(node, expect)| (node, expect.owner))
        .collect();
    // A 1.3 agent would refuse the unknown field: it is left out there.
    assert_eq!(owners, vec![(0, Some(65534)), (1, None)]);
    let roots = core.attach(attachment("roots", &["n0"]), 6).unwrap();
    assert_eq!(core.owner_of(roots.id), Some(None));
    assert_eq!(core.owner_of(999), None);
}

#[test]
fn an_agent_older_than_1_2_cannot_take_an_attached_job() {
    let mut core = Core::new(config(1, GlobalPolicy::Gang)).unwrap();
    register_speaking(&mut core, 0, 1, ProtocolVersion { major: 1, minor: 1 });
    inventory(&mut core, 0, &[]);
    let error = core.attach(attachment("mpi", &["n0"]), 5).unwrap_err();
    assert!(error.contains("older than protocol 1.2"), "{error}");
}

#[test]
fn the_launcher_exiting_ends_the_job_and_reaps_what_is_left() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = core.attach(attachment("mpi", &["n0", "n1"]), 5).unwrap().id;
    // Rank 0's processes all exited; rank 1's are still there.
    exit(&mut core, 0, id, 0, 0);
    core.take_effects();
    let view = core.detach(id, 0).unwrap();
    assert_eq!(view.state, JobStateView::Completed);
    let reaps: Vec<(usize, Message)> = sent(&core.take_effects());
    assert_eq!(
        reaps,
        vec![(
            1,
            Message::ReapRanks(ReapRanks {
                ranks: vec![RankRef {
                    job_id: id,
                    rank: 1
                }]
            })
        )]
    );
    assert!(core.matrix().has_no_placed_jobs());
    let error = core.detach(id, 0).unwrap_err();
    assert!(error.contains("already ended"), "{error}");
}

#[test]
fn a_failing_launcher_fails_the_job_and_submitted_jobs_cannot_be_detached() {
    let mut core = cluster(1, GlobalPolicy::Gang);
    let id = core.attach(attachment("mpi", &["n0"]), 5).unwrap().id;
    let view = core.detach(id, 3).unwrap();
    assert_eq!(view.state, JobStateView::Failed);
    assert!(view.reason.unwrap().contains("code 3"));
    let submitted = submit(&mut core, job("a", 1)).id;
    let error = core.detach(submitted, 0).unwrap_err();
    assert!(error.contains("cancel it instead"), "{error}");
}

#[test]
fn a_restarted_agent_that_lost_the_attached_rank_fails_the_job() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = core.attach(attachment("mpi", &["n0", "n1"]), 5).unwrap().id;
    inventory(&mut core, 0, &[id]);
    register(&mut core, 1, 9);
    inventory(&mut core, 1, &[]);
    let view = core.job_view(id).unwrap();
    assert!(view.reason.unwrap().contains("lost"), "agent restarted");
}
