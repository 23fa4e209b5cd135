//! The text form of a job's class, shared by `cosched submit --class` and
//! `cosched-synth --rt`, so a job and the benchmark that plays it are
//! written the same way.

use std::fmt;
use std::str::FromStr;

use crate::wire::JobClass;

/// What a real-time job declares, per process: a frame is due every
/// `period_ns` (d), `frames` (b) of them per window of b·d, each needing
/// `work_ns` (τ) of CPU. Only the syntax is checked here (and the period,
/// which every later division needs); what can be scheduled is the
/// policy's check at submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtParams {
    pub period_ns: u64,
    pub frames: u32,
    pub work_ns: u64,
}

/// Why a `<period_ns>:<frames>:<work_ns>` text was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtParamsError {
    /// Not three unsigned integers separated by colons (frames below 2^32).
    Format,
    ZeroPeriod,
}

impl fmt::Display for RtParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RtParamsError::Format => f.write_str("use <period_ns>:<frames>:<work_ns>"),
            RtParamsError::ZeroPeriod => f.write_str("the period must be positive"),
        }
    }
}

impl std::error::Error for RtParamsError {}

impl FromStr for RtParams {
    type Err = RtParamsError;

    /// `<period_ns>:<frames>:<work_ns>`, e.g. `10000000:2:1000000`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.split(':').collect();
        let [period, frames, work] = parts.as_slice() else {
            return Err(RtParamsError::Format);
        };
        let number = |value: &str| value.parse::<u64>().map_err(|_| RtParamsError::Format);
        let params = RtParams {
            period_ns: number(period)?,
            frames: u32::try_from(number(frames)?).map_err(|_| RtParamsError::Format)?,
            work_ns: number(work)?,
        };
        if params.period_ns == 0 {
            return Err(RtParamsError::ZeroPeriod);
        }
        Ok(params)
    }
}

impl fmt::Display for RtParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.period_ns, self.frames, self.work_ns)
    }
}

impl From<RtParams> for JobClass {
    fn from(params: RtParams) -> Self {
        JobClass::RealTime {
            period_ns: params.period_ns,
            frames: params.frames,
            work_ns: params.work_ns,
        }
    }
}

/// `be` (best effort, also `best-effort`) or `rt:<period_ns>:<frames>:<work_ns>`.
pub fn parse_class(text: &str) -> Result<JobClass, String> {
    if text == "be" || text == "best-effort" {
        return Ok(JobClass::BestEffort);
    }
    let usage = || format!("bad class {text:?}: use `be` or `rt:<period_ns>:<frames>:<work_ns>`");
    let fields = text.strip_prefix("rt:").ok_or_else(usage)?;
    match fields.parse::<RtParams>() {
        Ok(params) => Ok(params.into()),
        Err(RtParamsError::Format) => Err(usage()),
        Err(err) => Err(format!("bad class {text:?}: {err}")),
    }
}

impl fmt::Display for JobClass {
    /// The text [`parse_class`] reads back: `be` or `rt:<period_ns>:<frames>:<work_ns>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            JobClass::BestEffort => f.write_str("be"),
            JobClass::RealTime {
                period_ns,
                frames,
                work_ns,
            } => write!(f, "rt:{period_ns}:{frames}:{work_ns}"),
        }
    }
}

/// Best effort: the class of a job that names none.
pub fn best_effort() -> JobClass {
    JobClass::BestEffort
}

/// A class as its text in JSON (`"class": "rt:10000000:2:1000000"`), for
/// the control socket's job specs and requests:
/// `#[serde(default = "best_effort", with = "crate::class::text")]`.
pub mod text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    use super::{JobClass, parse_class};

    pub fn serialize<S: Serializer>(class: &JobClass, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(class)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<JobClass, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_class(&text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_parse_and_bad_ones_say_the_format() {
        assert_eq!(parse_class("be"), Ok(JobClass::BestEffort));
        assert_eq!(parse_class("best-effort"), Ok(JobClass::BestEffort));
        assert_eq!(
            parse_class("rt:10000000:2:1000000"),
            Ok(JobClass::RealTime {
                period_ns: 10_000_000,
                frames: 2,
                work_ns: 1_000_000
            })
        );
        assert!(
            parse_class("rt:1:2")
                .unwrap_err()
                .contains("rt:<period_ns>")
        );
        assert!(parse_class("gold").is_err());
        assert!(parse_class("rt:0:1:1").unwrap_err().contains("positive"));
        // A negative period is not a number of nanoseconds: the format.
        assert!(
            parse_class("rt:-10000000:2:1000000")
                .unwrap_err()
                .contains("rt:<period_ns>")
        );
    }

    #[test]
    fn rt_params_are_three_numbers_and_print_back_the_same() {
        let params: RtParams = "10000000:2:1000000".parse().unwrap();
        assert_eq!(
            params,
            RtParams {
                period_ns: 10_000_000,
                frames: 2,
                work_ns: 1_000_000
            }
        );
        assert_eq!(params.to_string(), "10000000:2:1000000");
        for bad in [
            "",
            "1:2",
            "1:2:3:4",
            "a:1:1",
            "1:-1:1",
            "-10000000:2:1000000",
            "10000000:2:-1",
            "1:4294967296:1",
            "1::1",
        ] {
            assert_eq!(
                bad.parse::<RtParams>(),
                Err(RtParamsError::Format),
                "{bad:?}"
            );
        }
        assert_eq!("0:1:1".parse::<RtParams>(), Err(RtParamsError::ZeroPeriod));
        assert!(
            RtParamsError::Format
                .to_string()
                .contains("<period_ns>:<frames>:<work_ns>")
        );
    }

    #[test]
    fn a_class_prints_as_the_text_that_parses_back() {
        for class in [
            JobClass::BestEffort,
            JobClass::RealTime {
                period_ns: 5_000_000,
                frames: 4,
                work_ns: 1_000_000,
            },
        ] {
            assert_eq!(parse_class(&class.to_string()), Ok(class));
        }
    }
}
