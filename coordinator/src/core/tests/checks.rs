//! Submissions wait for the agents of their nodes to confirm the program.

use super::*;

fn checking(core: &mut Core, job: Submission) -> u64 {
    match core.submit(job, 0, NOW_NS) {
        Ok(Submitted::Checking(check)) => check,
        other => panic!("expected a program check, got {other:?}"),
    }
}

fn asked_nodes(checks: &[(usize, CheckProgram)]) -> Vec<usize> {
    checks.iter().map(|(node, _)| *node).collect()
}

#[test]
fn the_program_is_checked_on_the_nodes_the_job_would_run_on_before_it_is_admitted() {
    let mut core = cluster(3, GlobalPolicy::Gang);
    let mut wide = job("ring", 2);
    wide.env.insert("PATH".into(), "/opt/bin:/usr/bin".into());
    let check = checking(&mut core, wide);
    let asked = take_checks(&mut core);
    assert_eq!(asked_nodes(&asked), vec![0, 1], "n2 would not run it");
    for (_, message) in &asked {
        assert_eq!(message.command, "/bin/synth");
        assert_eq!(message.search_path.as_deref(), Some("/opt/bin:/usr/bin"));
    }
    assert!(core.jobs_view(true).is_empty(), "no job before the answers");
    assert!(core.matrix().has_no_placed_jobs());
    answer(&mut core, 0, check, runnable());
    assert_eq!(take_answer(&mut core, check), None, "n1 has not answered");
    answer(&mut core, 1, check, runnable());
    let view = take_answer(&mut core, check).unwrap().unwrap();
    assert_eq!(view.state, JobStateView::Running);
    assert_eq!(view.nodes, vec!["n0", "n1"]);
    assert_eq!(launches(&core.take_effects()).len(), 2);
    assert_eq!(core.next_check_deadline(), None);
}

#[test]
fn a_program_missing_on_one_node_refuses_the_job_naming_the_node_and_why() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("ring", 2));
    take_checks(&mut core);
    answer(&mut core, 0, check, runnable());
    let missing = ProgramCheck::NotRunnable {
        reason: "not found in PATH /usr/bin:/bin".into(),
    };
    answer(&mut core, 1, check, missing);
    let error = take_answer(&mut core, check).unwrap().unwrap_err();
    assert_eq!(
        error,
        "cannot start \"/bin/synth\" on n1: not found in PATH /usr/bin:/bin"
    );
    assert!(core.jobs_view(true).is_empty(), "refused, not queued");
    assert!(core.matrix().has_no_placed_jobs());
    assert_eq!(core.matrix().queued_jobs().count(), 0);
    assert!(launches(&core.take_effects()).is_empty());
    assert_eq!(submit(&mut core, job("next", 2)).id, 1, "no job id used");
}

#[test]
fn every_refusing_node_is_named() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("ring", 2));
    take_checks(&mut core);
    for node in [1, 0] {
        let outcome = ProgramCheck::NotRunnable {
            reason: format!("missing on n{node}"),
        };
        answer(&mut core, node, check, outcome);
    }
    let error = take_answer(&mut core, check).unwrap().unwrap_err();
    assert_eq!(
        error,
        "cannot start \"/bin/synth\" on n0: missing on n0; on n1: missing on n1"
    );
}

#[test]
fn a_queued_job_is_checked_on_every_connected_node() {
    let mut core = cluster(3, GlobalPolicy::Fcfs);
    submit(&mut core, job("first", 3));
    core.disconnected(2, 3);
    core.take_effects();
    let check = checking(&mut core, job("later", 1));
    let asked = take_checks(&mut core);
    assert_eq!(asked_nodes(&asked), vec![0, 1], "n2 is down");
    answer(&mut core, 0, check, runnable());
    answer(&mut core, 1, check, runnable());
    let view = take_answer(&mut core, check).unwrap().unwrap();
    assert_eq!(view.state, JobStateView::Queued);
}

#[test]
fn a_silent_agent_fails_the_submission_after_the_timeout() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("ring", 2));
    take_checks(&mut core);
    answer(&mut core, 0, check, runnable());
    assert_eq!(core.next_check_deadline(), Some(NOW_NS + CHECK_TIMEOUT_NS));
    core.expire_checks(NOW_NS + CHECK_TIMEOUT_NS - 1);
    assert_eq!(take_answer(&mut core, check), None);
    core.expire_checks(NOW_NS + CHECK_TIMEOUT_NS);
    let error = take_answer(&mut core, check).unwrap().unwrap_err();
    assert_eq!(
        error,
        "cannot start \"/bin/synth\" on n1: its agent did not answer within 3000 ms"
    );
    assert_eq!(core.next_check_deadline(), None);
    assert!(core.jobs_view(true).is_empty());
    // A late answer finds nothing waiting.
    let late = ProgramChecked {
        check_id: check,
        outcome: runnable(),
    };
    assert!(core.program_checked(1, &late, NOW_NS).is_err());
}

#[test]
fn an_agent_that_disconnects_or_reconnects_before_answering_fails_the_submission() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("ring", 2));
    take_checks(&mut core);
    core.disconnected(1, 2);
    assert_eq!(take_answer(&mut core, check), None, "n0 not heard yet");
    answer(&mut core, 0, check, runnable());
    let error = take_answer(&mut core, check).unwrap().unwrap_err();
    assert!(
        error.ends_with("on n1: its agent disconnected before answering"),
        "{error}"
    );
    assert!(core.jobs_view(true).is_empty());

    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("ring", 2));
    take_checks(&mut core);
    register(&mut core, 0, 7);
    answer(&mut core, 1, check, runnable());
    let error = take_answer(&mut core, check).unwrap().unwrap_err();
    assert!(error.contains("on n0: its agent disconnected"), "{error}");
}

#[test]
fn a_job_that_would_run_on_a_disconnected_node_is_refused_at_once() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    core.disconnected(1, 2);
    core.take_effects();
    let error = core.submit(job("ring", 2), 0, NOW_NS).unwrap_err();
    assert_eq!(
        error,
        "cannot check that \"/bin/synth\" starts on n1, where the job would run: its agent is not connected"
    );
    assert!(take_checks(&mut core).is_empty());
    assert!(core.jobs_view(true).is_empty());
    core.disconnected(0, 1);
    let error = core.submit(job("solo", 1), 0, NOW_NS).unwrap_err();
    assert!(error.contains("n0"), "{error}");
}

#[test]
fn agents_of_protocol_1_0_are_not_asked() {
    let old = ProtocolVersion { major: 1, minor: 0 };
    let mut core = Core::new(config(2, GlobalPolicy::Gang)).unwrap();
    register(&mut core, 0, 1);
    register_speaking(&mut core, 1, 2, old);
    inventory(&mut core, 0, &[]);
    inventory(&mut core, 1, &[]);
    core.take_effects();
    let check = checking(&mut core, job("ring", 2));
    assert_eq!(asked_nodes(&take_checks(&mut core)), vec![0]);
    answer(&mut core, 0, check, runnable());
    assert!(take_answer(&mut core, check).unwrap().is_ok());

    register_speaking(&mut core, 0, 3, old);
    match core.submit(job("solo", 1), 0, NOW_NS) {
        Ok(Submitted::Job(view)) => assert_eq!(view.nodes, vec!["n0"]),
        other => panic!("nobody to ask: admitted at once, got {other:?}"),
    }
}

#[test]
fn a_placement_that_changed_while_checking_is_checked_on_its_new_nodes() {
    let mut core = cluster(2, GlobalPolicy::Fcfs);
    submit(&mut core, job("first", 1));
    core.take_effects();
    // "slow" would run on n1; "fast" takes n1 while slow's check is out.
    let slow = checking(&mut core, job("slow", 1));
    assert_eq!(asked_nodes(&take_checks(&mut core)), vec![1]);
    let fast = submit(&mut core, job("fast", 1));
    assert_eq!(fast.nodes, vec!["n1"]);
    answer(&mut core, 1, slow, runnable());
    assert_eq!(take_answer(&mut core, slow), None);
    // Now slow would be queued, so every node must know the program.
    let asked = take_checks(&mut core);
    assert_eq!(asked_nodes(&asked), vec![0]);
    answer(&mut core, 0, asked[0].1.check_id, runnable());
    let view = take_answer(&mut core, slow).unwrap().unwrap();
    assert_eq!(view.state, JobStateView::Queued);
}

#[test]
fn answers_nobody_waits_for_are_ignored() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let check = checking(&mut core, job("solo", 1));
    take_checks(&mut core);
    let stray = ProgramChecked {
        check_id: check,
        outcome: runnable(),
    };
    assert!(
        core.program_checked(1, &stray, NOW_NS).is_err(),
        "n1 not asked"
    );
    let unknown = ProgramChecked {
        check_id: 99,
        outcome: runnable(),
    };
    assert!(core.program_checked(0, &unknown, NOW_NS).is_err());
    assert_eq!(take_answer(&mut core, check), None);
}
