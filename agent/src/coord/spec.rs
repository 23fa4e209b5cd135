//! A coordinator's `LaunchJob` as the agent's own job spec.

use cosched_proto::{
    job::JobSpec,
    wire::{JobClass, LaunchJob},
};

/// The spec the agent launches for `launch`. Real-time classes are not
/// enforced by the agent yet: such ranks run best-effort (logged).
pub fn job_spec(launch: &LaunchJob) -> JobSpec {
    if let JobClass::RealTime { .. } = launch.class {
        tracing::warn!(
            job = launch.job_id,
            "real-time class requested; this agent runs the rank best-effort"
        );
    }
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
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

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
        };
        let spec = job_spec(&launch);
        spec.validate().unwrap();
        assert_eq!(spec.peers, launch.peers);
        assert_eq!((spec.rank, spec.size, spec.job_id), (1, 2, 4));
        assert_eq!(spec.env["A"], "b");
    }
}
