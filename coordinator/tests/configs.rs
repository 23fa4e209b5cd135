//! Every example coordinator config in `configs/` parses and validates, one
//! per global policy, and the systemd unit runs the binary this crate builds.
use cosched_coordinator::{config::Config, policy::GlobalPolicy};

fn configs_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs")
}

#[test]
fn every_example_coordinator_config_is_valid_and_every_policy_has_one() {
    let mut policies = Vec::new();
    for entry in std::fs::read_dir(configs_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("coordinator") && name.ends_with(".toml") {
            let config = Config::load(&path).unwrap_or_else(|error| panic!("{name}: {error}"));
            assert_eq!(
                name,
                format!("coordinator-{}.toml", config.policy),
                "file named after its policy"
            );
            policies.push(config.policy);
        }
    }
    for policy in GlobalPolicy::ALL {
        assert!(policies.contains(&policy), "no example config for {policy}");
    }
}

#[test]
fn systemd_unit_checks_the_config_and_starts_the_coordinator() {
    let unit =
        std::fs::read_to_string(configs_dir().join("systemd/cosched-coordinator.service")).unwrap();
    assert!(unit.contains("ExecStartPre=/usr/bin/cosched-coordinator --config"));
    assert!(unit.contains("--check-config"));
    assert!(unit.contains("ExecStart=/usr/bin/cosched-coordinator --config"));
}

#[test]
fn systemd_unit_gives_enough_files_for_every_connection_the_limits_allow() {
    let unit =
        std::fs::read_to_string(configs_dir().join("systemd/cosched-coordinator.service")).unwrap();
    let files: usize = unit
        .lines()
        .find_map(|line| line.strip_prefix("LimitNOFILE="))
        .expect("the unit sets LimitNOFILE (the default, 1024, is below the node limit)")
        .parse()
        .expect("a number");
    let limits = cosched_coordinator::limits::Limits::default();
    let most_nodes = 1024;
    let worst_case = 2 * most_nodes
        + limits.agents.unauthenticated
        + limits.admin.max_connections
        + limits.metrics.max_connections;
    assert!(files >= worst_case, "LimitNOFILE={files} < {worst_case}");
}
