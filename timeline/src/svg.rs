//! Laying nodes' intervals out on one clock ([`scene`]) and writing the
//! result as SVG ([`Scene::to_svg`]). Pure: the layout is a list of
//! rectangles, lines and labels that tests check directly.
//!
//! Per node, one above the other: a lane per CPU (which job's process held
//! it, in the job's colour; grey for anything else; hatched where the task
//! was in a spin episode), then a thin lane per job with the agent's levels
//! for its tasks (boost, background, demote, stop), and dashed lines where
//! the coordinator's slices switched on that node, labelled with the jobs
//! of the new slice.
use std::{collections::BTreeMap, fmt::Write as _};

use cosched_proto::{job::JobId, timeline::NodeTimeline};

use crate::model::{Holder, NodeIntervals, Span};

/// The colours of jobs, in order of job id.
pub const JOB_COLOURS: [&str; 8] = [
    "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
];
/// Anything that is not a managed job.
pub const OTHER_COLOUR: &str = "#e3e3e3";

/// The colour of an agent level.
pub fn level_colour(level: &str) -> &'static str {
    match level {
        "boost" => "#d62728",
        "background" => "#c7a500",
        "demote" => "#7f7f7f",
        "stop" => "#222222",
        _ => "#ffffff",
    }
}

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 110.0;
const RIGHT: f64 = 20.0;
const TITLE_H: f64 = 26.0;
const LEGEND_H: f64 = 22.0;
const NODE_HEAD_H: f64 = 18.0;
const CPU_LANE_H: f64 = 26.0;
const JOB_LANE_H: f64 = 9.0;
const LANE_GAP: f64 = 3.0;
const NODE_GAP: f64 = 14.0;
const AXIS_H: f64 = 34.0;

#[derive(Clone, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub fill: String,
    /// What it shows: `run`, `other`, `spin`, `level`, `legend`.
    pub kind: &'static str,
    /// Tooltip (None: none).
    pub title: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
    /// `slice`, `tick`, `axis`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Text {
    pub x: f64,
    pub y: f64,
    pub text: String,
    /// `start`, `middle` or `end`.
    pub anchor: &'static str,
    pub size: f64,
}

/// What the SVG draws.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scene {
    pub width: f64,
    pub height: f64,
    pub rects: Vec<Rect>,
    pub lines: Vec<Line>,
    pub texts: Vec<Text>,
}

impl Scene {
    /// The rectangles of one kind.
    pub fn rects_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Rect> + 'a {
        self.rects.iter().filter(move |r| r.kind == kind)
    }

    pub fn to_svg(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">"#,
            w = self.width,
            h = self.height
        );
        s.push_str(
            r##"<defs><pattern id="spin" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="4" fill="#ffffff" fill-opacity="0.6"/></pattern></defs>
<rect width="100%" height="100%" fill="#ffffff"/>
"##,
        );
        for r in &self.rects {
            let fill = if r.kind == "spin" {
                "url(#spin)"
            } else {
                r.fill.as_str()
            };
            let _ = write!(
                s,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}""#,
                num(r.x),
                num(r.y),
                num(r.w),
                num(r.h),
                fill
            );
            match &r.title {
                Some(t) => {
                    let _ = writeln!(s, "><title>{}</title></rect>", escape(t));
                }
                None => s.push_str("/>\n"),
            }
        }
        for l in &self.lines {
            let style = match l.kind {
                "slice" => r##"stroke="#000000" stroke-width="1" stroke-dasharray="3,2""##,
                "tick" => r##"stroke="#999999" stroke-width="0.5""##,
                _ => r##"stroke="#000000" stroke-width="1""##,
            };
            let _ = writeln!(
                s,
                r#"<line x1="{}" y1="{}" x2="{}" y2="{}" {style}/>"#,
                num(l.x1),
                num(l.y1),
                num(l.x2),
                num(l.y2)
            );
        }
        for t in &self.texts {
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" font-size="{}" text-anchor="{}">{}</text>"#,
                num(t.x),
                num(t.y),
                num(t.size),
                t.anchor,
                escape(&t.text)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn num(v: f64) -> String {
    let r = (v * 100.0).round() / 100.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A step of 1, 2 or 5 × 10^k ms giving at most about 10 ticks over `ms`.
fn tick_step_ms(ms: f64) -> f64 {
    if ms <= 0.0 || !ms.is_finite() {
        return 1.0;
    }
    let raw = ms / 10.0;
    let base = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * base)
}

/// Job names by id over every node (the first name wins).
fn job_names(nodes: &[NodeTimeline]) -> BTreeMap<JobId, String> {
    let mut names = BTreeMap::new();
    for n in nodes {
        for j in &n.jobs {
            names.entry(j.job_id).or_insert_with(|| j.name.clone());
        }
    }
    names
}

/// Lays out `nodes` one above the other on their common clock (the
/// earliest start to the latest end: CLOCK_MONOTONIC, which the nodes of a
/// one-machine cluster share) under `title`.
pub fn scene(title: &str, nodes: &[NodeTimeline]) -> Scene {
    let intervals: Vec<NodeIntervals> = nodes.iter().map(NodeIntervals::of).collect();
    let names = job_names(nodes);
    let mut jobs: Vec<JobId> = intervals.iter().flat_map(NodeIntervals::jobs).collect();
    jobs.extend(names.keys().copied());
    jobs.sort_unstable();
    jobs.dedup();
    // Jobs that never ran nor were acted on get no colour of their own.
    jobs.retain(|j| intervals.iter().any(|i| i.jobs().contains(j)));
    let colour = |job: JobId| -> &'static str {
        let i = jobs.iter().position(|j| *j == job).unwrap_or(0);
        JOB_COLOURS[i % JOB_COLOURS.len()]
    };
    let name = |job: JobId| -> String {
        names
            .get(&job)
            .map_or_else(|| format!("job {job}"), |n| format!("{n} ({job})"))
    };
    let t0 = intervals
        .iter()
        .map(|i| i.window.start_ns)
        .min()
        .unwrap_or(0);
    let t1 = intervals
        .iter()
        .map(|i| i.window.end_ns)
        .max()
        .unwrap_or(t0)
        .max(t0 + 1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let x_of = |ns: u64| LEFT + (ns.saturating_sub(t0)) as f64 / (t1 - t0) as f64 * plot_w;
    let ms = |ns: u64| ns.saturating_sub(t0) as f64 / 1e6;
    let mut sc = Scene {
        width: WIDTH,
        ..Scene::default()
    };
    sc.texts.push(Text {
        x: LEFT,
        y: 18.0,
        text: title.to_string(),
        anchor: "start",
        size: 14.0,
    });
    legend(&mut sc, &jobs, &colour, &name);
    let mut y = TITLE_H + LEGEND_H;
    for (iv, t) in intervals.iter().zip(nodes) {
        let top = y;
        let mut head = format!(
            "{}: {:.1} ms",
            iv.node,
            ms(iv.window.end_ns) - ms(iv.window.start_ns)
        );
        if t.truncated {
            head.push_str(", truncated at the event cap");
        }
        if t.lost > 0 {
            let _ = write!(head, ", {} records lost", t.lost);
        }
        sc.texts.push(Text {
            x: 4.0,
            y: y + 12.0,
            text: head,
            anchor: "start",
            size: 11.0,
        });
        y += NODE_HEAD_H;
        for &cpu in &iv.cpus {
            sc.texts.push(Text {
                x: LEFT - 6.0,
                y: y + CPU_LANE_H / 2.0 + 4.0,
                text: format!("cpu {cpu}"),
                anchor: "end",
                size: 11.0,
            });
            for r in iv.runs.iter().filter(|r| r.cpu == cpu) {
                let (fill, kind, who) = match r.holder {
                    Holder::Job { job, tid } => (
                        colour(job).to_string(),
                        "run",
                        format!("{} tid {tid}", name(job)),
                    ),
                    Holder::Other => (OTHER_COLOUR.to_string(), "other", "other or idle".into()),
                };
                sc.rects.push(Rect {
                    x: x_of(r.start_ns),
                    y,
                    w: x_of(r.end_ns) - x_of(r.start_ns),
                    h: CPU_LANE_H,
                    fill,
                    kind,
                    title: Some(format!(
                        "{who}: {:.3}-{:.3} ms",
                        ms(r.start_ns),
                        ms(r.end_ns)
                    )),
                });
            }
            for (_, s) in iv.spinning.iter().filter(|(c, _)| *c == cpu) {
                sc.rects.push(Rect {
                    x: x_of(s.start_ns),
                    y,
                    w: x_of(s.end_ns) - x_of(s.start_ns),
                    h: CPU_LANE_H,
                    fill: String::new(),
                    kind: "spin",
                    title: None,
                });
            }
            y += CPU_LANE_H + LANE_GAP;
        }
        for job in iv.jobs() {
            sc.texts.push(Text {
                x: LEFT - 6.0,
                y: y + JOB_LANE_H - 1.0,
                text: names
                    .get(&job)
                    .cloned()
                    .unwrap_or_else(|| format!("job {job}")),
                anchor: "end",
                size: 9.0,
            });
            sc.rects.push(Rect {
                x: LEFT,
                y: y + JOB_LANE_H / 2.0 - 0.5,
                w: plot_w,
                h: 1.0,
                fill: colour(job).into(),
                kind: "lane",
                title: None,
            });
            for l in iv.levels.iter().filter(|l| l.job == job) {
                sc.rects.push(level_rect(l, y, &x_of, &ms, &name));
            }
            y += JOB_LANE_H + LANE_GAP;
        }
        for (ts, active) in &iv.slices {
            let x = x_of(*ts);
            sc.lines.push(Line {
                x1: x,
                y1: top + NODE_HEAD_H - 2.0,
                x2: x,
                y2: y - LANE_GAP,
                kind: "slice",
            });
            let label = match active {
                None => "all".to_string(),
                Some(a) if a.is_empty() => "none".to_string(),
                Some(a) => a
                    .iter()
                    .map(|j| names.get(j).cloned().unwrap_or_else(|| j.to_string()))
                    .collect::<Vec<_>>()
                    .join("+"),
            };
            sc.texts.push(Text {
                x: x + 2.0,
                y: top + NODE_HEAD_H - 4.0,
                text: label,
                anchor: "start",
                size: 8.0,
            });
        }
        y += NODE_GAP;
    }
    axis(&mut sc, y, t0, t1, &x_of);
    sc.height = y + AXIS_H;
    sc
}

fn level_rect(
    l: &crate::model::LevelSpan,
    y: f64,
    x_of: &impl Fn(u64) -> f64,
    ms: &impl Fn(u64) -> f64,
    name: &impl Fn(JobId) -> String,
) -> Rect {
    let Span { start_ns, end_ns } = l.span;
    Rect {
        x: x_of(start_ns),
        y,
        w: (x_of(end_ns) - x_of(start_ns)).max(0.5),
        h: JOB_LANE_H,
        fill: level_colour(&l.level).into(),
        kind: "level",
        title: Some(format!(
            "{} tid {}: {} {:.3}-{:.3} ms",
            name(l.job),
            l.tid,
            l.level,
            ms(start_ns),
            ms(end_ns)
        )),
    }
}

fn legend(
    sc: &mut Scene,
    jobs: &[JobId],
    colour: &impl Fn(JobId) -> &'static str,
    name: &impl Fn(JobId) -> String,
) {
    let y = TITLE_H + 4.0;
    let mut x = LEFT;
    let mut item = |sc: &mut Scene, fill: &str, label: String, spin: bool| {
        sc.rects.push(Rect {
            x,
            y,
            w: 12.0,
            h: 10.0,
            fill: fill.into(),
            kind: "legend",
            title: None,
        });
        if spin {
            sc.rects.push(Rect {
                x,
                y,
                w: 12.0,
                h: 10.0,
                fill: String::new(),
                kind: "spin",
                title: None,
            });
        }
        let width = 22.0 + 5.5 * label.chars().count() as f64;
        sc.texts.push(Text {
            x: x + 16.0,
            y: y + 9.0,
            text: label,
            anchor: "start",
            size: 10.0,
        });
        x += width;
    };
    for &j in jobs {
        item(sc, colour(j), name(j), false);
    }
    item(sc, OTHER_COLOUR, "other/idle".into(), false);
    if let Some(&first) = jobs.first() {
        item(sc, colour(first), "spinning".into(), true);
    }
    for level in ["boost", "demote", "stop"] {
        item(sc, level_colour(level), level.into(), false);
    }
}

fn axis(sc: &mut Scene, y: f64, t0: u64, t1: u64, x_of: &impl Fn(u64) -> f64) {
    let total_ms = (t1 - t0) as f64 / 1e6;
    let step = tick_step_ms(total_ms);
    sc.lines.push(Line {
        x1: LEFT,
        y1: y,
        x2: WIDTH - RIGHT,
        y2: y,
        kind: "axis",
    });
    let mut k = 0.0;
    while k <= total_ms + 1e-9 {
        let ns = t0 + (k * 1e6) as u64;
        let x = x_of(ns);
        sc.lines.push(Line {
            x1: x,
            y1: y,
            x2: x,
            y2: y + 4.0,
            kind: "tick",
        });
        sc.texts.push(Text {
            x,
            y: y + 15.0,
            text: num(k),
            anchor: "middle",
            size: 10.0,
        });
        k += step;
    }
    sc.texts.push(Text {
        x: WIDTH - RIGHT,
        y: y + 29.0,
        text: "ms (CLOCK_MONOTONIC, from the earliest start)".into(),
        anchor: "end",
        size: 10.0,
    });
}

/// The SVG of `nodes` under `title`.
pub fn render(title: &str, nodes: &[NodeTimeline]) -> String {
    scene(title, nodes).to_svg()
}

#[cfg(test)]
mod tests {
    use cosched_proto::timeline::{Action, Slice, Switch, TimelineJob};

    use super::*;

    fn jobs() -> Vec<TimelineJob> {
        vec![
            TimelineJob {
                job_id: 1,
                name: "ring-a".into(),
            },
            TimelineJob {
                job_id: 2,
                name: "ring-b".into(),
            },
        ]
    }

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

    /// A node whose CPU runs job 1 for the first half of 10 ms, job 2 after.
    fn halves(node: &str, start_ns: u64) -> NodeTimeline {
        NodeTimeline {
            node: node.into(),
            cpus: vec![0],
            start_ns,
            end_ns: start_ns + 10_000_000,
            jobs: jobs(),
            switches: vec![sw(start_ns + 5_000_000, (11, 1), (22, 2))],
            ..NodeTimeline::default()
        }
    }

    #[test]
    fn two_jobs_on_one_cpu_give_two_run_rectangles_in_their_own_colours_splitting_the_plot() {
        let sc = scene("t", &[halves("n0", 1_000)]);
        let runs: Vec<&Rect> = sc.rects_of("run").collect();
        assert_eq!(runs.len(), 2);
        let plot_w = WIDTH - LEFT - RIGHT;
        assert_eq!((runs[0].x, runs[0].w), (LEFT, plot_w / 2.0));
        assert_eq!((runs[1].x, runs[1].w), (LEFT + plot_w / 2.0, plot_w / 2.0));
        assert_eq!(runs[0].fill, JOB_COLOURS[0]);
        assert_eq!(runs[1].fill, JOB_COLOURS[1]);
        assert!(
            runs[0]
                .title
                .as_deref()
                .unwrap()
                .starts_with("ring-a (1) tid 11")
        );
        assert!(
            runs[1]
                .title
                .as_deref()
                .unwrap()
                .starts_with("ring-b (2) tid 22")
        );
        let svg = sc.to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("ring-a (1)") && svg.contains("cpu 0"));
    }

    #[test]
    fn zero_events_draw_one_grey_lane_and_no_job() {
        let t = NodeTimeline {
            node: "n0".into(),
            cpus: vec![0],
            start_ns: 0,
            end_ns: 1_000_000,
            ..NodeTimeline::default()
        };
        let sc = scene("empty", &[t]);
        assert_eq!(sc.rects_of("run").count(), 0);
        assert_eq!(sc.rects_of("other").count(), 1);
        assert_eq!(sc.rects_of("level").count(), 0);
        assert!(sc.to_svg().contains("other/idle"));
        // And no nodes at all is still a picture.
        assert!(render("nothing", &[]).contains("</svg>"));
    }

    #[test]
    fn nodes_share_one_clock_and_stack_from_top_to_bottom() {
        // n1 started recording 10 ms after n0: its runs sit in the right half.
        let sc = scene("two", &[halves("n0", 0), halves("n1", 10_000_000)]);
        let runs: Vec<&Rect> = sc.rects_of("run").collect();
        assert_eq!(runs.len(), 4);
        let mid = LEFT + (WIDTH - LEFT - RIGHT) / 2.0;
        assert_eq!(runs[0].x, LEFT);
        assert_eq!(runs[2].x, mid);
        assert!(runs[2].y > runs[0].y, "n1 is below n0");
        // Same job, same colour on both nodes.
        assert_eq!(runs[0].fill, runs[2].fill);
    }

    #[test]
    fn boosts_demotions_and_slice_switches_are_drawn_with_labels() {
        let mut t = halves("n0", 0);
        t.actions = vec![
            Action {
                ts_ns: 0,
                tid: 22,
                job: 2,
                level: "demote".into(),
            },
            Action {
                ts_ns: 5_000_000,
                tid: 22,
                job: 2,
                level: "boost".into(),
            },
            Action {
                ts_ns: 6_000_000,
                tid: 22,
                job: 2,
                level: "normal".into(),
            },
        ];
        t.slices = vec![Slice {
            ts_ns: 5_000_000,
            active: Some(vec![2]),
            number: None,
        }];
        let sc = scene("acts", &[t]);
        let levels: Vec<&str> = sc.rects_of("level").map(|r| r.fill.as_str()).collect();
        assert_eq!(levels, [level_colour("demote"), level_colour("boost")]);
        let slices: Vec<&Line> = sc.lines.iter().filter(|l| l.kind == "slice").collect();
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].x1, LEFT + (WIDTH - LEFT - RIGHT) / 2.0);
        assert!(sc.texts.iter().any(|t| t.text == "ring-b"));
    }

    #[test]
    fn overlapping_recordings_of_one_node_keep_every_run_inside_the_plot() {
        // Switches out of order and one outside the window.
        let mut t = halves("n0", 0);
        t.switches.push(sw(20_000_000, (22, 2), (11, 1)));
        t.switches.insert(0, sw(2_000_000, (11, 1), (11, 1)));
        let sc = scene("o", &[t]);
        for r in sc.rects_of("run").chain(sc.rects_of("other")) {
            assert!(r.x >= LEFT && r.x + r.w <= WIDTH - RIGHT + 1e-9, "{r:?}");
        }
        assert_eq!(sc.rects_of("run").count(), 2);
    }

    #[test]
    fn ticks_are_1_2_or_5_times_a_power_of_ten() {
        assert_eq!(tick_step_ms(100.0), 10.0);
        assert_eq!(tick_step_ms(2000.0), 200.0);
        assert_eq!(tick_step_ms(35.0), 5.0);
        assert_eq!(tick_step_ms(0.0), 1.0);
    }

    #[test]
    fn labels_are_escaped() {
        let mut t = halves("n<0>", 0);
        t.jobs[0].name = "a&b".into();
        let svg = render("x", &[t]);
        assert!(svg.contains("n&lt;0&gt;") && svg.contains("a&amp;b"));
    }
}
