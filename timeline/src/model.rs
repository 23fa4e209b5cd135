//! From a node's records to intervals: who held each CPU when, the spin
//! episodes within those runs, and each task's level over time. Pure: the
//! records may come unsorted, with duplicates, or outside the recording's
//! window; every interval is clipped to the window and sorted.
use std::collections::BTreeMap;

use cosched_proto::{job::JobId, timeline::NodeTimeline};

/// What held a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Holder {
    /// A managed task of a job.
    Job { job: JobId, tid: u32 },
    /// Anything that is not a managed job: another process, the agent, or
    /// the idle task.
    Other,
}

/// One stretch of one CPU held by one holder, `[start_ns, end_ns)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub cpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub holder: Holder,
}

/// A stretch of time with no other meaning than its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// A task's level from `start_ns` to `end_ns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelSpan {
    pub job: JobId,
    pub tid: u32,
    pub level: String,
    pub span: Span,
}

/// A node's recording as intervals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeIntervals {
    pub node: String,
    pub window: Span,
    /// The CPUs with a lane: the node's, and any other a record names.
    pub cpus: Vec<u32>,
    /// Per CPU, in time order, not overlapping.
    pub runs: Vec<Run>,
    /// Spinning on a CPU: a task's spin episode while it held the CPU.
    pub spinning: Vec<(u32, Span)>,
    /// Levels other than `normal`, by task.
    pub levels: Vec<LevelSpan>,
    /// The coordinator's slice switches: when, and the jobs of the slice
    /// (None: gang mode off).
    pub slices: Vec<(u64, Option<Vec<JobId>>)>,
}

impl NodeIntervals {
    pub fn of(t: &NodeTimeline) -> Self {
        let window = Span {
            start_ns: t.start_ns,
            end_ns: t.end_ns.max(t.start_ns),
        };
        let mut cpus = t.cpus.clone();
        cpus.extend(t.switches.iter().map(|s| s.cpu));
        cpus.sort_unstable();
        cpus.dedup();
        let runs = runs(t, window, &cpus);
        let episodes = spin_episodes(t, window);
        let spinning = spinning(&runs, &episodes);
        let mut slices: Vec<(u64, Option<Vec<JobId>>)> = t
            .slices
            .iter()
            .filter(|s| s.ts_ns >= window.start_ns && s.ts_ns <= window.end_ns)
            .map(|s| (s.ts_ns, s.active.clone()))
            .collect();
        slices.sort_by_key(|s| s.0);
        slices.dedup();
        Self {
            node: t.node.clone(),
            window,
            cpus,
            runs,
            spinning,
            levels: levels(t, window),
            slices,
        }
    }

    /// The jobs that held a CPU or got a level, in id order.
    pub fn jobs(&self) -> Vec<JobId> {
        let mut jobs: Vec<JobId> = self
            .runs
            .iter()
            .filter_map(|r| match r.holder {
                Holder::Job { job, .. } => Some(job),
                Holder::Other => None,
            })
            .chain(self.levels.iter().map(|l| l.job))
            .collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// Time each job held a CPU, ns.
    pub fn oncpu_ns(&self, job: JobId) -> u64 {
        self.runs
            .iter()
            .filter(|r| matches!(r.holder, Holder::Job { job: j, .. } if j == job))
            .map(|r| r.end_ns - r.start_ns)
            .sum()
    }
}

fn holder(job: JobId, tid: u32) -> Holder {
    if job == 0 {
        Holder::Other
    } else {
        Holder::Job { job, tid }
    }
}

/// Per CPU: before its first switch the CPU ran that switch's `prev`;
/// from each switch on, its `next`, until the next switch or the end.
/// A CPU with no switch at all ran nothing managed.
fn runs(t: &NodeTimeline, window: Span, cpus: &[u32]) -> Vec<Run> {
    let mut out = Vec::new();
    for &cpu in cpus {
        let mut switches: Vec<_> = t.switches.iter().filter(|s| s.cpu == cpu).collect();
        switches.sort_by_key(|s| s.ts_ns);
        let mut at = window.start_ns;
        let mut current = switches
            .first()
            .map_or(Holder::Other, |s| holder(s.prev_job, s.prev_tid));
        let mut lane: Vec<Run> = Vec::new();
        let push = |lane: &mut Vec<Run>, start: u64, end: u64, h: Holder| {
            let (start, end) = (start.max(window.start_ns), end.min(window.end_ns));
            if end <= start {
                return;
            }
            match lane.last_mut() {
                Some(last) if last.holder == h && last.end_ns == start => last.end_ns = end,
                _ => lane.push(Run {
                    cpu,
                    start_ns: start,
                    end_ns: end,
                    holder: h,
                }),
            }
        };
        for s in switches {
            push(&mut lane, at, s.ts_ns, current);
            at = at.max(s.ts_ns);
            current = holder(s.next_job, s.next_tid);
        }
        push(&mut lane, at, window.end_ns, current);
        out.extend(lane);
    }
    out
}

/// Spin episodes per task: from a start to its end, to the task's next
/// start, or to the end of the window.
fn spin_episodes(t: &NodeTimeline, window: Span) -> BTreeMap<u32, Vec<Span>> {
    let mut spins: Vec<_> = t.spins.iter().collect();
    // Starts after ends at the same instant: an episode that ends and a new
    // one that starts at once stay two.
    spins.sort_by_key(|s| (s.ts_ns, s.start));
    let mut open: BTreeMap<u32, u64> = BTreeMap::new();
    let mut out: BTreeMap<u32, Vec<Span>> = BTreeMap::new();
    let close = |out: &mut BTreeMap<u32, Vec<Span>>, tid: u32, start: u64, end: u64| {
        let (start, end) = (start.max(window.start_ns), end.min(window.end_ns));
        if end > start {
            out.entry(tid).or_default().push(Span {
                start_ns: start,
                end_ns: end,
            });
        }
    };
    for s in spins {
        if let Some(start) = open.remove(&s.tid) {
            close(&mut out, s.tid, start, s.ts_ns);
        } else if !s.start {
            // An end whose start came before the window.
            close(&mut out, s.tid, window.start_ns, s.ts_ns);
        }
        if s.start {
            open.insert(s.tid, s.ts_ns);
        }
    }
    for (tid, start) in open {
        close(&mut out, tid, start, window.end_ns);
    }
    out
}

/// The parts of each task's runs inside its spin episodes.
fn spinning(runs: &[Run], episodes: &BTreeMap<u32, Vec<Span>>) -> Vec<(u32, Span)> {
    let mut out = Vec::new();
    for r in runs {
        let Holder::Job { tid, .. } = r.holder else {
            continue;
        };
        for e in episodes.get(&tid).into_iter().flatten() {
            let (start, end) = (e.start_ns.max(r.start_ns), e.end_ns.min(r.end_ns));
            if end > start {
                out.push((
                    r.cpu,
                    Span {
                        start_ns: start,
                        end_ns: end,
                    },
                ));
            }
        }
    }
    out.sort_by_key(|(cpu, s)| (*cpu, *s));
    out
}

/// Each task's level from each action to its next one (or the end);
/// `normal` stretches are left out.
fn levels(t: &NodeTimeline, window: Span) -> Vec<LevelSpan> {
    let mut by_task: BTreeMap<u32, Vec<&cosched_proto::timeline::Action>> = BTreeMap::new();
    for a in &t.actions {
        by_task.entry(a.tid).or_default().push(a);
    }
    let mut out = Vec::new();
    for (tid, mut actions) in by_task {
        actions.sort_by_key(|a| a.ts_ns);
        for (i, a) in actions.iter().enumerate() {
            let end = actions.get(i + 1).map_or(window.end_ns, |n| n.ts_ns);
            let (start, end) = (a.ts_ns.max(window.start_ns), end.min(window.end_ns));
            if a.level == "normal" || end <= start {
                continue;
            }
            out.push(LevelSpan {
                job: a.job,
                tid,
                level: a.level.clone(),
                span: Span {
                    start_ns: start,
                    end_ns: end,
                },
            });
        }
    }
    out.sort_by_key(|l| (l.job, l.span.start_ns, l.tid));
    out
}

#[cfg(test)]
mod tests {
    use cosched_proto::timeline::{Action, Slice, Spin, Switch};

    use super::*;

    fn sw(ts_ns: u64, prev: (u32, JobId), next: (u32, JobId)) -> Switch {
        Switch {
            ts_ns,
            cpu: 0,
            prev_tid: prev.0,
            prev_job: prev.1,
            next_tid: next.0,
            next_job: next.1,
        }
    }

    fn node(switches: Vec<Switch>) -> NodeTimeline {
        NodeTimeline {
            node: "n0".into(),
            cpus: vec![0],
            start_ns: 100,
            end_ns: 200,
            switches,
            ..NodeTimeline::default()
        }
    }

    fn run(start_ns: u64, end_ns: u64, holder: Holder) -> Run {
        Run {
            cpu: 0,
            start_ns,
            end_ns,
            holder,
        }
    }

    const A: Holder = Holder::Job { job: 1, tid: 11 };
    const B: Holder = Holder::Job { job: 2, tid: 22 };

    #[test]
    fn two_jobs_taking_turns_give_alternating_runs_over_the_whole_window() {
        let t = node(vec![
            sw(120, (11, 1), (22, 2)),
            sw(150, (22, 2), (0, 0)),
            sw(170, (0, 0), (11, 1)),
        ]);
        let i = NodeIntervals::of(&t);
        assert_eq!(
            i.runs,
            [
                run(100, 120, A),
                run(120, 150, B),
                run(150, 170, Holder::Other),
                run(170, 200, A),
            ]
        );
        assert_eq!(i.jobs(), [1, 2]);
        assert_eq!((i.oncpu_ns(1), i.oncpu_ns(2)), (50, 30));
    }

    #[test]
    fn no_records_is_one_lane_of_other_and_no_jobs() {
        let i = NodeIntervals::of(&node(vec![]));
        assert_eq!(i.runs, [run(100, 200, Holder::Other)]);
        assert!(i.jobs().is_empty());
        assert!(i.spinning.is_empty() && i.levels.is_empty() && i.slices.is_empty());
    }

    #[test]
    fn unsorted_and_duplicated_switches_give_the_same_runs_as_sorted_ones() {
        let sorted = vec![sw(120, (11, 1), (22, 2)), sw(150, (22, 2), (11, 1))];
        let shuffled = vec![sorted[1], sorted[0], sorted[1]];
        assert_eq!(
            NodeIntervals::of(&node(shuffled)).runs,
            NodeIntervals::of(&node(sorted)).runs
        );
    }

    #[test]
    fn records_outside_the_window_are_clipped_and_a_task_switched_in_again_stays_one_run() {
        let t = node(vec![
            sw(50, (0, 0), (11, 1)),
            sw(130, (11, 1), (11, 1)),
            sw(250, (11, 1), (0, 0)),
        ]);
        assert_eq!(NodeIntervals::of(&t).runs, [run(100, 200, A)]);
    }

    #[test]
    fn spinning_is_drawn_only_while_the_spinner_holds_the_cpu() {
        let mut t = node(vec![sw(120, (11, 1), (22, 2)), sw(150, (22, 2), (11, 1))]);
        // Task 11 spins from 110 to 160: on CPU 110-120 and 150-160.
        t.spins = vec![
            Spin {
                ts_ns: 160,
                tid: 11,
                job: 1,
                start: false,
            },
            Spin {
                ts_ns: 110,
                tid: 11,
                job: 1,
                start: true,
            },
        ];
        let i = NodeIntervals::of(&t);
        let spans: Vec<(u64, u64)> = i
            .spinning
            .iter()
            .map(|(_, s)| (s.start_ns, s.end_ns))
            .collect();
        assert_eq!(spans, [(110, 120), (150, 160)]);
    }

    #[test]
    fn an_episode_open_at_the_end_runs_to_the_end_and_one_ended_before_the_start_is_cut() {
        let mut t = node(vec![sw(100, (0, 0), (11, 1))]);
        t.spins = vec![
            Spin {
                ts_ns: 105,
                tid: 11,
                job: 1,
                start: false,
            },
            Spin {
                ts_ns: 190,
                tid: 11,
                job: 1,
                start: true,
            },
        ];
        let spans: Vec<(u64, u64)> = NodeIntervals::of(&t)
            .spinning
            .iter()
            .map(|(_, s)| (s.start_ns, s.end_ns))
            .collect();
        assert_eq!(spans, [(100, 105), (190, 200)]);
    }

    #[test]
    fn levels_last_until_the_next_action_and_normal_is_not_drawn() {
        let mut t = node(vec![]);
        let act = |ts_ns, level: &str| Action {
            ts_ns,
            tid: 11,
            job: 1,
            level: level.into(),
        };
        t.actions = vec![act(140, "normal"), act(100, "demote"), act(180, "boost")];
        let l: Vec<(String, u64, u64)> = NodeIntervals::of(&t)
            .levels
            .iter()
            .map(|l| (l.level.clone(), l.span.start_ns, l.span.end_ns))
            .collect();
        assert_eq!(l, [("demote".into(), 100, 140), ("boost".into(), 180, 200)]);
    }

    #[test]
    fn slices_in_the_window_are_kept_in_order() {
        let mut t = node(vec![]);
        t.slices = vec![
            Slice {
                ts_ns: 150,
                active: Some(vec![2]),
                number: None,
            },
            Slice {
                ts_ns: 110,
                active: Some(vec![1]),
                number: None,
            },
            Slice {
                ts_ns: 300,
                active: None,
                number: None,
            },
        ];
        let i = NodeIntervals::of(&t);
        assert_eq!(i.slices, [(110, Some(vec![1])), (150, Some(vec![2]))]);
    }
}
