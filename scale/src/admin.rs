//! The coordinator's admin socket (JSON lines, as the `cosched` CLI speaks
//! it) and its metrics endpoint, read as plain JSON and text.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    time::Duration,
};

use cosched_proto::jsonl::LineClient;
use serde_json::{Value, json};

use crate::ScaleError;

/// One admin request; the `ok` part of the answer.
pub fn call(socket: &Path, request: &Value, timeout: Duration) -> Result<Value, ScaleError> {
    let mut client = LineClient::connect(socket)?;
    let answer: Value = client
        .call(request, timeout)
        .map_err(|error| ScaleError::Msg(format!("admin {request}: {error}")))?;
    match answer.get("ok") {
        Some(ok) => Ok(ok.clone()),
        None => Err(ScaleError::Msg(format!(
            "admin {request} refused: {}",
            answer.get("error").unwrap_or(&answer)
        ))),
    }
}

/// `cosched status` as JSON (`status` object).
pub fn status(socket: &Path) -> Result<Value, ScaleError> {
    Ok(
        call(socket, &json!({"op": "status"}), Duration::from_secs(10))?["status"]["status"]
            .clone(),
    )
}

/// Active jobs (with `all`, recently finished too).
pub fn jobs(socket: &Path, all: bool) -> Result<Vec<Value>, ScaleError> {
    let reply = call(
        socket,
        &json!({"op": "jobs", "all": all}),
        Duration::from_secs(30),
    )?;
    Ok(reply["jobs"]["jobs"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// Submits a job of `nodes` ranks; returns its view.
pub fn submit(
    socket: &Path,
    name: &str,
    nodes: usize,
    timeout: Duration,
) -> Result<Value, ScaleError> {
    let request = json!({
        "op": "submit",
        "job": {"name": name, "nodes": nodes, "command": "/bin/true"},
    });
    Ok(call(socket, &request, timeout)?["submitted"]["job"].clone())
}

/// The text of `GET /metrics`.
pub fn scrape(address: SocketAddr) -> Result<String, ScaleError> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    Ok(text
        .split_once("\r\n\r\n")
        .map_or(text.clone(), |(_, body)| body.to_string()))
}

/// Sum of every sample of metric `name` (all label sets) whose labels
/// contain `label` (empty: any).
pub fn metric_sum(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let metric = series.split('{').next()?;
            (metric == name && series.contains(label)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Every label set of metric `name` with its value.
pub fn metric_series(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            (metric == name).then(|| {
                Some((
                    labels.trim_end_matches('}').to_string(),
                    value.parse().ok()?,
                ))
            })?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP x y\ncosched_wire_rejected_total{reason=\"a\"} 2\ncosched_wire_rejected_total{reason=\"b\"} 3\ncosched_nodes_connected 7\n";

    #[test]
    fn metric_sums_over_labels() {
        assert_eq!(metric_sum(TEXT, "cosched_wire_rejected_total", ""), 5.0);
        assert_eq!(
            metric_sum(TEXT, "cosched_wire_rejected_total", "\"b\""),
            3.0
        );
        assert_eq!(metric_sum(TEXT, "cosched_nodes_connected", ""), 7.0);
        assert_eq!(metric_series(TEXT, "cosched_wire_rejected_total").len(), 2);
    }
}
