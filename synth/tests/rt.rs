//! Real-time mode as real processes: a pipeline paced by rank 0 whose
//! ranks report their frames through cosched-rt into `COSCHED_RT_DIR`, and
//! count windows and misses for themselves.

mod common;

use std::fs;
use std::path::Path;

use common::{RankRun, job_lock, run_ranks_with_env};
use cosched_agent_common::rt_frames::{FrameRecord, SIZE};
use cosched_synth::RunReport;
use cosched_synth::report::RtReport;

const FRAMES: u64 = 60;
/// 2 ms period, 4 frames per window, 0.2 ms of work per frame.
const RT: &str = "2000000:4:200000";

fn run(size: usize, recv: &str, rt_dir: &Path) -> Vec<RankRun> {
    let args: Vec<String> = [
        "--job",
        &format!("rt-{recv}"),
        "--rt",
        RT,
        "--recv",
        recv,
        "--iterations",
        &FRAMES.to_string(),
        "--timeout",
        "5",
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect();
    run_ranks_with_env(&vec![args; size], &[("COSCHED_RT_DIR", rt_dir.as_os_str())])
}

fn counter(rt_dir: &Path, pid: u32) -> FrameRecord {
    let bytes = fs::read(rt_dir.join(format!("{pid}.frames"))).expect("the rank's counter file");
    let bytes: [u8; SIZE] = bytes.try_into().expect("one counter");
    FrameRecord::from_bytes(&bytes)
}

fn check_rank(report: &RunReport, size: usize) -> &RtReport {
    let who = format!("rank {}/{size}", report.rank);
    assert_eq!(report.pattern.as_str(), "pipeline", "{who}");
    assert_eq!(report.iterations, FRAMES, "{who}");
    let rt = report.rt.as_ref().expect("an rt section");
    assert_eq!(
        (rt.period_ns, rt.frames_per_window, rt.work_ns, rt.window_ns),
        (2_000_000, 4, 200_000, 8_000_000),
        "{who}"
    );
    assert_eq!((rt.frames, rt.counter_frames), (FRAMES, FRAMES), "{who}");
    // 60 frames released 2 ms apart span ~118 ms: 14 windows of 8 ms.
    assert!((10..=15).contains(&rt.windows), "{who}: {rt:?}");
    assert!(rt.frames_in_windows <= FRAMES, "{who}");
    // Σ max(0, b − n) is at least b·W − Σ n.
    assert!(
        rt.missed_frames + rt.frames_in_windows >= 4 * rt.windows,
        "{who}: {rt:?}"
    );
    assert!(rt.missed_windows <= rt.windows && rt.missed_frames <= 4 * rt.windows);
    let expected_rate = rt.missed_frames as f64 / (4 * rt.windows) as f64;
    assert!((rt.miss_rate - expected_rate).abs() < 1e-12, "{who}");
    // Each frame computed at least its 200 µs of CPU time.
    let work = rt.frame_work_us;
    assert!(
        200.0 <= work.p50 && work.p50 <= work.p95 && work.p95 <= work.p99,
        "{who}: {work:?}"
    );

    let (sent, received) = match report.rank {
        0 => (FRAMES, 0),
        r if r + 1 == size => (0, FRAMES),
        _ => (FRAMES, FRAMES),
    };
    assert_eq!(
        (report.data_messages_sent, report.data_messages_received),
        (sent, received),
        "{who}"
    );
    assert_eq!(report.unexpected_messages, 0, "{who}");
    rt
}

fn check_job(size: usize, recv: &str) {
    let _serial = job_lock();
    let rt_dir = tempfile::tempdir().unwrap();
    for run in run(size, recv, rt_dir.path()) {
        let report = run.report();
        let rt = check_rank(&report, size);
        let path = rt_dir.path().join(format!("{}.frames", run.pid));
        assert_eq!(rt.counter_file.as_deref(), path.to_str());
        assert_eq!(rt.counter_error, None);
        let counter = counter(rt_dir.path(), run.pid);
        assert_eq!((counter.pid, counter.frames), (run.pid, FRAMES));
        assert!(counter.cpu_sample().is_some());
    }
    assert_eq!(
        fs::read_dir(rt_dir.path()).unwrap().count(),
        size,
        "one file per rank"
    );
}

#[test]
fn a_blocking_udp_pipeline_of_three_reports_every_frame() {
    check_job(3, "block");
}

#[test]
fn a_spinning_pipeline_of_two_reports_every_frame() {
    check_job(2, "spin");
}

#[test]
fn without_a_counter_directory_the_frames_are_still_counted() {
    let _serial = job_lock();
    let scratch = tempfile::tempdir().unwrap();
    let missing = scratch.path().join("absent");
    for run in run(2, "block", &missing) {
        let report = run.report();
        let rt = check_rank(&report, 2);
        assert_eq!(rt.counter_file, None);
        let error = rt.counter_error.as_deref().expect("the reason");
        assert!(error.contains("No such file"), "{error}");
    }
    assert!(!missing.exists());
}
