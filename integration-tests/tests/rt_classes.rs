//! Real-time jobs on the real kernel: an RT `cosched-synth` pipeline
//! launched on one agent in 2DCS-PS mode reports its frames through the
//! counter directory the agent made for it, the agent counts them, and the
//! job's tasks run at SCHED_FIFO within the RT band while frames are due.
use std::{path::PathBuf, time::Duration};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::exclusive,
    pair::{eventually, job_info, watch},
    proc::{sched_of, threads_of},
    require_root, synth,
};

/// The band the test configures (not the default, so a priority seen in it
/// is the overlay's).
const BAND: (i32, i32) = (24, 36);

#[test]
fn an_rt_synth_job_under_ps_is_seen_counting_frames_and_its_tasks_at_sched_fifo_in_the_band() {
    require_root();
    let _serial = exclusive();
    let extra = format!(
        "[classes]\nmode = \"ps\"\nrt_band = [{}, {}]\n",
        BAND.0, BAND.1
    );
    let mut agent = TestAgent::start(AgentOpts {
        cpus: vec![0],
        extra: &extra,
        ..AgentOpts::default()
    });
    // One rank: frames of 0.5 ms of work every 10 ms, 2 per window of 20 ms,
    // for 3 s.
    let (period_ns, frames, work_ns) = (10_000_000, 2, 500_000);
    let spec = synth::rt_video(period_ns, frames, work_ns);
    let pid = agent.launch(spec);
    let counter_dir = PathBuf::from(agent.dir.path()).join("state/rt/1");

    let boosted = watch(Duration::from_secs(5), || {
        threads_of(pid).into_iter().find_map(|tid| {
            let s = sched_of(tid).ok()?;
            (s.policy == libc::SCHED_FIFO).then_some(s.priority)
        })
    });
    let Some(priority) = boosted else {
        panic!(
            "no task of the RT job was seen at SCHED_FIFO within 5 s\n{}",
            agent.log()
        );
    };
    assert!(
        (BAND.0..=BAND.1).contains(&priority),
        "SCHED_FIFO {priority} outside the band {BAND:?}"
    );
    let counter = counter_dir.join(format!("{pid}.frames"));
    assert!(
        eventually(Duration::from_secs(5), || counter.is_file()),
        "the rank reports into the job's counter directory {}",
        counter_dir.display()
    );

    let counted = eventually(Duration::from_secs(5), || {
        job_info(&agent, 1)
            .rt
            .is_some_and(|rt| rt.frames >= 20 && rt.windows >= 5)
    });
    let info = job_info(&agent, 1);
    assert!(
        counted,
        "the agent counted too little: {:?}\n{}",
        info.rt,
        agent.log()
    );
    assert_eq!(info.class, format!("rt:{period_ns}:{frames}:{work_ns}"));
    let rt = info.rt.unwrap();
    assert_eq!(rt.processes.len(), 1);
    assert_eq!(rt.processes[0].sched, "fifo");
    assert_eq!(rt.processes[0].counter_error, None);
    assert!(
        agent.metric("cosched_rt_frames_total", &["job_id=\"1\""]) > 0.0,
        "{}",
        agent.metrics()
    );
    assert!(agent.metric("cosched_rt_frames_expected_total", &["job_id=\"1\""]) > 0.0);

    let done = agent.wait(1, Duration::from_secs(20));
    assert!(
        !counter_dir.exists(),
        "the counter directory goes with the job: {done:?}"
    );
    assert_eq!(agent.stop(), Some(0), "{}", agent.log());
}
