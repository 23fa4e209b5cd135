//! Unit tests of the daemon's handlers over the fake kernel: requests in,
//! replies out, the engine changed as the request says.
use std::io::Write as _;

use cosched_proto::control::{Reply, Request, Response};
use tokio::sync::{mpsc, oneshot};

use super::Daemon;
use crate::{
    config::Config,
    engine::Engine,
    kernel::{SchedAttr, fake::FakeKernel},
    restore::RestoreLedger,
};

const CONFIG: &str = "node = \"n0\"\ncpus = [0]\n";

struct Harness {
    daemon: Daemon<FakeKernel>,
    config: tempfile::NamedTempFile,
}

fn harness() -> Harness {
    let mut config = tempfile::NamedTempFile::new().unwrap();
    config.write_all(CONFIG.as_bytes()).unwrap();
    let cfg = Config::parse(CONFIG, "test").unwrap();
    let mut kernel = FakeKernel::default();
    kernel.spawn(100, SchedAttr::other(0));
    let engine = Engine::new(kernel, cfg, RestoreLedger::new(None), "test", 2);
    let (tx, _rx) = mpsc::channel(4);
    Harness {
        daemon: Daemon::new(engine, config.path().to_path_buf(), tx),
        config,
    }
}

impl Harness {
    fn call(&mut self, req: Request) -> Response {
        let (tx, mut rx) = oneshot::channel();
        self.daemon.handle(req, tx);
        rx.try_recv().expect("answered at once")
    }
}

fn adopt(job_id: u32, pids: Vec<u32>) -> Request {
    Request::Adopt {
        job_id,
        name: "app".into(),
        pids,
        sched: None,
        move_to_node: false,
        class: cosched_proto::wire::JobClass::BestEffort,
    }
}

#[test]
fn adopt_then_release_hands_the_job_back() {
    let mut h = harness();
    assert_eq!(
        h.call(adopt(1, vec![100])),
        Response::Ok(Reply::Adopted {
            job_id: 1,
            tasks: 1
        })
    );
    let Response::Ok(Reply::Jobs { jobs }) = h.call(Request::Jobs) else {
        panic!("no job list");
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        h.call(Request::Release { job_id: 1 }),
        Response::Ok(Reply::Released {
            job_id: 1,
            tasks: 1
        })
    );
    assert_eq!(h.daemon.engine.task_count(), 0);
    let Response::Error(e) = h.call(Request::Release { job_id: 1 }) else {
        panic!("released twice");
    };
    assert!(e.contains("unknown job 1"), "{e}");
}

#[test]
fn adopting_a_missing_process_names_it() {
    let mut h = harness();
    let Response::Error(e) = h.call(adopt(1, vec![555])) else {
        panic!("adopted a missing process");
    };
    assert!(e.contains("no such process: 555"), "{e}");
    let Response::Error(e) = h.call(adopt(1, vec![])) else {
        panic!("adopted nothing");
    };
    assert!(e.contains("no process given"), "{e}");
}

#[test]
fn unknown_jobs_are_errors_for_wait_cancel_and_forget() {
    let mut h = harness();
    for req in [
        Request::Wait {
            job_id: 9,
            timeout_ms: 10,
        },
        Request::Cancel { job_id: 9 },
        Request::Forget { job_id: 9 },
    ] {
        let Response::Error(e) = h.call(req.clone()) else {
            panic!("{req:?} accepted");
        };
        assert!(e.contains('9'), "{req:?}: {e}");
    }
}

#[test]
fn a_running_job_cannot_be_forgotten() {
    let mut h = harness();
    h.call(adopt(1, vec![100]));
    let Response::Error(e) = h.call(Request::Forget { job_id: 1 }) else {
        panic!("forgot a running job");
    };
    assert!(e.contains("still running"), "{e}");
}

#[test]
fn wait_for_a_job_that_ended_answers_with_its_record() {
    let mut h = harness();
    h.call(adopt(1, vec![100]));
    h.daemon.engine.kernel_mut().exit(100, 5);
    let Response::Ok(Reply::Job { job }) = h.call(Request::Wait {
        job_id: 1,
        timeout_ms: 1000,
    }) else {
        panic!("no record");
    };
    assert_eq!(job.job_id, 1);
    assert_eq!(job.live_tasks, 0);
}

#[test]
fn reload_reads_the_file_and_a_bad_file_keeps_the_running_config() {
    let mut h = harness();
    std::fs::write(h.config.path(), format!("{CONFIG}policy = \"dcs\"\n")).unwrap();
    let Response::Ok(Reply::Reloaded { outcome }) = h.call(Request::Reload) else {
        panic!("no reload");
    };
    assert!(outcome.accepted, "{outcome:?}");
    assert_eq!(h.daemon.engine.running_policy().as_str(), "dcs");
    std::fs::write(
        h.config.path(),
        "node = \"n0\"\ncpus = [0]\npolicy = \"nope\"\n",
    )
    .unwrap();
    let Response::Ok(Reply::Reloaded { outcome }) = h.call(Request::Reload) else {
        panic!("no reload");
    };
    assert!(!outcome.accepted);
    assert_eq!(h.daemon.engine.running_policy().as_str(), "dcs");
    let Response::Ok(Reply::Status { status }) = h.call(Request::Status) else {
        panic!("no status");
    };
    assert_eq!(status.policy, "dcs");
}

#[test]
fn a_timeline_request_is_answered_when_its_recording_ends_and_a_second_one_meanwhile_is_refused() {
    let mut h = harness();
    let (tx, mut rx) = oneshot::channel();
    h.daemon.handle(
        Request::Timeline {
            duration_ms: 20,
            max_events: None,
        },
        tx,
    );
    assert!(
        rx.try_recv().is_err(),
        "no answer before the recording ends"
    );
    let Response::Error(e) = h.call(Request::Timeline {
        duration_ms: 20,
        max_events: None,
    }) else {
        panic!("two recordings at once");
    };
    assert!(e.contains("already running"), "{e}");
    h.daemon.on_recording();
    assert!(rx.try_recv().is_err(), "still recording");
    h.daemon.engine.kernel_mut().now += 20_000_000;
    h.daemon.on_recording();
    let Ok(Response::Ok(Reply::Timeline { timeline })) = rx.try_recv() else {
        panic!("no timeline");
    };
    assert_eq!(timeline.end_ns - timeline.start_ns, 20_000_000);
    assert!(!h.daemon.engine.kernel().recording);
}

#[test]
fn a_bad_timeline_request_is_refused_at_once() {
    let mut h = harness();
    let Response::Error(e) = h.call(Request::Timeline {
        duration_ms: 0,
        max_events: None,
    }) else {
        panic!("accepted");
    };
    assert!(e.contains("duration"), "{e}");
}
