//! One line per workload: which policy did best and by how much compared
//! with plain Linux. A policy's score in a workload is the geometric mean of
//! the slowdowns of all its rows there (every MPL, every job): slowdowns are
//! ratios, and the geometric mean weighs a halving and a doubling alike.
//! Only policies whose rows all succeeded are ranked, so every score covers
//! the same jobs.
use super::{metrics::geometric_mean, policies::BASELINE, rows::Row};

#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSummary {
    pub workload: String,
    /// `None` when no policy completed the workload.
    pub best: Option<(String, f64)>,
    /// Plain Linux's score, when it completed the workload.
    pub baseline: Option<f64>,
    /// Policies with at least one error row.
    pub failed: Vec<String>,
}

impl WorkloadSummary {
    /// Best score ÷ plain Linux's: below 1 means the best policy beats it.
    pub fn ratio_to_baseline(&self) -> Option<f64> {
        Some(self.best.as_ref()?.1 / self.baseline?)
    }

    pub fn line(&self) -> String {
        let mut line = match (&self.best, self.baseline, self.ratio_to_baseline()) {
            (Some((p, s)), Some(b), Some(r)) => format!(
                "{}: best {p} (slowdown {s:.2}) vs plain Linux {b:.2}: x{r:.2}",
                self.workload
            ),
            (Some((p, s)), _, _) => format!(
                "{}: best {p} (slowdown {s:.2}); plain Linux not measured",
                self.workload
            ),
            (None, _, _) => format!("{}: no policy completed", self.workload),
        };
        if !self.failed.is_empty() {
            line.push_str(&format!(" (failed: {})", self.failed.join(", ")));
        }
        line
    }
}

/// Workloads and policies in the order they first appear in `rows`.
pub fn summarise(rows: &[Row]) -> Vec<WorkloadSummary> {
    let workloads = first_appearance(rows.iter().map(|r| r.workload.as_str()));
    workloads
        .into_iter()
        .map(|w| {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.workload == w).collect();
            let policies = first_appearance(mine.iter().map(|r| r.policy.as_str()));
            let mut scores = Vec::new();
            let mut failed = Vec::new();
            for p in policies {
                let of_policy = mine.iter().filter(|r| r.policy == p);
                if of_policy.clone().all(|r| r.is_ok()) {
                    let score = geometric_mean(of_policy.map(|r| r.slowdown));
                    if score.is_finite() {
                        scores.push((p.to_string(), score));
                    }
                } else {
                    failed.push(p.to_string());
                }
            }
            let baseline = scores.iter().find(|(p, _)| p == BASELINE).map(|s| s.1);
            let best = scores.into_iter().min_by(|a, b| a.1.total_cmp(&b.1));
            WorkloadSummary {
                workload: w.to_string(),
                best,
                baseline,
                failed,
            }
        })
        .collect()
}

fn first_appearance<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for i in items {
        if !seen.contains(&i) {
            seen.push(i);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::super::rows::sample_row;
    use super::*;

    /// The best policy with its score rounded (geometric means go through
    /// logarithms).
    fn best(s: &WorkloadSummary) -> Option<(String, f64)> {
        let (p, v) = s.best.clone()?;
        Some((p, (v * 1e9).round() / 1e9))
    }

    #[test]
    fn names_the_best_policy_and_its_ratio_to_plain_linux() {
        let rows = vec![
            sample_row("fine-spin", "local", 2, "a", 4.0),
            sample_row("fine-spin", "local", 2, "b", 4.0),
            sample_row("fine-spin", "dcs", 2, "a", 2.0),
            sample_row("fine-spin", "dcs", 2, "b", 2.0),
            sample_row("blocking", "local", 2, "a", 2.1),
        ];
        let s = summarise(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!(best(&s[0]), Some(("dcs".into(), 2.0)));
        assert!((s[0].ratio_to_baseline().unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(
            s[0].line(),
            "fine-spin: best dcs (slowdown 2.00) vs plain Linux 4.00: x0.50"
        );
        assert_eq!(best(&s[1]), Some(("local".into(), 2.1)));
    }

    #[test]
    fn policies_with_errors_are_not_ranked_but_named() {
        let mut broken = sample_row("mix", "sb", 2, "a", 1.0);
        broken.status = "error".into();
        let rows = vec![
            sample_row("mix", "local", 2, "a", 3.0),
            sample_row("mix", "sb", 2, "b", 1.0),
            broken,
        ];
        let s = &summarise(&rows)[0];
        assert_eq!(best(s), Some(("local".into(), 3.0)));
        assert_eq!(s.failed, ["sb"]);
        assert!(s.line().ends_with("(failed: sb)"), "{}", s.line());
    }

    #[test]
    fn nothing_completed() {
        let mut r = sample_row("io-heavy", "dcs", 2, "a", 1.0);
        r.status = "error".into();
        assert_eq!(
            summarise(&[r])[0].line(),
            "io-heavy: no policy completed (failed: dcs)"
        );
    }
}
