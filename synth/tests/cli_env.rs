//! Rank, size, peers and job from the environment, as the cosched agent
//! launches ranks. The only test in this binary: it changes the process
//! environment, which no other thread may read meanwhile.

use clap::Parser;
use cosched_synth::Cli;

const VARS: [&str; 4] = [
    "COSCHED_RANK",
    "COSCHED_SIZE",
    "COSCHED_PEERS",
    "COSCHED_JOB",
];

fn set(name: &str, value: &str) {
    // SAFETY: this binary runs a single test on a single thread, so nothing
    // reads the environment concurrently.
    unsafe { std::env::set_var(name, value) }
}

fn unset(name: &str) {
    // SAFETY: as in `set`.
    unsafe { std::env::remove_var(name) }
}

#[test]
fn environment_supplies_and_flags_override() {
    set("COSCHED_RANK", "2");
    set("COSCHED_SIZE", "3");
    set("COSCHED_PEERS", "10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000");
    set("COSCHED_JOB", "from-env");
    let cli = Cli::try_parse_from(["cosched-synth"]).unwrap();
    assert_eq!((cli.rank, cli.size), (2, 3));
    assert_eq!(
        cli.peers,
        vec!["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"]
    );
    assert_eq!(cli.job, "from-env");

    let cli = Cli::try_parse_from(["cosched-synth", "--rank", "0", "--job", "flag"]).unwrap();
    assert_eq!(cli.rank, 0, "a flag beats the environment");
    assert_eq!(cli.job, "flag");

    unset("COSCHED_RANK");
    let err = Cli::try_parse_from(["cosched-synth"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);

    for name in VARS {
        unset(name);
    }
    let cli = Cli::try_parse_from([
        "cosched-synth",
        "--rank",
        "0",
        "--size",
        "1",
        "--peers",
        "h:1",
    ])
    .unwrap();
    assert_eq!(cli.job, "job", "default job name without COSCHED_JOB");
}
