//! Initial allocation of 2DCS-TDM / 2DCS-PS: RT by laxity, BE by count.

use crate::classes::tdm::{allocate_be, allocate_rt};
use crate::classes::{
    AllocationError, ClassLedger, FairnessRatio, Laxity, RtJob, RtLoadModel, RtPlacement,
};
use crate::global::JobId;

/// The paper's rule with 2:1 and no overheads.
fn model() -> RtLoadModel {
    RtLoadModel::bare(FairnessRatio::new(2, 1).unwrap())
}

/// A job with d = 1000 and b = 3 (Γ = 3000, RT capacity 2000 per window):
/// a process of work τ loads its node with 3τ.
fn job(id: u64, works: &[u64]) -> RtJob {
    RtJob::new(JobId(id), 1_000, 3, works.to_vec()).unwrap()
}

/// One single-process job per node, of the given work per frame.
fn loaded(works: &[u64]) -> ClassLedger {
    place_one_per_node(ClassLedger::new(works.len()), works)
}

/// `works[n]` placed as job 100 + n's only process on node n of `ledger`.
fn place_one_per_node(mut ledger: ClassLedger, works: &[u64]) -> ClassLedger {
    for (node, &work) in works.iter().enumerate() {
        let id = 100 + node as u64;
        ledger.place_rt(
            &job(id, &[work]),
            RtPlacement {
                job: JobId(id),
                nodes: vec![node],
            },
        );
    }
    ledger
}

#[test]
fn laxity_allocation_puts_the_heaviest_process_on_the_emptiest_node() {
    // Loads 600, 900, 300: laxities 1400, 1100, 1700.
    let ledger = loaded(&[200, 300, 100]);
    assert_eq!(ledger.node(2).laxity(&model()), Laxity::Finite(1_700));
    let placement = allocate_rt(&ledger, &job(1, &[50, 200, 100]), &model()).unwrap();
    // 600 → node 2 (left 1100); 300 → node 0 (left 1100); 150 → the tie
    // between all three goes to node 0.
    assert_eq!(placement.nodes, vec![0, 2, 0]);
}

#[test]
fn a_node_without_rt_processes_has_unbounded_laxity() {
    let mut ledger = loaded(&[10, 10]);
    ledger.remove(JobId(101));
    assert_eq!(ledger.node(1).laxity(&model()), Laxity::Unbounded);
    let placement = allocate_rt(&ledger, &job(1, &[500]), &model()).unwrap();
    assert_eq!(placement.nodes, vec![1]);
}

#[test]
fn two_processes_of_one_light_job_share_a_node() {
    // Node 0 has 1700 of laxity left, node 1 only 500.
    let ledger = loaded(&[100, 500]);
    let placement = allocate_rt(&ledger, &job(1, &[50, 50]), &model()).unwrap();
    assert_eq!(placement.nodes, vec![0, 0]);
}

#[test]
fn the_shortest_window_on_a_node_sets_its_laxity() {
    let mut ledger = ClassLedger::new(1);
    // d = 100, b = 3: Γ = 300, capacity 200; τ = 10 loads 30.
    let short = RtJob::new(JobId(1), 100, 3, vec![10]).unwrap();
    ledger.place_rt(
        &short,
        RtPlacement {
            job: JobId(1),
            nodes: vec![0],
        },
    );
    ledger.place_rt(
        &job(2, &[100]),
        RtPlacement {
            job: JobId(2),
            nodes: vec![0],
        },
    );
    assert_eq!(ledger.node(0).gamma_ns(), Some(300));
    assert_eq!(ledger.node(0).laxity(&model()), Laxity::Finite(200 - 330));
    ledger.remove(JobId(1));
    assert_eq!(ledger.node(0).laxity(&model()), Laxity::Finite(2_000 - 300));
}

#[test]
fn be_jobs_go_to_the_nodes_with_the_fewest_be_processes() {
    let mut ledger = ClassLedger::new(3);
    ledger.place_be(JobId(1), vec![0, 1]);
    ledger.place_be(JobId(2), vec![1]);
    assert_eq!(allocate_be(&ledger, 2).unwrap(), vec![0, 2]);
    assert_eq!(allocate_be(&ledger, 1).unwrap(), vec![2]);
    assert_eq!(
        allocate_be(&ledger, 4),
        Err(AllocationError::BeJobTooLarge { size: 4, nodes: 3 })
    );
    assert_eq!(allocate_be(&ledger, 0), Err(AllocationError::EmptyBeJob));
    // RT processes do not count against BE placement.
    let rt = loaded(&[900, 1]);
    assert_eq!(allocate_be(&rt, 1).unwrap(), vec![0]);
}

#[test]
fn an_empty_cluster_cannot_place_an_rt_job() {
    assert_eq!(
        allocate_rt(&ClassLedger::new(0), &job(1, &[10]), &model()),
        Err(AllocationError::NoNodes)
    );
}

/// [`loaded`] on a ledger of one process per node.
fn loaded_spread(works: &[u64]) -> ClassLedger {
    place_one_per_node(ClassLedger::one_process_per_node(works.len()), works)
}

#[test]
fn with_one_process_per_node_a_light_job_takes_the_next_most_laxity_node() {
    // As in the shared case, but the second process may not join the first.
    let ledger = loaded_spread(&[100, 500]);
    let placement = allocate_rt(&ledger, &job(1, &[50, 50]), &model()).unwrap();
    assert_eq!(placement.nodes, vec![0, 1]);
    assert!(placement.is_spread());
}

#[test]
fn with_one_process_per_node_a_job_wider_than_the_cluster_is_refused() {
    let ledger = ClassLedger::one_process_per_node(2);
    assert_eq!(
        allocate_rt(&ledger, &job(1, &[1, 1, 1]), &model()),
        Err(AllocationError::RtJobTooLarge { size: 3, nodes: 2 })
    );
    // Where processes may share, it fits.
    assert!(allocate_rt(&ClassLedger::new(2), &job(1, &[1, 1, 1]), &model()).is_ok());
}
