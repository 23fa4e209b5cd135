//! The agents' own CPU time, read from their Prometheus endpoints before and
//! after a run, so every row can say what the policy cost in agent CPU. Read
//! over HTTP (not /proc) because that is what works on a real cluster too.
use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, bail};

use crate::cluster::Cluster;

/// The agent's counter of its own CPU seconds.
pub const AGENT_CPU_METRIC: &str = "cosched_agent_cpu_seconds_total";

/// Every agent's CPU seconds so far, `None` for an agent that did not answer
/// (a missing reading makes the agent CPU figure unknown, not the run fail).
pub fn read_all(cluster: &Cluster) -> Vec<Option<f64>> {
    cluster
        .nodes
        .iter()
        .map(|n| {
            scrape(n.metrics_addr)
                .ok()
                .and_then(|text| metric_sum(&text, AGENT_CPU_METRIC))
        })
        .collect()
}

/// `GET /metrics` as HTTP/1.0 (so the body is never chunked).
pub fn scrape(addr: SocketAddr) -> anyhow::Result<String> {
    let timeout = Duration::from_secs(2);
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("connecting to the metrics endpoint {addr}"))?;
    s.set_read_timeout(Some(timeout))?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: cosched\r\n\r\n")?;
    let mut response = String::new();
    s.read_to_string(&mut response)
        .with_context(|| format!("reading {addr}/metrics"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .with_context(|| format!("malformed HTTP response from {addr}"))?;
    if !head.starts_with("HTTP/1.") || !head.split(' ').nth(1).is_some_and(|c| c == "200") {
        bail!(
            "{addr}/metrics answered {}",
            head.lines().next().unwrap_or("")
        );
    }
    Ok(body.to_string())
}

/// Sum of every sample of metric `name` in Prometheus text format (labelled
/// series included); `None` when it has no sample.
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let value = if let Some(labelled) = rest.strip_prefix('{') {
            labelled.split_once('}').map(|(_, v)| v)
        } else if rest.starts_with(' ') {
            Some(rest)
        } else {
            None // a longer name with this prefix
        };
        if let Some(v) = value
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
        {
            found = Some(found.unwrap_or(0.0) + v);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plain_and_labelled_samples_and_skips_longer_names() {
        let text = "# HELP cosched_agent_cpu_seconds_total CPU\n\
                    # TYPE cosched_agent_cpu_seconds_total counter\n\
                    cosched_agent_cpu_seconds_total 1.25\n\
                    cosched_agent_cpu_seconds_total_extra 100\n\
                    x{job=\"a\"} 2\n\
                    x{job=\"b\"} 3 1700000000\n";
        assert_eq!(metric_sum(text, AGENT_CPU_METRIC), Some(1.25));
        assert_eq!(metric_sum(text, "x"), Some(5.0));
        assert_eq!(metric_sum(text, "missing"), None);
    }
}
