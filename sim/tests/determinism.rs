//! A run is a function of its configuration and seed.

use cosched_policy::local::PolicyKind;
use cosched_sim::config::{GlobalMode, SimConfig};
use cosched_sim::workload::{JobShape, StreamParams, generate};
use cosched_sim::{RunOptions, simulate};

fn report_json(seed: u64, global: GlobalMode, local: PolicyKind) -> String {
    let mut config = SimConfig::default();
    config.cluster.nodes = 16;
    config.sched.global = global;
    config.sched.local.kind = local;
    config.sched.slice_ns = 20_000_000;
    let stream = StreamParams {
        jobs: 40,
        nodes: 16,
        load: 0.8,
        max_size: 8,
        min_runtime_s: 0.05,
        max_runtime_s: 0.5,
        seed,
        ..StreamParams::default()
    };
    let shape = JobShape {
        granularity_ns: 2_000_000,
        ..JobShape::default()
    };
    let options = RunOptions {
        job_records: true,
        ..RunOptions::default()
    };
    let report = simulate(&config, generate(&stream, &shape), &options).unwrap();
    assert_eq!(report.completed, 40);
    serde_json::to_string(&report).unwrap()
}

#[test]
fn the_same_seed_gives_the_same_report_byte_for_byte() {
    for (global, local) in [
        (GlobalMode::Gang, PolicyKind::Local),
        (GlobalMode::PairedGang, PolicyKind::Local),
        (GlobalMode::Local, PolicyKind::Dcs),
        (GlobalMode::Local, PolicyKind::PbSb),
    ] {
        assert_eq!(
            report_json(7, global, local),
            report_json(7, global, local),
            "{global:?}/{local}"
        );
    }
}

#[test]
fn another_seed_gives_another_run() {
    assert_ne!(
        report_json(7, GlobalMode::Gang, PolicyKind::Local),
        report_json(8, GlobalMode::Gang, PolicyKind::Local)
    );
}
