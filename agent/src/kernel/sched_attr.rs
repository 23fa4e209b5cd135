//! `struct sched_attr` (see sched_setattr(2)) as a plain value type.
use serde::{Deserialize, Serialize};

/// Scheduling policy of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchedPolicy {
    Other,
    Fifo,
    Rr,
    Batch,
    Idle,
    Deadline,
}

impl SchedPolicy {
    pub fn to_raw(self) -> u32 {
        match self {
            Self::Other => libc::SCHED_OTHER as u32,
            Self::Fifo => libc::SCHED_FIFO as u32,
            Self::Rr => libc::SCHED_RR as u32,
            Self::Batch => libc::SCHED_BATCH as u32,
            Self::Idle => libc::SCHED_IDLE as u32,
            Self::Deadline => 6,
        }
    }

    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw as i32 {
            libc::SCHED_OTHER => Self::Other,
            libc::SCHED_FIFO => Self::Fifo,
            libc::SCHED_RR => Self::Rr,
            libc::SCHED_BATCH => Self::Batch,
            libc::SCHED_IDLE => Self::Idle,
            6 => Self::Deadline,
            _ => return None,
        })
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, Self::Fifo | Self::Rr)
    }
}

/// SCHED_FLAG_RESET_ON_FORK: children do not inherit a real-time policy or a
/// negative nice. The agent sets it on every boost so a boosted task cannot
/// hand its boost to processes it forks.
pub const FLAG_RESET_ON_FORK: u64 = 0x01;

/// The attributes the agent reads, changes and restores.
/// Default: SCHED_OTHER at nice 0, what a new process gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SchedAttr {
    pub policy: SchedPolicy,
    pub flags: u64,
    /// Nice value (SCHED_OTHER / SCHED_BATCH).
    pub nice: i32,
    /// Static priority (SCHED_FIFO / SCHED_RR), 1..=99.
    pub priority: u32,
    /// SCHED_DEADLINE parameters, ns.
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

impl SchedAttr {
    pub const fn other(nice: i32) -> Self {
        Self {
            policy: SchedPolicy::Other,
            flags: 0,
            nice,
            priority: 0,
            runtime_ns: 0,
            deadline_ns: 0,
            period_ns: 0,
        }
    }

    pub const fn with_policy(policy: SchedPolicy, nice: i32, priority: u32) -> Self {
        Self {
            policy,
            nice,
            priority,
            ..Self::other(0)
        }
    }
}

/// Kernel layout (SCHED_ATTR_SIZE_VER1).
#[repr(C)]
#[derive(Default)]
pub(crate) struct RawSchedAttr {
    pub size: u32,
    pub sched_policy: u32,
    pub sched_flags: u64,
    pub sched_nice: i32,
    pub sched_priority: u32,
    pub sched_runtime: u64,
    pub sched_deadline: u64,
    pub sched_period: u64,
    pub sched_util_min: u32,
    pub sched_util_max: u32,
}
const _: () = assert!(std::mem::size_of::<RawSchedAttr>() == 56);

impl From<&SchedAttr> for RawSchedAttr {
    fn from(a: &SchedAttr) -> Self {
        // Only set fields meaningful for the policy: the kernel rejects e.g. a
        // non-zero priority with SCHED_OTHER.
        let rt = a.policy.is_realtime();
        let fair = matches!(a.policy, SchedPolicy::Other | SchedPolicy::Batch);
        let dl = a.policy == SchedPolicy::Deadline;
        Self {
            size: std::mem::size_of::<Self>() as u32,
            sched_policy: a.policy.to_raw(),
            // Util-clamp flags are not carried over: they would need the
            // util fields, which the agent never changes.
            sched_flags: a.flags & FLAG_RESET_ON_FORK,
            sched_nice: if fair { a.nice } else { 0 },
            sched_priority: if rt { a.priority } else { 0 },
            sched_runtime: if dl { a.runtime_ns } else { 0 },
            sched_deadline: if dl { a.deadline_ns } else { 0 },
            sched_period: if dl { a.period_ns } else { 0 },
            sched_util_min: 0,
            sched_util_max: 0,
        }
    }
}

impl TryFrom<&RawSchedAttr> for SchedAttr {
    type Error = std::io::Error;
    fn try_from(r: &RawSchedAttr) -> Result<Self, Self::Error> {
        let policy = SchedPolicy::from_raw(r.sched_policy).ok_or_else(|| {
            std::io::Error::other(format!("unknown scheduling policy {}", r.sched_policy))
        })?;
        // For fair tasks, recent kernels report the EEVDF slice in
        // sched_runtime; the agent never sets custom slices, so it is not part
        // of what is compared and restored (0 = the kernel's default).
        let dl = policy == SchedPolicy::Deadline;
        Ok(Self {
            policy,
            flags: r.sched_flags & FLAG_RESET_ON_FORK,
            nice: r.sched_nice,
            priority: r.sched_priority,
            runtime_ns: if dl { r.sched_runtime } else { 0 },
            deadline_ns: if dl { r.sched_deadline } else { 0 },
            period_ns: if dl { r.sched_period } else { 0 },
        })
    }
}

impl Default for SchedAttr {
    fn default() -> Self {
        SchedAttr::other(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_conversion_keeps_only_fields_of_the_policy() {
        let a = SchedAttr {
            nice: 5,
            priority: 40,
            ..SchedAttr::with_policy(SchedPolicy::Fifo, 5, 40)
        };
        let r = RawSchedAttr::from(&a);
        assert_eq!(r.sched_priority, 40);
        assert_eq!(r.sched_nice, 0, "nice is meaningless for FIFO");
        let o = RawSchedAttr::from(&SchedAttr::other(-3));
        assert_eq!((o.sched_nice, o.sched_priority), (-3, 0));
    }

    #[test]
    fn raw_round_trip_preserves_policy_and_reset_on_fork() {
        let mut a = SchedAttr::with_policy(SchedPolicy::Rr, 0, 10);
        a.flags = FLAG_RESET_ON_FORK;
        let back = SchedAttr::try_from(&RawSchedAttr::from(&a)).unwrap();
        assert_eq!(back, a);
    }

    #[test]
    fn fair_slice_reported_by_the_kernel_is_not_part_of_the_attributes() {
        let r = RawSchedAttr {
            sched_policy: libc::SCHED_OTHER as u32,
            sched_nice: 2,
            sched_runtime: 1_400_000,
            ..Default::default()
        };
        assert_eq!(SchedAttr::try_from(&r).unwrap(), SchedAttr::other(2));
    }

    #[test]
    fn unknown_raw_policy_is_an_error() {
        let r = RawSchedAttr {
            sched_policy: 42,
            ..Default::default()
        };
        assert!(SchedAttr::try_from(&r).is_err());
    }
}
