//! eBPF overhead benchmark: the time a context switch costs with the agent's
//! programs attached vs not, measured side by side in one run.
//!
//! Workload: two threads of this process pinned to one CPU play ping-pong over
//! two pipes, so every round trip is exactly two context switches on that CPU
//! (pipes, not sockets, so the socket tracepoints do not fire and the number
//! is the cost of the `sched_switch` program alone).
//! Modes, interleaved in every repetition so drift hits all of them alike:
//! - `baseline`: no agent running;
//! - `attached`: an agent running, the ping-pong threads not managed (every
//!   switch runs `sched_switch`, whose map lookups miss);
//! - `managed`: the ping-pong process adopted by the agent (lookups hit and
//!   the per-task counters are updated on every switch);
//! - `recording`: the same while the agent records a timeline (every
//!   switch also queues a timeline record; the agent drains them).
//!
//! The same three modes time the system calls the waiting detectors watch
//! (see [`super::overhead_syscalls`]), by one thread of this process.
use std::{
    io::{Read as _, Write as _},
    path::{Path, PathBuf},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use cosched_proto::timeline::MAX_EVENTS;
use serde::Serialize;

use super::{
    jobs::median,
    overhead_syscalls::{CALLS, CallCost, SyscallLoop},
    solo_agent::SoloAgent,
};

#[derive(Clone, Debug, Serialize)]
pub struct OverheadReport {
    pub round_trips_per_sample: u64,
    pub repetitions: usize,
    pub cpu: usize,
    /// Median ns per context switch in each mode.
    pub baseline_ns_per_switch: f64,
    pub attached_ns_per_switch: f64,
    pub managed_ns_per_switch: f64,
    pub recording_ns_per_switch: f64,
    /// Medians of the per-repetition differences to the baseline.
    pub added_ns_attached: f64,
    pub added_ns_managed: f64,
    pub added_ns_recording: f64,
    /// Median switches the recordings held (each sample has
    /// `2 * round_trips_per_sample` of them, plus a few around it).
    pub recorded_switches: f64,
    /// The kernel's own BPF stats: mean run time of `sched_switch` per run
    /// (includes the stats' own timing overhead).
    pub kernel_sched_switch_ns_per_run: f64,
    /// Calls made per system-call sample.
    pub calls_per_sample: u64,
    /// ns per waiting-detector system call, per mode.
    pub syscalls: Vec<CallCost>,
    pub samples: Vec<(String, f64)>,
}

pub(super) fn pin(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid set for the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        bail!("sched_setaffinity: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Two pinned threads that exchange one byte `n` times on request.
struct PingPong {
    go: mpsc::Sender<u64>,
    done: mpsc::Receiver<Duration>,
}

impl PingPong {
    fn start(cpu: usize) -> anyhow::Result<Self> {
        // ping -> pong and pong -> ping.
        let (mut to_pong_rd, mut to_pong_wr) = std::io::pipe()?;
        let (mut to_ping_rd, mut to_ping_wr) = std::io::pipe()?;
        let (go_tx, go_rx) = mpsc::channel::<u64>();
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("pong".into())
            .spawn(move || {
                let _ = pin(cpu);
                let mut byte = [0u8; 1];
                while to_pong_rd.read_exact(&mut byte).is_ok() {
                    if to_ping_wr.write_all(&byte).is_err() {
                        break;
                    }
                }
            })?;
        std::thread::Builder::new()
            .name("ping".into())
            .spawn(move || {
                let _ = pin(cpu);
                let mut byte = [0u8; 1];
                while let Ok(n) = go_rx.recv() {
                    let t0 = Instant::now();
                    for _ in 0..n {
                        if to_pong_wr.write_all(&byte).is_err()
                            || to_ping_rd.read_exact(&mut byte).is_err()
                        {
                            return;
                        }
                    }
                    let _ = done_tx.send(t0.elapsed());
                }
            })?;
        Ok(Self {
            go: go_tx,
            done: done_rx,
        })
    }

    /// ns per context switch over `n` round trips.
    fn measure(&self, n: u64) -> anyhow::Result<f64> {
        self.go.send(n)?;
        let d = self
            .done
            .recv_timeout(Duration::from_secs(120))
            .context("ping-pong stalled")?;
        Ok(d.as_nanos() as f64 / (2 * n) as f64)
    }
}

/// (runs, seconds) of sched_switch from the agent's metrics.
fn sched_switch_cost(agent: &SoloAgent) -> anyhow::Result<(f64, f64)> {
    let text = agent.metrics()?;
    let get = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("program=\"sched_switch\""))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((
        get("cosched_ebpf_program_runs_total"),
        get("cosched_ebpf_program_run_seconds_total"),
    ))
}

/// ns per call of every kind in [`CALLS`].
fn call_costs(sys: &SyscallLoop, calls: u64) -> anyhow::Result<Vec<f64>> {
    CALLS.iter().map(|&c| sys.measure(c, calls)).collect()
}

pub fn run(
    agent_bin: &Path,
    repetitions: usize,
    round_trips: u64,
    cpu: usize,
) -> anyhow::Result<OverheadReport> {
    let dir = tempfile_dir()?;
    let pp = PingPong::start(cpu)?;
    pp.measure(round_trips / 10)?; // warm up
    // Syscalls are cheaper than a switch: more of them per sample.
    let calls = round_trips * 5;
    let sys = SyscallLoop::start(cpu)?;
    call_costs(&sys, calls / 10)?; // warm up
    // Per call kind: (baseline, attached, managed) per repetition.
    let mut per_call: Vec<[Vec<f64>; 3]> = CALLS.iter().map(|_| Default::default()).collect();
    let (mut base, mut att, mut man, mut samples) = (vec![], vec![], vec![], vec![]);
    let (mut d_att, mut d_man) = (vec![], vec![]);
    let (mut rec, mut d_rec, mut recorded) = (vec![], vec![], vec![]);
    let (mut runs, mut secs) = (0.0, 0.0);
    for rep in 0..repetitions {
        let b = pp.measure(round_trips)?;
        let sb = call_costs(&sys, calls)?;
        let agent = SoloAgent::start(agent_bin, &dir, "local")?;
        std::thread::sleep(Duration::from_millis(200));
        let a = pp.measure(round_trips)?;
        let sa = call_costs(&sys, calls)?;
        agent.adopt(1, "pingpong", vec![std::process::id()])?;
        let m = pp.measure(round_trips)?;
        let sm = call_costs(&sys, calls)?;
        for (i, call) in CALLS.iter().enumerate() {
            eprintln!(
                "  rep {}: {}: baseline {:.0} ns, attached {:.0} ns, managed {:.0} ns per call",
                rep + 1,
                call.as_str(),
                sb[i],
                sa[i],
                sm[i]
            );
            for (mode, v) in [sb[i], sa[i], sm[i]].into_iter().enumerate() {
                per_call[i][mode].push(v);
            }
        }
        // Long enough for the sample at twice the managed cost.
        let record_ms = (m * 2.0 * round_trips as f64 * 2.0 / 1e6) as u64 + 300;
        let (rc, timeline) = std::thread::scope(|s| -> anyhow::Result<_> {
            let recording = s.spawn(|| agent.timeline(record_ms, MAX_EVENTS));
            std::thread::sleep(Duration::from_millis(100));
            let rc = pp.measure(round_trips)?;
            let timeline = recording
                .join()
                .map_err(|_| anyhow::anyhow!("recording thread panicked"))??;
            Ok((rc, timeline))
        })?;
        recorded.push(timeline.switches.len() as f64);
        if timeline.truncated || timeline.lost > 0 {
            eprintln!(
                "  rep {}: the recording was truncated or lost records ({} lost)",
                rep + 1,
                timeline.lost
            );
        }
        let (r, s) = sched_switch_cost(&agent)?;
        runs += r;
        secs += s;
        agent.stop();
        eprintln!(
            "  rep {}: baseline {b:.0} ns, attached {a:.0} ns, managed {m:.0} ns, recording {rc:.0} ns per switch ({} switches recorded)",
            rep + 1,
            timeline.switches.len()
        );
        samples.extend([
            ("baseline".to_string(), b),
            ("attached".to_string(), a),
            ("managed".to_string(), m),
            ("recording".to_string(), rc),
        ]);
        d_rec.push(rc - b);
        rec.push(rc);
        d_att.push(a - b);
        d_man.push(m - b);
        base.push(b);
        att.push(a);
        man.push(m);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let syscalls = CALLS
        .iter()
        .zip(per_call)
        .map(|(&call, [b, a, m])| {
            let diff = |x: &[f64]| median(x.iter().zip(&b).map(|(x, b)| x - b).collect::<Vec<_>>());
            CallCost {
                call,
                added_ns_attached: diff(&a),
                added_ns_managed: diff(&m),
                baseline_ns: median(b),
                attached_ns: median(a),
                managed_ns: median(m),
            }
        })
        .collect();
    Ok(OverheadReport {
        round_trips_per_sample: round_trips,
        repetitions,
        cpu,
        baseline_ns_per_switch: median(base),
        attached_ns_per_switch: median(att),
        managed_ns_per_switch: median(man),
        recording_ns_per_switch: median(rec),
        added_ns_attached: median(d_att),
        added_ns_managed: median(d_man),
        added_ns_recording: median(d_rec),
        recorded_switches: median(recorded),
        kernel_sched_switch_ns_per_run: if runs > 0.0 {
            secs * 1e9 / runs
        } else {
            f64::NAN
        },
        calls_per_sample: calls,
        syscalls,
        samples,
    })
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("cosched-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
