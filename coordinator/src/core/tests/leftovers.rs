//! Ranks the coordinator gives up are reaped on their node, also when the
//! node's agent comes back only later.

use cosched_proto::wire::{RanksReaped, ReapedRank};

use super::*;

fn reaps(effects: &[Effect]) -> Vec<(usize, ReapRanks)> {
    sent_of!(effects, Message::ReapRanks)
}

fn reap_of(job_id: u32, rank: u32) -> ReapRanks {
    ReapRanks {
        ranks: vec![RankRef { job_id, rank }],
    }
}

fn unreaped(core: &Core, node: usize) -> Vec<String> {
    core.nodes_view()[node].unreaped.clone()
}

/// `node`'s agent comes back on connection `conn` with an empty inventory.
fn returns(core: &mut Core, node: usize, conn: u64) -> Vec<Effect> {
    register(core, node, conn);
    assert!(
        reaps(&core.take_effects()).is_empty(),
        "nothing is sent before the inventory"
    );
    inventory(core, node, &[]);
    core.take_effects()
}

#[test]
fn a_job_cancelled_while_a_node_is_down_is_reaped_there_once_its_agent_is_back() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.disconnected(1, 2);
    core.take_effects();
    core.cancel(id).unwrap();
    assert_eq!(reaps(&core.take_effects()), vec![(0, reap_of(id, 0))]);
    assert_eq!(unreaped(&core, 1), vec![format!("job {id} rank 1")]);

    assert_eq!(reaps(&returns(&mut core, 1, 3)), vec![(1, reap_of(id, 1))]);
    // Not acknowledged (the agent died again?): sent after the next
    // inventory too; acknowledged: forgotten.
    assert_eq!(reaps(&returns(&mut core, 1, 4)), vec![(1, reap_of(id, 1))]);
    let done = RanksReaped {
        ranks: vec![ReapedRank {
            job_id: id,
            rank: 1,
            processes: 3,
        }],
    };
    core.ranks_reaped(1, &done);
    assert!(core.take_effects().contains(&Effect::Persist));
    assert!(unreaped(&core, 1).is_empty());
    assert!(reaps(&returns(&mut core, 1, 5)).is_empty());
}

#[test]
fn ranks_to_reap_survive_a_coordinator_restart() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.disconnected(1, 2);
    core.cancel(id).unwrap();
    let text = serde_json::to_string(&core.snapshot()).unwrap();
    let mut restarted = Core::restore(
        config(2, GlobalPolicy::Gang),
        serde_json::from_str(&text).unwrap(),
        NOW_NS,
    )
    .unwrap();
    assert_eq!(
        reaps(&returns(&mut restarted, 1, 10)),
        vec![(1, reap_of(id, 1))]
    );
}

#[test]
fn a_rank_a_restarted_agent_no_longer_knows_is_reaped_on_its_node() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.disconnected(1, 2);
    let effects = returns(&mut core, 1, 3);
    assert_eq!(reaps(&effects), vec![(1, reap_of(id, 1))]);
    assert!(sent(&effects).contains(&(0, Message::CancelJob(CancelJob { job_id: id }))));
    exit(&mut core, 0, id, 0, 137);
    let view = core.job_view(id).unwrap();
    assert_eq!(view.state, JobStateView::Failed);
    assert_eq!(view.ranks[1].state, "lost: the agent on n1 does not run it");
}

#[test]
fn a_job_that_failed_while_a_node_was_down_is_reaped_there_later() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.disconnected(1, 2);
    exit(&mut core, 0, id, 0, 3);
    assert_eq!(core.job_view(id).unwrap().state, JobStateView::Failed);
    assert!(reaps(&core.take_effects()).is_empty(), "n1 cannot be told");
    // The agent kept running (a lost link): it still lists the job.
    register(&mut core, 1, 3);
    core.take_effects();
    inventory(&mut core, 1, &[id]);
    let messages = sent(&core.take_effects());
    assert!(messages.contains(&(1, Message::ReapRanks(reap_of(id, 1)))));
    assert!(messages.contains(&(1, Message::CancelJob(CancelJob { job_id: id }))));
}

#[test]
fn a_rank_never_launched_needs_no_reaping() {
    let mut core = Core::new(config(2, GlobalPolicy::Fcfs)).unwrap();
    register(&mut core, 0, 1);
    inventory(&mut core, 0, &[]);
    let first = submit(&mut core, job("first", 1)).id;
    let id = submit(&mut core, job("wide", 2)).id;
    exit(&mut core, 0, first, 0, 0);
    core.take_effects();
    // Placed on n0 and the never-registered n1: nothing launched yet.
    core.cancel(id).unwrap();
    assert!(reaps(&core.take_effects()).is_empty());
    assert!(unreaped(&core, 0).is_empty() && unreaped(&core, 1).is_empty());
}

#[test]
fn agents_of_protocol_1_0_get_cancel_job_instead() {
    let mut core = cluster(2, GlobalPolicy::Gang);
    let id = submit(&mut core, job("ring", 2)).id;
    core.disconnected(1, 2);
    core.cancel(id).unwrap();
    register_speaking(&mut core, 1, 3, ProtocolVersion { major: 1, minor: 0 });
    core.take_effects();
    inventory(&mut core, 1, &[id]);
    let messages = sent(&core.take_effects());
    assert!(messages.contains(&(1, Message::CancelJob(CancelJob { job_id: id }))));
    assert!(reaps(&core.take_effects()).is_empty());
    assert!(unreaped(&core, 1).is_empty(), "nothing to wait for");
}
