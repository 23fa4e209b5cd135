//! The tables `cosched` prints (squeue-like), built as text so they can be
//! tested.

use std::fmt::Write as _;

use cosched_coordinator::admin::protocol::{JobView, MatrixView, NodeView, StatusView};
use cosched_proto::control::{JobInfo, JobState};

/// Left-aligned columns separated by two spaces; the last column is not
/// padded.
fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|title| title.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (index, cell) in cells.into_iter().enumerate() {
            if index == last {
                text.push_str(&cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ", width = widths[index]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header.iter().map(|title| title.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
    out
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |value| format!("{value:.1}"))
}

/// The row (1GS: every row it holds, `+` replicas).
fn rows(job: &JobView) -> String {
    if job.rows_held.is_empty() {
        return job.row.map_or_else(|| "-".into(), |row| row.to_string());
    }
    let list = |rows: &[usize]| {
        rows.iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    if job.replica_rows.is_empty() {
        list(&job.rows_held)
    } else {
        format!("{}+{}", list(&job.rows_held), list(&job.replica_rows))
    }
}

pub fn jobs(jobs: &[JobView]) -> String {
    if jobs.is_empty() {
        return "no jobs\n".into();
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            vec![
                job.id.to_string(),
                job.name.clone(),
                // Who started its processes: the coordinator (submitted) or
                // a launcher of the user's (mpirun, mpiexec, srun) that
                // attached it.
                if job.attached {
                    "attached"
                } else {
                    "submitted"
                }
                .to_string(),
                match job.queue_position {
                    Some(position) => format!("queued#{position}"),
                    None => job.state.as_str().to_string(),
                },
                if job.nodes.is_empty() {
                    format!("({} wanted)", job.nodes_wanted)
                } else {
                    job.nodes.join(",")
                },
                rows(job),
                format!("{}{}", job.class, if job.exclusive { ",excl" } else { "" }),
                percent(job.cpu_percent),
                percent(job.predicted_percent),
                job.pair
                    .clone()
                    .or_else(|| job.reason.clone())
                    .or_else(|| {
                        job.admission
                            .as_ref()
                            .map(|admission| admission.state.clone())
                    })
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    render(
        &[
            "ID",
            "NAME",
            "LAUNCH",
            "STATE",
            "NODES",
            "ROW",
            "CLASS",
            "CPU%",
            "PRED%",
            "PAIR/REASON",
        ],
        &rows,
    )
}

/// One job in detail.
pub fn job(job: &JobView) -> String {
    let mut out = jobs(std::slice::from_ref(job));
    if let Some(prediction) = &job.prediction {
        let _ = writeln!(out, "prediction: {prediction}");
    }
    if let Some(port) = job.port {
        let _ = writeln!(out, "port: {port}");
    }
    if let Some(admission) = &job.admission {
        match &admission.reason {
            Some(reason) => {
                let _ = writeln!(out, "admission: {} ({reason})", admission.state);
            }
            None => {
                let _ = writeln!(out, "admission: {}", admission.state);
            }
        }
    }
    if !job.rows_held.is_empty() {
        let _ = writeln!(
            out,
            "1GS rows: {:?} held, {:?} as replicas",
            job.rows_held, job.replica_rows
        );
    }
    if let Some(guarantee) = &job.guarantee {
        let _ = writeln!(out, "guarantee: {guarantee}");
    }
    if let Some(frames) = &job.frames {
        let _ = writeln!(
            out,
            "frames: {} done; {} due in closed windows, {} met, {} missed ({}) on {} node(s){}",
            frames.frames,
            frames.expected,
            frames.met,
            frames.missed,
            frames.miss_rate_percent.map_or_else(
                || "no window closed yet".into(),
                |rate| format!("{rate:.2}% missed")
            ),
            frames.nodes_reporting,
            frames.work_p95_ns.map_or_else(String::new, |work| format!(
                "; p95 work {:.3} ms per frame",
                work as f64 / 1e6
            ))
        );
    }
    for rank in &job.ranks {
        let _ = writeln!(out, "rank {} on {}: {}", rank.rank, rank.node, rank.state);
    }
    out
}

pub fn matrix(matrix: &MatrixView) -> String {
    let mut header = vec!["ROW"];
    header.extend(matrix.nodes.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = matrix
        .cells
        .iter()
        .enumerate()
        .map(|(row, cells)| {
            let marker = if matrix.active_rows.contains(&row) {
                "*"
            } else {
                ""
            };
            let class = matrix
                .row_classes
                .get(row)
                .map_or_else(String::new, |class| format!(" {class}"));
            let mut line = vec![format!("{row}{marker}{class}")];
            let replica = |node: usize| {
                matrix
                    .replicas
                    .get(row)
                    .and_then(|row| row.get(node))
                    .copied()
                    .unwrap_or(false)
            };
            line.extend(cells.iter().enumerate().map(|(node, cell)| {
                cell.map_or_else(
                    || ".".into(),
                    |job| format!("{job}{}", if replica(node) { "+" } else { "" }),
                )
            }));
            line
        })
        .collect();
    let mut out = render(&header, &rows);
    let list = |jobs: &[u32]| {
        if jobs.is_empty() {
            "none".to_string()
        } else {
            jobs.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let _ = writeln!(
        out,
        "(* = running now{}) alternates: {}",
        if matrix.replicas.is_empty() {
            ""
        } else {
            ", + = replica"
        },
        list(&matrix.alternates)
    );
    let _ = writeln!(out, "queue: {}", list(&matrix.queue));
    out
}

pub fn nodes(nodes: &[NodeView]) -> String {
    let rows: Vec<Vec<String>> = nodes
        .iter()
        .map(|node| {
            vec![
                node.index.to_string(),
                node.name.clone(),
                if node.connected { "up" } else { "down" }.into(),
                node.address.clone().unwrap_or_else(|| "-".into()),
                format!("{:?}", node.cpus),
                node.clock_offset_ns.map_or_else(
                    || "-".into(),
                    |offset| format!("{:.1}", offset as f64 / 1e3),
                ),
                node.clock_uncertainty_ns.map_or_else(
                    || "-".into(),
                    |uncertainty| format!("{:.1}", uncertainty as f64 / 1e3),
                ),
                format!("{:?}", node.jobs),
                node.protocol.clone().unwrap_or_else(|| "-".into()),
                if node.unreaped.is_empty() {
                    "-".into()
                } else {
                    node.unreaped.join(", ")
                },
            ]
        })
        .collect();
    render(
        &[
            "IDX",
            "NAME",
            "STATE",
            "ADDRESS",
            "CPUS",
            "OFFSET_US",
            "+-US",
            "JOBS",
            "PROTOCOL",
            "TO_REAP",
        ],
        &rows,
    )
}

pub fn status(status: &StatusView) -> String {
    let skew = &status.skew;
    let mut out = format!(
        "policy: {}\nslice: {} ms (switches announced {} us ahead)\nepoch: {} ({} slices)\nnodes: {}/{} connected\njobs: {} running, {} queued\nswitch skew over {} slices: p50 {:.1} us, p99 {:.1} us, max {:.1} us\n",
        status.policy,
        status.slice_ms,
        status.switch_lead_us,
        status.epoch,
        status.slices,
        status.nodes_connected,
        status.nodes,
        status.jobs_running,
        status.jobs_queued,
        skew.samples,
        skew.p50_s * 1e6,
        skew.p99_s * 1e6,
        skew.max_s * 1e6,
    );
    let Some(classes) = &status.classes else {
        return out;
    };
    let _ = writeln!(
        out,
        "classes: ratio {} (RT:BE), admission {}, {} RT jobs admitted, {} waiting",
        classes.ratio, classes.admission, classes.rt_jobs_admitted, classes.rt_jobs_waiting
    );
    if let (Some(rt), Some(be)) = (classes.one_gs_rows_rt, classes.one_gs_rows_be) {
        let _ = writeln!(
            out,
            "1GS rows: {rt} RT, {be} BE; an RT job waits at most {} ms",
            classes.rt_max_wait_ms
        );
    }
    if let Some(division) = &classes.division {
        let _ = writeln!(
            out,
            "TDM period {} ms; now division {} ({}, {:.1} ms)",
            classes.tdm_period_ms,
            division.number,
            division.class,
            division.end_ns.saturating_sub(division.start_ns) as f64 / 1e6
        );
        let skew = &status.division_skew;
        let _ = writeln!(
            out,
            "division skew over {} divisions: p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            skew.samples,
            skew.p50_s * 1e6,
            skew.p99_s * 1e6,
            skew.max_s * 1e6
        );
    }
    out
}

/// The jobs one agent manages (`cosched node jobs`).
pub fn agent_jobs(jobs: &[JobInfo]) -> String {
    if jobs.is_empty() {
        return "no jobs\n".into();
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            vec![
                job.job_id.to_string(),
                job.name.clone(),
                job.rank.to_string(),
                match &job.state {
                    JobState::Running => "running".into(),
                    JobState::Exited {
                        signal: Some(signal),
                        ..
                    } => format!("killed (signal {signal})"),
                    JobState::Exited {
                        code: Some(code), ..
                    } => format!("exited ({code})"),
                    JobState::Exited { .. } => "ended".into(),
                },
                job.live_tasks.to_string(),
                format!("{:.2}", job.stats.cpu_seconds),
                if job.pids.is_empty() {
                    "-".into()
                } else {
                    job.pids
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                },
                job.class.clone(),
                rt_summary(job),
            ]
        })
        .collect();
    render(
        &[
            "JOB", "NAME", "RANK", "STATE", "TASKS", "CPU_S", "PIDS", "CLASS", "FRAMES",
        ],
        &rows,
    )
}

/// An RT job's frames: reported, missed of expected over closed windows
/// (miss rate), and each process's state in its open window.
fn rt_summary(job: &JobInfo) -> String {
    let Some(rt) = &job.rt else {
        return "-".into();
    };
    let states: Vec<String> = rt
        .processes
        .iter()
        .map(|p| format!("{}:{}/{}", p.pid, p.state, p.sched))
        .collect();
    format!(
        "{} done, {}/{} missed ({:.1}%) {}",
        rt.frames,
        rt.missed,
        rt.expected,
        rt.miss_rate * 100.0,
        states.join(",")
    )
}

#[cfg(test)]
mod tests {
    use cosched_coordinator::admin::protocol::JobStateView;

    use super::*;

    fn running_job() -> JobView {
        JobView {
            id: 3,
            name: "ring".into(),
            state: JobStateView::Running,
            nodes_wanted: 2,
            nodes: vec!["n0".into(), "n1".into()],
            row: Some(1),
            queue_position: None,
            class: "be".into(),
            exclusive: false,
            attached: false,
            owner: None,
            cpu_percent: Some(42.04),
            predicted_percent: Some(40.0),
            prediction: None,
            pair: Some("row 1 (40.0%) paired with row 0 (30.0%)".into()),
            port: Some(20003),
            ranks: vec![],
            reason: None,
            submitted_unix_ms: 0,
            admission: None,
            rows_held: vec![],
            replica_rows: vec![],
            guarantee: None,
            frames: None,
        }
    }

    #[test]
    fn jobs_table_has_the_squeue_like_columns() {
        let text = jobs(&[running_job()]);
        let mut lines = text.lines();
        let header = lines.next().unwrap();
        for column in [
            "ID", "STATE", "NODES", "ROW", "CLASS", "CPU%", "PRED%", "PAIR",
        ] {
            assert!(header.contains(column), "{header}");
        }
        let row = lines.next().unwrap();
        assert!(row.contains("n0,n1") && row.contains("42.0") && row.contains("paired with"));
    }

    #[test]
    fn attached_jobs_are_told_apart_from_submitted_ones() {
        let attached = JobView {
            id: 8,
            name: "slurm-12.0".into(),
            attached: true,
            ..running_job()
        };
        let text = jobs(&[running_job(), attached]);
        let mut lines = text.lines();
        assert!(lines.next().unwrap().contains("LAUNCH"), "{text}");
        assert!(lines.next().unwrap().contains("submitted"), "{text}");
        let row = lines.next().unwrap();
        assert!(
            row.contains("slurm-12.0") && row.contains("attached"),
            "{text}"
        );
    }

    #[test]
    fn queued_jobs_show_their_position_and_wanted_nodes() {
        let job = JobView {
            state: JobStateView::Queued,
            queue_position: Some(0),
            nodes: vec![],
            row: None,
            cpu_percent: None,
            pair: None,
            ..running_job()
        };
        let text = jobs(&[job]);
        assert!(
            text.contains("queued#0") && text.contains("(2 wanted)"),
            "{text}"
        );
    }

    #[test]
    fn matrix_marks_the_running_row() {
        let view = MatrixView {
            nodes: vec!["n0".into(), "n1".into()],
            cells: vec![vec![Some(1), Some(1)], vec![Some(2), None]],
            active_rows: vec![1],
            alternates: vec![],
            queue: vec![5],
            row_classes: vec![],
            replicas: vec![],
        };
        let text = matrix(&view);
        assert!(text.contains("1*   2   ."), "{text}");
        assert!(text.contains("queue: 5"), "{text}");
    }

    #[test]
    fn a_1gs_matrix_marks_row_classes_and_replicas() {
        let view = MatrixView {
            nodes: vec!["n0".into(), "n1".into()],
            cells: vec![vec![Some(1), Some(1)], vec![Some(1), Some(1)]],
            active_rows: vec![0],
            alternates: vec![],
            queue: vec![],
            row_classes: vec!["rt".into(), "be".into()],
            replicas: vec![vec![false, false], vec![true, true]],
        };
        let text = matrix(&view);
        assert!(text.contains("0* rt  1   1"), "{text}");
        assert!(text.contains("1 be   1+  1+"), "{text}");
        assert!(text.contains("+ = replica"), "{text}");
    }

    #[test]
    fn an_rt_job_shows_its_admission_rows_guarantee_and_frames() {
        use cosched_coordinator::admin::protocol::{AdmissionView, FramesView};
        let job = JobView {
            class: "rt(10000000ns/2x1000000ns)".into(),
            pair: None,
            admission: Some(AdmissionView {
                state: "admitted".into(),
                reason: None,
            }),
            rows_held: vec![0, 1],
            replica_rows: vec![2],
            guarantee: Some("2 of 2 rows needed".into()),
            frames: Some(FramesView {
                nodes_reporting: 2,
                frames: 410,
                expected: 400,
                met: 398,
                missed: 2,
                miss_rate_percent: Some(0.5),
                work_p95_ns: Some(900_000),
            }),
            ..running_job()
        };
        let text = self::job(&job);
        assert!(text.contains("  0,1+2  "), "{text}");
        assert!(text.contains("admission: admitted\n"), "{text}");
        assert!(text.contains("guarantee: 2 of 2 rows needed"), "{text}");
        assert!(
            text.contains("2 missed (0.50% missed) on 2 node(s); p95 work 0.900 ms"),
            "{text}"
        );
        let rejected = JobView {
            admission: Some(AdmissionView {
                state: "rejected".into(),
                reason: Some("evicted: waited 30000 ms".into()),
            }),
            ..job
        };
        assert!(self::job(&rejected).contains("admission: rejected (evicted: waited 30000 ms)"));
    }

    #[test]
    fn status_shows_the_ratio_admission_and_current_division() {
        use cosched_coordinator::admin::protocol::{ClassesStatusView, DivisionView, SkewSummary};
        use cosched_coordinator::policy::GlobalPolicy;
        let view = StatusView {
            policy: GlobalPolicy::TwoDcsTdm,
            slice_ms: 100,
            switch_lead_us: 5000,
            epoch: 2,
            slices: 0,
            nodes_connected: 2,
            nodes: 2,
            jobs_running: 1,
            jobs_queued: 0,
            skew: SkewSummary::default(),
            division_skew: SkewSummary::default(),
            classes: Some(ClassesStatusView {
                ratio: "2:1".into(),
                admission: "deterministic".into(),
                tdm_period_ms: 150,
                rt_max_wait_ms: 30000,
                one_gs_rows_rt: None,
                one_gs_rows_be: None,
                rt_jobs_admitted: 1,
                rt_jobs_waiting: 0,
                division: Some(DivisionView {
                    number: 7,
                    class: "rt".into(),
                    start_ns: 1_000_000_000,
                    end_ns: 1_100_000_000,
                }),
            }),
        };
        let text = status(&view);
        assert!(text.contains("policy: 2dcs-tdm"), "{text}");
        assert!(
            text.contains("ratio 2:1 (RT:BE), admission deterministic"),
            "{text}"
        );
        assert!(text.contains("now division 7 (rt, 100.0 ms)"), "{text}");
    }

    #[test]
    fn agent_jobs_show_state_tasks_and_pids() {
        let job: JobInfo = serde_json::from_str(
            r#"{"job_id":1073741824,"name":"mpi","rank":0,"state":{"state":"running"},
                "pids":[10,11],"live_tasks":3,"stats":{"cpu_seconds":1.5,"spin_seconds":0,
                "messages_observed":0,"receives":0,"empty_receives":0,"sends":0,
                "switches_in":0,"switches_voluntary":0,"switches_preempted":0},
                "stdout":null,"stderr":null}"#,
        )
        .unwrap();
        let table = agent_jobs(&[job]);
        assert!(table.starts_with("JOB"), "{table}");
        assert!(
            table.contains("1073741824  mpi   0     running  3      1.50   10,11  be     -"),
            "{table}"
        );
        assert_eq!(agent_jobs(&[]), "no jobs\n");
    }

    #[test]
    fn agent_jobs_show_an_rt_jobs_frames_and_process_states() {
        let mut job: JobInfo = serde_json::from_str(
            r#"{"job_id":3,"name":"video","rank":0,"state":{"state":"running"},
                "pids":[10],"live_tasks":1,"stats":{"cpu_seconds":0.5,"spin_seconds":0,
                "messages_observed":0,"receives":0,"empty_receives":0,"sends":0,
                "switches_in":0,"switches_voluntary":0,"switches_preempted":0},
                "stdout":null,"stderr":null,"class":"rt:10000000:2:1000000"}"#,
        )
        .unwrap();
        job.rt = Some(cosched_proto::control::RtJobInfo {
            frames: 40,
            expected: 40,
            missed: 2,
            miss_rate: 0.05,
            processes: vec![cosched_proto::control::RtProcessInfo {
                pid: 10,
                state: "due".into(),
                sched: "fifo".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let table = agent_jobs(&[job]);
        assert!(
            table.contains("rt:10000000:2:1000000  40 done, 2/40 missed (5.0%) 10:due/fifo"),
            "{table}"
        );
    }
}
