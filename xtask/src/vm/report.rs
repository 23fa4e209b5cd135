//! What the guests reported (their `VMTEST ` console lines) turned into
//! checks with a verdict each: pure functions over the lines, so every rule
//! is tested without a VM.

use std::{collections::BTreeMap, time::Duration};

use cosched_policy::global::OffsetEstimate;
use cosched_proto::timeline::{NodeTimeline, SliceNumber};
use cosched_timeline::clock::align_all;

use serde_json::Value;

/// The guests of one run: the coordinator's VM and the two agents' VMs.
pub const COORDINATOR_VM: &str = "coord";
pub const AGENT_VMS: [&str; 2] = ["n1", "n2"];

/// Checks each agent VM reports when its kernel has what the agent needs.
pub const AGENT_CHECKS: [&str; 8] = [
    "network",
    "attach",
    "adopt",
    "observe",
    "dcs_boost",
    "reload",
    "sigkill_restore",
    "rejoin",
];
/// Checks of the coordinator's VM (the gang ones are decided here from its
/// DATA lines).
pub const COORDINATOR_CHECKS: [&str; 7] = [
    "network",
    "coordinator",
    "nodes_joined",
    "gang_slices",
    "gang_skew",
    "timeline_clock",
    "gang_jobs_completed",
];

/// The second agent's VM boots this much later than the others, so its
/// CLOCK_MONOTONIC is behind theirs by about as much.
pub const CLOCK_STAGGER: Duration = Duration::from_millis(1500);
/// Own-clock gap the two agents' recordings must show for the same slice
/// switch, so that a timeline left on the nodes' clocks (or moved the wrong
/// way) cannot pass for aligned.
const MIN_OWN_CLOCK_GAP_NS: u64 = 1_000_000_000;
/// Largest gap allowed between the same slice switch on two nodes once
/// both are on the coordinator's clock: the switch skew (p99 ~20 ms under
/// TCG) plus the offsets' uncertainty, well under the 50 ms slice.
const MAX_ALIGNED_GAP_NS: u64 = 20_000_000;
/// Slice switches both recordings must have (1 s of 50 ms slices has ~20).
const MIN_MATCHED_SLICES: usize = 5;

/// Tracepoints the agent cannot start without (the others are optional
/// waiting detectors).
pub const REQUIRED_TRACEPOINTS: [&str; 7] = [
    "sched/sched_switch",
    "sched/sched_process_fork",
    "sched/sched_process_exit",
    "sock/sock_recv_length",
    "sock/sock_send_length",
    "sock/sk_data_ready",
    "sock/inet_sock_set_state",
];

/// Share of a node's gang-job CPU time allowed outside the job's own slots
/// (switches are announced ahead and applied by each agent; under TCG the
/// edges are coarse).
const MAX_OUT_OF_SLOT_SHARE: f64 = 0.10;
/// Slice switches the coordinator must have measured the skew of.
const MIN_SKEW_SAMPLES: u64 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// Not run on this kernel, by design (e.g. the agent refuses to start).
    NotApplicable,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub vm: String,
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

/// One guest's console lines, the `VMTEST ` prefix removed.
#[derive(Debug, Clone, Default)]
pub struct Guest {
    pub lines: Vec<String>,
}

impl Guest {
    /// Takes a console line; keeps it if it is a report line.
    pub fn push_console_line(&mut self, line: &str) {
        if let Some(at) = line.find("VMTEST ") {
            self.lines
                .push(strip_ansi(line[at + 7..].trim_end_matches('\r')));
        }
    }

    fn tagged<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.lines.iter().filter_map(move |l| {
            l.strip_prefix(tag)
                .and_then(|rest| rest.strip_prefix(' ').or((rest.is_empty()).then_some("")))
        })
    }

    pub fn has(&self, marker: &str) -> bool {
        self.lines.iter().any(|l| l == marker)
    }

    pub fn kernel_release(&self) -> Option<&str> {
        self.tagged("KERNEL").next()
    }

    /// `(tracepoint, present)` as the guest listed them.
    pub fn tracepoints(&self) -> Vec<(String, bool)> {
        self.tagged("TP")
            .filter_map(|rest| {
                let (tp, yes) = rest.split_once(' ')?;
                Some((tp.to_string(), yes == "yes"))
            })
            .collect()
    }

    pub fn features(&self) -> BTreeMap<String, String> {
        self.tagged("FEATURE")
            .filter_map(|rest| {
                let (k, v) = rest.split_once(' ')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect()
    }

    /// The guest's own verdicts: name -> (passed, detail); the last wins.
    fn checks(&self) -> BTreeMap<String, (bool, String)> {
        self.tagged("CHECK")
            .filter_map(|rest| {
                let mut words = rest.splitn(3, ' ');
                let name = words.next()?.to_string();
                let pass = words.next()? == "PASS";
                Some((name, (pass, words.next().unwrap_or("").to_string())))
            })
            .collect()
    }

    fn data(&self, name: &str) -> Vec<&str> {
        self.tagged("DATA")
            .filter_map(|rest| {
                let (n, text) = rest.split_once(' ').unwrap_or((rest, ""));
                (n == name).then_some(text)
            })
            .collect()
    }

    pub fn log(&self) -> Vec<&str> {
        self.tagged("LOG").collect()
    }
}

/// The text without terminal colour sequences (`ESC [ ... m`: the agent's
/// log lines carry them).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The required tracepoints a guest reported missing.
pub fn missing_required(guest: &Guest) -> Vec<String> {
    guest
        .tracepoints()
        .into_iter()
        .filter(|(tp, present)| !present && REQUIRED_TRACEPOINTS.contains(&tp.as_str()))
        .map(|(tp, _)| tp)
        .collect()
}

/// Every check of a run, from the three guests' lines.
pub fn decide(guests: &BTreeMap<String, Guest>) -> Vec<Check> {
    let empty = Guest::default();
    let guest = |vm: &str| guests.get(vm).unwrap_or(&empty);
    let mut out = Vec::new();
    let mut agents_refused = false;
    for vm in AGENT_VMS {
        let g = guest(vm);
        let missing = missing_required(g);
        if missing.is_empty() {
            out.extend(reported(vm, g, &AGENT_CHECKS));
        } else {
            agents_refused = true;
            out.extend(reported(vm, g, &["network"]));
            out.push(refusal(vm, g, &missing));
            for name in AGENT_CHECKS.iter().skip(2) {
                out.push(not_applicable(vm, name, "the agent refuses this kernel"));
            }
        }
    }
    let c = guest(COORDINATOR_VM);
    out.extend(reported(COORDINATOR_VM, c, &["network", "coordinator"]));
    if agents_refused {
        for name in &COORDINATOR_CHECKS[2..] {
            out.push(not_applicable(
                COORDINATOR_VM,
                name,
                "no agent runs on this kernel",
            ));
        }
    } else {
        out.extend(reported(COORDINATOR_VM, c, &["nodes_joined"]));
        out.push(gang_slices(c));
        out.push(gang_skew(c));
        out.push(timeline_clock(guests));
        out.extend(reported(COORDINATOR_VM, c, &["gang_jobs_completed"]));
    }
    out
}

fn not_applicable(vm: &str, name: &str, why: &str) -> Check {
    Check {
        vm: vm.into(),
        name: name.into(),
        verdict: Verdict::NotApplicable,
        detail: why.into(),
    }
}

/// The guest's verdicts on `names`; a check it never reported fails.
fn reported(vm: &str, guest: &Guest, names: &[&str]) -> Vec<Check> {
    let checks = guest.checks();
    names
        .iter()
        .map(|name| {
            let (verdict, detail) = match checks.get(*name) {
                Some((true, d)) => (Verdict::Pass, d.clone()),
                Some((false, d)) => (Verdict::Fail, d.clone()),
                None => (
                    Verdict::Fail,
                    "not reported (guest stopped or timed out)".into(),
                ),
            };
            Check {
                vm: vm.into(),
                name: (*name).into(),
                verdict,
                detail,
            }
        })
        .collect()
}

/// On a kernel without a required tracepoint the agent must refuse to
/// start, naming every missing one.
fn refusal(vm: &str, guest: &Guest, missing: &[String]) -> Check {
    let checks = guest.checks();
    let said: String = guest
        .log()
        .join("\n")
        .chars()
        .chain(
            checks
                .get("attach")
                .map(|c| c.1.clone())
                .unwrap_or_default()
                .chars(),
        )
        .collect();
    let started = checks.get("attach").is_some_and(|c| c.0);
    let unnamed: Vec<&String> = missing
        .iter()
        .filter(|tp| !said.contains(tp.as_str()))
        .collect();
    let (verdict, detail) = if started {
        (
            Verdict::Fail,
            format!("the agent started without {}", missing.join(", ")),
        )
    } else if !unnamed.is_empty() {
        let first = checks
            .get("attach")
            .map(|c| c.1.clone())
            .unwrap_or_default();
        (
            Verdict::Fail,
            format!("refused, but its error does not name {unnamed:?}: {first}"),
        )
    } else {
        (
            Verdict::Pass,
            format!("refused at start, naming {}", missing.join(", ")),
        )
    };
    Check {
        vm: vm.into(),
        name: "start_refused".into(),
        verdict,
        detail,
    }
}

/// Per agent node: CPU seconds of gang jobs inside and outside their slots
/// (`cosched_gang_job_cpu_seconds_total{..., slot="in|out"}` lines).
fn slot_seconds(lines: &[&str]) -> (f64, f64) {
    let mut inside = 0.0;
    let mut outside = 0.0;
    for line in lines {
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        if line.contains("slot=\"in\"") {
            inside += value;
        } else if line.contains("slot=\"out\"") {
            outside += value;
        }
    }
    (inside, outside)
}

fn gang_slices(coordinator: &Guest) -> Check {
    let mut failures = Vec::new();
    let mut details = Vec::new();
    for (vm, octet) in AGENT_VMS.iter().zip(["11", "12"]) {
        let lines = coordinator.data(&format!("gang-cpu-{octet}"));
        let (inside, outside) = slot_seconds(&lines);
        let total = inside + outside;
        details.push(format!(
            "{vm}: {inside:.2} s in own slots, {outside:.2} s outside"
        ));
        if total <= 0.0 {
            failures.push(format!("{vm}: no gang job CPU time"));
        } else if outside > MAX_OUT_OF_SLOT_SHARE * total {
            failures.push(format!(
                "{vm}: {:.0} % outside own slots",
                100.0 * outside / total
            ));
        }
    }
    Check {
        vm: COORDINATOR_VM.into(),
        name: "gang_slices".into(),
        verdict: if failures.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        detail: if failures.is_empty() {
            details.join("; ")
        } else {
            format!("{} ({})", failures.join("; "), details.join("; "))
        },
    }
}

/// The slice switch skew as the coordinator measured it: samples, p50,
/// p99 and max in µs.
pub fn skew(coordinator: &Guest) -> Option<(u64, f64, f64, f64)> {
    let text = *coordinator.data("status").last()?;
    let value: Value = serde_json::from_str(text).ok()?;
    let s = &value["status"]["status"]["skew"];
    Some((
        s["samples"].as_u64()?,
        s["p50_s"].as_f64()? * 1e6,
        s["p99_s"].as_f64()? * 1e6,
        s["max_s"].as_f64()? * 1e6,
    ))
}

fn gang_skew(coordinator: &Guest) -> Check {
    let (verdict, detail) = match skew(coordinator) {
        Some((samples, p50, p99, max)) => (
            if samples >= MIN_SKEW_SAMPLES {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            format!(
                "{samples} slice switches across n1+n2: skew p50 {p50:.0} us, p99 {p99:.0} us, max {max:.0} us"
            ),
        ),
        None => (
            Verdict::Fail,
            format!(
                "no skew in the coordinator's status: {}",
                coordinator
                    .data("status")
                    .last()
                    .copied()
                    .unwrap_or("not reported")
            ),
        ),
    };
    Check {
        vm: COORDINATOR_VM.into(),
        name: "gang_skew".into(),
        verdict,
        detail,
    }
}

/// Every node's clock offset estimate as the coordinator listed them
/// (`cosched --json nodes`).
fn offsets(coordinator: &Guest) -> Result<BTreeMap<String, Option<OffsetEstimate>>, String> {
    let text = coordinator
        .data("nodes")
        .last()
        .copied()
        .ok_or("the coordinator did not list its nodes")?;
    let value: Value = serde_json::from_str(text).map_err(|e| format!("nodes: {e}: {text}"))?;
    let list = value["nodes"]["nodes"]
        .as_array()
        .or(value["nodes"].as_array())
        .ok_or_else(|| format!("no node list in {text}"))?;
    Ok(list
        .iter()
        .filter_map(|n| {
            let name = n["name"].as_str()?.to_string();
            let estimate = n["clock_offset_ns"].as_i64().map(|offset_ns| {
                let uncertainty_ns = n["clock_uncertainty_ns"].as_u64().unwrap_or(0);
                OffsetEstimate {
                    offset_ns,
                    round_trip_ns: 2 * uncertainty_ns,
                    uncertainty_ns,
                }
            });
            Some((name, estimate))
        })
        .collect())
}

fn recording(guests: &BTreeMap<String, Guest>, vm: &str) -> Result<NodeTimeline, String> {
    let guest = guests.get(vm).ok_or(format!("{vm}: no console"))?;
    if let Some(text) = guest.data("timeline").last() {
        return serde_json::from_str::<Vec<NodeTimeline>>(text)
            .map_err(|e| format!("{vm}: timeline: {e}"))?
            .into_iter()
            .next()
            .ok_or(format!("{vm}: empty recording"));
    }
    Err(format!(
        "{vm}: {}",
        guest
            .data("timeline-error")
            .last()
            .copied()
            .unwrap_or("no timeline recorded")
    ))
}

/// Gap between two nodes' instants of each slice switch both recorded,
/// by slice number: second minus first, ns.
fn slice_gaps(a: &NodeTimeline, b: &NodeTimeline) -> Vec<i128> {
    let of = |t: &NodeTimeline| -> BTreeMap<SliceNumber, u64> {
        t.slices
            .iter()
            .filter_map(|s| Some((s.number?, s.ts_ns)))
            .collect()
    };
    let (a, b) = (of(a), of(b));
    a.iter()
        .filter_map(|(n, at)| Some(i128::from(*b.get(n)?) - i128::from(*at)))
        .collect()
}

fn median_abs(gaps: &[i128]) -> u64 {
    let mut abs: Vec<u64> = gaps
        .iter()
        .map(|g| u64::try_from(g.unsigned_abs()).unwrap_or(u64::MAX))
        .collect();
    abs.sort_unstable();
    abs.get(abs.len() / 2).copied().unwrap_or(0)
}

/// Separate machines' timelines on one clock: n1's and n2's recordings (each
/// on its own CLOCK_MONOTONIC, n2 booted [`CLOCK_STAGGER`] later) moved onto
/// the coordinator's clock with its heartbeat offset estimates, by the same
/// code as `cosched timeline --coordinator-clock`; the same numbered slice
/// switch must then line up on both.
fn timeline_clock(guests: &BTreeMap<String, Guest>) -> Check {
    let decided = (|| -> Result<String, String> {
        let raw = [
            recording(guests, AGENT_VMS[0])?,
            recording(guests, AGENT_VMS[1])?,
        ];
        let estimates = offsets(guests.get(COORDINATOR_VM).unwrap_or(&Guest::default()))?;
        let aligned = align_all(&raw, &estimates, "coordinator").map_err(|e| e.to_string())?;
        let own = slice_gaps(&raw[0], &raw[1]);
        let on_coordinator = slice_gaps(&aligned[0], &aligned[1]);
        let (own_gap, gap) = (median_abs(&own), median_abs(&on_coordinator));
        let said = format!(
            "{} slice switches in both recordings: n2 - n1 median {:.1} ms on their own clocks, {:.0} us on the coordinator's",
            own.len(),
            own_gap as f64 / 1e6,
            gap as f64 / 1e3
        );
        if own.len() < MIN_MATCHED_SLICES {
            Err(format!("{said}: fewer than {MIN_MATCHED_SLICES}"))
        } else if own_gap < MIN_OWN_CLOCK_GAP_NS {
            Err(format!(
                "{said}: the clocks differ too little to tell (at least {} ms expected)",
                MIN_OWN_CLOCK_GAP_NS / 1_000_000
            ))
        } else if gap > MAX_ALIGNED_GAP_NS {
            Err(format!(
                "{said}: more than {} ms apart once aligned",
                MAX_ALIGNED_GAP_NS / 1_000_000
            ))
        } else {
            Ok(said)
        }
    })();
    let (verdict, detail) = match decided {
        Ok(detail) => (Verdict::Pass, detail),
        Err(detail) => (Verdict::Fail, detail),
    };
    Check {
        vm: COORDINATOR_VM.into(),
        name: "timeline_clock".into(),
        verdict,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(lines: &[&str]) -> Guest {
        let mut g = Guest::default();
        for l in lines {
            g.push_console_line(l);
        }
        g
    }

    const ALL_TPS_PRESENT: [&str; 7] = [
        "VMTEST TP sched/sched_switch yes",
        "VMTEST TP sched/sched_process_fork yes",
        "VMTEST TP sched/sched_process_exit yes",
        "VMTEST TP sock/sock_recv_length yes",
        "VMTEST TP sock/sock_send_length yes",
        "VMTEST TP sock/sk_data_ready yes",
        "VMTEST TP sock/inet_sock_set_state yes",
    ];

    fn passing_agent() -> Guest {
        let mut lines: Vec<String> = ALL_TPS_PRESENT.iter().map(|s| s.to_string()).collect();
        lines.extend(
            AGENT_CHECKS
                .iter()
                .map(|c| format!("VMTEST CHECK {c} PASS ok")),
        );
        guest(&lines.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Agent clock minus coordinator clock of n1 and n2 (n2 booted later).
    const OFFSETS: [i64; 2] = [3_000_000, -1_497_000_000];

    /// An agent VM that passed and recorded 20 slice switches at 50 ms, on
    /// its own clock (`offset_ns` ahead of the coordinator's), each up to
    /// `jitter_ns` late.
    fn timed_agent(name: &str, offset_ns: i64, jitter_ns: u64) -> Guest {
        use cosched_proto::timeline::Slice;
        let slices = (0..20u64)
            .map(|k| Slice {
                ts_ns: (10_000_000_000 + k * 50_000_000 + (k % 3) * jitter_ns / 2)
                    .checked_add_signed(offset_ns)
                    .unwrap(),
                active: Some(vec![1 + (k % 2) as u32]),
                number: Some(SliceNumber {
                    epoch: 1,
                    slice: 100 + k,
                }),
            })
            .collect();
        let t = NodeTimeline {
            node: name.into(),
            cpus: vec![0],
            slices,
            ..NodeTimeline::default()
        };
        let mut g = passing_agent();
        g.push_console_line(&format!(
            "VMTEST DATA timeline {}",
            serde_json::to_string(&[t]).unwrap()
        ));
        g
    }

    fn nodes_line(offsets: [i64; 2]) -> String {
        format!(
            r#"VMTEST DATA nodes {{"nodes":{{"nodes":[{{"name":"n1","clock_offset_ns":{},"clock_uncertainty_ns":40000}},{{"name":"n2","clock_offset_ns":{},"clock_uncertainty_ns":90000}}]}}}}"#,
            offsets[0], offsets[1]
        )
    }

    fn coordinator(gang_lines: &[&str], status: &str) -> Guest {
        let mut lines = vec![
            "VMTEST CHECK network PASS eth0".to_string(),
            "VMTEST CHECK coordinator PASS up".into(),
            "VMTEST CHECK nodes_joined PASS both".into(),
            format!("VMTEST DATA status {status}"),
            nodes_line(OFFSETS),
            "VMTEST CHECK gang_jobs_completed PASS 1 2".into(),
        ];
        lines.extend(gang_lines.iter().map(|l| l.to_string()));
        guest(&lines.iter().map(String::as_str).collect::<Vec<_>>())
    }

    const STATUS: &str = r#"{"status":{"status":{"skew":{"samples":40,"p50_s":0.0002,"p99_s":0.004,"max_s":0.006}}}}"#;

    fn run(agents: [Guest; 2], coord: Guest) -> Vec<Check> {
        let mut guests = BTreeMap::new();
        let [a, b] = agents;
        guests.insert("n1".to_string(), a);
        guests.insert("n2".to_string(), b);
        guests.insert(COORDINATOR_VM.to_string(), coord);
        decide(&guests)
    }

    fn verdict(checks: &[Check], vm: &str, name: &str) -> Verdict {
        checks
            .iter()
            .find(|c| c.vm == vm && c.name == name)
            .unwrap_or_else(|| panic!("{vm}/{name} missing: {checks:?}"))
            .verdict
    }

    const GANG_OK: [&str; 4] = [
        "VMTEST DATA gang-cpu-11 cosched_gang_job_cpu_seconds_total{job_id=\"1\",job=\"a\",slot=\"in\"} 1.5",
        "VMTEST DATA gang-cpu-11 cosched_gang_job_cpu_seconds_total{job_id=\"1\",job=\"a\",slot=\"out\"} 0.02",
        "VMTEST DATA gang-cpu-12 cosched_gang_job_cpu_seconds_total{job_id=\"2\",job=\"b\",slot=\"in\"} 1.4",
        "VMTEST DATA gang-cpu-12 cosched_gang_job_cpu_seconds_total{job_id=\"2\",job=\"b\",slot=\"out\"} 0",
    ];

    fn timed_agents() -> [Guest; 2] {
        [
            timed_agent("n1", OFFSETS[0], 300_000),
            timed_agent("n2", OFFSETS[1], 0),
        ]
    }

    #[test]
    fn a_full_run_passes_every_check_and_reads_the_skew() {
        let checks = run(timed_agents(), coordinator(&GANG_OK, STATUS));
        assert_eq!(
            checks.len(),
            2 * AGENT_CHECKS.len() + COORDINATOR_CHECKS.len()
        );
        assert!(
            checks.iter().all(|c| c.verdict == Verdict::Pass),
            "{checks:#?}"
        );
        let skew = checks.iter().find(|c| c.name == "gang_skew").unwrap();
        assert!(skew.detail.contains("40 slice switches") && skew.detail.contains("p50 200 us"));
    }

    #[test]
    fn two_recordings_on_the_coordinator_clock_line_up_slice_by_slice() {
        let checks = run(timed_agents(), coordinator(&GANG_OK, STATUS));
        let c = checks.iter().find(|c| c.name == "timeline_clock").unwrap();
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.detail);
        // 1.5 s apart on their own clocks, up to 300 us apart once aligned.
        assert!(
            c.detail.contains("20 slice switches") && c.detail.contains("median 1500."),
            "{}",
            c.detail
        );
    }

    #[test]
    fn recordings_moved_by_wrong_offsets_do_not_line_up() {
        for wrong in [[0, 0], [OFFSETS[1], OFFSETS[0]], [-OFFSETS[0], -OFFSETS[1]]] {
            let mut coord = coordinator(&GANG_OK, STATUS);
            coord.push_console_line(&nodes_line(wrong));
            let checks = run(timed_agents(), coord);
            let c = checks.iter().find(|c| c.name == "timeline_clock").unwrap();
            assert_eq!(c.verdict, Verdict::Fail, "{wrong:?}: {}", c.detail);
            assert!(c.detail.contains("apart once aligned"), "{}", c.detail);
        }
    }

    #[test]
    fn clocks_too_close_to_tell_fail_rather_than_pass_by_chance() {
        let agents = [timed_agent("n1", 1_000, 0), timed_agent("n2", 2_000, 0)];
        let mut coord = coordinator(&GANG_OK, STATUS);
        coord.push_console_line(&nodes_line([1_000, 2_000]));
        let checks = run(agents, coord);
        let c = checks.iter().find(|c| c.name == "timeline_clock").unwrap();
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("too little to tell"), "{}", c.detail);
    }

    #[test]
    fn a_node_without_a_recording_or_an_offset_fails_the_timeline_check_naming_why() {
        let mut failed = passing_agent();
        failed.push_console_line("VMTEST DATA timeline-error gang mode never started on this node");
        let checks = run(
            [timed_agent("n1", OFFSETS[0], 0), failed],
            coordinator(&GANG_OK, STATUS),
        );
        let c = checks.iter().find(|c| c.name == "timeline_clock").unwrap();
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(
            c.detail.contains("n2: gang mode never started"),
            "{}",
            c.detail
        );
        let mut coord = coordinator(&GANG_OK, STATUS);
        coord.push_console_line(
            r#"VMTEST DATA nodes {"nodes":{"nodes":[{"name":"n1","clock_offset_ns":3000000,"clock_uncertainty_ns":1},{"name":"n2","clock_offset_ns":null}]}}"#,
        );
        let checks = run(timed_agents(), coord);
        let c = checks.iter().find(|c| c.name == "timeline_clock").unwrap();
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(
            c.detail.contains("no clock offset estimate"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn a_check_a_guest_never_reported_fails() {
        let mut lines: Vec<String> = ALL_TPS_PRESENT.iter().map(|s| s.to_string()).collect();
        lines.push("VMTEST CHECK attach PASS up".into());
        let partial = guest(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let checks = run([passing_agent(), partial], coordinator(&GANG_OK, STATUS));
        assert_eq!(verdict(&checks, "n2", "attach"), Verdict::Pass);
        assert_eq!(verdict(&checks, "n2", "dcs_boost"), Verdict::Fail);
        assert_eq!(verdict(&checks, "n1", "dcs_boost"), Verdict::Pass);
    }

    #[test]
    fn gang_cpu_outside_the_own_slots_fails_the_slices_check() {
        let mut lines = GANG_OK.to_vec();
        lines[1] = "VMTEST DATA gang-cpu-11 cosched_gang_job_cpu_seconds_total{job_id=\"1\",job=\"a\",slot=\"out\"} 0.5";
        let checks = run(
            [passing_agent(), passing_agent()],
            coordinator(&lines, STATUS),
        );
        let slices = checks.iter().find(|c| c.name == "gang_slices").unwrap();
        assert_eq!(slices.verdict, Verdict::Fail);
        assert!(
            slices.detail.contains("n1: 25 % outside own slots"),
            "{}",
            slices.detail
        );
    }

    #[test]
    fn a_node_that_ran_no_gang_job_fails_the_slices_check() {
        let checks = run(
            [passing_agent(), passing_agent()],
            coordinator(&GANG_OK[..2], STATUS),
        );
        assert_eq!(
            verdict(&checks, COORDINATOR_VM, "gang_slices"),
            Verdict::Fail
        );
    }

    #[test]
    fn too_few_slice_switches_or_no_status_fail_the_skew_check() {
        let few = STATUS.replace("\"samples\":40", "\"samples\":3");
        let checks = run(
            [passing_agent(), passing_agent()],
            coordinator(&GANG_OK, &few),
        );
        assert_eq!(verdict(&checks, COORDINATOR_VM, "gang_skew"), Verdict::Fail);
        let checks = run(
            [passing_agent(), passing_agent()],
            coordinator(&GANG_OK, "cosched: connection refused"),
        );
        assert_eq!(verdict(&checks, COORDINATOR_VM, "gang_skew"), Verdict::Fail);
    }

    fn old_kernel_agent(error: &str) -> Guest {
        guest(&[
            "VMTEST KERNEL 6.1.0-56-cloud-amd64",
            "VMTEST TP sched/sched_switch yes",
            "VMTEST TP sock/sock_recv_length no",
            "VMTEST TP sock/sk_data_ready no",
            "VMTEST TP sock/inet_sock_set_state yes",
            "VMTEST TP syscalls/sys_enter_poll yes",
            "VMTEST CHECK network PASS eth0",
            &format!("VMTEST CHECK attach FAIL the agent did not start: {error}"),
            "VMTEST LOG Error: this kernel lacks",
        ])
    }

    #[test]
    fn on_a_kernel_without_the_sock_tracepoints_a_start_refusal_naming_them_passes() {
        let error = "tracepoints missing on this kernel: sock/sock_recv_length, sock/sk_data_ready";
        let checks = run(
            [old_kernel_agent(error), old_kernel_agent(error)],
            coordinator(&[], "none"),
        );
        assert_eq!(verdict(&checks, "n1", "start_refused"), Verdict::Pass);
        assert_eq!(verdict(&checks, "n1", "dcs_boost"), Verdict::NotApplicable);
        assert_eq!(
            verdict(&checks, COORDINATOR_VM, "gang_skew"),
            Verdict::NotApplicable
        );
        assert_eq!(
            verdict(&checks, COORDINATOR_VM, "coordinator"),
            Verdict::Pass
        );
        assert!(
            !checks.iter().any(|c| c.verdict == Verdict::Fail),
            "{checks:#?}"
        );
    }

    #[test]
    fn a_refusal_that_names_only_some_missing_tracepoints_fails() {
        let error = "reading /sys/kernel/tracing/events/sock/sock_recv_length/format";
        let checks = run(
            [old_kernel_agent(error), old_kernel_agent(error)],
            coordinator(&[], "none"),
        );
        let refusal = checks.iter().find(|c| c.name == "start_refused").unwrap();
        assert_eq!(refusal.verdict, Verdict::Fail);
        assert!(
            refusal.detail.contains("sock/sk_data_ready"),
            "{}",
            refusal.detail
        );
    }

    #[test]
    fn console_noise_around_report_lines_is_ignored() {
        let g = guest(&[
            "[    1.2] random: crng init done",
            "\u{1b}[0mVMTEST KERNEL 7.2.13+deb14-cloud-amd64\r",
            "VMTEST FEATURE sched_ext disabled",
            "VMTEST LOG \u{1b}[2m2026-11-26T15:56:34Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m agent running",
        ]);
        assert_eq!(g.log(), ["2026-11-26T15:56:34Z  INFO agent running"]);
        assert_eq!(g.kernel_release(), Some("7.2.13+deb14-cloud-amd64"));
        assert_eq!(g.features()["sched_ext"], "disabled");
        assert_eq!(g.lines.len(), 3);
    }
}
