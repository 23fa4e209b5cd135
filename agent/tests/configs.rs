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
            Config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            n += 1;
        }
    }
    assert!(n >= 1, "no agent configs found in {}", dir.display());
}
