//! CPU time spent outside a bench while it runs (someone's build, another
//! program): on a 2-core machine that distorts every number, so runs
//! disturbed by it are repeated. Outside time = the machine's busy CPU time
//! minus what the cluster used (its node cgroups: agents and jobs), the
//! coordinator (its /proc stat) and the bench process itself with what it
//! starts outside the nodes (its own cgroup, `bench_cgroup`: charged while
//! they run, so exactly over the run; getrusage of itself and its reaped
//! children where it has none). On a saturated machine outside work adds no
//! busy time but displaces ours, which the difference shows all the same.
//!
//! Busy time is the CPUs' wall time minus their idle, iowait and steal time
//! (/proc/stat), not the sum of its user, system, irq and softirq columns:
//! on this kernel (tick-based CPU accounting) those columns are samples of
//! what each 4 ms tick interrupted, while the cgroups' `usage_usec` is exact:
//! over `bench mpi` runs of ~2 s their sum differed from the exact busy time
//! by -7.9 … +3.9 % of a CPU (the repeat threshold is 10), with a different
//! mean per column (docs/benchmarks.md, session 17). Idle and iowait are
//! exact on a tickless kernel (NO_HZ_IDLE), steal is the hypervisor's count.
//! Interrupt and softirq work is busy time either way: without CONFIG_IRQ_TIME_ACCOUNTING (this
//! kernel) the task it interrupted is charged for it, so it counts as ours
//! when it hits our tasks and as outside when it hits idle CPUs or other
//! programs (with that option tasks are not charged and all of it would
//! count as outside).
use std::{
    path::PathBuf,
    thread,
    time::{Duration, Instant},
};

use crate::{
    bench::{bench_cgroup, local::interrupt::interrupted},
    cluster::Cluster,
    progress::say,
};

/// When a run counts as disturbed and how it is repeated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Retry {
    /// Outside load above which a run is repeated, % of one CPU.
    pub max_outside_percent: f64,
    /// Attempts before the last one is kept whatever its load.
    pub attempts: usize,
    /// Pause before repeating (builds come in bursts).
    pub pause: Duration,
}

impl Retry {
    pub const DEFAULT: Retry = Retry {
        max_outside_percent: 10.0,
        attempts: 8,
        pause: Duration::from_secs(5),
    };
}

/// CPU seconds, cumulative, at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSample {
    pub at: Instant,
    /// CPUs of the machine (its time is `cpus` seconds per wall second).
    pub cpus: u32,
    /// Time the machine's CPUs were not busy: idle, iowait, steal.
    pub not_busy_s: f64,
    /// The cluster's, the coordinator's and the bench's own.
    pub ours_s: f64,
}

/// What to count as ours: the nodes' cgroups, the coordinator and the
/// bench's own cgroup.
#[derive(Clone, Debug, Default)]
pub struct Ours {
    pub cgroups: Vec<PathBuf>,
    pub coordinator_pid: Option<u32>,
    /// The bench's cgroup (`None`: getrusage of the bench instead).
    pub bench_cgroup: Option<PathBuf>,
}

/// CPU seconds, cumulative, of what counts as ours, read at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OursRead {
    /// The nodes' cgroups.
    pub nodes_s: f64,
    /// The coordinator process.
    pub coordinator_s: f64,
    /// True when the coordinator runs in the bench's cgroup (started after
    /// the bench entered it), which counts it already.
    pub coordinator_in_bench_cgroup: bool,
    /// The bench's cgroup, or the bench and its reaped children.
    pub bench_s: f64,
}

impl OursRead {
    /// Each CPU second once.
    pub fn total_s(&self) -> f64 {
        let coordinator = if self.coordinator_in_bench_cgroup {
            0.0
        } else {
            self.coordinator_s
        };
        self.nodes_s + coordinator + self.bench_s
    }
}

impl Ours {
    /// Enters the bench's cgroup if it has not yet (once per process).
    pub fn of(cluster: &Cluster) -> Self {
        Self {
            cgroups: cluster.nodes.iter().map(|n| n.cgroup.clone()).collect(),
            coordinator_pid: cluster.coordinator.as_ref().and_then(|c| c.pid),
            bench_cgroup: bench_cgroup::own().map(PathBuf::from),
        }
    }

    /// Now; `None` when /proc/stat cannot be read.
    pub fn sample(&self) -> Option<CpuSample> {
        let at = Instant::now();
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpus = cpu_count(&stat)?;
        let not_busy_s = not_busy_ticks(&stat)? as f64 / clock_ticks_per_s();
        let read = OursRead {
            nodes_s: self.cgroups.iter().filter_map(|dir| cgroup_s(dir)).sum(),
            coordinator_s: self
                .coordinator_pid
                .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
                .and_then(|t| process_ticks(&t))
                .map_or(0.0, |ticks| ticks as f64 / clock_ticks_per_s()),
            coordinator_in_bench_cgroup: self
                .coordinator_pid
                .zip(self.bench_cgroup.as_deref())
                .is_some_and(|(pid, dir)| bench_cgroup::holds(dir, pid)),
            bench_s: match self.bench_cgroup.as_deref().and_then(cgroup_s) {
                Some(seconds) => seconds,
                None => own_cpu_s(),
            },
        };
        Some(CpuSample {
            at,
            cpus,
            not_busy_s,
            ours_s: read.total_s(),
        })
    }
}

/// CPU seconds charged to a cgroup v2 directory so far.
fn cgroup_s(dir: &std::path::Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    cgroup_usage_us(&text).map(|us| us as f64 / 1e6)
}

/// Outside load between two samples, % of one CPU (NaN when unknown).
pub fn outside_percent(before: Option<CpuSample>, after: Option<CpuSample>) -> f64 {
    let (Some(b), Some(a)) = (before, after) else {
        return f64::NAN;
    };
    let wall = a.at.duration_since(b.at).as_secs_f64();
    if wall <= 0.0 {
        return f64::NAN;
    }
    let busy = f64::from(a.cpus.min(b.cpus)) * wall - (a.not_busy_s - b.not_busy_s);
    let outside = busy - (a.ours_s - b.ours_s);
    (outside.max(0.0) / wall) * 100.0
}

/// Runs `run` until its outside load (`load` of its result) is at most
/// `retry.max_outside_percent`, at most `retry.attempts` times; errors end
/// it at once. `what` names the run in the progress lines.
pub fn undisturbed<R>(
    retry: Retry,
    what: &str,
    mut run: impl FnMut() -> anyhow::Result<R>,
    load: impl Fn(&R) -> f64,
) -> anyhow::Result<R> {
    let mut attempt = 1;
    loop {
        let r = run()?;
        let outside = load(&r);
        let disturbed = outside > retry.max_outside_percent;
        if !disturbed || attempt >= retry.attempts || interrupted() {
            if disturbed {
                say(
                    "bench",
                    format!(
                        "{what}: kept after {attempt} attempts although disturbed ({outside:.0}% of a CPU used outside the bench)"
                    ),
                );
            }
            return Ok(r);
        }
        say(
            "bench",
            format!(
                "{what}: {outside:.0}% of a CPU used outside the bench (a build?); repeating in {} s",
                retry.pause.as_secs()
            ),
        );
        thread::sleep(retry.pause);
        attempt += 1;
    }
}

/// Idle + iowait + steal ticks of the `cpu` line of /proc/stat (user,
/// nice, system, idle, iowait, irq, softirq, steal, ...).
fn not_busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    (fields.len() == 8).then(|| fields[3] + fields[4] + fields[7])
}

/// CPUs listed in /proc/stat (`cpu0`, `cpu1`, ...: the online ones).
fn cpu_count(stat: &str) -> Option<u32> {
    let n = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// `usage_usec` of a cgroup v2 `cpu.stat`.
fn cgroup_usage_us(cpu_stat: &str) -> Option<u64> {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix("usage_usec "))?
        .trim()
        .parse()
        .ok()
}

/// utime + stime (fields 14 and 15) of /proc/PID/stat, in ticks; fields
/// are counted after the command name, which may hold spaces.
fn process_ticks(stat: &str) -> Option<u64> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    // After the name come fields 3 (state), 4, ...: utime is the 12th.
    let utime: u64 = fields.nth(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// CPU time of this process and its reaped children (with every descendant
/// each of them reaped), counted when reaped: the fallback without a cgroup
/// of the bench's own (see `bench_cgroup`).
fn own_cpu_s() -> f64 {
    let usage = |who| {
        // SAFETY: getrusage writes into the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return 0.0;
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_counters() {
        let stat = "cpu  925205 64 351323 883348 3241 0 39745 502 0 0\n\
                    cpu0 1 2 3 4 5 6 7 8 0 0\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 1 2\nctxt 9\n";
        assert_eq!(not_busy_ticks(stat), Some(883348 + 3241 + 502));
        assert_eq!(not_busy_ticks("cpu0 1 2 3\n"), None);
        assert_eq!(cpu_count(stat), Some(2));
        assert_eq!(cpu_count("cpu  1 2 3\n"), None);
        let cpu_stat = "usage_usec 13163378920\nuser_usec 9252690821\n";
        assert_eq!(cgroup_usage_us(cpu_stat), Some(13163378920));
        let proc_stat = "77 (a b) S 1 77 77 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 1 0 9876";
        assert_eq!(process_ticks(proc_stat), Some(281));
    }

    fn sample(at: Instant, not_busy_s: f64, ours_s: f64) -> Option<CpuSample> {
        Some(CpuSample {
            at,
            cpus: 2,
            not_busy_s,
            ours_s,
        })
    }

    #[test]
    fn outside_load_is_the_machine_minus_ours_per_wall_second() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        // 2 CPUs for 2 s, 1 s of it idle: 3 busy CPU seconds, 2.5 of them
        // ours: 25 % of a CPU outside.
        let p = outside_percent(sample(t0, 10.0, 4.0), sample(t1, 11.0, 6.5));
        assert!((p - 25.0).abs() < 1e-9, "{p}");
        // A saturated machine with all of it ours: nothing outside.
        let p = outside_percent(sample(t0, 10.0, 4.0), sample(t1, 10.0, 8.0));
        assert!(p.abs() < 1e-9, "{p}");
        // Accounting noise (1 busy CPU second, 1.5 ours) never makes it
        // negative.
        assert_eq!(
            outside_percent(sample(t0, 10.0, 4.0), sample(t1, 13.0, 5.5)),
            0.0
        );
        assert!(outside_percent(None, sample(t1, 1.0, 1.0)).is_nan());
    }

    #[test]
    fn the_benchs_children_count_while_they_run_and_the_coordinator_once() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(2);
        // A launcher that ran 0.4 s before the run is in both reads of the
        // bench's cgroup: it adds nothing to the run (reaped inside the run,
        // getrusage added all of it then). Over the run the bench's cgroup
        // grew by 0.2 s: 2 CPUs for 2 s, 0.5 s idle, 3.5 busy, 3.2 ours.
        let read = |nodes_s, bench_s| OursRead {
            nodes_s,
            coordinator_s: 1.0,
            coordinator_in_bench_cgroup: false,
            bench_s,
        };
        let before = read(10.0, 0.4).total_s();
        let after = read(13.0, 0.6).total_s();
        assert!((before - 11.4).abs() < 1e-9);
        let p = outside_percent(sample(t0, 1.0, before), sample(t1, 1.5, after));
        assert!((p - 15.0).abs() < 1e-9, "{p}");
        // A coordinator the bench started from its cgroup is in that
        // cgroup's usage already: not added a second time.
        let inside = OursRead {
            coordinator_in_bench_cgroup: true,
            ..read(13.0, 0.6)
        };
        assert!((inside.total_s() - 13.6).abs() < 1e-9);
    }

    #[test]
    fn disturbed_runs_are_repeated_and_errors_end_at_once() {
        let retry = Retry {
            pause: Duration::ZERO,
            attempts: 3,
            ..Retry::DEFAULT
        };
        let run = |loads: Vec<f64>| {
            let mut loads = loads.into_iter();
            let mut calls = 0;
            let kept = undisturbed(
                retry,
                "t",
                || {
                    calls += 1;
                    Ok(loads.next().unwrap())
                },
                |l| *l,
            )
            .unwrap();
            (kept, calls)
        };
        assert_eq!(run(vec![2.0]), (2.0, 1));
        assert_eq!(run(vec![50.0, 30.0, 3.0]), (3.0, 3));
        // After the last attempt the run is kept whatever its load.
        assert_eq!(run(vec![50.0, 40.0, 30.0, 1.0]), (30.0, 3));
        // An unknown load (NaN) is not a reason to repeat.
        assert!(run(vec![f64::NAN]).0.is_nan());
        let e = undisturbed(
            retry,
            "t",
            || -> anyhow::Result<f64> { anyhow::bail!("boom") },
            |l| *l,
        );
        assert!(e.is_err());
    }
}
