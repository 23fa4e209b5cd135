//! `bench rt --timeline DIR`: both agents' timelines of a cell (`cosched
//! timeline`: context switches of managed tasks, the slices as each agent
//! applied them), recorded while the cell runs, for finding where an RT
//! job's frames met its rows (docs/timeline.md).
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, bail};

use crate::cluster::Cluster;

/// The longest recording an agent accepts.
pub const MAX_SECONDS: f64 = 60.0;

/// A recording under way.
pub struct Recording {
    child: Child,
    path: PathBuf,
}

/// Starts recording every node of `cluster` for `seconds` (at most
/// [`MAX_SECONDS`]) into `path` with the `cosched` CLI at `cli`.
pub fn start(
    cluster: &Cluster,
    cli: &Path,
    path: &Path,
    seconds: f64,
) -> anyhow::Result<Recording> {
    let mut command = Command::new(cli);
    command.arg("timeline");
    for node in &cluster.nodes {
        command.arg("--agent-socket").arg(&node.control_socket);
    }
    command
        .arg("--seconds")
        .arg(format!("{:.1}", seconds.clamp(0.1, MAX_SECONDS)))
        .arg("--json-file")
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = command
        .spawn()
        .with_context(|| format!("starting {} timeline", cli.display()))?;
    Ok(Recording {
        child,
        path: path.to_path_buf(),
    })
}

impl Recording {
    /// Waits until the recording is written.
    pub fn finish(self) -> anyhow::Result<PathBuf> {
        let out = self
            .child
            .wait_with_output()
            .context("waiting for cosched timeline")?;
        if !out.status.success() {
            bail!(
                "cosched timeline failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(self.path)
    }
}

/// The file name of a cell's recording.
pub fn file_name(column: &str, admission: &str, mix: &str, rate_per_s: f64) -> String {
    format!(
        "{column}-{admission}-{}-{rate_per_s}.json",
        mix.replace(':', "to")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cells_file_name_has_no_colon() {
        assert_eq!(
            file_name("1gs", "deterministic", "9:1", 2.5),
            "1gs-deterministic-9to1-2.5.json"
        );
    }
}
