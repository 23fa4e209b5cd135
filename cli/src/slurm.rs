//! `cosched slurm-hook`: Slurm's SrunProlog, TaskProlog and SrunEpilog, so
//! a user's own `srun` step becomes a coscheduled job without changing the
//! user's command line (see docs/launchers.md, "Slurm").
//!
//! Slurm runs the same program in three places and says which in
//! `SLURM_SCRIPT_CONTEXT`:
//!
//! - `prolog_srun` (on the submit host, as the user, with srun's
//!   environment, before the step's tasks start): attach the step to the
//!   coordinator as job `slurm-<job>.<step>` on the job's nodes;
//! - `prolog_task` (on each node, before each task execs, with the task's
//!   pid in `SLURM_TASK_PID`): join the task to that job at the node's agent
//!   (found by name; or by `COSCHED_ATTACHED_JOB` when the step runs under
//!   `cosched attach`);
//! - `epilog_srun` (submit host, after the step): detach the job if it is
//!   still active (a rank that never joined would otherwise hold its row).
//!
//! This module decides what to do from the environment (pure); the binary
//! talks to the coordinator and the agent.

use std::fmt;

/// The job name of a Slurm step at the coordinator and the agents.
pub fn step_name(job: &str, step: &str) -> String {
    format!("slurm-{job}.{step}")
}

/// Which steps are coscheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Every step, unless the user sets `COSCHED_SLURM=off`.
    #[default]
    All,
    /// Only steps whose environment has `COSCHED_SLURM=on`.
    OptIn,
}

/// What to do when the coordinator or the agent cannot take the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// Warn and let the step run unmanaged (not coscheduled).
    #[default]
    RunUnmanaged,
    /// Fail the hook, so Slurm aborts the step (srun prolog) or the task
    /// (task prolog).
    Fail,
}

/// The user's switch in the step's environment.
pub const SWITCH_ENV: &str = "COSCHED_SLURM";

/// How the task prolog finds the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobRef {
    /// `COSCHED_ATTACHED_JOB`: the step runs under `cosched attach`.
    Id(u32),
    /// Attached by this hook's srun prolog under this name.
    Name(String),
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobRef::Id(id) => write!(f, "job {id}"),
            JobRef::Name(name) => write!(f, "job {name:?}"),
        }
    }
}

/// What the hook does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing (with the reason, for `--verbose`).
    Skip(String),
    /// Attach the step to the coordinator.
    Attach {
        name: String,
        nodes: Vec<String>,
        command: Vec<String>,
    },
    /// Join the task's process to the job at this node's agent.
    Join { job: JobRef, pid: u32 },
    /// Detach the step's job if it is still active.
    Detach { name: String },
}

/// What the hook should do, from the environment (`get`) and, for the
/// srun prolog, the step's command line (`args`). An error is a broken
/// environment (not called by Slurm, a malformed variable).
pub fn decide(
    mode: Mode,
    get: impl Fn(&str) -> Option<String>,
    args: &[String],
) -> Result<Action, String> {
    let context = get("SLURM_SCRIPT_CONTEXT").ok_or(
        "SLURM_SCRIPT_CONTEXT is not set: run this as Slurm's SrunProlog, TaskProlog or SrunEpilog",
    )?;
    let switch = get(SWITCH_ENV).unwrap_or_default().to_ascii_lowercase();
    let wanted = match (mode, switch.as_str()) {
        (_, "off" | "0" | "no") => false,
        (Mode::All, _) => true,
        (Mode::OptIn, on) => matches!(on, "on" | "1" | "yes"),
    };
    if !wanted {
        return Ok(Action::Skip(format!(
            "not coscheduled ({SWITCH_ENV}={switch:?}, mode {mode:?})"
        )));
    }
    let need = |var: &str| get(var).ok_or(format!("{var} is not set in the {context} environment"));
    let attached = get(crate::attach::JOB_ENV);
    match context.as_str() {
        "prolog_srun" | "epilog_srun" if attached.is_some() => Ok(Action::Skip(
            "the step runs under `cosched attach`, which attached it".into(),
        )),
        "prolog_srun" => {
            let name = step_name(&need("SLURM_JOB_ID")?, &need("SLURM_STEP_ID")?);
            let nodes = expand_hostlist(&need("SLURM_NODELIST")?)?;
            Ok(Action::Attach {
                name,
                nodes,
                command: args.to_vec(),
            })
        }
        "epilog_srun" => Ok(Action::Detach {
            name: step_name(&need("SLURM_JOB_ID")?, &need("SLURM_STEP_ID")?),
        }),
        "prolog_task" => {
            let pid = need("SLURM_TASK_PID")?
                .parse()
                .map_err(|_| "SLURM_TASK_PID is not a pid".to_string())?;
            let job =
                match attached {
                    Some(id) => JobRef::Id(id.parse().map_err(|_| {
                        format!("{}={id:?} is not a job id", crate::attach::JOB_ENV)
                    })?),
                    None => {
                        let Some(step) = get("SLURM_STEP_ID") else {
                            return Ok(Action::Skip("no step id: the batch script's task".into()));
                        };
                        // The batch script and the extern step are no srun step:
                        // no srun prolog attached them.
                        if !step.parse::<u32>().is_ok_and(|s| s < 0xffff_fff0) {
                            return Ok(Action::Skip(format!("step {step} is no srun step")));
                        }
                        JobRef::Name(step_name(&need("SLURM_JOB_ID")?, &step))
                    }
                };
            Ok(Action::Join { job, pid })
        }
        other => Ok(Action::Skip(format!(
            "nothing to do in Slurm context {other:?}"
        ))),
    }
}

/// Expands a Slurm host list (`n[0-3,7],login1,gpu[01-02]`) into names, in
/// order, as `scontrol show hostnames` does (zero padding kept).
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let bad = |why: &str| format!("bad Slurm host list {list:?}: {why}");
    let mut names = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item: a prefix, optionally a [ranges] part, up to a top-level comma.
        let end = match (rest.find(','), rest.find('[')) {
            (Some(comma), Some(open)) if open < comma => {
                let close = rest[open..].find(']').ok_or_else(|| bad("no closing ]"))? + open;
                rest[close..].find(',').map_or(rest.len(), |c| c + close)
            }
            (Some(comma), _) => comma,
            (None, _) => rest.len(),
        };
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or(&rest[end..]);
        match item.split_once('[') {
            None if item.is_empty() => return Err(bad("empty name")),
            None => names.push(item.to_string()),
            Some((prefix, tail)) => {
                let (ranges, suffix) = tail.split_once(']').ok_or_else(|| bad("no closing ]"))?;
                for range in ranges.split(',') {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    let width = lo.len();
                    let lo: u64 = lo.parse().map_err(|_| bad("a range bound is no number"))?;
                    let hi: u64 = hi.parse().map_err(|_| bad("a range bound is no number"))?;
                    if hi < lo || hi - lo > 100_000 {
                        return Err(bad("a range runs backwards or is too long"));
                    }
                    for n in lo..=hi {
                        names.push(format!("{prefix}{n:0width$}{suffix}"));
                    }
                }
            }
        }
    }
    if names.is_empty() {
        return Err(bad("no hosts"));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn host_lists_expand_like_scontrol_show_hostnames() {
        assert_eq!(expand_hostlist("n[0-1]").unwrap(), ["n0", "n1"]);
        assert_eq!(
            expand_hostlist("n[0-1,5],login,gpu[08-10]").unwrap(),
            ["n0", "n1", "n5", "login", "gpu08", "gpu09", "gpu10"]
        );
        assert_eq!(expand_hostlist("n3").unwrap(), ["n3"]);
        assert_eq!(expand_hostlist("rack[1-2]a").unwrap(), ["rack1a", "rack2a"]);
        for bad in ["", "n[1-", "n[3-1]", "n[a-b]", "a,,b"] {
            assert!(expand_hostlist(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_srun_step_is_attached_by_its_job_and_step_id_on_the_jobs_nodes() {
        let get = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_srun"),
            ("SLURM_JOB_ID", "42"),
            ("SLURM_STEP_ID", "3"),
            ("SLURM_NODELIST", "n[0-1]"),
        ]);
        let args = vec!["./pingpong".to_string()];
        assert_eq!(
            decide(Mode::All, &get, &args).unwrap(),
            Action::Attach {
                name: "slurm-42.3".into(),
                nodes: vec!["n0".into(), "n1".into()],
                command: args,
            }
        );
    }

    #[test]
    fn each_task_joins_the_step_by_name_with_its_own_pid() {
        let get = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_task"),
            ("SLURM_JOB_ID", "42"),
            ("SLURM_STEP_ID", "3"),
            ("SLURM_TASK_PID", "777"),
        ]);
        assert_eq!(
            decide(Mode::All, &get, &[]).unwrap(),
            Action::Join {
                job: JobRef::Name("slurm-42.3".into()),
                pid: 777
            }
        );
    }

    #[test]
    fn under_cosched_attach_the_tasks_join_its_job_and_srun_attaches_nothing() {
        let task = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_task"),
            ("SLURM_TASK_PID", "777"),
            ("COSCHED_ATTACHED_JOB", "9"),
        ]);
        assert_eq!(
            decide(Mode::All, &task, &[]).unwrap(),
            Action::Join {
                job: JobRef::Id(9),
                pid: 777
            }
        );
        let prolog = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_srun"),
            ("COSCHED_ATTACHED_JOB", "9"),
        ]);
        assert!(matches!(
            decide(Mode::All, &prolog, &[]).unwrap(),
            Action::Skip(_)
        ));
    }

    #[test]
    fn the_user_opts_out_or_in_with_one_variable() {
        let base = [
            ("SLURM_SCRIPT_CONTEXT", "prolog_srun"),
            ("SLURM_JOB_ID", "1"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_NODELIST", "n0"),
        ];
        let with = |switch: Option<&str>| {
            let mut pairs = base.to_vec();
            if let Some(value) = switch {
                pairs.push((SWITCH_ENV, value));
            }
            env(&pairs)
        };
        let attaches = |mode, switch| {
            matches!(
                decide(mode, with(switch), &[]).unwrap(),
                Action::Attach { .. }
            )
        };
        assert!(attaches(Mode::All, None));
        assert!(!attaches(Mode::All, Some("off")));
        assert!(!attaches(Mode::OptIn, None));
        assert!(attaches(Mode::OptIn, Some("on")));
        assert!(!attaches(Mode::OptIn, Some("off")));
    }

    #[test]
    fn the_batch_script_and_extern_steps_are_left_alone() {
        for step in ["4294967291", "batch", "4294967292"] {
            let get = env(&[
                ("SLURM_SCRIPT_CONTEXT", "prolog_task"),
                ("SLURM_JOB_ID", "42"),
                ("SLURM_STEP_ID", step),
                ("SLURM_TASK_PID", "777"),
            ]);
            assert!(
                matches!(decide(Mode::All, &get, &[]).unwrap(), Action::Skip(_)),
                "{step}"
            );
        }
        let batch = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_task"),
            ("SLURM_JOB_ID", "42"),
            ("SLURM_TASK_PID", "777"),
        ]);
        assert!(matches!(
            decide(Mode::All, &batch, &[]).unwrap(),
            Action::Skip(_)
        ));
    }

    #[test]
    fn outside_slurm_or_with_a_broken_environment_it_is_an_error() {
        assert!(decide(Mode::All, env(&[]), &[]).is_err());
        let get = env(&[
            ("SLURM_SCRIPT_CONTEXT", "prolog_task"),
            ("SLURM_TASK_PID", "x"),
            ("SLURM_JOB_ID", "1"),
            ("SLURM_STEP_ID", "0"),
        ]);
        assert!(decide(Mode::All, &get, &[]).is_err());
        let epilog = env(&[
            ("SLURM_SCRIPT_CONTEXT", "epilog_srun"),
            ("SLURM_JOB_ID", "5"),
        ]);
        assert!(decide(Mode::All, &epilog, &[]).is_err(), "no step id");
    }

    #[test]
    fn after_the_step_its_job_is_detached_by_name() {
        let get = env(&[
            ("SLURM_SCRIPT_CONTEXT", "epilog_srun"),
            ("SLURM_JOB_ID", "42"),
            ("SLURM_STEP_ID", "3"),
        ]);
        assert_eq!(
            decide(Mode::All, &get, &[]).unwrap(),
            Action::Detach {
                name: "slurm-42.3".into()
            }
        );
    }
}
