//! `cargo xtask <command>`: see `cargo xtask --help`.

mod commands;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = commands::Cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
