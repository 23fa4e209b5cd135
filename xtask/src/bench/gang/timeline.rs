//! Timelines of a bench's runs: while a run's jobs go, every agent of the
//! cluster records the same short window (from the middle of the run), and
//! the picture is written as `timeline-<column>.svg` (with the recordings
//! as `.json`) in a directory: what the demo shows next to its table.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use cosched_proto::timeline::NodeTimeline;

use crate::{cluster::Cluster, progress::say};

/// Where and what to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    pub dir: PathBuf,
    /// The window each recording covers.
    pub window: Duration,
    /// How long after the jobs' launch it starts.
    pub delay: Duration,
}

/// `timeline-<column>` with anything but letters, digits and `-` as `-`.
pub fn file_stem(column: &str) -> String {
    let slug: String = column
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut out = String::from("timeline-");
    for part in slug.split('-').filter(|p| !p.is_empty()) {
        if !out.ends_with('-') {
            out.push('-');
        }
        out.push_str(part);
    }
    out
}

/// Runs `run`, recording every agent of `cluster` meanwhile when `capture`
/// says so; a recording that fails is reported and the run's result kept.
pub fn during<T>(
    cluster: &Cluster,
    capture: Option<&Capture>,
    column: &str,
    title: &str,
    run: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let Some(capture) = capture else {
        return run();
    };
    let sockets: Vec<PathBuf> = cluster
        .nodes
        .iter()
        .map(|n| n.control_socket.clone())
        .collect();
    let (result, recorded) = std::thread::scope(|s| {
        let recording = s.spawn(|| {
            std::thread::sleep(capture.delay);
            cosched_timeline::record::record_all(&sockets, capture.window, None)
        });
        let result = run();
        (result, recording.join())
    });
    match recorded {
        Ok(Ok(nodes)) => {
            if let Err(e) = write(&capture.dir, column, title, &nodes) {
                say("timeline", format!("{column}: {e:#}"));
            }
        }
        Ok(Err(e)) => say("timeline", format!("{column}: no timeline: {e}")),
        Err(_) => say(
            "timeline",
            format!("{column}: the recording thread panicked"),
        ),
    }
    result
}

fn write(dir: &Path, column: &str, title: &str, nodes: &[NodeTimeline]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let stem = file_stem(column);
    let svg = dir.join(format!("{stem}.svg"));
    std::fs::write(&svg, cosched_timeline::render(title, nodes))?;
    std::fs::write(
        dir.join(format!("{stem}.json")),
        serde_json::to_string(nodes)?,
    )?;
    say("timeline", format!("{column}: {}", svg.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_one_word_per_column() {
        assert_eq!(file_stem("local"), "timeline-local");
        assert_eq!(file_stem("gang 10 ms"), "timeline-gang-10-ms");
        assert_eq!(file_stem("DCS (best local)"), "timeline-dcs-best-local");
    }
}
