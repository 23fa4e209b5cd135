//! `[classes] edf = "deadline"` for real: the kernel refuses SCHED_DEADLINE
//! to a task pinned narrower than its root domain, so a node pinned to one
//! CPU needs an exclusive cpuset of its own (what `cargo xtask cluster up
//! --exclusive-cpusets` makes with `xtask::cluster::cpusets`). Inside one,
//! an RT rank of a 2DCS-PS agent must run at SCHED_DEADLINE and the agent
//! must say so; afterwards the cpusets are gone and the hierarchy's root
//! balances again (a pinned task is refused SCHED_DEADLINE again).
use std::{io, time::Duration};

use cosched_integration_tests::{
    agent::{AgentOpts, TestAgent},
    coord::exclusive,
    pair::{job_info, watch},
    proc::{online_cpus, pin_current_thread, sched_of, threads_of},
    require_root, synth,
};
use xtask::cluster::cpusets;

const SCHED_DEADLINE: i32 = 6;

/// Undoes the cpusets even when an assertion fails half-way.
struct Cpusets {
    balance_was: String,
    removed: bool,
}

impl Cpusets {
    fn remove(&mut self) -> (usize, usize) {
        self.removed = true;
        cpusets::remove(Some(&self.balance_was)).expect("removing the test's cpusets")
    }
}

impl Drop for Cpusets {
    fn drop(&mut self) {
        if !self.removed {
            let _ = cpusets::remove(Some(&self.balance_was));
        }
    }
}

/// `sched_setattr(SCHED_DEADLINE)` on a new thread pinned to `cpu` (put
/// back to SCHED_OTHER when accepted).
fn pinned_thread_gets_deadline(cpu: u32) -> io::Result<()> {
    #[repr(C)]
    #[derive(Default)]
    struct Attr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let set = |attr: &Attr| -> io::Result<()> {
        // SAFETY: a SCHED_ATTR_SIZE_VER0 struct with its size set.
        let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const Attr, 0u32) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    std::thread::spawn(move || {
        pin_current_thread(&[cpu]);
        let size = std::mem::size_of::<Attr>() as u32;
        set(&Attr {
            size,
            policy: SCHED_DEADLINE as u32,
            runtime: 100_000,
            deadline: 100_000_000,
            period: 100_000_000,
            ..Attr::default()
        })?;
        set(&Attr {
            size,
            ..Attr::default()
        })
    })
    .join()
    .expect("probe thread")
}

#[test]
fn an_rt_rank_runs_at_sched_deadline_in_an_exclusive_cpuset_and_everything_is_restored_after() {
    require_root();
    let _serial = exclusive();
    // Mounted here when the machine has not (CI's fresh machine may not).
    if let Err(e) = cpusets::ensure_hierarchy() {
        panic!("cannot give a node its own root domain on this machine: {e:#}");
    }
    let leftovers = cpusets::leftovers();
    assert!(
        leftovers.is_empty(),
        "cpusets of a cluster exist ({leftovers:?}): run `cargo xtask cluster down` first"
    );
    // The last CPU, away from CPU 0 where most of the machine runs.
    let cpu = online_cpus() - 1;
    let balance_was = cpusets::root_balance().unwrap();
    let mut guard = Cpusets {
        balance_was: balance_was.clone(),
        removed: false,
    };
    cpusets::create(&[("n0".to_string(), cpu as usize)])
        .unwrap_or_else(|e| panic!("could not create an exclusive cpuset for CPU {cpu}: {e:#}"));
    let dir = cpusets::node_dir("n0");

    // The agent starts inside the node's cpuset; its ranks inherit it.
    let script = r#"echo $$ > "$0/cgroup.procs" && exec "$@""#;
    let dir_arg = dir.display().to_string();
    let mut agent = TestAgent::start_under(
        AgentOpts {
            cpus: vec![cpu],
            extra: "[classes]\nmode = \"ps\"\nedf = \"deadline\"\n",
            ..AgentOpts::default()
        },
        &["sh", "-c", script, &dir_arg],
    );
    assert!(
        agent.log().contains("EDF mechanism: SCHED_DEADLINE"),
        "the agent in an exclusive cpuset should find SCHED_DEADLINE accepted:\n{}",
        agent.log()
    );
    let (period_ns, frames, work_ns) = (10_000_000, 2, 500_000);
    let spec = synth::rt_video(period_ns, frames, work_ns);
    let pid = agent.launch(spec);
    let at_deadline = watch(Duration::from_secs(5), || {
        threads_of(pid)
            .into_iter()
            .find(|&tid| sched_of(tid).is_ok_and(|s| s.policy == SCHED_DEADLINE))
    });
    assert!(
        at_deadline.is_some(),
        "no thread of the RT rank was seen at SCHED_DEADLINE within 5 s (the kernel refused it, \
         or the agent did not ask)\n{}",
        agent.log()
    );
    let info = job_info(&agent, 1);
    let rt = info.rt.expect("an RT job");
    assert_eq!(rt.processes[0].sched, "deadline", "{}", agent.log());
    assert_eq!(
        agent.metric("cosched_rt_edf_mechanism", &["mechanism=\"deadline\""]),
        1.0,
        "{}",
        agent.metrics()
    );
    assert_eq!(
        agent.metric("cosched_rt_deadline_refused_total", &[]),
        0.0,
        "{}",
        agent.log()
    );
    agent.wait(1, Duration::from_secs(20));
    assert_eq!(agent.stop(), Some(0), "{}", agent.log());

    let (moved, removed) = guard.remove();
    assert_eq!(moved, 0, "the agent and its rank left with their processes");
    assert_eq!(removed, 2, "the cluster's cpuset and the node's");
    assert!(cpusets::leftovers().is_empty());
    assert_eq!(cpusets::root_balance().unwrap(), balance_was);
    if online_cpus() > 1 {
        let error = pinned_thread_gets_deadline(cpu)
            .expect_err("one root domain again: a pinned task is refused SCHED_DEADLINE");
        assert_eq!(error.raw_os_error(), Some(libc::EPERM), "{error}");
    }
}
