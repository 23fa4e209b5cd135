//! Every example agent config in `configs/` parses and validates.
use cosched_agent::config::Config;

#[test]
fn every_example_agent_config_is_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("agent") && name.ends_with(".toml") {
            let c = Config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let policy = name.trim_start_matches("agent-").trim_end_matches(".toml");
            assert_eq!(
                c.policy.as_str(),
                policy,
                "{name} must configure the policy it is named after"
            );
            n += 1;
        }
    }
    assert_eq!(
        n,
        8,
        "one example config per local policy in {}",
        dir.display()
    );
}

#[test]
fn systemd_unit_gives_files_beyond_the_endpoint_caps() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs/systemd/cosched-agent.service");
    let unit = std::fs::read_to_string(path).unwrap();
    let files: usize = unit
        .lines()
        .find_map(|line| line.strip_prefix("LimitNOFILE="))
        .expect("the unit sets LimitNOFILE (the default, 1024, was used up by metrics clients)")
        .parse()
        .expect("a number");
    let limits = cosched_agent::limits::Limits::default();
    let clients = limits.control.max_connections + limits.metrics.max_connections;
    assert!(
        files >= 1024 + clients,
        "LimitNOFILE={files} leaves the agent less than 1024 files beside its clients"
    );
}
