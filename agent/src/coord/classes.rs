//! The node's side of the BE/RT policies (protocol 1.3), decided without
//! I/O: what `ClassSettings` mean for the class overlay, a `SwitchDivision`
//! as the engine's division, and the `FrameReport` of the coordinator's RT
//! jobs from what the engine counted.

use std::collections::BTreeMap;

use cosched_policy::classes::{Class, Division, DivisionClock, FairnessRatio};
use cosched_proto::{
    job::JobId,
    wire::{ClassSettings, DivisionClass, FrameReport, JobFrames, SwitchDivision},
};

use super::switch::{Announced, ClassPolicy};
use crate::{classes::CoordinatorClasses, engine::RtFrameReport};

/// The terms of the BE/RT policies from the coordinator's last
/// `ClassSettings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassTerms {
    pub ratio: FairnessRatio,
    /// Δ of 2DCS-TDM (also the period of the node's fallback clock).
    pub tdm_period_ns: u64,
}

/// Checks `ClassSettings` beyond the wire's own check: the ratio, and that
/// Δ split x:y leaves both TDM divisions some time.
pub fn check_settings(settings: &ClassSettings) -> Result<ClassTerms, String> {
    let ratio = FairnessRatio::new(settings.ratio_rt, settings.ratio_be)
        .map_err(|error| error.to_string())?;
    DivisionClock::new(settings.tdm_period_ns, ratio, 0).map_err(|error| {
        format!(
            "TDM period {} ns split {}:{}: {error}",
            settings.tdm_period_ns, ratio.rt, ratio.be
        )
    })?;
    Ok(ClassTerms {
        ratio,
        tdm_period_ns: settings.tdm_period_ns,
    })
}

/// What the engine's class overlay must become under `policy` with the
/// coordinator's `terms` (from its last `ClassSettings`). `None`: nothing
/// yet — the 2DCS policies start their mode with the ratio, which follows
/// `SetPolicy` at once.
pub fn class_order(policy: ClassPolicy, terms: Option<ClassTerms>) -> Option<CoordinatorClasses> {
    match (policy, terms) {
        (ClassPolicy::Config, _) => Some(CoordinatorClasses::Config),
        (ClassPolicy::Off, _) => Some(CoordinatorClasses::Off),
        (ClassPolicy::Tdm, Some(terms)) => Some(CoordinatorClasses::Tdm {
            ratio: terms.ratio,
            period_ns: terms.tdm_period_ns,
        }),
        (ClassPolicy::Ps, Some(terms)) => Some(CoordinatorClasses::Ps { ratio: terms.ratio }),
        (ClassPolicy::Tdm | ClassPolicy::Ps, None) => None,
    }
}

/// A division switch as the timing decision sees it: always strict.
pub fn announced(division: &SwitchDivision) -> Announced {
    Announced {
        epoch: division.epoch,
        number: division.division,
        apply_at_ns: division.apply_at_ns,
        strict: true,
    }
}

/// The engine's division for `switch` (instants already in this node's
/// clock).
pub fn division(switch: &SwitchDivision) -> Division {
    Division {
        number: switch.division,
        class: match switch.class {
            DivisionClass::RealTime => Class::RealTime,
            DivisionClass::BestEffort => Class::BestEffort,
        },
        start_ns: switch.apply_at_ns,
        end_ns: switch.ends_at_ns,
    }
}

/// The `FrameReport` entries of the coordinator's jobs (`coordinator_jobs`:
/// job → rank launched here) among what the engine counted. An entry whose
/// counts break the report's invariants (met + missed = expected, met ≤
/// frames) is left out and named in the second list, so one bad count does
/// not make the coordinator refuse the whole report. `ready` is sent only
/// `with_ready` (a coordinator of protocol 1.6 or later), the work's mean
/// and deviation only `with_moments` (1.8 or later).
pub fn frame_entries(
    counted: &[RtFrameReport],
    coordinator_jobs: &BTreeMap<JobId, u32>,
    with_ready: bool,
    with_moments: bool,
) -> (Vec<JobFrames>, Vec<JobId>) {
    let mut entries = Vec::new();
    let mut broken = Vec::new();
    for report in counted {
        if !coordinator_jobs.contains_key(&report.job) {
            continue;
        }
        let entry = JobFrames {
            job_id: report.job,
            frames: report.frames,
            expected: report.totals.expected,
            met: report.totals.met,
            missed: report.totals.missed,
            satisfied: report.satisfied,
            work_p95_ns: report.work_p95_ns,
            work_mean_ns: report
                .work_moments
                .filter(|_| with_moments)
                .map(|m| m.mean_ns),
            work_sd_ns: report
                .work_moments
                .filter(|_| with_moments)
                .map(|m| m.sd_ns),
            ready: with_ready && report.ready,
        };
        let consistent = entry.met.checked_add(entry.missed) == Some(entry.expected)
            && entry.met <= entry.frames;
        if consistent {
            entries.push(entry);
        } else {
            broken.push(report.job);
        }
    }
    (entries, broken)
}

/// `entries` as a report, none when empty.
pub fn frame_report(entries: Vec<JobFrames>) -> Option<FrameReport> {
    (!entries.is_empty()).then_some(FrameReport { jobs: entries })
}

#[cfg(test)]
mod tests {
    use cosched_policy::classes::{FrameTotals, WorkMoments};

    use super::*;

    fn settings(rt: u32, be: u32, period_ns: u64) -> ClassSettings {
        ClassSettings {
            ratio_rt: rt,
            ratio_be: be,
            tdm_period_ns: period_ns,
        }
    }

    fn counted(job: JobId, met: u64, missed: u64, frames: u64, satisfied: bool) -> RtFrameReport {
        RtFrameReport {
            job,
            totals: FrameTotals {
                windows: 1,
                expected: met + missed,
                met,
                missed,
                overruns: 0,
            },
            frames,
            work_p95_ns: Some(900_000),
            work_moments: Some(WorkMoments {
                frames,
                mean_ns: 800_000,
                sd_ns: 50_000,
            }),
            satisfied,
            ready: frames > 0,
        }
    }

    #[test]
    fn settings_give_the_ratio_and_a_period_too_short_to_split_is_refused() {
        assert_eq!(
            check_settings(&settings(2, 1, 150_000_000)),
            Ok(ClassTerms {
                ratio: FairnessRatio::new(2, 1).unwrap(),
                tdm_period_ns: 150_000_000
            })
        );
        let error = check_settings(&settings(2, 1, 1)).unwrap_err();
        assert!(error.contains("TDM period 1 ns"), "{error}");
        let error = check_settings(&settings(0, 1, 150_000_000)).unwrap_err();
        assert!(error.contains("at least 1"), "{error}");
    }

    #[test]
    fn the_2dcs_modes_wait_for_the_ratio_and_the_others_need_none() {
        let ratio = FairnessRatio::new(3, 1).unwrap();
        let terms = ClassTerms {
            ratio,
            tdm_period_ns: 40_000_000,
        };
        assert_eq!(class_order(ClassPolicy::Tdm, None), None);
        assert_eq!(
            class_order(ClassPolicy::Tdm, Some(terms)),
            Some(CoordinatorClasses::Tdm {
                ratio,
                period_ns: 40_000_000
            })
        );
        assert_eq!(
            class_order(ClassPolicy::Ps, Some(terms)),
            Some(CoordinatorClasses::Ps { ratio })
        );
        assert_eq!(
            class_order(ClassPolicy::Off, None),
            Some(CoordinatorClasses::Off)
        );
        assert_eq!(
            class_order(ClassPolicy::Config, Some(terms)),
            Some(CoordinatorClasses::Config)
        );
    }

    #[test]
    fn a_division_keeps_its_number_class_and_instants_and_is_always_strict() {
        let switch = SwitchDivision {
            epoch: 2,
            division: 7,
            class: DivisionClass::BestEffort,
            apply_at_ns: 1_000,
            ends_at_ns: 51_000,
        };
        assert_eq!(
            division(&switch),
            Division {
                number: 7,
                class: Class::BestEffort,
                start_ns: 1_000,
                end_ns: 51_000
            }
        );
        let timing = announced(&switch);
        assert!(timing.strict);
        assert_eq!((timing.epoch, timing.number), (2, 7));
    }

    #[test]
    fn only_the_coordinators_rt_jobs_are_reported_and_inconsistent_counts_are_left_out() {
        let jobs = BTreeMap::from([(4, 0), (5, 1)]);
        let mut bad = counted(5, 3, 1, 2, false);
        bad.totals.expected = 4;
        let (entries, broken) = frame_entries(
            &[
                counted(4, 6, 2, 7, true),
                bad,
                counted(9, 1, 0, 1, true), // launched through the control socket
            ],
            &jobs,
            true,
            true,
        );
        assert_eq!(
            entries,
            vec![JobFrames {
                job_id: 4,
                frames: 7,
                expected: 8,
                met: 6,
                missed: 2,
                satisfied: true,
                work_p95_ns: Some(900_000),
                work_mean_ns: Some(800_000),
                work_sd_ns: Some(50_000),
                ready: true,
            }]
        );
        assert_eq!(broken, vec![5], "met 3 > 2 frames completed");
        assert_eq!(frame_report(Vec::new()), None, "nothing to report");
    }

    #[test]
    fn readiness_is_left_out_for_a_coordinator_that_does_not_know_it() {
        let jobs = BTreeMap::from([(4, 0)]);
        let ready = [counted(4, 0, 0, 1, false)];
        let (new, _) = frame_entries(&ready, &jobs, true, true);
        assert!(new[0].ready);
        let (old, _) = frame_entries(&ready, &jobs, false, false);
        assert!(!old[0].ready, "a 1.5 coordinator refuses unknown fields");
    }

    #[test]
    fn the_works_mean_and_deviation_are_left_out_for_a_coordinator_before_1_8() {
        let jobs = BTreeMap::from([(4, 0)]);
        let counts = [counted(4, 0, 0, 1, false)];
        let (new, _) = frame_entries(&counts, &jobs, true, true);
        assert_eq!(
            (new[0].work_mean_ns, new[0].work_sd_ns),
            (Some(800_000), Some(50_000))
        );
        let (old, _) = frame_entries(&counts, &jobs, true, false);
        assert_eq!(
            (old[0].work_mean_ns, old[0].work_sd_ns),
            (None, None),
            "a 1.7 coordinator refuses unknown fields"
        );
        assert_eq!(old[0].work_p95_ns, Some(900_000));
    }
}
