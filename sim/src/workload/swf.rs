//! Standard Workload Format traces (Feitelson's Parallel Workloads Archive):
//! one job per line, 18 whitespace-separated numeric fields, `-1` for
//! unknown, `;` starts a header comment.
//!
//! Used here: 1 job number, 2 submit time (s), 4 run time (s), 5 allocated
//! processors (or 8, requested processors, when 5 is unknown). A job without a
//! usable run time or processor count (cancelled before it ran) is skipped and
//! counted; a malformed line is an error naming the line.

use std::fmt;

/// Fields in an SWF line.
pub const SWF_FIELDS: usize = 18;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SwfError {
    #[error("line {line}: {found} fields, an SWF line has {SWF_FIELDS}")]
    FieldCount { line: usize, found: usize },
    #[error("line {line}: field {field} ({name}) is not a number: {text:?}")]
    NotANumber {
        line: usize,
        field: usize,
        name: &'static str,
        text: String,
    },
    #[error("line {line}: submit time {value} is negative")]
    NegativeSubmit { line: usize, value: f64 },
    #[error("the trace holds no usable job")]
    Empty,
}

/// A usable job of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfJob {
    pub id: u64,
    pub submit_s: f64,
    pub run_s: f64,
    pub processors: u32,
}

/// The usable jobs, sorted by submit time, and how many were skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct SwfTrace {
    pub jobs: Vec<SwfJob>,
    pub skipped: usize,
}

impl fmt::Display for SwfTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} jobs ({} skipped)", self.jobs.len(), self.skipped)
    }
}

const NAMES: [&str; SWF_FIELDS] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average cpu time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
];

/// Parses a whole trace.
pub fn parse_swf(text: &str) -> Result<SwfTrace, SwfError> {
    let mut jobs = Vec::new();
    let mut skipped = 0;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let content = raw.split(';').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content.split_whitespace().collect();
        if fields.len() != SWF_FIELDS {
            return Err(SwfError::FieldCount {
                line,
                found: fields.len(),
            });
        }
        let mut values = [0f64; SWF_FIELDS];
        for (field, text) in fields.iter().enumerate() {
            values[field] = text
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| SwfError::NotANumber {
                    line,
                    field: field + 1,
                    name: NAMES[field],
                    text: (*text).to_owned(),
                })?;
        }
        let submit_s = values[1];
        if submit_s < 0.0 {
            return Err(SwfError::NegativeSubmit {
                line,
                value: submit_s,
            });
        }
        let run_s = values[3];
        let processors = if values[4] > 0.0 {
            values[4]
        } else {
            values[7]
        };
        if run_s <= 0.0 || processors < 1.0 {
            skipped += 1;
            continue;
        }
        jobs.push(SwfJob {
            id: values[0].max(0.0) as u64,
            submit_s,
            run_s,
            processors: processors.min(f64::from(u32::MAX)) as u32,
        });
    }
    if jobs.is_empty() {
        return Err(SwfError::Empty);
    }
    jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s).then(a.id.cmp(&b.id)));
    Ok(SwfTrace { jobs, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "; Version: 2.2\n; MaxProcs: 8\n\
        1 0 5 100 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n\
        \n\
        2 10 0 -1 2 -1 -1 2 50 -1 5 1 1 1 1 1 -1 -1\n\
        3 5 0 30 -1 -1 -1 2 50 -1 1 1 1 1 1 1 -1 -1 ; trailing note\n";

    #[test]
    fn a_trace_is_read_sorted_and_unusable_jobs_are_counted() {
        let trace = parse_swf(GOOD).unwrap();
        assert_eq!(trace.skipped, 1, "job 2 has no run time");
        assert_eq!(trace.jobs.len(), 2);
        assert_eq!(trace.jobs[0].id, 1);
        assert_eq!(trace.jobs[1].id, 3);
        assert_eq!(
            trace.jobs[1].processors, 2,
            "requested processors stand in for unknown allocated ones"
        );
        assert_eq!(trace.jobs[0].run_s, 100.0);
    }

    #[test]
    fn a_short_line_names_its_line_number() {
        let err = parse_swf("; c\n1 0 5 100 4\n").unwrap_err();
        assert_eq!(err, SwfError::FieldCount { line: 2, found: 5 });
    }

    #[test]
    fn a_word_where_a_number_belongs_names_the_field() {
        let err = parse_swf("1 0 5 ten 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n").unwrap_err();
        assert!(
            matches!(
                err,
                SwfError::NotANumber {
                    line: 1,
                    field: 4,
                    name: "run time",
                    ..
                }
            ),
            "{err}"
        );
        let err = parse_swf("1 0 5 1 NaN -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n").unwrap_err();
        assert!(matches!(err, SwfError::NotANumber { field: 5, .. }));
    }

    #[test]
    fn negative_submit_and_empty_traces_are_refused() {
        let err = parse_swf("1 -3 5 1 4 -1 -1 4 200 -1 1 1 1 1 1 1 -1 -1\n").unwrap_err();
        assert!(matches!(err, SwfError::NegativeSubmit { line: 1, .. }));
        assert_eq!(
            parse_swf("; only a header\n\n").unwrap_err(),
            SwfError::Empty
        );
    }
}
