//! The per-rank result: one JSON object per rank, plus a human summary line.

use serde::{Deserialize, Serialize};

use crate::modes::{Proto, RecvMode, WaitMode};
use crate::pattern::Pattern;
use crate::rt::Percentiles;

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
    /// Real-time mode (`--rt`) only: frames and deadline misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<RtReport>,
}

/// What one process of a real-time pipeline measured (see [`crate::rt`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RtReport {
    /// d: a frame is released every period.
    pub period_ns: u64,
    /// b: frames due per window.
    pub frames_per_window: u32,
    /// τ: CPU time computed per frame.
    pub work_ns: u64,
    /// Γ = b·d.
    pub window_ns: u64,
    /// Frames this process finished (one per iteration).
    pub frames: u64,
    /// Complete windows since the start of its first frame (the last,
    /// partial one is not judged).
    pub windows: u64,
    /// Frames finished inside those windows.
    pub frames_in_windows: u64,
    /// Σ (b − n) over the windows with n < b frames.
    pub missed_frames: u64,
    /// Windows with fewer than b frames: deadlines missed.
    pub missed_windows: u64,
    /// b − n of each complete window in order (where the misses fell).
    #[serde(default)]
    pub missed_by_window: Vec<u64>,
    /// missed_frames / (b · windows), the paper's (b − n)/b averaged.
    pub miss_rate: f64,
    /// CPU time per frame, µs: from the start of its compute to its report
    /// (compute, I/O, the send to the next stage), excluding the wait for it.
    pub frame_work_us: Percentiles,
    /// The cosched-rt counter file the frames went to.
    pub counter_file: Option<String>,
    /// Why there was none (the frames were counted in memory only).
    pub counter_error: Option<String>,
    /// The count cosched-rt holds at the end (equals `frames` unless
    /// something else in the process reported frames too).
    pub counter_frames: u64,
    /// When this process started, reached its measured run and began its
    /// first frame, and when its first frames were done (at most 2·b):
    /// CLOCK_MONOTONIC ns, where start-up ran and at what phase of a
    /// schedule the windows began.
    #[serde(default)]
    pub timeline: RtTimeline,
}

/// CLOCK_MONOTONIC instants of a rank's start (see [`RtReport::timeline`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtTimeline {
    /// `main` began (0 when not noted).
    pub process_start_ns: u64,
    /// The measured run began: the ranks were connected and
    /// `cosched_rt::init()` returned (after its first-frame gate, if any).
    pub began_ns: u64,
    /// The first-frame instant `cosched_rt::init()` waited for (0: no
    /// gate, or the wait gave up).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gate_ns: u64,
    /// The first frame's compute began: window 0's start.
    pub first_frame_ns: u64,
    /// When each of the first frames was done.
    pub first_done_ns: Vec<u64>,
    /// When every frame was done, µs after `first_frame_ns` (at most
    /// [`MAX_FRAME_TIMES`]): where a window's last frames finished against
    /// a schedule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub done_us: Vec<u32>,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Frames whose done time [`RtTimeline::done_us`] keeps.
pub const MAX_FRAME_TIMES: usize = 100_000;

impl RunReport {
    /// One line for stderr, for people watching a run.
    pub fn summary_line(&self) -> String {
        let rt = self.rt.as_ref().map_or(String::new(), |rt| {
            format!(
                "; rt {} frames, {} windows, {} missed ({:.1}%), work p99 {:.1} us",
                rt.frames,
                rt.windows,
                rt.missed_frames,
                rt.miss_rate * 100.0,
                rt.frame_work_us.p99
            )
        });
        format!(
            "cosched-synth: job {} rank {}/{} {} {} {}: {} iterations in {:.3} s ({:.1}/s), \
             wait {:.1}%, cpu {:.3} s, sent {} recv {} empty polls {}{}",
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
            rt,
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
            rt: None,
        }
    }

    fn rt_sample() -> RunReport {
        RunReport {
            pattern: Pattern::Pipeline,
            rt: Some(RtReport {
                period_ns: 10_000_000,
                frames_per_window: 4,
                work_ns: 2_000_000,
                window_ns: 40_000_000,
                frames: 100,
                windows: 24,
                frames_in_windows: 96,
                missed_frames: 2,
                missed_windows: 1,
                missed_by_window: vec![2, 0],
                timeline: RtTimeline::default(),
                miss_rate: 2.0 / 96.0,
                frame_work_us: Percentiles {
                    p50: 2001.5,
                    p95: 2010.0,
                    p99: 2100.25,
                },
                counter_file: Some("/run/cosched/rt/42.frames".into()),
                counter_error: None,
                counter_frames: 100,
            }),
            ..sample()
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
    fn rt_results_are_one_object_absent_outside_rt_mode() {
        let plain = serde_json::to_value(sample()).unwrap();
        assert!(plain.get("rt").is_none());
        let json = serde_json::to_value(rt_sample()).unwrap();
        assert_eq!(json["pattern"], "pipeline");
        let rt = &json["rt"];
        for key in [
            "period_ns",
            "frames_per_window",
            "work_ns",
            "window_ns",
            "frames",
            "windows",
            "frames_in_windows",
            "missed_frames",
            "missed_windows",
            "missed_by_window",
            "miss_rate",
            "counter_file",
            "counter_error",
            "counter_frames",
        ] {
            assert!(rt.get(key).is_some(), "missing rt.{key}");
        }
        assert_eq!(rt["frame_work_us"]["p99"], 2100.25);
        let back: RunReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, rt_sample());
        let line = rt_sample().summary_line();
        assert!(
            line.contains("rt 100 frames, 24 windows, 2 missed (2.1%)"),
            "{line}"
        );
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
