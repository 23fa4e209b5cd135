//! Loading, attaching and reading the eBPF programs and maps.
use std::{
    io,
    os::fd::{AsRawFd, OwnedFd, RawFd},
};

use anyhow::{Context as _, bail};
use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{TracePoint, trace_point::TracePointLinkId},
};
use cosched_agent_common::{
    CpuSlot, Drops, Event, MAX_CPUS, Settings, SockOwner, TaskStats, TimelineRecord, WaitKind,
    names,
};

use crate::{
    kernel::{ProgramCost, WaitDetectorState},
    tracefs,
};

/// The eBPF object built by aya-build (empty when built without bpf-linker).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/cosched-probes"));

/// How long the waiting detectors stay attached once no task is tracked
/// (their cost falls on every system call of the machine, their detach
/// takes ~1 s of RCU waits): back-to-back jobs keep them, an idle node
/// sheds them.
pub const DETECTOR_LINGER: std::time::Duration = std::time::Duration::from_secs(10);

/// The loaded programs and the maps the agent uses.
pub struct Probes {
    ebpf: Ebpf,
    tasks: HashMap<MapData, u32, TaskStats>,
    cpus: Array<MapData, CpuSlot>,
    sockets: HashMap<MapData, u64, SockOwner>,
    events: RingBuf<MapData>,
    settings: Array<MapData, Settings>,
    drops: PerCpuArray<MapData, Drops>,
    watch: HashMap<MapData, u32, u32>,
    timeline: RingBuf<MapData>,
    recording: Array<MapData, u32>,
    job_cpu: PerCpuHashMap<MapData, u32, u64>,
    wait_detectors: Vec<WaitDetectorState>,
    /// The waiting detectors' (program, `syscalls` event) pairs.
    detector_hooks: Vec<Hook>,
    /// Their links while attached. A `syscalls` tracepoint with any program
    /// on it sends every system call of every task on the machine through
    /// the kernel's syscall-tracing path (~125–165 ns more per context switch
    /// of the overhead bench's pipe ping-pong, two system calls per switch:
    /// docs/benchmarks.md), so they are attached only while the agent
    /// tracks a task, and for [`DETECTOR_LINGER`] after the last one.
    detector_links: Vec<(&'static str, TracePointLinkId)>,
    /// Since when no task is tracked while the detectors are attached:
    /// they are detached only after [`DETECTOR_LINGER`] of that, so the
    /// next job of a busy node finds them attached.
    detectors_idle_since: Option<std::time::Instant>,
    /// A detach running on its own thread (see [`Probes::housekeeping`]);
    /// the next attach waits for it (the kernel refuses a program attached
    /// twice to one tracepoint: EEXIST).
    detaching: Option<std::thread::JoinHandle<()>>,
    /// A task came while that detach still ran: the detectors are attached
    /// again by [`Probes::housekeeping`] once it has finished, instead of
    /// the event loop waiting up to ~1.2 s for it (the task's waits go
    /// unseen meanwhile; its arrivals and switches do not).
    attach_after_detach: bool,
    /// Keeps the kernel's BPF run-time statistics on while the agent runs.
    _stats: Option<OwnedFd>,
}

/// Loads every optional waiting detector whose tracepoints this kernel
/// has with the expected layout (they are attached while a task is tracked,
/// see [`Probes::track`]); a missing one is logged and skipped (an older
/// kernel still runs the agent, with fewer ways to see a wait). A detector
/// that fails to load on a kernel that has its tracepoints is an error: that
/// is a bug, not an old kernel. Returns the detectors' states and the
/// (program, `syscalls` event) pairs to attach.
fn load_wait_detectors(ebpf: &mut Ebpf) -> anyhow::Result<(Vec<WaitDetectorState>, Vec<Hook>)> {
    let mut out = vec![WaitDetectorState {
        name: "recv",
        kind: WaitKind::Recv,
        problem: None,
    }];
    let mut hooks = Vec::new();
    for d in names::WAIT_DETECTORS {
        let problem = tracefs::detector_problem(&d);
        if problem.is_none() {
            let progs = [
                Some((d.enter_prog, d.enter_event)),
                d.exit_prog.zip(d.exit_event),
            ];
            for (prog, event) in progs.into_iter().flatten() {
                tracepoint(ebpf, prog)?
                    .load()
                    .with_context(|| format!("loading program {prog}"))?;
                hooks.push((prog, event));
            }
        }
        out.push(WaitDetectorState {
            name: d.syscall,
            kind: d.kind,
            problem,
        });
    }
    let (on, off): (Vec<_>, Vec<_>) = out.iter().partition(|d| d.problem.is_none());
    tracing::info!(
        active = %on.iter().map(|d| d.name).collect::<Vec<_>>().join(","),
        "waiting detectors"
    );
    for d in off {
        tracing::warn!(
            detector = d.name,
            "waiting detector inactive: {}; waits by {} are not seen",
            d.problem.as_deref().unwrap_or_default(),
            d.name
        );
    }
    Ok((out, hooks))
}

fn map_io(e: aya::maps::MapError) -> io::Error {
    io::Error::other(e)
}

/// A removal of a key that is not there (any more) is not an error: the task
/// exited, or was never watched.
fn absent_ok(r: Result<(), aya::maps::MapError>) -> io::Result<()> {
    match r {
        Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
        Err(aya::maps::MapError::SyscallError(e))
            if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
        {
            Ok(())
        }
        Err(e) => Err(map_io(e)),
    }
}

impl Probes {
    /// Mounts tracefs if needed, checks the tracepoint layouts, loads every
    /// program and attaches it.
    pub fn load(settings: Settings) -> anyhow::Result<Self> {
        if OBJECT.is_empty() {
            bail!(
                "this agent was built without its eBPF object (bpf-linker was missing at build \
                 time); run `cargo xtask setup` and rebuild"
            );
        }
        tracefs::ensure_mounted()?;
        let fork = tracefs::check_layouts()?;
        if fork == tracefs::ForkLayout::Comm16 {
            tracing::info!(
                "sched_process_fork has char[16] comms (6.12 and older): reading that layout"
            );
        }
        let stats = match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!("cannot enable BPF run-time stats ({e}); eBPF cost metrics stay 0");
                None
            }
        };
        let mut ebpf = Ebpf::load(OBJECT).context("loading the eBPF object")?;
        for (prog, cat, name) in names::TRACEPOINTS {
            let prog = if prog == names::PROG_PROCESS_FORK {
                fork.program()
            } else {
                prog
            };
            attach_tracepoint(&mut ebpf, prog, cat, name)?;
        }
        let (wait_detectors, detector_hooks) = load_wait_detectors(&mut ebpf)?;
        let mut take = |n: &str| ebpf.take_map(n).with_context(|| format!("map {n} missing"));
        let tasks = HashMap::try_from(take(names::TASKS)?)?;
        let cpus = Array::try_from(take(names::CPU_CURRENT)?)?;
        let sockets = HashMap::try_from(take(names::SOCK_OWNER)?)?;
        let events = RingBuf::try_from(take(names::EVENTS)?)?;
        let mut settings_map = Array::try_from(take(names::SETTINGS)?)?;
        let drops = PerCpuArray::try_from(take(names::DROPS)?)?;
        let watch = HashMap::try_from(take(names::WATCH)?)?;
        let timeline = RingBuf::try_from(take(names::TIMELINE)?)?;
        let recording = Array::try_from(take(names::RECORDING)?)?;
        let job_cpu = PerCpuHashMap::try_from(take(names::JOB_CPU)?)?;
        settings_map.set(0, &settings, 0)?;
        Ok(Self {
            ebpf,
            tasks,
            cpus,
            sockets,
            events,
            settings: settings_map,
            drops,
            watch,
            timeline,
            recording,
            job_cpu,
            wait_detectors,
            detector_hooks,
            detector_links: Vec::new(),
            detectors_idle_since: None,
            detaching: None,
            attach_after_detach: false,
            _stats: stats,
        })
    }

    /// The waiting detectors attached (empty receives always are).
    pub fn wait_detectors(&self) -> &[WaitDetectorState] {
        &self.wait_detectors
    }

    /// File descriptor that becomes readable when the ring buffer has data
    /// and the programs asked for a wakeup.
    pub fn events_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }

    pub fn set_settings(&mut self, s: Settings) -> io::Result<()> {
        self.settings.set(0, &s, 0).map_err(map_io)
    }

    pub fn track(&mut self, tid: u32, tgid: u32, job_id: u32) -> io::Result<()> {
        self.attach_detectors()?;
        let v = TaskStats {
            job_id,
            tgid,
            ..TaskStats::default()
        };
        // BPF_NOEXIST (1): never overwrite the counters of a task already tracked.
        match self.tasks.insert(&tid, &v, 1) {
            Ok(()) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::EEXIST) =>
            {
                Ok(())
            }
            Err(e) => Err(map_io(e)),
        }
    }

    /// Sets the task's `watch_flags` (0 removes the entry).
    pub fn watch(&mut self, tid: u32, flags: u32) -> io::Result<()> {
        let r = if flags == 0 {
            self.watch.remove(&tid)
        } else {
            self.watch.insert(&tid, &flags, 0)
        };
        absent_ok(r)
    }

    pub fn untrack(&mut self, tid: u32) -> io::Result<()> {
        let _ = self.watch(tid, 0);
        absent_ok(self.tasks.remove(&tid))?;
        if self.tasks.keys().next().is_none() {
            self.attach_after_detach = false;
            if !self.detector_links.is_empty() {
                self.detectors_idle_since
                    .get_or_insert_with(std::time::Instant::now);
            }
        }
        Ok(())
    }

    /// Called from the agent's periodic poll: detaches the waiting
    /// detectors once no task was tracked for [`DETECTOR_LINGER`], and
    /// attaches them again for a task that came during that detach once it
    /// has finished.
    pub fn housekeeping(&mut self) {
        if self.attach_after_detach && self.detaching.as_ref().is_none_or(|d| d.is_finished()) {
            self.attach_after_detach = false;
            if let Err(e) = self.attach_detectors() {
                tracing::warn!("attaching the waiting detectors after a detach: {e}");
            }
        }
        let idle_long_enough = self
            .detectors_idle_since
            .is_some_and(|since| since.elapsed() >= DETECTOR_LINGER);
        if idle_long_enough && self.tasks.keys().next().is_none() {
            self.detectors_idle_since = None;
            self.detach_detectors();
        }
    }

    /// Attaches the waiting detectors (once; they stay until no task was
    /// tracked for [`DETECTOR_LINGER`], see [`Probes::housekeeping`]).
    fn attach_detectors(&mut self) -> io::Result<()> {
        self.detectors_idle_since = None;
        if !self.detector_links.is_empty() || self.detector_hooks.is_empty() {
            return Ok(());
        }
        match self.detaching.take() {
            // Rare: a job came within ~1 s of a lingering detach. Attached
            // by `housekeeping` when the detach is over.
            Some(detaching) if !detaching.is_finished() => {
                self.detaching = Some(detaching);
                self.attach_after_detach = true;
                tracing::debug!(
                    "a task came during the detach: detectors attached again when it is over"
                );
                return Ok(());
            }
            Some(finished) => {
                let _ = finished.join();
            }
            None => {}
        }
        for &(prog, event) in &self.detector_hooks {
            let link = tracepoint(&mut self.ebpf, prog)
                .and_then(|p| {
                    p.attach("syscalls", event)
                        .with_context(|| format!("attaching {prog} to tracepoint syscalls/{event}"))
                })
                .map_err(|e| io::Error::other(format!("{e:#}")))?;
            self.detector_links.push((prog, link));
        }
        tracing::debug!("waiting detectors attached");
        Ok(())
    }

    /// Detaches the waiting detectors (no task tracked for a while) on a
    /// thread of its own: closing a `syscalls` tracepoint's perf event waits
    /// for RCU grace periods (60–120 ms per close here, ~1.2 s for the nine
    /// detectors, strace'd), and on the event loop that held heartbeats past
    /// the coordinator's timeout at the end of every job.
    fn detach_detectors(&mut self) {
        let mut links = Vec::new();
        for (prog, link) in std::mem::take(&mut self.detector_links) {
            match tracepoint(&mut self.ebpf, prog).and_then(|p| Ok(p.take_link(link)?)) {
                Ok(link) => links.push((prog, link)),
                Err(e) => tracing::warn!("detaching {prog}: {e:#}"),
            }
        }
        let detach = move || {
            let started = std::time::Instant::now();
            for (prog, link) in links {
                if let Err(e) = aya::programs::links::Link::detach(link) {
                    tracing::warn!("detaching {prog}: {e:#}");
                }
            }
            tracing::debug!(
                took_ms = started.elapsed().as_millis() as u64,
                "waiting detectors detached (no task tracked)"
            );
        };
        match std::thread::Builder::new()
            .name("cosched-detach".into())
            .spawn(detach)
        {
            Ok(handle) => self.detaching = Some(handle),
            // The closure, and with it the links, was dropped: detached here.
            Err(e) => {
                tracing::warn!("cannot start the detach thread ({e}); detached on the event loop")
            }
        }
    }

    pub fn task_stat(&self, tid: u32) -> io::Result<Option<TaskStats>> {
        match self.tasks.get(&tid, 0) {
            Ok(s) => Ok(Some(s)),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(map_io(e)),
        }
    }

    /// On-CPU ns of a job's completed runs, summed over the CPUs (None: no
    /// entry, see the `JOB_CPU` map).
    pub fn job_cpu_ns(&self, job: u32) -> io::Result<Option<u64>> {
        match self.job_cpu.get(&job, 0) {
            Ok(per_cpu) => Ok(Some(per_cpu.iter().sum())),
            Err(aya::maps::MapError::KeyNotFound) => Ok(None),
            Err(e) => Err(map_io(e)),
        }
    }

    pub fn forget_job_cpu(&mut self, job: u32) -> io::Result<()> {
        absent_ok(self.job_cpu.remove(&job))
    }

    pub fn task_stats(&self) -> io::Result<Vec<(u32, TaskStats)>> {
        let mut out = Vec::new();
        for kv in self.tasks.iter() {
            match kv {
                Ok(kv) => out.push(kv),
                // A key deleted between iteration steps: skip it.
                Err(aya::maps::MapError::KeyNotFound) => {}
                Err(e) => return Err(map_io(e)),
            }
        }
        Ok(out)
    }

    pub fn cpu_slots(&self, cpus: &[u32]) -> io::Result<Vec<(u32, CpuSlot)>> {
        cpus.iter()
            .filter(|&&c| c < MAX_CPUS)
            .map(|&c| Ok((c, self.cpus.get(&c, 0).map_err(map_io)?)))
            .collect()
    }

    pub fn drain_events(&mut self, out: &mut Vec<Event>) {
        while let Some(item) = self.events.next() {
            if item.len() >= std::mem::size_of::<Event>() {
                // SAFETY: the programs write whole `Event`s; read_unaligned copes
                // with the ring buffer's 8-byte alignment.
                out.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) });
            }
        }
    }

    pub fn set_recording(&mut self, on: bool) -> io::Result<()> {
        self.recording.set(0, &u32::from(on), 0).map_err(map_io)
    }

    pub fn drain_timeline(&mut self, out: &mut Vec<TimelineRecord>) {
        while let Some(item) = self.timeline.next() {
            if item.len() >= std::mem::size_of::<TimelineRecord>() {
                // SAFETY: the programs write whole records (see drain_events).
                out.push(unsafe {
                    std::ptr::read_unaligned(item.as_ptr().cast::<TimelineRecord>())
                });
            }
        }
    }

    pub fn forget_sockets_of(&mut self, tids: &[u32]) -> io::Result<usize> {
        let stale: Vec<u64> = self
            .sockets
            .iter()
            .filter_map(Result::ok)
            .filter(|(_, o)| tids.contains(&o.tid))
            .map(|(k, _)| k)
            .collect();
        for k in &stale {
            let _ = self.sockets.remove(k);
        }
        Ok(stale.len())
    }

    pub fn drops(&self) -> io::Result<Drops> {
        let per_cpu = self.drops.get(&0, 0).map_err(map_io)?;
        Ok(per_cpu.iter().fold(Drops::default(), |a, d| Drops {
            ring_full: a.ring_full + d.ring_full,
            tasks_full: a.tasks_full + d.tasks_full,
            sockets_full: a.sockets_full + d.sockets_full,
            forced_wakeups: a.forced_wakeups + d.forced_wakeups,
            timeline_lost: a.timeline_lost + d.timeline_lost,
        }))
    }

    pub fn program_costs(&self) -> io::Result<Vec<ProgramCost>> {
        let mut out = Vec::new();
        for (name, prog) in self.ebpf.programs() {
            // The fork program of the other record layout is never loaded.
            if prog.fd().is_err() {
                continue;
            }
            let info = prog.info().map_err(io::Error::other)?;
            out.push(ProgramCost {
                name: name.to_string(),
                run_count: info.run_count(),
                run_time_ns: info.run_time().as_nanos() as u64,
            });
        }
        Ok(out)
    }
}

/// A (program, tracepoint event) pair.
type Hook = (&'static str, &'static str);

/// Tracepoint program `prog` of the object.
fn tracepoint<'a>(ebpf: &'a mut Ebpf, prog: &str) -> anyhow::Result<&'a mut TracePoint> {
    Ok(ebpf
        .program_mut(prog)
        .with_context(|| format!("program {prog} missing from the object"))?
        .try_into()?)
}

/// Loads program `prog` of the object and attaches it to tracepoint
/// `category/name`.
fn attach_tracepoint(
    ebpf: &mut Ebpf,
    prog: &str,
    category: &str,
    name: &str,
) -> anyhow::Result<()> {
    let p = tracepoint(ebpf, prog)?;
    p.load()
        .with_context(|| format!("loading program {prog}"))?;
    p.attach(category, name)
        .with_context(|| format!("attaching {prog} to tracepoint {category}/{name}"))?;
    Ok(())
}
