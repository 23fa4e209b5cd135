//! `cosched node timeline` and `cosched timeline`: ask agents to record
//! for a while, then write the recordings as SVG (and JSON) and print a
//! summary.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use cosched_policy::global::OffsetEstimate;
use cosched_proto::timeline::NodeTimeline;
use cosched_timeline::{clock::align_all, record::record_all, summary::summary, svg};

/// What to record and where to write it.
pub struct TimelineArgs {
    pub sockets: Vec<PathBuf>,
    pub seconds: f64,
    pub max_events: Option<u32>,
    pub svg: Option<PathBuf>,
    pub json_file: Option<PathBuf>,
    pub title: Option<String>,
    /// Move every recording onto the coordinator's clock with these
    /// estimates (node name → its offset, `None` before the first one):
    /// for nodes on separate machines.
    pub align: Option<BTreeMap<String, Option<OffsetEstimate>>>,
}

/// The recordings, written where asked; returns the summary text.
pub fn run(args: &TimelineArgs) -> Result<(Vec<NodeTimeline>, String), String> {
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        return Err("--seconds must be a positive number".into());
    }
    if args.sockets.is_empty() {
        return Err("no agent to record: give --agent-socket".into());
    }
    let nodes = record_all(
        &args.sockets,
        Duration::from_secs_f64(args.seconds),
        args.max_events,
    )
    .map_err(|e| e.to_string())?;
    let nodes = match &args.align {
        Some(estimates) => {
            align_all(&nodes, estimates, "coordinator").map_err(|e| e.to_string())?
        }
        None => nodes,
    };
    let title = args.title.clone().unwrap_or_else(|| {
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        format!("cosched timeline: {}", names.join(", "))
    });
    if let Some(path) = &args.svg {
        write(path, &svg::render(&title, &nodes))?;
    }
    if let Some(path) = &args.json_file {
        let json = serde_json::to_string(&nodes).map_err(|e| e.to_string())?;
        write(path, &json)?;
    }
    let text = summary(&nodes);
    Ok((nodes, text))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}
