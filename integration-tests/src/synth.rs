//! Benchmark jobs (`cosched-synth`) as job specs, launched across agents,
//! and their JSON results.
use std::collections::BTreeMap;

use cosched_proto::{control::JobInfo, job::JobSpec};

use crate::agent::TestAgent;

/// One spec per rank; rank r listens on `addrs[r]:port`.
/// The fine-grain job of `bench local`: a ring over `proto` (`udp` or
/// `tcp`), spinning receives, 20 µs of computation per iteration, for
/// `seconds`.
pub fn fine_spin<'a>(proto: &'a str, seconds: &'a str) -> [&'a str; 8] {
    [
        "--proto",
        proto,
        "--recv",
        "spin",
        "--compute-us",
        "20",
        "--duration",
        seconds,
    ]
}

/// A one-rank RT job ("video", job 1): `cosched-synth --rt` with `frames`
/// frames of `work_ns` every `period_ns`, blocking receives, for 3 s;
/// declared to the agent with the same numbers.
pub fn rt_video(period_ns: u64, frames: u32, work_ns: u64) -> JobSpec {
    JobSpec {
        job_id: 1,
        name: "video".into(),
        rank: 0,
        size: 1,
        command: crate::bin("cosched-synth").display().to_string(),
        args: [
            "--rt",
            &format!("{period_ns}:{frames}:{work_ns}"),
            "--recv",
            "block",
            "--duration",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        env: BTreeMap::new(),
        peers: vec![format!("127.0.0.1:{}", crate::free_port())],
        cpus: vec![],
        sched: None,
        class: cosched_proto::wire::JobClass::RealTime {
            period_ns,
            frames,
            work_ns,
        },
    }
}

pub fn specs(job_id: u32, name: &str, addrs: &[&str], port: u16, args: &[&str]) -> Vec<JobSpec> {
    let peers: Vec<String> = addrs.iter().map(|a| format!("{a}:{port}")).collect();
    (0..addrs.len())
        .map(|rank| JobSpec {
            job_id,
            name: name.to_string(),
            rank: rank as u32,
            size: addrs.len() as u32,
            command: crate::bin("cosched-synth").display().to_string(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::new(),
            peers: peers.clone(),
            cpus: vec![],
            sched: None,
            class: cosched_proto::wire::JobClass::BestEffort,
        })
        .collect()
}

/// A job's rank processes, one per node. They are SIGKILLed on drop: an
/// agent that stops hands its jobs back and leaves them running, and they
/// must not outlive the test.
pub struct RunningJob {
    pub job_id: u32,
    /// Main process of rank r (launched by `agents[r]`).
    pub pids: Vec<u32>,
}

impl RunningJob {
    /// Launches rank r of a `cosched-synth` job through `agents[r]`, which
    /// listens on `addrs[r]:port`.
    pub fn launch(
        agents: &[&TestAgent],
        addrs: &[&str],
        job_id: u32,
        port: u16,
        args: &[&str],
    ) -> Self {
        let pids = specs(job_id, &format!("job{job_id}"), addrs, port, args)
            .into_iter()
            .zip(agents)
            .map(|(spec, agent)| agent.launch(spec))
            .collect();
        Self { job_id, pids }
    }

    /// Every thread of every rank alive now.
    pub fn threads(&self) -> Vec<u32> {
        self.pids
            .iter()
            .flat_map(|&pid| crate::proc::threads_of(pid))
            .collect()
    }
}

impl Drop for RunningJob {
    fn drop(&mut self) {
        for &pid in &self.pids {
            // Only our benchmark: the pid may have been reaped and reused.
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "cosched-synth" {
                // SAFETY: plain syscall.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
    }
}

/// The rank's JSON result (the benchmark prints it on stdout).
pub fn result(info: &JobInfo) -> serde_json::Value {
    let path = info
        .stdout
        .as_ref()
        .expect("launched job has a stdout file");
    let text = std::fs::read_to_string(path).expect("reading job stdout");
    let stderr = info
        .stderr
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "job {} rank {} printed no JSON result ({e}); stdout: {text:?}; stderr: {stderr}",
            info.job_id, info.rank
        )
    })
}

pub fn num(v: &serde_json::Value, key: &str) -> f64 {
    v.get(key)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("result has no numeric {key}: {v}"))
}
