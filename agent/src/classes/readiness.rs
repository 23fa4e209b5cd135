//! Whether a task is ready to run, as far as the agent can tell from its
//! eBPF counters at a tick (2DCS-PS and 2DCS-TDM lending need it).
//!
//! The agent does not see every wakeup (no per-switch record crosses to
//! userspace), so this is an approximation read from the latest switch:
//! a task on a CPU, or switched out by preemption (still runnable), is
//! ready; one that never ran yet is ready (it was just created or taken);
//! one that blocked (a voluntary switch-out) is not, unless a message
//! is pending for it ([`TaskStats::message_pending`]: its wakeup is on the
//! way). A blocked task woken by anything else (I/O, a timer, a
//! pipe) counts as ready only from its next switch-in the agent sees.
use cosched_agent_common::TaskStats;

pub fn task_ready(s: &TaskStats) -> bool {
    s.on_cpu != 0 || s.switches_in == 0 || s.last_out_preempted != 0 || s.message_pending()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran() -> TaskStats {
        TaskStats {
            switches_in: 3,
            switches_out_voluntary: 3,
            ..TaskStats::default()
        }
    }

    #[test]
    fn running_preempted_or_new_tasks_are_ready_blocked_ones_are_not() {
        assert!(!task_ready(&ran()), "blocked");
        assert!(task_ready(&TaskStats { on_cpu: 1, ..ran() }));
        assert!(task_ready(&TaskStats {
            last_out_preempted: 1,
            ..ran()
        }));
        assert!(task_ready(&TaskStats::default()), "never ran yet");
    }

    #[test]
    fn a_blocked_task_with_a_message_it_has_not_received_is_about_to_wake() {
        let waiting = TaskStats {
            last_recv_ok_ns: 100,
            last_arrival_ns: 150,
            ..ran()
        };
        assert!(task_ready(&waiting));
        let received = TaskStats {
            last_recv_ok_ns: 160,
            ..waiting
        };
        assert!(!task_ready(&received));
    }
}
