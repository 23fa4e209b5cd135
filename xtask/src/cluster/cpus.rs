//! The machine's online CPUs, which nodes are pinned to.

use std::fs;

use anyhow::{Context as _, Result, bail};

const ONLINE: &str = "/sys/devices/system/cpu/online";

/// Online CPU numbers in ascending order.
pub fn online() -> Result<Vec<usize>> {
    let text = fs::read_to_string(ONLINE).with_context(|| format!("could not read {ONLINE}"))?;
    parse_cpu_list(&text).with_context(|| format!("unexpected contents of {ONLINE}: {text:?}"))
}

/// Parses the kernel's CPU list format (`0-3,6,8-9`).
fn parse_cpu_list(text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for range in text.trim().split(',').filter(|range| !range.is_empty()) {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse()?, last.parse()?);
        if last < first {
            bail!("descending range {range}");
        }
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_single_cpus() {
        assert_eq!(parse_cpu_list("0-1\n").unwrap(), [0, 1]);
        assert_eq!(parse_cpu_list("0,2-4,7").unwrap(), [0, 2, 3, 4, 7]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }
}
