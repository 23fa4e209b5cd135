//! tracefs: making sure it is mounted, and checking that the running kernel's
//! tracepoint record layouts are the ones the eBPF programs were built for.
use std::{fs, io, path::Path};

use anyhow::{Context as _, bail};
use cosched_agent_common::{
    WaitDetector,
    layout::{self, Field},
};

const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs at /sys/kernel/tracing when it is not there (a fresh boot,
/// or a mount namespace made by `ip netns exec`). aya attaches tracepoints
/// through it.
pub fn ensure_mounted() -> anyhow::Result<()> {
    if Path::new(TRACEFS).join("events").is_dir() {
        return Ok(());
    }
    let src = c"tracefs";
    let target = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings, no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            src.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context("mounting tracefs at /sys/kernel/tracing");
    }
    Ok(())
}

/// A field of a tracepoint format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatField {
    pub name: String,
    pub offset: usize,
    pub size: usize,
}

/// Parses the `field:` lines of a tracepoint `format` file, e.g.
/// `field:pid_t prev_pid; offset:24; size:4; signed:1;` (tab-separated).
pub fn parse_format(text: &str) -> Vec<FormatField> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let decl = line.strip_prefix("field:")?.split(';').next()?;
            // The name is the last word of the declaration, minus any array suffix.
            let name = decl
                .split_whitespace()
                .last()?
                .split('[')
                .next()?
                .to_string();
            let num = |key: &str| -> Option<usize> {
                line.split(';')
                    .map(str::trim)
                    .find_map(|p| p.strip_prefix(key))?
                    .parse()
                    .ok()
            };
            Some(FormatField {
                name,
                offset: num("offset:")?,
                size: num("size:")?,
            })
        })
        .collect()
}

/// Compares the expected fields with a parsed format; returns a description of
/// every mismatch.
pub fn mismatches(expected: &[Field], event: &str, actual: &[FormatField]) -> Vec<String> {
    expected
        .iter()
        .filter(|f| f.event == event)
        .filter_map(|f| match actual.iter().find(|a| a.name == f.name) {
            None => Some(format!(
                "{}/{}: field {} missing",
                f.category, f.event, f.name
            )),
            Some(a) if a.offset != f.offset || a.size != f.size => Some(format!(
                "{}/{}: field {} at offset {} size {} (cosched expects offset {} size {})",
                f.category, f.event, f.name, a.offset, a.size, f.offset, f.size
            )),
            Some(_) => None,
        })
        .collect()
}

/// Which `sched_process_fork` record the kernel has, so which program reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForkLayout {
    /// `__data_loc` comms (newer kernels): `names::PROG_PROCESS_FORK`.
    DataLocComm,
    /// `char[16]` comms (6.12 and older): `names::PROG_PROCESS_FORK_COMM16`.
    Comm16,
}

impl ForkLayout {
    pub fn program(self) -> &'static str {
        match self {
            ForkLayout::DataLocComm => cosched_agent_common::names::PROG_PROCESS_FORK,
            ForkLayout::Comm16 => cosched_agent_common::names::PROG_PROCESS_FORK_COMM16,
        }
    }
}

/// The fork record layout whose pid fields the format file has, if any.
pub fn fork_layout(actual: &[FormatField]) -> Option<ForkLayout> {
    let ev = "sched_process_fork";
    let new = [layout::FORK_PARENT_PID, layout::FORK_CHILD_PID];
    let old = [
        layout::FORK_PARENT_PID_COMM16,
        layout::FORK_CHILD_PID_COMM16,
    ];
    if mismatches(&new, ev, actual).is_empty() {
        Some(ForkLayout::DataLocComm)
    } else if mismatches(&old, ev, actual).is_empty() {
        Some(ForkLayout::Comm16)
    } else {
        None
    }
}

/// Refuses to attach to a kernel that lacks a tracepoint the programs need
/// (naming every missing one at once) or whose record layouts differ from
/// ours; `sched_process_fork` may have either known layout (returned).
pub fn check_layouts() -> anyhow::Result<ForkLayout> {
    let events = required_events();
    let format_path = |cat: &str, ev: &str| {
        Path::new(TRACEFS)
            .join("events")
            .join(cat)
            .join(ev)
            .join("format")
    };
    let missing: Vec<(&str, &str)> = events
        .iter()
        .copied()
        .filter(|(cat, ev)| !format_path(cat, ev).exists())
        .collect();
    if !missing.is_empty() {
        let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        bail!("{}", missing_message(release.trim(), &missing));
    }
    let mut problems = Vec::new();
    let mut fork = ForkLayout::DataLocComm;
    for (cat, ev) in events {
        let path = format_path(cat, ev);
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let actual = parse_format(&text);
        let mut found = mismatches(&layout::ALL, ev, &actual);
        if ev == "sched_process_fork"
            && let Some(known) = fork_layout(&actual)
        {
            fork = known;
            found.clear();
        }
        problems.extend(found);
    }
    if !problems.is_empty() {
        bail!(
            "kernel tracepoint layout differs from the one cosched was built for:\n  {}",
            problems.join("\n  ")
        );
    }
    Ok(fork)
}

/// The tracepoints whose fields the programs read, each once, in order.
fn required_events() -> Vec<(&'static str, &'static str)> {
    let mut events: Vec<(&str, &str)> = Vec::new();
    for f in layout::ALL {
        if !events.contains(&(f.category, f.event)) {
            events.push((f.category, f.event));
        }
    }
    events
}

/// The start-up error on a kernel without some required tracepoints.
pub fn missing_message(release: &str, missing: &[(&str, &str)]) -> String {
    let names: Vec<String> = missing.iter().map(|(c, e)| format!("{c}/{e}")).collect();
    format!(
        "this kernel ({release}) lacks the tracepoint{} {}, which cosched-agent needs; \
         it does not start without them (the sock tracepoints are in Linux 6.12, not in 6.1: \
         see docs/kernels.md)",
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    )
}

/// Why an optional waiting detector is not attached, if it is not: its
/// tracepoints are missing on this kernel, or their layout differs.
pub fn detector_problem(d: &WaitDetector) -> Option<String> {
    let events = [Some(d.enter_event), d.exit_event];
    for ev in events.into_iter().flatten() {
        let path = Path::new(TRACEFS)
            .join("events/syscalls")
            .join(ev)
            .join("format");
        let Ok(text) = fs::read_to_string(&path) else {
            return Some(format!("tracepoint syscalls/{ev} missing"));
        };
        if Some(ev) == d.exit_event {
            let ret = [layout::sys_exit_ret(ev)];
            let problems = mismatches(&ret, ev, &parse_format(&text));
            if !problems.is_empty() {
                return Some(problems.join("; "));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch
ID: 316
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:char prev_comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t prev_pid;	offset:24;	size:4;	signed:1;
	field:int prev_prio;	offset:28;	size:4;	signed:1;
	field:long prev_state;	offset:32;	size:8;	signed:1;
	field:char next_comm[16];	offset:40;	size:16;	signed:0;
	field:pid_t next_pid;	offset:56;	size:4;	signed:1;
";

    #[test]
    fn parses_names_offsets_and_sizes() {
        let f = parse_format(SCHED_SWITCH);
        assert!(f.contains(&FormatField {
            name: "prev_comm".into(),
            offset: 8,
            size: 16
        }));
        assert!(f.contains(&FormatField {
            name: "next_pid".into(),
            offset: 56,
            size: 4
        }));
        assert_eq!(f.len(), 7);
    }

    #[test]
    fn matching_layout_has_no_mismatch() {
        assert!(mismatches(&layout::ALL, "sched_switch", &parse_format(SCHED_SWITCH)).is_empty());
    }

    #[test]
    fn moved_field_is_reported_with_both_offsets() {
        let moved = SCHED_SWITCH.replace("offset:56", "offset:60");
        let m = mismatches(&layout::ALL, "sched_switch", &parse_format(&moved));
        assert_eq!(m.len(), 1);
        assert!(
            m[0].contains("next_pid at offset 60") && m[0].contains("expects offset 56"),
            "{m:?}"
        );
    }

    #[test]
    fn syscall_exit_ret_is_checked_at_its_offset() {
        let exit = "name: sys_exit_poll
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:int __syscall_nr;	offset:8;	size:4;	signed:1;
	field:long ret;	offset:16;	size:8;	signed:1;
";
        let ret = [layout::sys_exit_ret("sys_exit_poll")];
        assert!(mismatches(&ret, "sys_exit_poll", &parse_format(exit)).is_empty());
        let moved = exit.replace("offset:16", "offset:24");
        assert_eq!(
            mismatches(&ret, "sys_exit_poll", &parse_format(&moved)).len(),
            1
        );
    }

    const FORK_6_12: &str = "name: sched_process_fork
ID: 310
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:char parent_comm[16];	offset:8;	size:16;	signed:0;
	field:pid_t parent_pid;	offset:24;	size:4;	signed:1;
	field:char child_comm[16];	offset:28;	size:16;	signed:0;
	field:pid_t child_pid;	offset:44;	size:4;	signed:1;
";
    const FORK_7_2: &str = "name: sched_process_fork
format:
	field:__data_loc char[] parent_comm;	offset:8;	size:4;	signed:0;
	field:pid_t parent_pid;	offset:12;	size:4;	signed:1;
	field:__data_loc char[] child_comm;	offset:16;	size:4;	signed:0;
	field:pid_t child_pid;	offset:20;	size:4;	signed:1;
";

    #[test]
    fn the_6_12_fork_record_with_char16_comms_gets_its_own_program() {
        let layout = fork_layout(&parse_format(FORK_6_12));
        assert_eq!(layout, Some(ForkLayout::Comm16));
        assert_eq!(layout.unwrap().program(), "sched_process_fork_comm16");
        assert_eq!(
            fork_layout(&parse_format(FORK_7_2)),
            Some(ForkLayout::DataLocComm)
        );
    }

    #[test]
    fn a_fork_record_of_neither_known_layout_is_refused() {
        let moved = FORK_7_2.replace("offset:20", "offset:28");
        assert_eq!(fork_layout(&parse_format(&moved)), None);
    }

    #[test]
    fn every_required_tracepoint_is_checked_once() {
        let events = required_events();
        assert_eq!(events.len(), 7);
        assert!(events.contains(&("sock", "sk_data_ready")));
        assert_eq!(events[0], ("sched", "sched_switch"));
    }

    #[test]
    fn a_kernel_without_the_sock_tracepoints_is_refused_naming_each() {
        let text = missing_message(
            "6.1.0-56-cloud-amd64",
            &[
                ("sock", "sock_recv_length"),
                ("sock", "sock_send_length"),
                ("sock", "sk_data_ready"),
            ],
        );
        assert!(text.starts_with("this kernel (6.1.0-56-cloud-amd64) lacks the tracepoints "));
        for tp in [
            "sock/sock_recv_length",
            "sock/sock_send_length",
            "sock/sk_data_ready",
        ] {
            assert!(text.contains(tp), "{text}");
        }
    }

    #[test]
    fn missing_field_is_reported() {
        let gone: String = SCHED_SWITCH
            .lines()
            .filter(|l| !l.contains("prev_state"))
            .collect::<Vec<_>>()
            .join("\n");
        let m = mismatches(&layout::ALL, "sched_switch", &parse_format(&gone));
        assert_eq!(
            m,
            vec!["sched/sched_switch: field prev_state missing".to_string()]
        );
    }
}
