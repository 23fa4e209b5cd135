//! Issue 12's targets for real MPI programs, judged on the rows (a
//! benchmark, not a test: the bench reports them, it does not fail on
//! them):
//! 1. gang: slowdown ≤ 2.1 at MPL 2 and ≤ 3.15 at MPL 3, and below the
//!    library's yield mode;
//! 2. the best local policy ≥ 1.5× better than plain Linux on fine-grain
//!    MPI (ping-pong) at MPL 2;
//! 3. no policy worse than plain Linux by more than 5 %.
use super::rows::MpiRow;

/// One target's verdict.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Target {
    pub name: String,
    /// None: not measurable in this run (columns not run).
    pub met: Option<bool>,
    pub detail: String,
}

impl Target {
    pub fn line(&self) -> String {
        let verdict = match self.met {
            Some(true) => "MET",
            Some(false) => "MISSED",
            None => "NOT MEASURED",
        };
        format!("target {}: {verdict} ({})", self.name, self.detail)
    }
}

fn slowdown(rows: &[MpiRow], lib: &str, w: &str, mpl: u32, col: &str) -> Option<f64> {
    rows.iter()
        .find(|r| {
            r.status == "ok" && r.lib == lib && r.workload == w && r.mpl == mpl && r.column == col
        })
        .map(|r| r.slowdown)
        .filter(|s| s.is_finite())
}

pub fn evaluate(rows: &[MpiRow]) -> Vec<Target> {
    vec![gang(rows), best_local(rows), no_worse(rows)]
}

fn gang(rows: &[MpiRow]) -> Target {
    let gang: Vec<&MpiRow> = rows
        .iter()
        .filter(|r| r.column.starts_with("gang@") && r.status == "ok")
        .collect();
    let name = "gang <= 2.1 (MPL 2), <= 3.15 (MPL 3), below yield".to_string();
    if gang.is_empty() {
        return Target {
            name,
            met: None,
            detail: "no gang column measured in this run".into(),
        };
    }
    let mut misses = Vec::new();
    for r in &gang {
        let bound = if r.mpl == 2 { 2.1 } else { 1.05 * r.mpl as f64 };
        let y = slowdown(rows, &r.lib, &r.workload, r.mpl, "yield");
        if r.slowdown > bound || y.is_some_and(|y| r.slowdown >= y) {
            misses.push(format!(
                "{} {} MPL {}: {:.2}",
                r.lib, r.workload, r.mpl, r.slowdown
            ));
        }
    }
    Target {
        name,
        met: Some(misses.is_empty()),
        detail: if misses.is_empty() {
            format!("{} cells", gang.len())
        } else {
            misses.join("; ")
        },
    }
}

fn best_local(rows: &[MpiRow]) -> Target {
    let name = "best local policy >= 1.5x better than plain Linux, pingpong MPL 2".to_string();
    let mut parts = Vec::new();
    let mut met = None;
    for lib in ["openmpi", "mpich"] {
        let Some(plain) = slowdown(rows, lib, "pingpong", 2, "local") else {
            continue;
        };
        let best = rows
            .iter()
            .filter(|r| {
                r.status == "ok"
                    && r.lib == lib
                    && r.workload == "pingpong"
                    && r.mpl == 2
                    && !["local", "yield", "dedicated"].contains(&r.column.as_str())
                    && !r.column.contains('@')
            })
            .filter(|r| r.slowdown.is_finite())
            .min_by(|a, b| a.slowdown.total_cmp(&b.slowdown));
        if let Some(b) = best {
            let gain = plain / b.slowdown;
            met = Some(met.unwrap_or(true) && gain >= 1.5);
            parts.push(format!(
                "{lib}: {} {:.2} vs local {plain:.2} = {gain:.2}x",
                b.column, b.slowdown
            ));
        }
    }
    Target {
        name,
        met,
        detail: if parts.is_empty() {
            "pingpong at MPL 2 not measured".into()
        } else {
            parts.join("; ")
        },
    }
}

fn no_worse(rows: &[MpiRow]) -> Target {
    let name = "no policy > 5 % worse than plain Linux".to_string();
    let mut checked = 0;
    let mut worse = Vec::new();
    for r in rows.iter().filter(|r| {
        r.status == "ok" && !["local", "dedicated", "yield"].contains(&r.column.as_str())
    }) {
        let Some(plain) = slowdown(rows, &r.lib, &r.workload, r.mpl, "local") else {
            continue;
        };
        checked += 1;
        if r.slowdown > 1.05 * plain {
            worse.push(format!(
                "{} {} MPL {} {}: {:.2} vs {plain:.2}",
                r.lib, r.workload, r.mpl, r.column, r.slowdown
            ));
        }
    }
    Target {
        name,
        met: (checked > 0).then_some(worse.is_empty()),
        detail: if worse.is_empty() {
            format!("{checked} cells")
        } else {
            worse.join("; ")
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lib: &str, w: &str, mpl: u32, col: &str, slowdown: f64) -> MpiRow {
        MpiRow::measured(lib, w, mpl, col, &[slowdown], 1.0)
    }

    #[test]
    fn judges_the_targets_on_the_rows() {
        let rows = vec![
            row("openmpi", "pingpong", 2, "local", 6.0),
            row("openmpi", "pingpong", 2, "dcs", 3.0),
            row("openmpi", "pingpong", 2, "sb", 6.5),
            row("openmpi", "pingpong", 2, "yield", 2.5),
        ];
        let t = evaluate(&rows);
        assert_eq!(t[0].met, None, "no gang rows");
        assert_eq!(t[1].met, Some(true), "{}", t[1].detail);
        assert!(t[1].detail.contains("dcs 3.00"), "{}", t[1].detail);
        assert_eq!(t[2].met, Some(false));
        assert!(t[2].detail.contains("sb"), "{}", t[2].detail);
        let mut with_gang = rows.clone();
        with_gang.push(row("openmpi", "pingpong", 2, "gang@10ms", 2.0));
        assert_eq!(evaluate(&with_gang)[0].met, Some(true));
        with_gang.push(row("openmpi", "pingpong", 2, "yield", 1.9));
        with_gang.retain(|r| !(r.column == "yield" && r.slowdown == 2.5));
        assert_eq!(evaluate(&with_gang)[0].met, Some(false));
    }
}
