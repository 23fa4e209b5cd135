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
                match job.queue_position {
                    Some(position) => format!("queued#{position}"),
                    None => job.state.as_str().to_string(),
                },
                if job.nodes.is_empty() {
                    format!("({} wanted)", job.nodes_wanted)
                } else {
                    job.nodes.join(",")
                },
                job.row.map_or_else(|| "-".into(), |row| row.to_string()),
                format!("{}{}", job.class, if job.exclusive { ",excl" } else { "" }),
                percent(job.cpu_percent),
                percent(job.predicted_percent),
                job.pair
                    .clone()
                    .or_else(|| job.reason.clone())
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    render(
        &[
            "ID",
            "NAME",
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
            let mut line = vec![format!("{row}{marker}")];
            line.extend(
                cells
                    .iter()
                    .map(|cell| cell.map_or_else(|| ".".into(), |job| job.to_string())),
            );
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
        "(* = running now) alternates: {}",
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
    format!(
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
    )
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
            cpu_percent: Some(42.04),
            predicted_percent: Some(40.0),
            prediction: None,
            pair: Some("row 1 (40.0%) paired with row 0 (30.0%)".into()),
            port: Some(20003),
            ranks: vec![],
            reason: None,
            submitted_unix_ms: 0,
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
        };
        let text = matrix(&view);
        assert!(text.contains("1*   2   ."), "{text}");
        assert!(text.contains("queue: 5"), "{text}");
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
