//! A few lines of text about recordings: per node and job, time on CPU and
//! spinning, the agent's level changes and the slice switches.
use std::fmt::Write as _;

use cosched_proto::timeline::NodeTimeline;

use crate::model::NodeIntervals;

pub fn summary(nodes: &[NodeTimeline]) -> String {
    let mut s = String::new();
    for t in nodes {
        let i = NodeIntervals::of(t);
        let window_ms = (i.window.end_ns - i.window.start_ns) as f64 / 1e6;
        let _ = writeln!(
            s,
            "{}: {:.1} ms, {} switches, {} slice switches{}{}",
            t.node,
            window_ms,
            t.switches.len(),
            i.slices.len(),
            if t.truncated {
                ", truncated at the event cap"
            } else {
                ""
            },
            if t.lost > 0 {
                format!(", {} records lost", t.lost)
            } else {
                String::new()
            }
        );
        if let Some(clock) = &t.clock {
            let _ = writeln!(
                s,
                "  on the {} clock: offset {:+.1} µs ± {:.1} µs",
                clock.reference,
                clock.offset_ns as f64 / 1e3,
                clock.uncertainty_ns as f64 / 1e3
            );
        }
        for job in i.jobs() {
            let name = t
                .jobs
                .iter()
                .find(|j| j.job_id == job)
                .map_or_else(|| format!("job {job}"), |j| j.name.clone());
            let spin_ns: u64 = i
                .spinning
                .iter()
                .filter(|(cpu, span)| {
                    i.runs.iter().any(|r| {
                        r.cpu == *cpu
                            && r.start_ns <= span.start_ns
                            && span.end_ns <= r.end_ns
                            && matches!(r.holder, crate::model::Holder::Job { job: j, .. } if j == job)
                    })
                })
                .map(|(_, span)| span.end_ns - span.start_ns)
                .sum();
            let actions = t
                .actions
                .iter()
                .filter(|a| a.job == job && a.ts_ns > t.start_ns)
                .count();
            let _ = writeln!(
                s,
                "  {name} ({job}): on CPU {:.1} ms ({:.0} %), spinning {:.1} ms, {actions} level changes",
                i.oncpu_ns(job) as f64 / 1e6,
                if window_ms > 0.0 {
                    i.oncpu_ns(job) as f64 / 1e6 / window_ms * 100.0
                } else {
                    0.0
                },
                spin_ns as f64 / 1e6,
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use cosched_proto::timeline::{Switch, TimelineJob};

    use super::*;

    #[test]
    fn the_summary_names_each_node_and_job_with_its_share_of_the_cpu() {
        let t = NodeTimeline {
            node: "n0".into(),
            cpus: vec![0],
            start_ns: 0,
            end_ns: 10_000_000,
            jobs: vec![TimelineJob {
                job_id: 7,
                name: "ring".into(),
            }],
            switches: vec![Switch {
                ts_ns: 5_000_000,
                cpu: 0,
                prev_tid: 0,
                prev_job: 0,
                next_tid: 70,
                next_job: 7,
            }],
            ..NodeTimeline::default()
        };
        let s = summary(&[t]);
        assert!(s.starts_with("n0: 10.0 ms, 1 switches"), "{s}");
        assert!(s.contains("ring (7): on CPU 5.0 ms (50 %)"), "{s}");
    }
}
