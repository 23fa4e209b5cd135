//! The attributes a job's static scheduling request stands for (the level
//! `Normal` of its tasks; see `engine::plan`).
use cosched_proto::job::SchedRequest;

use crate::kernel::{SchedAttr, SchedPolicy};

/// The attributes a static job request asks for.
pub fn attr_for(req: &SchedRequest) -> SchedAttr {
    match *req {
        SchedRequest::Nice { nice } => SchedAttr::other(nice),
        SchedRequest::Batch { nice } => SchedAttr::with_policy(SchedPolicy::Batch, nice, 0),
        SchedRequest::Idle => SchedAttr::with_policy(SchedPolicy::Idle, 0, 0),
        SchedRequest::Fifo { priority } => SchedAttr::with_policy(SchedPolicy::Fifo, 0, priority),
        SchedRequest::Rr { priority } => SchedAttr::with_policy(SchedPolicy::Rr, 0, priority),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_maps_to_matching_policy() {
        assert_eq!(
            attr_for(&SchedRequest::Fifo { priority: 9 }).policy,
            SchedPolicy::Fifo
        );
        assert_eq!(attr_for(&SchedRequest::Idle).policy, SchedPolicy::Idle);
        assert_eq!(attr_for(&SchedRequest::Batch { nice: 2 }).nice, 2);
    }
}
