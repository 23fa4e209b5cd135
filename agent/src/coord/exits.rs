//! Rank exits the coordinator must hear about. Exits that happen while the
//! coordinator is unreachable are kept until the next registration; exits
//! sent just before a connection broke may have been lost with it, so they
//! are sent again after a reconnect that follows within `resend_window_ns`.
//! The coordinator ignores repeated exits.

use std::collections::VecDeque;

use cosched_proto::wire::JobExited;

/// Most exits remembered (the oldest are dropped first).
pub const MAX_EXITS: usize = 512;

#[derive(Debug, Clone)]
struct Entry {
    exit: JobExited,
    sent_at_ns: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct ExitLog {
    entries: VecDeque<Entry>,
    resend_window_ns: u64,
}

impl ExitLog {
    pub fn new(resend_window_ns: u64) -> Self {
        Self {
            entries: VecDeque::new(),
            resend_window_ns,
        }
    }

    /// Records an exit; `sent_at_ns` is when it was sent, if it was.
    pub fn record(&mut self, exit: JobExited, sent_at_ns: Option<u64>) {
        if self.entries.len() == MAX_EXITS {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry { exit, sent_at_ns });
    }

    /// The exits to send after (re)registering at `now_ns`: never sent, or
    /// sent recently; older ones are forgotten.
    pub fn to_resend(&mut self, now_ns: u64) -> Vec<JobExited> {
        let oldest = now_ns.saturating_sub(self.resend_window_ns);
        self.entries
            .retain(|entry| entry.sent_at_ns.is_none_or(|sent| sent >= oldest));
        self.entries
            .iter_mut()
            .map(|entry| {
                entry.sent_at_ns = Some(now_ns);
                entry.exit.clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use cosched_proto::wire::ExitStatus;

    use super::*;

    fn exit(job: u32) -> JobExited {
        JobExited {
            job_id: job,
            rank: 0,
            status: ExitStatus::Exited { code: 0 },
        }
    }

    #[test]
    fn unsent_exits_wait_for_the_coordinator_however_long() {
        let mut log = ExitLog::new(1_000);
        log.record(exit(1), None);
        assert_eq!(log.to_resend(1_000_000), vec![exit(1)]);
    }

    #[test]
    fn recently_sent_exits_are_resent_once_older_ones_are_forgotten() {
        let mut log = ExitLog::new(1_000);
        log.record(exit(1), Some(100));
        log.record(exit(2), Some(5_000));
        assert_eq!(log.to_resend(5_500), vec![exit(2)]);
        assert!(log.to_resend(100_000).is_empty());
    }

    #[test]
    fn the_log_is_bounded() {
        let mut log = ExitLog::new(1_000);
        for job in 0..(MAX_EXITS as u32 + 10) {
            log.record(exit(job), None);
        }
        let resent = log.to_resend(0);
        assert_eq!(resent.len(), MAX_EXITS);
        assert_eq!(resent[0], exit(10));
    }
}
