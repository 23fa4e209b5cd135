//! The eBPF side of the policy's wake-up interest: the node-wide
//! [`Settings`] and the per-task `WATCH` flags. Pure translation; what to
//! hear is decided by the policy crate ([`WakeInterest`], [`TaskWatch`]).
use crate::local::{OffCpuArrivals, TaskWatch, WakeInterest};
use cosched_agent_common::{Settings, offcpu_arrival, watch_flags};

/// The eBPF settings for `interest`, with the spin gap.
pub fn settings(interest: &WakeInterest, wake_batch_bytes: u32, spin_gap_ns: u64) -> Settings {
    Settings {
        wake_on_offcpu_arrival: match interest.off_cpu_arrivals {
            OffCpuArrivals::Never => offcpu_arrival::OFF,
            OffCpuArrivals::WhileWaiting => offcpu_arrival::WAITING,
            OffCpuArrivals::WhileReady => offcpu_arrival::READY,
        },
        wake_batch_bytes,
        spin_gap_ns,
        spin_report_ns: interest.long_spin_ns,
    }
}

/// The `WATCH` map value for one task (0: no entry).
pub fn watch_flags(watch: TaskWatch) -> u32 {
    let mut flags = 0;
    if watch.boosted {
        flags |= watch_flags::BOOSTED;
    }
    if watch.spin_start {
        flags |= watch_flags::SPIN_START;
    }
    if watch.held {
        flags |= watch_flags::HELD;
    }
    flags
}

#[cfg(test)]
mod tests {
    use crate::local::{Level, LocalPolicyConfig, PolicyKind, Reason};

    use super::*;

    fn config(kind: PolicyKind, end_on_wait: bool, boost_computing: bool) -> LocalPolicyConfig {
        let mut c = LocalPolicyConfig::for_kind(kind);
        c.dcs.end_on_wait = Some(end_on_wait);
        c.dcs.boost_computing = boost_computing;
        c
    }

    /// Every policy × its switches: the eBPF settings and the flags of a
    /// boosted task, a task held for its message and a task left alone.
    #[test]
    fn ebpf_side_of_every_policy_and_switch() {
        use PolicyKind as P;
        let boost = Level::Boost { prio: 10 };
        for kind in PolicyKind::ALL {
            for end_on_wait in [false, true] {
                for boost_computing in [false, true] {
                    let i = WakeInterest::of(&config(kind, end_on_wait, boost_computing));
                    let dcs = matches!(kind, P::Dcs | P::DcsSb);
                    let pb = matches!(kind, P::Pb | P::PbSb);
                    let want_arrivals = match (dcs, boost_computing) {
                        (false, _) if pb => offcpu_arrival::WAITING,
                        (false, _) => offcpu_arrival::OFF,
                        (true, false) => offcpu_arrival::WAITING,
                        (true, true) => offcpu_arrival::READY,
                    };
                    let s = settings(&i, 4096, 150_000);
                    assert_eq!(s.wake_on_offcpu_arrival, want_arrivals, "{kind:?}");
                    assert_eq!(s.wake_batch_bytes, 4096);
                    assert_eq!(s.spin_gap_ns, 150_000);

                    let boosted = watch_flags(TaskWatch::of(
                        &i,
                        boost,
                        Some((boost, Reason::ArrivalBoost)),
                    ));
                    let ends_on_spin = kind != P::Local && !(dcs && !end_on_wait);
                    let want_boosted = watch_flags::BOOSTED
                        | if ends_on_spin {
                            watch_flags::SPIN_START
                        } else {
                            0
                        };
                    assert_eq!(boosted, want_boosted, "{kind:?} end_on_wait={end_on_wait}");

                    let held = watch_flags(TaskWatch::of(
                        &i,
                        Level::Demote,
                        Some((Level::Demote, Reason::SpinThresholdBlock)),
                    ));
                    assert_eq!(held, watch_flags::HELD);
                    assert_eq!(watch_flags(TaskWatch::of(&i, Level::Normal, None)), 0);
                }
            }
        }
    }
}
