//! Processes: liveness from /proc (robust against recycled pids) and signals.

use std::{
    fs,
    process::Command,
    thread,
    time::{Duration, Instant},
};

use anyhow::Result;

use crate::process;

/// What /proc/PID/stat says about a process that matters here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStat {
    /// One letter: R, S, D, Z (zombie), X (dead), ...
    pub state: char,
    /// Start time in clock ticks after boot.
    pub start_ticks: u64,
}

/// Reads /proc/PID/stat; `None` when the process does not exist.
pub fn stat(pid: u32) -> Option<ProcessStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Whether a process runs (exists and is not a zombie) and, when given, has
/// this start time.
pub fn is_running(pid: u32, start_ticks: Option<u64>) -> bool {
    stat(pid).is_some_and(|stat| {
        !matches!(stat.state, 'Z' | 'X')
            && start_ticks.is_none_or(|ticks| ticks == stat.start_ticks)
    })
}

/// Sends a signal (`TERM`, `KILL`, ...) with kill(1); a process that is gone
/// already is not an error.
pub fn signal(pid: u32, signal: &str) -> Result<()> {
    if !is_running(pid, None) {
        return Ok(());
    }
    let result = process::capture(
        Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string()),
    );
    match result {
        Err(_) if !is_running(pid, None) => Ok(()),
        other => other.map(drop),
    }
}

/// Waits until none of the processes runs; returns those still running at the deadline.
pub fn wait_for_exit(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let running: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&pid| is_running(pid, None))
            .collect();
        if running.is_empty() || Instant::now() >= deadline {
            return running;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Parses /proc/PID/stat. The command name (field 2) may contain spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<ProcessStat> {
    let after_name = &text[text.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3) come fields 4..; starttime is field 22.
    let start_ticks = fields.nth(22 - 4)?.parse().ok()?;
    Some(ProcessStat { state, start_ticks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_state_and_start_time_despite_odd_names() {
        let text = "1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 \
                    987654 1000000 200 18446744073709551615";
        assert_eq!(
            parse_stat(text),
            Some(ProcessStat {
                state: 'S',
                start_ticks: 987654
            })
        );
    }

    #[test]
    fn this_process_is_running_and_a_wrong_start_time_is_not() {
        let pid = std::process::id();
        let me = stat(pid).unwrap();
        assert!(is_running(pid, Some(me.start_ticks)));
        assert!(!is_running(pid, Some(me.start_ticks + 1)));
    }
}
