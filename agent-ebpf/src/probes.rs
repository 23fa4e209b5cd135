//! cosched eBPF programs.
//!
//! Counting and filtering only: per-task state lives in the `TASKS` map (only
//! managed tasks have an entry, so every program starts with one hash lookup and
//! returns at once for everything else), per-CPU "who runs" in `CPU_CURRENT`,
//! socket ownership in `SOCK_OWNER`, and the few events the agent must react to
//! go through the `EVENTS` ring buffer, which wakes the agent only when the
//! settings ask for it (an arrival for an off-CPU receiver, a spin start) or when
//! a batch has accumulated.
use core::intrinsics::{AtomicOrdering, atomic_xadd};

use aya_ebpf::{
    EbpfContext as _,
    bindings::{BPF_NOEXIST, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP},
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::TracePointContext,
};
use cosched_agent_common::{
    CpuSlot, DEFAULT_SPIN_GAP_NS, Drops, EVENT_RING_BYTES, Event, MAX_CPUS, MAX_JOB_CPU,
    MAX_SOCKETS, MAX_TASKS, Settings, SockOwner, TIMELINE_RING_BYTES, TaskStats, TimelineRecord,
    arrival_reported, episode, event_flags, event_kind, in_spin_episode,
    layout::{self, Field},
    timeline_kind, watch_flags,
};

#[map]
static TASKS: HashMap<u32, TaskStats> = HashMap::with_max_entries(MAX_TASKS, 0);

#[map]
static CPU_CURRENT: Array<CpuSlot> = Array::with_max_entries(MAX_CPUS, 0);

#[map]
static SOCK_OWNER: HashMap<u64, SockOwner> = HashMap::with_max_entries(MAX_SOCKETS, 0);

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(EVENT_RING_BYTES, 0);

#[map]
static SETTINGS: Array<Settings> = Array::with_max_entries(1, 0);

/// tid -> `watch_flags`, written by the agent.
#[map]
static WATCH: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TASKS, 0);

#[map]
static DROPS: PerCpuArray<Drops> = PerCpuArray::with_max_entries(1, 0);

/// Timeline records (see `TimelineRecord`), written only while recording.
#[map]
static TIMELINE: RingBuf = RingBuf::with_byte_size(TIMELINE_RING_BYTES, 0);

/// Non-zero while the agent records a timeline. Read only on paths that
/// already found a managed task, so with recording off an unmanaged
/// switch costs nothing more and a managed one one array lookup.
#[map]
static RECORDING: Array<u32> = Array::with_max_entries(1, 0);

/// job id -> on-CPU ns of the job's tasks' completed runs, per CPU (each CPU
/// adds its own runs: no atomics; the agent sums the CPUs). The agent reads
/// it at every gang slice switch for the quantum's utilisation: one lookup
/// per job instead of one per task (a system call each, ~1.7 µs here). It
/// deletes a job's entry when it reserves or finishes the job.
#[map]
static JOB_CPU: PerCpuHashMap<u32, u64> = PerCpuHashMap::with_max_entries(MAX_JOB_CPU, 0);

/// Adds a completed run of `ns` to `job`'s CPU time on this CPU.
#[inline(always)]
fn add_job_cpu(job: u32, ns: u64) {
    if job == 0 {
        return;
    }
    if let Some(p) = JOB_CPU.get_ptr_mut(&job) {
        // SAFETY: this CPU's own slot of the entry.
        unsafe { *p += ns };
        return;
    }
    // BPF_NOEXIST: an entry another CPU made meanwhile keeps its counts
    // (an update would zero every other CPU's slot).
    if JOB_CPU.insert(&job, &ns, BPF_NOEXIST as u64).is_err()
        && let Some(p) = JOB_CPU.get_ptr_mut(&job)
    {
        // SAFETY: as above. (Neither: the map is full; the agent then
        // reads the job task by task.)
        unsafe { *p += ns };
    }
}

/// Reads a tracepoint field straight from the trace record (a verified ctx
/// load, cheaper than a probe-read helper call).
#[inline(always)]
pub(crate) fn field<T: Copy>(ctx: &TracePointContext, f: Field) -> T {
    // SAFETY: `layout` offsets are checked against the running kernel's format
    // files by the agent before it attaches; the verifier bounds-checks the load.
    unsafe { core::ptr::read_unaligned(ctx.as_ptr().cast::<u8>().add(f.offset).cast::<T>()) }
}

#[inline(always)]
pub(crate) fn current_tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

#[inline(always)]
fn current_tgid() -> u32 {
    (bpf_get_current_pid_tgid() >> 32) as u32
}

#[inline(always)]
pub(crate) fn task(tid: u32) -> Option<&'static mut TaskStats> {
    if tid == 0 {
        return None;
    }
    // SAFETY: map values stay valid for the program's run; concurrent writers
    // touch disjoint fields (see TaskStats docs).
    TASKS.get_ptr_mut(&tid).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn drops() -> Option<&'static mut Drops> {
    // SAFETY: per-CPU slot, only this CPU writes it while we run.
    DROPS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn watched(tid: u32, flag: u32) -> bool {
    // SAFETY: value read by copy.
    unsafe { WATCH.get(&tid) }.is_some_and(|f| f & flag != 0)
}

#[inline(always)]
fn settings() -> Settings {
    SETTINGS.get(0).copied().unwrap_or_default()
}

/// The spin gap in force (see `Settings::spin_gap_ns`).
#[inline(always)]
pub(crate) fn spin_gap() -> u64 {
    match settings().spin_gap_ns {
        0 => DEFAULT_SPIN_GAP_NS,
        n => n,
    }
}

/// Ends the current spin episode of `t` at `now` (see `episode::end`).
#[inline(always)]
pub(crate) fn end_spin(t: &mut TaskStats, tid: u32, now: u64, gap: u64) {
    let was = t.spin_episode_start_ns != 0;
    episode::end(t, now, gap);
    if was {
        record_spin(timeline_kind::SPIN_END, tid, t.job_id, now);
    }
}

#[inline(always)]
fn recording() -> bool {
    RECORDING.get(0).is_some_and(|r| *r != 0)
}

/// Queues a timeline record while the agent records (never wakes it: it
/// drains the ring on its own clock while recording).
#[inline(always)]
fn record(r: &TimelineRecord) {
    if TIMELINE.output(r, BPF_RB_NO_WAKEUP as u64).is_err()
        && let Some(d) = drops()
    {
        d.timeline_lost += 1;
    }
}

/// A spin episode of managed task `tid` starts or ends (while recording).
#[inline(always)]
fn record_spin(kind: u32, tid: u32, job: u32, now: u64) {
    if recording() {
        record(&TimelineRecord {
            kind,
            cpu: unsafe { bpf_get_smp_processor_id() },
            ts_ns: now,
            prev_tid: tid,
            prev_job: job,
            next_tid: 0,
            next_job: 0,
        });
    }
}

/// One empty wait of `tid` at `now` (an empty receive, an empty poll, a
/// yield; see `episode::empty_wait`). A new episode is reported to the
/// agent when it asked for this task's spin starts; `arg` goes with the
/// report (the socket of an empty receive, else 0).
#[inline(always)]
pub(crate) fn empty_wait(t: &mut TaskStats, tid: u32, now: u64, arg: u64) {
    let s = settings();
    let gap = match s.spin_gap_ns {
        0 => DEFAULT_SPIN_GAP_NS,
        n => n,
    };
    let starts = episode::empty_wait(t, now, gap);
    if starts {
        record_spin(timeline_kind::SPIN_START, tid, t.job_id, now);
    }
    // A spin long enough for the policy to act on (spin-block, spin-yield):
    // reported once per episode, so the agent needs no fast tick to find it.
    if episode::passed_report(t, s.spin_report_ns) {
        let ev = Event {
            kind: event_kind::SPIN_LONG,
            tid,
            job_id: t.job_id,
            flags: event_flags::TASK_ON_CPU | event_flags::TASK_SPINNING,
            ts_ns: now,
            arg: episode::episode_spin_ns(t),
        };
        emit(&ev, true);
    }
    if starts && watched(tid, watch_flags::SPIN_START) {
        let ev = Event {
            kind: event_kind::SPIN_START,
            tid,
            job_id: t.job_id,
            flags: event_flags::TASK_ON_CPU | event_flags::TASK_SPINNING,
            ts_ns: now,
            arg,
        };
        emit(&ev, true);
    }
}

#[inline(always)]
fn emit(ev: &Event, force_wakeup: bool) {
    let flags = if force_wakeup || EVENTS.query(BPF_RB_AVAIL_DATA as u64) >= batch_bytes() {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    let failed = EVENTS.output(ev, flags as u64).is_err();
    if let Some(d) = drops() {
        if failed {
            d.ring_full += 1;
        } else if flags == BPF_RB_FORCE_WAKEUP {
            d.forced_wakeups += 1;
        }
    }
}

#[inline(always)]
fn batch_bytes() -> u64 {
    match settings().wake_batch_bytes {
        0 => (EVENT_RING_BYTES / 4) as u64,
        n => n as u64,
    }
}

/// Learns that `tid` owns socket `sk` (it receives or sends on it), so that
/// later data-ready callbacks, which run in the sender's or softirq context,
/// can be attributed to it.
#[inline(always)]
fn learn_owner(sk: u64, tid: u32, job_id: u32, now: u64) {
    if let Some(o) = SOCK_OWNER.get_ptr(&sk) {
        // SAFETY: valid map value pointer for this run.
        if unsafe { (*o).tid } == tid {
            return;
        }
    }
    let owner = SockOwner {
        tid,
        job_id,
        learned_ns: now,
    };
    if SOCK_OWNER.insert(&sk, &owner, 0).is_err()
        && let Some(d) = drops()
    {
        d.sockets_full += 1;
    }
}

#[tracepoint(category = "sched", name = "sched_switch")]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let prev: i32 = field(&ctx, layout::SCHED_SWITCH_PREV_PID);
    let prev_state: i64 = field(&ctx, layout::SCHED_SWITCH_PREV_STATE);
    let next: i32 = field(&ctx, layout::SCHED_SWITCH_NEXT_PID);
    let now = unsafe { bpf_ktime_get_ns() };
    let cpu = unsafe { bpf_get_smp_processor_id() };

    let mut prev_job = None;
    if let Some(t) = task(prev as u32) {
        prev_job = Some(t.job_id);
        // Episode rules first: they read the run that ends here.
        let gap = spin_gap();
        // Still runnable at switch-out = preempted. With PREEMPT_NONE a task
        // preempted on return to user space reports TASK_RUNNING (0), not the
        // TASK_REPORT_MAX bit that in-kernel preemption reports.
        if prev_state == 0 || prev_state & layout::PREV_STATE_PREEMPTED != 0 {
            t.switches_out_preempted += 1;
            t.last_out_preempted = 1;
            let was = t.spin_episode_start_ns != 0;
            episode::preempted(t, now, gap);
            if was && t.spin_episode_start_ns == 0 {
                record_spin(timeline_kind::SPIN_END, prev as u32, t.job_id, now);
            }
        } else {
            t.switches_out_voluntary += 1;
            t.last_out_preempted = 0;
            end_spin(t, prev as u32, now, gap);
        }
        if t.run_start_ns != 0 {
            let ran = now.saturating_sub(t.run_start_ns);
            t.oncpu_ns += ran;
            add_job_cpu(t.job_id, ran);
        }
        t.run_start_ns = 0;
        t.on_cpu = 0;
        t.last_switch_out_ns = now;
        // The tracepoint runs in prev's context: fill in the thread group of
        // tasks added by fork, whose tgid the fork record does not carry.
        if t.tgid == 0 {
            t.tgid = current_tgid();
        }
    }

    let mut slot = CpuSlot {
        tid: next as u32,
        prev_tid: prev as u32,
        since_ns: now,
        ..CpuSlot::default()
    };
    if let Some(t) = task(next as u32) {
        t.run_start_ns = now;
        t.last_run_start_ns = now;
        t.switches_in += 1;
        t.cpu = cpu;
        t.on_cpu = 1;
        slot.job_id = t.job_id;
        slot.managed = 1;
    }
    if let Some(s) = CPU_CURRENT.get_ptr_mut(cpu) {
        // SAFETY: this CPU's own slot.
        unsafe { *s = slot };
    }
    if (prev_job.is_some() || slot.managed != 0) && recording() {
        record(&TimelineRecord {
            kind: timeline_kind::SWITCH,
            cpu,
            ts_ns: now,
            prev_tid: prev as u32,
            prev_job: prev_job.unwrap_or(0),
            next_tid: next as u32,
            next_job: slot.job_id,
        });
    }
    0
}

#[tracepoint(category = "sched", name = "sched_process_fork")]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let parent: i32 = field(&ctx, layout::FORK_PARENT_PID);
    let child: i32 = field(&ctx, layout::FORK_CHILD_PID);
    on_fork(parent, child)
}

/// `sched_process_fork` on kernels whose record has `char[16]` comms (6.12
/// and older); the agent attaches this one or the one above.
#[tracepoint(category = "sched", name = "sched_process_fork")]
pub fn sched_process_fork_comm16(ctx: TracePointContext) -> u32 {
    let parent: i32 = field(&ctx, layout::FORK_PARENT_PID_COMM16);
    let child: i32 = field(&ctx, layout::FORK_CHILD_PID_COMM16);
    on_fork(parent, child)
}

#[inline(always)]
fn on_fork(parent: i32, child: i32) -> u32 {
    let Some(p) = task(parent as u32) else {
        return 0;
    };
    let job_id = p.job_id;
    // tgid of the child is unknown here (thread or process); sched_switch fills
    // it in the child's first switch-out.
    let entry = TaskStats {
        job_id,
        ..TaskStats::default()
    };
    if TASKS
        .insert(&(child as u32), &entry, BPF_NOEXIST as u64)
        .is_err()
    {
        if let Some(d) = drops() {
            d.tasks_full += 1;
        }
        return 0;
    }
    let ev = Event {
        kind: event_kind::FORK,
        tid: parent as u32,
        job_id,
        flags: 0,
        ts_ns: unsafe { bpf_ktime_get_ns() },
        arg: child as u64,
    };
    emit(&ev, false);
    0
}

#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let tid: i32 = field(&ctx, layout::EXIT_PID);
    let Some(t) = task(tid as u32) else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    end_spin(t, tid as u32, now, spin_gap());
    t.exited_ns = now;
    let ev = Event {
        kind: event_kind::EXIT,
        tid: tid as u32,
        job_id: t.job_id,
        flags: 0,
        ts_ns: now,
        arg: 0,
    };
    emit(&ev, false);
    0
}

#[tracepoint(category = "sock", name = "sock_recv_length")]
pub fn sock_recv_length(ctx: TracePointContext) -> u32 {
    let tid = current_tid();
    let Some(t) = task(tid) else {
        return 0;
    };
    let sk: u64 = field(&ctx, layout::RECV_SK);
    let ret: i32 = field(&ctx, layout::RECV_RET);
    let now = unsafe { bpf_ktime_get_ns() };
    if ret > 0 {
        t.recv_ok += 1;
        t.last_recv_ok_ns = now;
        t.bytes_received += ret as u64;
        end_spin(t, tid, now, spin_gap());
    } else if ret == layout::NEG_EAGAIN {
        t.recv_empty += 1;
        t.last_found_empty_ns = now;
        empty_wait(t, tid, now, sk);
    } else {
        return 0;
    }
    learn_owner(sk, tid, t.job_id, now);
    0
}

#[tracepoint(category = "sock", name = "sock_send_length")]
pub fn sock_send_length(ctx: TracePointContext) -> u32 {
    let tid = current_tid();
    let Some(t) = task(tid) else {
        return 0;
    };
    let ret: i32 = field(&ctx, layout::SEND_RET);
    if ret <= 0 {
        return 0;
    }
    t.sends += 1;
    let now = unsafe { bpf_ktime_get_ns() };
    // A task that sends is making progress, not waiting.
    end_spin(t, tid, now, spin_gap());
    let sk: u64 = field(&ctx, layout::SEND_SK);
    learn_owner(sk, tid, t.job_id, now);
    0
}

#[tracepoint(category = "sock", name = "sk_data_ready")]
pub fn sk_data_ready(ctx: TracePointContext) -> u32 {
    let sk: u64 = field(&ctx, layout::DATA_READY_SK);
    let Some(owner) = SOCK_OWNER.get_ptr(&sk) else {
        return 0;
    };
    // SAFETY: valid map value pointer for this run.
    let tid = unsafe { (*owner).tid };
    let Some(t) = task(tid) else {
        // The owner is gone (exited and removed): forget the socket, its
        // address may be reused by an unrelated one.
        let _ = SOCK_OWNER.remove(&sk);
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    // This runs in the sender's (or softirq) context, concurrently with the
    // receiver's own programs: only these two fields are written from here.
    // SAFETY: aligned u64 inside a live map value.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut t.arrivals, 1) };
    t.last_arrival_ns = now;
    let on_cpu = t.on_cpu != 0;
    // Read from another CPU while the receiver may run: a torn view costs
    // at most one misjudged arrival, and the agent's tick corrects it.
    let waiting = in_spin_episode(t, now, spin_gap());
    let mut flags = 0;
    if on_cpu {
        flags |= event_flags::TASK_ON_CPU;
    }
    if waiting {
        flags |= event_flags::TASK_SPINNING;
    }
    // Only a receiver that is ready but not running (preempted while
    // spinning; with `READY` also preempted while computing) is a decision,
    // as the agent's settings say (`arrival_reported`): one blocked in a
    // receive is woken by the kernel, one on a CPU is running already. A task the policy holds back
    // (spin-block) is a decision wherever it is: its wait is over. Every
    // other arrival is only counted (above): the agent reads the counters at
    // its tick, so the ring (and the agent's drain) sees no per-message cost.
    //
    // A receiver already boosted runs as soon as it can: its arrivals are
    // only counted too. (They used to be queued without a wakeup; read
    // whenever the agent next woke, 0.5–2 ms later, they were stale — the
    // boost had ended, the message was read — yet re-boosted the task, and
    // made the 1–2 ms tail of DCS's reaction latency.)
    // SAFETY: value read by copy.
    let watch = unsafe { WATCH.get(&tid) }.copied().unwrap_or(0);
    if !arrival_reported(
        &settings(),
        watch,
        on_cpu,
        waiting,
        t.last_out_preempted != 0,
    ) {
        return 0;
    }
    let ev = Event {
        kind: event_kind::ARRIVAL,
        tid,
        job_id: t.job_id,
        flags,
        ts_ns: now,
        arg: sk,
    };
    // Every record here is a decision: wake the agent (also when it holds
    // the task's CPU: it may be past its last look at the ring, about to
    // sleep; waking a running agent costs no context switch).
    emit(&ev, true);
    0
}

#[tracepoint(category = "sock", name = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: TracePointContext) -> u32 {
    let newstate: i32 = field(&ctx, layout::SOCK_STATE_NEWSTATE);
    if newstate == layout::TCP_CLOSE {
        let sk: u64 = field(&ctx, layout::SOCK_STATE_SK);
        let _ = SOCK_OWNER.remove(&sk);
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
