//! Types shared between the eBPF programs (`cosched-agent-ebpf`) and the agent.
//!
//! Every type is `#[repr(C)]`, built from fixed-width fields only, with explicit
//! padding and a compile-time size assertion, so the kernel-side and the
//! userspace-side view of a map value or ring-buffer record are byte-identical.
//! [`rt_frames`] is the same kind of contract between two userspace sides: the
//! frame counter file an RT process's client library writes and the agent reads.
#![no_std]

pub mod episode;
pub mod layout;
// Userspace only: the eBPF programs never see frame counters, and the bpf
// target lacks 64-bit atomic read-modify-writes.
#[cfg(not(target_arch = "bpf"))]
pub mod rt_frames;
// Userspace only, like the frame counters: the first-frame gate file.
#[cfg(not(target_arch = "bpf"))]
pub mod first_frame;

pub use episode::{in_spin_episode, oncpu_since_wait};

/// Maximum number of CPUs the per-CPU "who runs" array covers.
pub const MAX_CPUS: u32 = 256;
/// Capacity of the managed-task map (threads, not processes).
pub const MAX_TASKS: u32 = 16384;
/// Capacity of the socket -> owning task map.
pub const MAX_SOCKETS: u32 = 16384;
/// Capacity of the per-job CPU time map (`JOB_CPU`): jobs whose tasks ran
/// since the agent reserved them. A job that finds it full is read task by
/// task instead.
pub const MAX_JOB_CPU: u32 = 1024;
/// Size of the event ring buffer in bytes (a power of two, multiple of the page size).
pub const EVENT_RING_BYTES: u32 = 1 << 20;
/// Size of the timeline ring buffer in bytes: what a recording (see
/// [`TimelineRecord`]) can queue between two drains by the agent
/// (16384 records of 32 bytes); records that do not fit are counted in
/// [`Drops::timeline_lost`].
pub const TIMELINE_RING_BYTES: u32 = 1 << 19;

/// Names of the maps and programs in the eBPF object, so both sides agree.
pub mod names {
    pub const TASKS: &str = "TASKS";
    pub const CPU_CURRENT: &str = "CPU_CURRENT";
    pub const SOCK_OWNER: &str = "SOCK_OWNER";
    pub const EVENTS: &str = "EVENTS";
    pub const SETTINGS: &str = "SETTINGS";
    pub const DROPS: &str = "DROPS";
    pub const WATCH: &str = "WATCH";
    pub const TIMELINE: &str = "TIMELINE";
    pub const RECORDING: &str = "RECORDING";
    pub const JOB_CPU: &str = "JOB_CPU";

    pub const PROG_SCHED_SWITCH: &str = "sched_switch";
    pub const PROG_PROCESS_FORK: &str = "sched_process_fork";
    /// The same for the older record layout ([`crate::layout::FORK_PARENT_PID_COMM16`]).
    pub const PROG_PROCESS_FORK_COMM16: &str = "sched_process_fork_comm16";
    pub const PROG_PROCESS_EXIT: &str = "sched_process_exit";
    pub const PROG_RECV: &str = "sock_recv_length";
    pub const PROG_SEND: &str = "sock_send_length";
    pub const PROG_DATA_READY: &str = "sk_data_ready";
    pub const PROG_SOCK_STATE: &str = "inet_sock_set_state";

    /// Programs and the `category/name` tracepoint each attaches to.
    pub const TRACEPOINTS: [(&str, &str, &str); 7] = [
        (PROG_SCHED_SWITCH, "sched", "sched_switch"),
        (PROG_PROCESS_FORK, "sched", "sched_process_fork"),
        (PROG_PROCESS_EXIT, "sched", "sched_process_exit"),
        (PROG_RECV, "sock", "sock_recv_length"),
        (PROG_SEND, "sock", "sock_send_length"),
        (PROG_DATA_READY, "sock", "sk_data_ready"),
        (PROG_SOCK_STATE, "sock", "inet_sock_set_state"),
    ];

    pub const PROG_POLL_ENTER: &str = "poll_enter";
    pub const PROG_POLL_EXIT: &str = "poll_exit";
    pub const PROG_PPOLL_ENTER: &str = "ppoll_enter";
    pub const PROG_PPOLL_EXIT: &str = "ppoll_exit";
    pub const PROG_SELECT_ENTER: &str = "select_enter";
    pub const PROG_SELECT_EXIT: &str = "select_exit";
    pub const PROG_PSELECT6_ENTER: &str = "pselect6_enter";
    pub const PROG_PSELECT6_EXIT: &str = "pselect6_exit";
    pub const PROG_EPOLL_WAIT_ENTER: &str = "epoll_wait_enter";
    pub const PROG_EPOLL_WAIT_EXIT: &str = "epoll_wait_exit";
    pub const PROG_EPOLL_PWAIT_ENTER: &str = "epoll_pwait_enter";
    pub const PROG_EPOLL_PWAIT_EXIT: &str = "epoll_pwait_exit";
    pub const PROG_EPOLL_PWAIT2_ENTER: &str = "epoll_pwait2_enter";
    pub const PROG_EPOLL_PWAIT2_EXIT: &str = "epoll_pwait2_exit";
    pub const PROG_SCHED_YIELD: &str = "sched_yield_enter";

    /// The optional waiting detectors, one per system call: attached when
    /// the running kernel has its `syscalls` tracepoints (with the expected
    /// record layout), skipped otherwise.
    pub const WAIT_DETECTORS: [super::WaitDetector; 8] = {
        use super::{WaitDetector as D, WaitKind as K};
        [
            D::poll(
                "poll",
                PROG_POLL_ENTER,
                PROG_POLL_EXIT,
                ["sys_enter_poll", "sys_exit_poll"],
            ),
            D::poll(
                "ppoll",
                PROG_PPOLL_ENTER,
                PROG_PPOLL_EXIT,
                ["sys_enter_ppoll", "sys_exit_ppoll"],
            ),
            D::poll(
                "select",
                PROG_SELECT_ENTER,
                PROG_SELECT_EXIT,
                ["sys_enter_select", "sys_exit_select"],
            ),
            D::poll(
                "pselect6",
                PROG_PSELECT6_ENTER,
                PROG_PSELECT6_EXIT,
                ["sys_enter_pselect6", "sys_exit_pselect6"],
            ),
            D::poll(
                "epoll_wait",
                PROG_EPOLL_WAIT_ENTER,
                PROG_EPOLL_WAIT_EXIT,
                ["sys_enter_epoll_wait", "sys_exit_epoll_wait"],
            ),
            D::poll(
                "epoll_pwait",
                PROG_EPOLL_PWAIT_ENTER,
                PROG_EPOLL_PWAIT_EXIT,
                ["sys_enter_epoll_pwait", "sys_exit_epoll_pwait"],
            ),
            D::poll(
                "epoll_pwait2",
                PROG_EPOLL_PWAIT2_ENTER,
                PROG_EPOLL_PWAIT2_EXIT,
                ["sys_enter_epoll_pwait2", "sys_exit_epoll_pwait2"],
            ),
            D {
                syscall: "sched_yield",
                kind: K::Yield,
                enter_prog: PROG_SCHED_YIELD,
                enter_event: "sys_enter_sched_yield",
                exit_prog: None,
                exit_event: None,
            },
        ]
    };
}

/// How a wait iteration shows up (the `kind` label of the wait counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// A non-blocking socket receive that returned -EAGAIN.
    Recv,
    /// A poll-family call that returned 0 ready descriptors without blocking.
    Poll,
    /// A `sched_yield` call.
    Yield,
}

impl WaitKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            WaitKind::Recv => "recv",
            WaitKind::Poll => "poll",
            WaitKind::Yield => "yield",
        }
    }
}

/// One optional waiting detector: the programs on a system call's
/// `syscalls/sys_enter_<syscall>` (and `sys_exit_<syscall>`) tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitDetector {
    pub syscall: &'static str,
    pub kind: WaitKind,
    /// Program on `syscalls/<enter_event>`.
    pub enter_prog: &'static str,
    /// `sys_enter_<syscall>`.
    pub enter_event: &'static str,
    /// Program on the exit tracepoint, if the detector needs the result.
    pub exit_prog: Option<&'static str>,
    /// `sys_exit_<syscall>`, whose `ret` field the exit program reads.
    pub exit_event: Option<&'static str>,
}

impl WaitDetector {
    const fn poll(
        syscall: &'static str,
        enter_prog: &'static str,
        exit_prog: &'static str,
        [enter_event, exit_event]: [&'static str; 2],
    ) -> Self {
        WaitDetector {
            syscall,
            kind: WaitKind::Poll,
            enter_prog,
            enter_event,
            exit_prog: Some(exit_prog),
            exit_event: Some(exit_event),
        }
    }
}

/// Per-task (thread) state, the value of the `TASKS` map keyed by tid.
///
/// Presence in the map is what makes a task *managed*: the agent inserts the
/// threads of the processes it launches or adopts, the fork tracepoint adds the
/// children of managed tasks, and the agent deletes the entry after reading the
/// final counters of an exited task.
///
/// Writers: every field except `arrivals`/`last_arrival_ns` is written only by
/// programs running in the task's own context (its own CPU), so plain stores do
/// not race. `arrivals` is bumped from the *sender's* context (sk_data_ready on
/// loopback/veth runs there) with an atomic add.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// Job the task belongs to (agent-assigned, 0 = none).
    pub job_id: u32,
    /// Thread-group id (process id) of the task.
    pub tgid: u32,
    /// Total time on CPU, ns (completed runs only; add `now - run_start_ns` while running).
    pub oncpu_ns: u64,
    /// `bpf_ktime_get_ns` at the start of the current run, 0 while off CPU.
    pub run_start_ns: u64,
    /// Start of the most recent run (kept after switch-out), for "last run start".
    pub last_run_start_ns: u64,
    /// End of the most recent run.
    pub last_switch_out_ns: u64,
    pub switches_in: u64,
    /// Switched out while not runnable (blocked in a receive, slept).
    pub switches_out_voluntary: u64,
    /// Switched out while still runnable (preempted, or sched_yield).
    pub switches_out_preempted: u64,
    /// Messages (socket data-ready callbacks) for sockets this task owns. Atomic.
    pub arrivals: u64,
    /// Time of the most recent arrival. Written from the sender's context.
    pub last_arrival_ns: u64,
    /// Receives that returned data (ret > 0).
    pub recv_ok: u64,
    /// Time of the most recent receive that returned data (see
    /// [`TaskStats::message_pending`]).
    pub last_recv_ok_ns: u64,
    /// Receives that found nothing (-EAGAIN / -EWOULDBLOCK): an empty wait.
    pub recv_empty: u64,
    /// On-CPU time of spin episodes: from an empty wait to the next one, to
    /// the end of the episode (data, a send, blocking) or to a preemption,
    /// as long as the stretch stays within the spin gap (see
    /// [`Settings::spin_gap_ns`]); time computed past the gap is not spin.
    pub spin_ns: u64,
    /// Time of the latest empty wait while on CPU, 0 if not spinning or
    /// preempted since (the spin clock only runs on CPU).
    pub spin_last_ns: u64,
    /// Start of the current spin episode (first empty wait), 0 if not
    /// waiting. Kept across preemptions; ended by data, a send, blocking, or
    /// more than the spin gap of on-CPU time since the last empty wait.
    pub spin_episode_start_ns: u64,
    /// Bytes received by successful receives.
    pub bytes_received: u64,
    /// Messages sent (successful sends).
    pub sends: u64,
    /// CPU of the current / most recent run.
    pub cpu: u32,
    /// 1 while the task is on a CPU.
    pub on_cpu: u32,
    /// 1 if the last switch-out was a preemption (the task stayed runnable).
    pub last_out_preempted: u32,
    /// 1 once the current spin episode passed [`Settings::spin_report_ns`]
    /// and was reported (`event_kind::SPIN_LONG`); 0 again at the next
    /// episode's start.
    pub spin_reported: u32,
    /// Time the task exited (sched_process_exit), 0 while alive.
    pub exited_ns: u64,
    /// Poll-family calls (poll, ppoll, select, pselect6, epoll_wait,
    /// epoll_pwait, epoll_pwait2) that returned 0 ready descriptors without
    /// blocking inside the call: an empty wait.
    pub empty_polls: u64,
    /// `sched_yield` calls: each one is a wait iteration (MPICH's wait loop).
    pub yields: u64,
    /// Spin episodes started.
    pub spin_episodes: u64,
    /// On-CPU time since the latest empty wait, from runs that ended since
    /// (add the current run's part while on CPU). Checked against the spin
    /// gap: a task that computes past it after a wait is no longer waiting.
    pub gap_oncpu_ns: u64,
    /// `switches_out_voluntary + 1` at the entry of the poll-family call the
    /// task is in, 0 outside one: the exit tells "returned at once" from
    /// "blocked, then timed out" by whether the count moved.
    pub wait_enter_voluntary: u64,
    /// `spin_ns` when the current spin episode started: the episode's own
    /// spin time is `spin_ns - episode_spin_base_ns`.
    pub episode_spin_base_ns: u64,
    /// Time of the latest receive or poll-family call that found nothing
    /// to read (an empty wait that looked at the sockets; a yield looks at
    /// none). Kept across episodes. See [`TaskStats::message_pending`].
    pub last_found_empty_ns: u64,
    /// Time the task last stopped waiting by itself: a receive that
    /// returned data, a send, a block (voluntary switch-out) or its exit
    /// (`episode::end`), 0 if never. Passing the spin gap is not such an
    /// end: on a virtual machine a stalled vCPU (hypervisor steal, measured
    /// here up to 7 ms) looks like on-CPU time without an empty wait, so a
    /// gap-only end can be a spinner that never stopped spinning. A policy
    /// that holds a waiting task hands it back on a wait end stamped after
    /// the hold began, never on the gap alone.
    pub last_wait_end_ns: u64,
}
const _: () = assert!(core::mem::size_of::<TaskStats>() == 232);

impl TaskStats {
    /// A message is waiting to be read: the latest arrival came after the
    /// task's latest receive that returned data, and after its latest look
    /// that found its sockets empty.
    ///
    /// The second bound is needed because the arrival's stamp can come
    /// after the receive that read it: `sk_data_ready` runs (and stamps)
    /// after the sender queued the data and released the queue's lock, and
    /// a receiver spinning on the socket can take the data in between (it
    /// is often waiting on that very lock). Judged by the first bound alone,
    /// such a message stayed "pending" until the next one was read: a
    /// receiver whose peer then stopped sending spun with a message
    /// "pending" and was never blocked (the flaky spin-block root test of
    /// session 17). A receive or poll that found nothing after the stamp
    /// shows the data was gone by then. A receiver that reads several
    /// sockets one by one may find one empty while another holds a message:
    /// it reads that one in its next iterations, microseconds later.
    #[inline(always)]
    pub fn message_pending(&self) -> bool {
        self.last_arrival_ns > self.last_recv_ok_ns
            && self.last_arrival_ns > self.last_found_empty_ns
    }
}

/// Who runs on a CPU: the value of the `CPU_CURRENT` array, indexed by CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuSlot {
    /// tid now running on this CPU (0 = idle).
    pub tid: u32,
    /// Job of that task if managed, else 0.
    pub job_id: u32,
    /// 1 if the running task is managed.
    pub managed: u32,
    /// The task that ran before it. When the agent itself holds the CPU
    /// (reacting to an event), this is the task it preempted and that runs
    /// again as soon as the agent sleeps.
    pub prev_tid: u32,
    /// When it started running.
    pub since_ns: u64,
}
const _: () = assert!(core::mem::size_of::<CpuSlot>() == 24);

/// Value of the `SOCK_OWNER` map, keyed by the kernel socket address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockOwner {
    pub tid: u32,
    pub job_id: u32,
    /// When the owner was learned (a receive or send by the task on this socket).
    pub learned_ns: u64,
}
const _: () = assert!(core::mem::size_of::<SockOwner>() == 16);

/// Flags in the `WATCH` map (tid -> flags): per-task requests for events the
/// agent normally does not want, so they cost nothing for other tasks.
pub mod watch_flags {
    /// Report the start of every spin episode of this task (e.g. a boosted
    /// task that consumed its message and waits again: its boost should end).
    pub const SPIN_START: u32 = 1;
    /// The task is boosted: it runs as soon as its CPU allows, so an arrival
    /// for it while it is off CPU needs no wakeup of the agent.
    pub const BOOSTED: u32 = 2;
    /// The policy holds the task back (spin-block): any arrival for it ends
    /// its wait, so it is reported, and wakes the agent, wherever the task is.
    pub const HELD: u32 = 4;
}

/// Kinds of ring-buffer records.
pub mod event_kind {
    /// A message arrived on a socket owned by a managed task that is a
    /// decision: the task is ready but off CPU, or held back by the policy
    /// (other arrivals are only counted in `TASKS`). `arg` = socket address.
    pub const ARRIVAL: u32 = 1;
    /// A managed task exited; its final counters are still in `TASKS`.
    pub const EXIT: u32 = 2;
    /// A managed task forked; `arg` = child tid (already added to `TASKS`).
    pub const FORK: u32 = 3;
    /// A managed task started spinning (first empty receive of an episode).
    pub const SPIN_START: u32 = 4;
    /// A managed task's spin episode passed [`Settings::spin_report_ns`] of
    /// on-CPU spin time (once per episode). `arg` = the episode's spin time, ns.
    pub const SPIN_LONG: u32 = 5;
}

/// Flags in [`Event::flags`].
pub mod event_flags {
    /// The task the event is about was on a CPU when the event happened.
    pub const TASK_ON_CPU: u32 = 1;
    /// The task was spinning (in a spin episode) when the event happened.
    pub const TASK_SPINNING: u32 = 2;
}

/// One ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub kind: u32,
    pub tid: u32,
    pub job_id: u32,
    pub flags: u32,
    /// `bpf_ktime_get_ns` when the event happened (CLOCK_MONOTONIC).
    pub ts_ns: u64,
    /// Kind-specific argument.
    pub arg: u64,
}
const _: () = assert!(core::mem::size_of::<Event>() == 32);

/// Settings the agent writes into the one-element `SETTINGS` array (at load
/// and whenever its policy changes). Which arrivals and spin starts wake the
/// agent is decided in one place on the agent's side (the policy's wake-up
/// interest); per-task requests go through the `WATCH` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// Which arrivals for a receiver that is off CPU are reported at once,
    /// waking the agent (what DCS reacts to): one of [`offcpu_arrival`].
    /// Every other arrival is only counted.
    pub wake_on_offcpu_arrival: u32,
    /// Records that need no immediate decision (forks, exits) wake the agent
    /// only once this many bytes are queued (0: a quarter of the ring).
    pub wake_batch_bytes: u32,
    /// The spin gap, ns: a spin episode ends when the task has been on CPU
    /// this long since its last empty wait (it computes, it no longer
    /// waits). 0: [`DEFAULT_SPIN_GAP_NS`].
    pub spin_gap_ns: u64,
    /// Report a managed task's spin episode once its on-CPU spin time
    /// passes this, ns (`event_kind::SPIN_LONG`, once per episode, waking
    /// the agent): what a spin-block or spin-yield policy acts on, so it
    /// needs no fast tick to find its spinners. 0: never.
    pub spin_report_ns: u64,
}
const _: () = assert!(core::mem::size_of::<Settings>() == 24);

/// The spin gap used while the agent has not written one (see
/// [`Settings::spin_gap_ns`]; the agent's `[detect] spin_gap_us` documents
/// how it was chosen).
pub const DEFAULT_SPIN_GAP_NS: u64 = 200_000;

/// Values of [`Settings::wake_on_offcpu_arrival`].
pub mod offcpu_arrival {
    /// None (only counted).
    pub const OFF: u32 = 0;
    /// For a receiver preempted while it waited (spun) for a message.
    pub const WAITING: u32 = 1;
    /// For any ready receiver: preempted while waiting or while computing.
    pub const READY: u32 = 2;
}

/// Is an arrival for a managed task a decision the agent must hear at once
/// (an `event_kind::ARRIVAL` record that wakes it), or only counted?
/// `watch`: the task's [`watch_flags`]; `waiting`: it is in a spin episode.
/// Only a receiver that is ready but not running (preempted while spinning;
/// with [`offcpu_arrival::READY`] also preempted while computing) is a
/// decision: one blocked in a receive is woken by the kernel, one on a CPU
/// runs already, one boosted runs as soon as it can. A task the policy
/// holds back is a decision wherever it is: its wait is over. The eBPF
/// `sk_data_ready` program and the simulator both judge with this.
#[inline(always)]
pub fn arrival_reported(
    settings: &Settings,
    watch: u32,
    on_cpu: bool,
    waiting: bool,
    last_out_preempted: bool,
) -> bool {
    let ready_off_cpu = !on_cpu
        && watch & watch_flags::BOOSTED == 0
        && match settings.wake_on_offcpu_arrival {
            offcpu_arrival::WAITING => waiting,
            offcpu_arrival::READY => last_out_preempted || waiting,
            _ => false,
        };
    ready_off_cpu || watch & watch_flags::HELD != 0
}

/// Kinds of [`TimelineRecord`]s.
pub mod timeline_kind {
    /// A context switch with a managed task on either side.
    pub const SWITCH: u32 = 1;
    /// A managed task started a spin episode (`prev_tid` is the task).
    pub const SPIN_START: u32 = 2;
    /// A managed task's spin episode ended (`prev_tid` is the task).
    pub const SPIN_END: u32 = 3;
}

/// One record of a timeline recording, in the `TIMELINE` ring buffer.
///
/// Written only while the agent records (the one-element `RECORDING` array
/// is non-zero) and only for managed tasks: a context switch with a managed
/// task on either side, and the start and end of their spin episodes.
/// Switches between two unmanaged tasks are never recorded, so between
/// records a CPU runs either the managed task switched in or something
/// else (another process or idle).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelineRecord {
    /// One of [`timeline_kind`].
    pub kind: u32,
    pub cpu: u32,
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC).
    pub ts_ns: u64,
    /// The task switched out (a switch) or the task (spin records).
    pub prev_tid: u32,
    /// Its job (0: not managed).
    pub prev_job: u32,
    /// The task switched in (0: the idle task; switches only).
    pub next_tid: u32,
    /// Its job (0: not managed).
    pub next_job: u32,
}
const _: () = assert!(core::mem::size_of::<TimelineRecord>() == 32);

/// Counters of records the eBPF side could not deliver, the value of the
/// one-element per-CPU `DROPS` array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drops {
    /// Ring buffer full.
    pub ring_full: u64,
    /// TASKS map full (a fork child could not be added).
    pub tasks_full: u64,
    /// SOCK_OWNER map full.
    pub sockets_full: u64,
    /// Records submitted with a forced wakeup of the agent (not a drop: kept
    /// here to compare with the wakeups the agent sees).
    pub forced_wakeups: u64,
    /// Timeline records lost (timeline ring full while recording).
    pub timeline_lost: u64,
}
const _: () = assert!(core::mem::size_of::<Drops>() == 40);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all types are repr(C), made of integers, with no implicit padding
    // (the size asserts above pin the layout), so every bit pattern is valid.
    unsafe impl aya::Pod for super::TaskStats {}
    unsafe impl aya::Pod for super::CpuSlot {}
    unsafe impl aya::Pod for super::SockOwner {}
    unsafe impl aya::Pod for super::Event {}
    unsafe impl aya::Pod for super::Settings {}
    unsafe impl aya::Pod for super::Drops {}
    unsafe impl aya::Pod for super::TimelineRecord {}
}

#[cfg(test)]
mod tests {
    use super::TaskStats;

    /// Received at 1_000, the data's arrival stamped at 1_050 (the receiver
    /// took it off the queue before `sk_data_ready` ran), then it spun.
    fn read_before_its_stamp() -> TaskStats {
        TaskStats {
            recv_ok: 1,
            last_recv_ok_ns: 1_000,
            arrivals: 1,
            last_arrival_ns: 1_050,
            ..TaskStats::default()
        }
    }

    #[test]
    fn an_arrival_stamped_after_its_receive_is_pending_until_an_empty_look() {
        let s = read_before_its_stamp();
        assert!(s.message_pending(), "nothing shows it was read yet");
        let looked = TaskStats {
            last_found_empty_ns: 1_200,
            ..s
        };
        assert!(!looked.message_pending(), "an empty receive after it");
        // A new message after that look is pending again.
        let again = TaskStats {
            arrivals: 2,
            last_arrival_ns: 5_000,
            ..looked
        };
        assert!(again.message_pending());
    }
}
