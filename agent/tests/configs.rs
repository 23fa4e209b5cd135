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
