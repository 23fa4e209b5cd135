//! The per-rank result: one JSON object per rank, plus a human summary line.

use serde::{Deserialize, Serialize};

use crate::modes::{Proto, RecvMode, WaitMode};
use crate::pattern::Pattern;

/// What one rank measured.
///
/// Message counters cover the whole run, handshake included, so they match
/// what a kernel-side observer of the rank's sockets counts; time and CPU
/// figures cover the measured window only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub job: String,
    pub rank: usize,
    pub size: usize,
    pub pattern: Pattern,
    pub proto: Proto,
    pub recv_mode: RecvMode,
    /// How spinning receives waited (`--wait`).
    #[serde(default)]
    pub wait_mode: WaitMode,
    pub compute_us: u64,
    pub io_us: u64,
    pub io_every: u64,
    pub msg_bytes: usize,
    /// Iterations completed, the same on every rank of a run.
    pub iterations: u64,
    /// Wall time of the measured window.
    pub elapsed_s: f64,
    pub iterations_per_s: f64,
    /// Time spent inside receive steps, spinning or blocked.
    pub wait_s: f64,
    pub wait_fraction: f64,
    /// Every frame sent, handshake included.
    pub messages_sent: u64,
    /// Every frame this rank's sockets delivered, handshake and rejected included.
    pub messages_received: u64,
    pub data_messages_sent: u64,
    /// Pattern frames (data, arrive, release, task, reply) received.
    pub data_messages_received: u64,
    pub handshake_messages_sent: u64,
    pub handshake_messages_received: u64,
    /// Frames dropped for bad magic, version, length or job hash.
    pub rejected_messages: u64,
    /// Frames of this job that the pattern does not expect (stale,
    /// duplicate, wrong kind or sender).
    pub unexpected_messages: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Non-blocking receive calls, or zero-timeout polls, that found nothing
    /// (spin mode only).
    pub empty_polls: u64,
    /// Process CPU time during the measured window.
    pub cpu_s: f64,
    pub started_unix_ns: u64,
    pub finished_unix_ns: u64,
    pub pid: u32,
    /// Datagrams the kernel dropped on this rank's UDP socket (receive
    /// buffer overflow), when it could be read; `null` for TCP.
    pub udp_drops: Option<u64>,
}

impl RunReport {
    /// One line for stderr, for people watching a run.
    pub fn summary_line(&self) -> String {
        format!(
            "cosched-synth: job {} rank {}/{} {} {} {}: {} iterations in {:.3} s ({:.1}/s), \
             wait {:.1}%, cpu {:.3} s, sent {} recv {} empty polls {}",
            self.job,
            self.rank,
            self.size,
            self.pattern.as_str(),
            self.proto.as_str(),
            self.recv_mode.as_str(),
            self.iterations,
            self.elapsed_s,
            self.iterations_per_s,
            self.wait_fraction * 100.0,
            self.cpu_s,
            self.messages_sent,
            self.messages_received,
            self.empty_polls,
        )
    }
}

/// `part / whole`, 0 when nothing was measured.
pub fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> RunReport {
        RunReport {
            job: "j".into(),
            rank: 1,
            size: 2,
            pattern: Pattern::AllToAll,
            proto: Proto::Tcp,
            recv_mode: RecvMode::Block,
            wait_mode: WaitMode::Recv,
            compute_us: 20,
            io_us: 0,
            io_every: 1,
            msg_bytes: 64,
            iterations: 10,
            elapsed_s: 2.0,
            iterations_per_s: 5.0,
            wait_s: 0.5,
            wait_fraction: 0.25,
            messages_sent: 11,
            messages_received: 11,
            data_messages_sent: 10,
            data_messages_received: 10,
            handshake_messages_sent: 1,
            handshake_messages_received: 1,
            rejected_messages: 0,
            unexpected_messages: 0,
            bytes_sent: 704,
            bytes_received: 704,
            empty_polls: 0,
            cpu_s: 0.1,
            started_unix_ns: 1,
            finished_unix_ns: 2,
            pid: 42,
            udp_drops: None,
        }
    }

    #[test]
    fn json_has_the_documented_keys_and_spellings() {
        let json = serde_json::to_value(sample()).unwrap();
        for key in [
            "job",
            "rank",
            "size",
            "pattern",
            "proto",
            "recv_mode",
            "compute_us",
            "io_us",
            "msg_bytes",
            "iterations",
            "elapsed_s",
            "iterations_per_s",
            "wait_s",
            "wait_fraction",
            "messages_sent",
            "messages_received",
            "data_messages_received",
            "bytes_sent",
            "bytes_received",
            "empty_polls",
            "cpu_s",
            "started_unix_ns",
            "finished_unix_ns",
            "pid",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        assert_eq!(json["pattern"], "all-to-all");
        assert_eq!(json["proto"], "tcp");
        assert_eq!(json["recv_mode"], "block");
        let back: RunReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn summary_names_the_rank_and_rate() {
        let line = sample().summary_line();
        assert!(line.contains("rank 1/2"), "{line}");
        assert!(line.contains("all-to-all tcp block"), "{line}");
        assert!(line.contains("10 iterations"), "{line}");
        assert!(line.contains("wait 25.0%"), "{line}");
    }

    #[test]
    fn ratio_of_nothing_is_zero() {
        assert_eq!(ratio(1.0, 0.0), 0.0);
        assert_eq!(ratio(1.0, 4.0), 0.25);
    }
}
