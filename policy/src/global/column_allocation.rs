//! Choosing the columns of one row for a job: first-fit and buddy.
//!
//! Both work on a row's free mask (`free[node]` is true when the cell is
//! empty) and never look at other rows: which row to use is the matrix's
//! decision (lowest row that has room, ClusterSchedSim §4.2.1 "first fit").

use super::ids::NodeIndex;
use super::matrix_config::ColumnAllocation;

/// The columns (ascending) of a row with free mask `free` that a job of
/// `size` nodes would take under `strategy`, or `None` when it does not fit.
pub fn choose_columns(
    strategy: ColumnAllocation,
    free: &[bool],
    size: usize,
) -> Option<Vec<NodeIndex>> {
    if size == 0 || size > free.len() {
        return None;
    }
    match strategy {
        ColumnAllocation::FirstFit => first_fit(free, size),
        ColumnAllocation::Buddy => buddy(free, size),
    }
}

/// First contiguous run of `size` free columns (keeps a job's nodes together,
/// which the Scheduler Testbed report §3.2.1 prefers for hardware broadcast); failing that, the
/// lowest `size` free columns (a cluster does not need contiguity).
fn first_fit(free: &[bool], size: usize) -> Option<Vec<NodeIndex>> {
    let mut run_start = 0;
    for (node, &is_free) in free.iter().enumerate() {
        if !is_free {
            run_start = node + 1;
        } else if node + 1 - run_start == size {
            return Some((run_start..=node).collect());
        }
    }
    let scattered: Vec<NodeIndex> = free
        .iter()
        .enumerate()
        .filter(|&(_, &is_free)| is_free)
        .map(|(node, _)| node)
        .take(size)
        .collect();
    (scattered.len() == size).then_some(scattered)
}

/// Size of the buddy block that holds a job of `size` nodes.
pub fn buddy_block_size(size: usize) -> usize {
    size.next_power_of_two()
}

/// Lowest aligned block of `2^⌈log2 size⌉` columns that is entirely free
/// (a block running past the last node is cut at the cluster's end). The job
/// takes the block's first `size` columns; the rest of the block stays free
/// for smaller jobs whose own aligned blocks fit there, so every job holds
/// exactly the columns it asked for.
fn buddy(free: &[bool], size: usize) -> Option<Vec<NodeIndex>> {
    let block = buddy_block_size(size);
    let nodes = free.len();
    (0..nodes)
        .step_by(block)
        .filter(|&offset| offset + size <= nodes)
        .find(|&offset| free[offset..(offset + block).min(nodes)].iter().all(|&f| f))
        .map(|offset| (offset..offset + size).collect())
}

#[cfg(test)]
mod unit {
    use super::*;

    fn mask(pattern: &str) -> Vec<bool> {
        pattern.chars().map(|c| c == '.').collect()
    }

    #[test]
    fn first_fit_prefers_a_contiguous_run() {
        let free = mask("x.x..x..");
        assert_eq!(
            choose_columns(ColumnAllocation::FirstFit, &free, 2),
            Some(vec![3, 4])
        );
    }

    #[test]
    fn first_fit_scatters_when_no_run_is_long_enough() {
        let free = mask("x.x.x.xx");
        assert_eq!(
            choose_columns(ColumnAllocation::FirstFit, &free, 3),
            Some(vec![1, 3, 5])
        );
        assert_eq!(choose_columns(ColumnAllocation::FirstFit, &free, 4), None);
    }

    #[test]
    fn buddy_needs_a_whole_aligned_block() {
        // Columns 1..4 are free but not an aligned block of 4.
        let free = mask("x...x...");
        assert_eq!(choose_columns(ColumnAllocation::Buddy, &free, 3), None);
        let free = mask("x.......");
        assert_eq!(
            choose_columns(ColumnAllocation::Buddy, &free, 3),
            Some(vec![4, 5, 6])
        );
    }

    #[test]
    fn buddy_block_may_be_cut_by_the_cluster_end() {
        let free = mask("......");
        assert_eq!(
            choose_columns(ColumnAllocation::Buddy, &free, 5),
            Some(vec![0, 1, 2, 3, 4])
        );
    }
}
