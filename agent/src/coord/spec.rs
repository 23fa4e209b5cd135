//! A coordinator's `LaunchJob` as the agent's own job spec.

use cosched_proto::{job::JobSpec, wire::LaunchJob};

/// The spec the agent launches for `launch`, its class included (the
/// agent counts an RT rank's frames and, in a class mode, runs it by EDF).
pub fn job_spec(launch: &LaunchJob) -> JobSpec {
    JobSpec {
        job_id: launch.job_id,
        name: launch.name.clone(),
        rank: launch.rank,
        size: launch.size,
        command: launch.command.clone(),
        args: launch.args.clone(),
        env: launch.env.clone(),
        peers: launch.peers.clone(),
        cpus: launch.cpus.clone(),
        sched: None,
        class: launch.class.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cosched_proto::wire::JobClass;

    use super::*;

    #[test]
    fn every_rank_field_carries_over_and_the_spec_is_valid() {
        let launch = LaunchJob {
            job_id: 4,
            name: "ring".into(),
            rank: 1,
            size: 2,
            peers: vec!["10.0.0.1:20004".into(), "10.0.0.2:20004".into()],
            command: "/usr/bin/cosched-synth".into(),
            args: vec!["--duration".into(), "2".into()],
            env: BTreeMap::from([("A".into(), "b".into())]),
            cpus: vec![],
            class: JobClass::BestEffort,
            exclusive: false,
            first_frame_wait_ns: None,
        };
        let spec = job_spec(&launch);
        spec.validate().unwrap();
        assert_eq!(spec.peers, launch.peers);
        assert_eq!((spec.rank, spec.size, spec.job_id), (1, 2, 4));
        assert_eq!(spec.env["A"], "b");
        assert_eq!(spec.class, JobClass::BestEffort);
        let rt = JobClass::RealTime {
            period_ns: 10_000_000,
            frames: 2,
            work_ns: 1_000_000,
        };
        let spec = job_spec(&LaunchJob {
            class: rt.clone(),
            ..launch
        });
        assert_eq!(spec.class, rt, "the class carries over");
    }
}
