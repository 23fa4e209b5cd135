//! `cargo xtask bench rt`, one tiny cell per column (the 2:1 mix at 2 jobs/s,
//! 1.5 s of arrivals, no admission control) on the xtask cluster: every
//! column (1GS, 2DCS-TDM, 2DCS-PS, SCHED_FIFO, SCHED_DEADLINE) must give a
//! measured row in the JSON, RT jobs with frames counted and BE jobs with a
//! response time. A capability that is missing (a coordinator policy, the
//! agents' class handling, SCHED_DEADLINE) shows as that column's error.
//! Needs root, the release binaries (`cargo xtask test` builds them) and no
//! other `cargo xtask cluster` up on this machine.
use cosched_integration_tests::require_root;
use xtask::{
    bench::rt::{
        self, RtOptions,
        columns::{Admission, Column},
        stream::Mix,
    },
    workspace::Workspace,
};

#[test]
fn every_column_of_bench_rt_measures_a_tiny_cell() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rt.json");
    let options = RtOptions {
        mixes: vec![Mix { rt: 2, be: 1 }],
        admission_mixes: vec![],
        rates: vec![2.0],
        admissions: vec![Admission::None],
        window_s: 1.5,
        json: Some(json.clone()),
        svg: Some(dir.path().join("rt.svg")),
        build: false,
        ..RtOptions::default()
    };
    let workspace = Workspace::locate().unwrap();
    let report = rt::run(&workspace, &options).expect("bench rt ran");
    let text = std::fs::read_to_string(&json).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = doc["rows"].as_array().expect("rows in the JSON");
    for column in Column::ALL {
        let row = rows
            .iter()
            .find(|r| r["column"] == column.label())
            .unwrap_or_else(|| panic!("no row for column {} in {text}", column.label()));
        assert_eq!(
            row["status"],
            "ok",
            "column {} could not be measured: {}",
            column.label(),
            row["error"]
        );
        assert!(row["arrivals"].as_u64().unwrap() > 0, "{row}");
        assert!(
            row["rt_admitted"].as_u64().unwrap() + row["be_finished"].as_u64().unwrap() > 0,
            "column {}: no job ran: {row}",
            column.label()
        );
    }
    assert_eq!(report.failed_rows(), 0);
    assert!(!report.targets.is_empty());
}
