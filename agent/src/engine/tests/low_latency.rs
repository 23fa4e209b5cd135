//! The CPU latency request over the fake kernel: held while an RT job runs
//! on the node, released when the last one ends, at shutdown, or never taken
//! when the config says `off`; a refusal leaves the job running.
use cosched_proto::class::parse_class;

use super::*;

const MS: u64 = 1_000_000;
const SPEC: &str = "rt:10000000:2:2000000";

fn engine(classes: &str) -> Engine<FakeKernel> {
    let mut e = engine_configured(&format!("state_dir = \"/st\"\n[classes]\n{classes}"));
    e.k.now = MS;
    e
}

/// Job `job` as process `pid`, of class `class` (None: best effort).
fn launch(e: &mut Engine<FakeKernel>, job: u32, pid: u32, class: Option<&str>) {
    e.k.spawn(pid, SchedAttr::other(0));
    e.reserve_job(job, &format!("j{job}"), 0, None).unwrap();
    if let Some(class) = class {
        e.set_job_class(job, &parse_class(class).unwrap(), true)
            .unwrap();
    }
    e.manage_process(job, pid).unwrap();
}

/// The gauge's sample (its help text also starts with the name).
fn held_metric(e: &Engine<FakeKernel>) -> bool {
    let text = e.metrics.render();
    match text
        .lines()
        .find_map(|l| l.strip_prefix("cosched_low_latency_held "))
    {
        Some("1") => true,
        Some("0") => false,
        other => panic!("cosched_low_latency_held sample {other:?} in {text}"),
    }
}

#[test]
fn an_rt_job_keeps_the_cpus_from_halting_until_the_last_rt_job_ends() {
    let mut e = engine("");
    launch(&mut e, 1, 100, None);
    assert!(!e.k.low_latency_held, "a best-effort job asks nothing");
    launch(&mut e, 2, 200, Some(SPEC));
    assert!(e.k.low_latency_held && held_metric(&e));
    launch(&mut e, 3, 300, Some(SPEC));
    assert_eq!(e.k.low_latency_changes, 1, "taken once for both jobs");
    e.k.exit(200, 2 * MS);
    assert_eq!(e.poll(3 * MS, 0.0), vec![2]);
    assert!(e.k.low_latency_held, "job 3 still runs");
    e.release_job(3).unwrap();
    assert!(!e.k.low_latency_held && !held_metric(&e));
    assert_eq!(e.k.low_latency_changes, 2);
}

#[test]
fn shutdown_releases_the_request() {
    let mut e = engine("");
    launch(&mut e, 1, 100, Some(SPEC));
    assert!(e.k.low_latency_held);
    e.shutdown();
    assert!(!e.k.low_latency_held && !held_metric(&e));
}

#[test]
fn with_low_latency_idle_off_an_rt_job_leaves_the_cpus_their_idle_states() {
    let mut e = engine("low_latency_idle = \"off\"");
    launch(&mut e, 1, 100, Some(SPEC));
    assert!(!e.k.low_latency_held && !held_metric(&e));
    assert_eq!(e.k.low_latency_changes, 0);
}

#[test]
fn a_refused_request_leaves_the_rt_job_running_and_is_not_retried_while_nothing_changes() {
    let mut e = engine("");
    e.k.deny_low_latency = true;
    launch(&mut e, 1, 100, Some(SPEC));
    assert!(!e.k.low_latency_held && !held_metric(&e));
    assert!(e.job_info(1).unwrap().rt.is_some(), "the job runs as RT");
    // Allowed from now on: the next change of mind (a job ending, another
    // starting) takes it.
    e.k.deny_low_latency = false;
    launch(&mut e, 2, 200, Some(SPEC));
    assert!(!e.k.low_latency_held, "nothing changed: no retry");
    e.release_job(1).unwrap();
    e.release_job(2).unwrap();
    launch(&mut e, 3, 300, Some(SPEC));
    assert!(e.k.low_latency_held && held_metric(&e));
}
