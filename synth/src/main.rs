//! One rank of a synthetic parallel job. See the library docs.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use cosched_synth::{Cli, Config, RunReport, Session};

fn main() -> ExitCode {
    cosched_synth::clock::mark_process_start();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line with the whole cause chain: launchers collect stderr
            // per rank, and a backtrace would bury the rank and peer named here.
            eprintln!("cosched-synth: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let config = Config::from_cli(&cli).context("invalid configuration")?;
    let session = Session::establish(config)?;
    let config = session.config();
    eprintln!(
        "cosched-synth: job {} rank {}/{} started ({} {} {})",
        config.job,
        config.rank,
        config.size,
        config.pattern.as_str(),
        config.proto.as_str(),
        config.recv.as_str()
    );
    let out = config.out.clone();
    let report = session.run()?;
    eprintln!("{}", report.summary_line());
    write_report(&report, out.as_deref())
}

fn write_report(report: &RunReport, out: Option<&Path>) -> Result<()> {
    let mut json = serde_json::to_string(report).context("serialise the result")?;
    json.push('\n');
    match out {
        Some(path) => {
            fs::write(path, json).with_context(|| format!("write the result to {}", path.display()))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(json.as_bytes())
                .and_then(|()| stdout.flush())
                .context("write the result to stdout")
        }
    }
}
