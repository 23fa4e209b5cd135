//! Applying scheduling attributes to tasks, always through the restore ledger:
//! the original attributes are recorded before the first change, no-op changes
//! are skipped, and a task that exited in the meantime is not an error.
use std::io;

use cosched_proto::job::SchedRequest;

use crate::{
    kernel::{SchedAttr, SchedPolicy, TaskControl, is_gone},
    restore::RestoreLedger,
};

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

/// What happened when asking for a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    Changed,
    AlreadySo,
    TaskGone,
}

/// Sets `attr` on `tid`, recording its original attributes first.
pub fn set_attr(
    k: &mut impl TaskControl,
    ledger: &mut RestoreLedger,
    tid: u32,
    attr: &SchedAttr,
) -> io::Result<Applied> {
    let res = (|| {
        ledger.original(k, tid)?;
        if k.get_attr(tid)? == *attr {
            return Ok(Applied::AlreadySo);
        }
        k.set_attr(tid, attr)?;
        Ok(Applied::Changed)
    })();
    match res {
        Err(e) if is_gone(&e) => {
            ledger.forget(tid);
            Ok(Applied::TaskGone)
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fake::{Call, FakeKernel};

    #[test]
    fn first_change_records_original_then_applies() {
        let mut k = FakeKernel::default();
        k.spawn(5, SchedAttr::other(0));
        let mut l = RestoreLedger::new(None);
        let a = attr_for(&SchedRequest::Nice { nice: 7 });
        assert_eq!(set_attr(&mut k, &mut l, 5, &a).unwrap(), Applied::Changed);
        assert_eq!(k.attr(5), SchedAttr::other(7));
        assert_eq!(l.get(5).unwrap().original, SchedAttr::other(0));
    }

    #[test]
    fn unchanged_attributes_make_no_syscall() {
        let mut k = FakeKernel::default();
        k.spawn(5, SchedAttr::other(7));
        let mut l = RestoreLedger::new(None);
        let a = SchedAttr::other(7);
        assert_eq!(set_attr(&mut k, &mut l, 5, &a).unwrap(), Applied::AlreadySo);
        assert!(!k.calls.iter().any(|c| matches!(c, Call::SetAttr(..))));
    }

    #[test]
    fn vanished_task_is_not_an_error() {
        let mut k = FakeKernel::default();
        let mut l = RestoreLedger::new(None);
        assert_eq!(
            set_attr(&mut k, &mut l, 99, &SchedAttr::other(1)).unwrap(),
            Applied::TaskGone
        );
        assert!(l.is_empty());
    }

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
