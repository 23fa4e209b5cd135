//! Offsets of the tracepoint fields the eBPF programs read.
//!
//! Classic tracepoint programs get a pointer to the raw trace record; the
//! offsets below are the ones the kernel publishes in
//! `/sys/kernel/tracing/events/<category>/<name>/format` (stable for years on
//! x86_64). The agent checks them against the running kernel's format files
//! before attaching, so a kernel with another layout is refused with a clear
//! error instead of being misread.

/// One field a program reads: tracepoint, field name, offset, size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub category: &'static str,
    pub event: &'static str,
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
}

const fn field(
    category: &'static str,
    event: &'static str,
    name: &'static str,
    offset: usize,
    size: usize,
) -> Field {
    Field {
        category,
        event,
        name,
        offset,
        size,
    }
}

pub const SCHED_SWITCH_PREV_PID: Field = field("sched", "sched_switch", "prev_pid", 24, 4);
pub const SCHED_SWITCH_PREV_STATE: Field = field("sched", "sched_switch", "prev_state", 32, 8);
pub const SCHED_SWITCH_NEXT_PID: Field = field("sched", "sched_switch", "next_pid", 56, 4);
pub const FORK_PARENT_PID: Field = field("sched", "sched_process_fork", "parent_pid", 12, 4);
pub const FORK_CHILD_PID: Field = field("sched", "sched_process_fork", "child_pid", 20, 4);
/// `sched_process_fork` before its comms became `__data_loc` strings (Linux
/// 6.12 and older: `char parent_comm[16]`, `char child_comm[16]`); the
/// agent attaches the program that reads this layout where the kernel has it.
pub const FORK_PARENT_PID_COMM16: Field = field("sched", "sched_process_fork", "parent_pid", 24, 4);
pub const FORK_CHILD_PID_COMM16: Field = field("sched", "sched_process_fork", "child_pid", 44, 4);
pub const EXIT_PID: Field = field("sched", "sched_process_exit", "pid", 24, 4);
pub const RECV_SK: Field = field("sock", "sock_recv_length", "sk", 8, 8);
pub const RECV_RET: Field = field("sock", "sock_recv_length", "ret", 20, 4);
pub const RECV_FLAGS: Field = field("sock", "sock_recv_length", "flags", 24, 4);
pub const SEND_SK: Field = field("sock", "sock_send_length", "sk", 8, 8);
pub const SEND_RET: Field = field("sock", "sock_send_length", "ret", 20, 4);
pub const DATA_READY_SK: Field = field("sock", "sk_data_ready", "skaddr", 8, 8);
pub const SOCK_STATE_SK: Field = field("sock", "inet_sock_set_state", "skaddr", 8, 8);
pub const SOCK_STATE_NEWSTATE: Field = field("sock", "inet_sock_set_state", "newstate", 20, 4);

/// `ret` of a `syscalls/sys_exit_*` record (the same place in every one).
pub const SYS_EXIT_RET: Field = sys_exit_ret("sys_exit_*");

/// The `ret` field of one `syscalls/<event>` exit tracepoint, for the check
/// of an optional waiting detector (see `names::WAIT_DETECTORS`).
pub const fn sys_exit_ret(event: &'static str) -> Field {
    field("syscalls", event, "ret", 16, 8)
}

/// Every field read by the mandatory programs, for the agent's start-up check.
pub const ALL: [Field; 14] = [
    SCHED_SWITCH_PREV_PID,
    SCHED_SWITCH_PREV_STATE,
    SCHED_SWITCH_NEXT_PID,
    FORK_PARENT_PID,
    FORK_CHILD_PID,
    EXIT_PID,
    RECV_SK,
    RECV_RET,
    RECV_FLAGS,
    SEND_SK,
    SEND_RET,
    DATA_READY_SK,
    SOCK_STATE_SK,
    SOCK_STATE_NEWSTATE,
];

/// `prev_state` bit the kernel reports for a preempted task (TASK_REPORT_MAX).
pub const PREV_STATE_PREEMPTED: i64 = 0x100;
/// `-EAGAIN` (== `-EWOULDBLOCK`) as returned in `sock_recv_length.ret`.
pub const NEG_EAGAIN: i32 = -11;
/// TCP_CLOSE in `inet_sock_set_state.newstate`.
pub const TCP_CLOSE: i32 = 7;
