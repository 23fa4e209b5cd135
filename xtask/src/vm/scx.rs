//! `cargo xtask vm-test --scx`: does a reaction from inside the kernel (a
//! sched_ext scheduler) beat the agent's? (docs/kernels.md, "A reaction
//! from inside the kernel".)
//!
//! Builds the C sources in `scx/` — a minimal sched_ext scheduler with the
//! probe that measures arrival → running, and its static libbpf loader —
//! then boots the 7.x guest (2 vCPUs, TCG) `runs` times. In each boot the
//! same two 2-rank `cosched-synth` jobs (UDP over loopback, spinning, both on
//! CPU 0) run once per mode, the probe loaded in all of them:
//! `plain` (Linux alone), `agent` (the agent with DCS), `scx` (the
//! scheduler instead of the agent, fair variant) and `scx-fifo` (its FIFO
//! variant, which starves one job). The order of the modes rotates from one
//! boot to the next.
//!
//! Build inputs, all cached under `~/.cache/cosched/vm/scx`: libbpf built
//! from Debian sid's source package (bookworm's 1.1 predates
//! `SEC(".struct_ops.link")`; sid's binary `libbpf.a` is built against a
//! newer glibc than the host's static one), and `vmlinux.h` dumped by
//! bpftool from the kernel's own BTF (the ELF decompressed out of its
//! vmlinuz).

use std::{
    collections::BTreeMap,
    fs,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use super::{
    GUEST_BINARIES, GUEST_SCRIPT, cache_dir,
    initramfs::{self, Initramfs},
    kernels::{self, Kernel, PrivateApt},
};
use crate::{
    process,
    progress::say,
    setup::apt::{self, Package},
};

/// What building the scheduler and its loader needs on the host.
pub const BUILD_PACKAGES: &[Package] = &[
    Package {
        name: "clang",
        needed_for: "compiling the sched_ext scheduler (BPF C)",
    },
    Package {
        name: "bpftool",
        needed_for: "vmlinux.h from the guest kernel's BTF",
    },
    Package {
        name: "libelf-dev",
        needed_for: "libelf.a for the static scheduler loader",
    },
    Package {
        name: "zlib1g-dev",
        needed_for: "libz.a for the static scheduler loader",
    },
    Package {
        name: "libzstd-dev",
        needed_for: "libzstd.a for the static scheduler loader",
    },
    Package {
        name: "zstd",
        needed_for: "decompressing the guest kernel (its BTF)",
    },
    Package {
        name: "xz-utils",
        needed_for: "decompressing the guest kernel (its BTF)",
    },
    Package {
        name: "make",
        needed_for: "building libbpf from source",
    },
    Package {
        name: "gcc",
        needed_for: "building libbpf and the loader",
    },
];

/// The modes, in the first boot's order.
pub const MODES: [&str; 4] = ["plain", "agent", "scx", "scx-fifo"];

#[derive(Debug, Clone)]
pub struct ScxOptions {
    pub kernel: kernels::KernelChoice,
    /// The workspace root (the C sources are in `scx/`).
    pub root: PathBuf,
    pub bin_dir: PathBuf,
    pub out_dir: PathBuf,
    /// Boots.
    pub runs: usize,
    /// Seconds the jobs run in each mode.
    pub seconds: u64,
}

/// What the loader printed at the end of one mode
/// (`SCX RESULT mode=… n=… p50_us=… …`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeResult {
    pub mode: String,
    /// Arrivals followed by a switch-in of their receiver.
    pub n: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub stamps: u64,
    pub kicks: u64,
    pub enq_preempt: u64,
    pub dispatch_first: u64,
    /// Stamped receivers `bpf_task_from_pid` did not find.
    pub no_task: u64,
    /// The scheduler's exit kind (0: it was still running).
    pub exit: u64,
}

impl ProbeResult {
    /// Parses a loader line; `None` when it is not a result line.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix("SCX RESULT ")?;
        let mut out = Self::default();
        for pair in rest.split_whitespace() {
            let (key, value) = pair.split_once('=')?;
            if key == "mode" {
                out.mode = value.to_string();
                continue;
            }
            let value: u64 = value.parse().ok()?;
            match key {
                "n" => out.n = value,
                "p50_us" => out.p50_us = value,
                "p90_us" => out.p90_us = value,
                "p99_us" => out.p99_us = value,
                "max_us" => out.max_us = value,
                "stamps" => out.stamps = value,
                "kicks" => out.kicks = value,
                "enq_preempt" => out.enq_preempt = value,
                "dispatch_first" => out.dispatch_first = value,
                "no_task" => out.no_task = value,
                "exit" => out.exit = value,
                _ => {}
            }
        }
        (!out.mode.is_empty()).then_some(out)
    }
}

/// Iterations per second in a `cosched-synth` summary line
/// (`…: 1234 iterations in 10.001 s (123.4/s), …`).
pub fn synth_rate(line: &str) -> Option<f64> {
    let (_, after) = line.split_once(" s (")?;
    after.split_once("/s)")?.0.parse().ok()
}

/// One mode in one boot.
#[derive(Debug, Clone, Default)]
pub struct ModeRun {
    pub probe: Option<ProbeResult>,
    /// Iterations per second of each job's rank 0.
    pub rates: Vec<f64>,
    pub errors: Vec<String>,
}

/// The modes of one boot, from its `SCX <mode> …` console lines.
pub fn parse_boot(lines: &[String]) -> BTreeMap<String, ModeRun> {
    let mut out: BTreeMap<String, ModeRun> = BTreeMap::new();
    for line in lines {
        let Some(rest) = line.strip_prefix("SCX ") else {
            continue;
        };
        let Some((mode, what)) = rest.split_once(' ') else {
            continue;
        };
        let entry = out.entry(mode.to_string()).or_default();
        if let Some(result) = ProbeResult::parse(what) {
            entry.probe = Some(result);
        } else if let Some(error) = what.strip_prefix("SCX ERROR ") {
            entry.errors.push(error.to_string());
        } else if let Some(summary) = what.strip_prefix("SYNTH ") {
            match synth_rate(summary) {
                Some(rate) => entry.rates.push(rate),
                None => entry.errors.push(format!("no job summary: {summary:?}")),
            }
        }
    }
    out
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// The modes of boot `index` (0-based): `MODES` rotated by `index`.
pub fn modes_for(index: usize) -> Vec<&'static str> {
    (0..MODES.len())
        .map(|i| MODES[(i + index) % MODES.len()])
        .collect()
}

/// Builds, boots `runs` times, prints each boot and the medians.
pub fn run(options: &ScxOptions) -> Result<Vec<BTreeMap<String, ModeRun>>> {
    super::check_host()?;
    apt::ensure(BUILD_PACKAGES)?;
    let cache = cache_dir()?;
    let kernel = kernels::fetch(&cache, options.kernel)
        .with_context(|| format!("could not get the {} kernel", options.kernel.key))?;
    let out_dir = options.out_dir.join("scx");
    fs::create_dir_all(&out_dir)?;
    let loader = build(&cache.join("scx"), &options.root, &kernel, &out_dir)?;
    let mut boots = Vec::new();
    for index in 0..options.runs {
        let modes = modes_for(index);
        say(
            "scx",
            format!("boot {}/{}: {}", index + 1, options.runs, modes.join(", ")),
        );
        let lines = boot(options, &kernel, &loader, &modes, &out_dir, index)?;
        let parsed = parse_boot(&lines);
        print_boot(index, &parsed);
        boots.push(parsed);
    }
    print_summary(&boots);
    Ok(boots)
}

/// libbpf (static, from sid's source package), `vmlinux.h`, the BPF object
/// and the static loader; returns the loader.
fn build(cache: &Path, root: &Path, kernel: &Kernel, out: &Path) -> Result<PathBuf> {
    fs::create_dir_all(cache)?;
    let libbpf = libbpf(cache)?;
    let include = libbpf.join("usr/include");
    let header_dir = cache.join(format!("btf-{}", kernel.version));
    let vmlinux_h = header_dir.join("vmlinux.h");
    if !vmlinux_h.is_file() {
        fs::create_dir_all(&header_dir)?;
        let elf = header_dir.join("vmlinux");
        decompress_vmlinuz(&kernel.vmlinuz, &elf)?;
        let header = process::capture(
            Command::new("bpftool")
                .args(["btf", "dump", "file"])
                .arg(&elf)
                .args(["format", "c"]),
        )?;
        fs::write(&vmlinux_h, header)?;
        fs::remove_file(&elf)?;
    }
    let sources = root.join("scx");
    let object = out.join("cosched_scx.bpf.o");
    say("scx", "compiling the scheduler and its loader");
    process::capture(
        Command::new("clang")
            .args([
                "-g",
                "-O2",
                "-target",
                "bpf",
                "-mcpu=v3",
                "-D__TARGET_ARCH_x86",
            ])
            .args(["-Wall", "-Wno-missing-declarations"])
            .arg("-I")
            .arg(&header_dir)
            .arg("-I")
            .arg(&include)
            .arg("-c")
            .arg(sources.join("cosched_scx.bpf.c"))
            .arg("-o")
            .arg(&object),
    )?;
    let loader = out.join("cosched-scx");
    process::capture(
        Command::new("gcc")
            .args(["-O2", "-Wall", "-static"])
            .arg(format!("-DSCX_OBJ=\"{}\"", object.display()))
            .arg("-I")
            .arg(&include)
            .arg(sources.join("cosched_scx.c"))
            .arg(libbpf.join("usr/lib/libbpf.a"))
            .args(["-lelf", "-lz", "-lzstd", "-o"])
            .arg(&loader),
    )?;
    Ok(loader)
}

/// libbpf from Debian sid's source package, built static once; returns its
/// install root (`usr/include`, `usr/lib/libbpf.a`).
fn libbpf(cache: &Path) -> Result<PathBuf> {
    let src = cache.join("src");
    fs::create_dir_all(&src)?;
    let built = |dir: &Path| dir.join("inst/usr/lib/libbpf.a").is_file();
    let existing = |src: &Path| -> Option<PathBuf> {
        fs::read_dir(src)
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.is_dir()
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("libbpf-"))
            })
    };
    if let Some(dir) = existing(&src).filter(|d| built(d)) {
        return Ok(dir.join("inst"));
    }
    let apt = PrivateApt::with_source(&cache_dir()?, "sid-src", "deb-src", "sid")?;
    apt.update_if_stale()?;
    say("scx", "fetching libbpf's source (Debian sid)");
    process::capture(apt.command("apt-get").current_dir(&src).args([
        "source",
        "--download-only",
        "libbpf",
    ]))
    .context("could not download libbpf's source package")?;
    let tarball = fs::read_dir(&src)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".orig.tar.gz"))
        .context("no libbpf_*.orig.tar.gz downloaded")?;
    process::capture(
        Command::new("tar")
            .arg("xzf")
            .arg(&tarball)
            .current_dir(&src),
    )?;
    let dir = existing(&src).context("the libbpf source did not unpack to libbpf-*")?;
    say("scx", format!("building {} (static)", dir.display()));
    process::capture(Command::new("make").current_dir(dir.join("src")).args([
        "-j2",
        "BUILD_STATIC_ONLY=1",
        "OBJDIR=../build",
        "DESTDIR=../inst",
        "PREFIX=/usr",
        "LIBDIR=/usr/lib",
        "install",
    ]))
    .context("could not build libbpf")?;
    if !built(&dir) {
        bail!(
            "libbpf built but {} is missing",
            dir.join("inst/usr/lib/libbpf.a").display()
        );
    }
    Ok(dir.join("inst"))
}

/// Writes the kernel ELF inside `vmlinuz` (a zstd, xz or gzip stream after
/// the boot stub) to `elf`.
fn decompress_vmlinuz(vmlinuz: &Path, elf: &Path) -> Result<()> {
    let image = fs::read(vmlinuz)?;
    for (magic, tool) in [
        (&b"\x28\xb5\x2f\xfd"[..], "zstd"),
        (&b"\xfd7zXZ\x00"[..], "xz"),
        (&b"\x1f\x8b\x08"[..], "gzip"),
    ] {
        for at in find_all(&image, magic) {
            let mut child = Command::new(tool)
                .args(["-dc"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("could not run {tool}"))?;
            let mut stdin = child.stdin.take().context("stdin")?;
            let data = image[at..].to_vec();
            let writer = thread::spawn(move || {
                let _ = stdin.write_all(&data);
            });
            let output = child.wait_with_output()?;
            let _ = writer.join();
            // Trailing data after the stream makes the tools complain; the
            // ELF is what counts.
            if output.stdout.starts_with(b"\x7fELF") {
                fs::write(elf, &output.stdout)?;
                return Ok(());
            }
        }
    }
    bail!("found no compressed kernel ELF in {}", vmlinuz.display())
}

fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .take(8)
        .collect()
}

/// One boot: the guest runs `modes`; returns its `VMTEST` lines.
fn boot(
    options: &ScxOptions,
    kernel: &Kernel,
    loader: &Path,
    modes: &[&str],
    out: &Path,
    index: usize,
) -> Result<Vec<String>> {
    let mut image = Initramfs::new();
    image.add_file("/bin/busybox", &initramfs::host_program("busybox")?, 0o755)?;
    image.add_bytes("/init", GUEST_SCRIPT.as_bytes().to_vec(), 0o755);
    for name in GUEST_BINARIES {
        image.add_program(&format!("/bin/{name}"), &options.bin_dir.join(name))?;
    }
    image.add_file("/bin/cosched-scx", loader, 0o755)?;
    image.add_bytes(
        "/etc/cosched/secret",
        b"hex:00000000000000000000000000000000\n".to_vec(),
        0o600,
    );
    let initrd = out.join("initramfs.cpio");
    image.write(&initrd)?;
    let append = format!(
        "console=ttyS0 quiet loglevel=1 panic=-1 cosched.role=scx cosched.name=n1 \
         cosched.ip=10.77.0.11 cosched.coord=10.77.0.10 cosched.secs={} cosched.modes={}",
        options.seconds,
        modes.join(",")
    );
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-accel", "tcg", "-cpu", "max", "-m", "512", "-smp", "2"])
        .args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
        .args(["-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(&initrd)
        .args(["-append", &append])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("could not start qemu-system-x86_64")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let mut log = fs::File::create(out.join(format!("boot{index}.log")))?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            let _ = writeln!(log, "{line}");
            if tx.send(line).is_err() {
                break;
            }
            buf.clear();
        }
    });
    let mut guest = super::report::Guest::default();
    let deadline = Instant::now() + Duration::from_secs(120 + 60 * options.seconds);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            say("scx", "timed out");
            break;
        }
        match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(line) => {
                guest.push_console_line(&line);
                if line.contains("VMTEST SCX") {
                    say("scx", line.split_once("VMTEST ").map_or("", |(_, l)| l));
                }
                if guest.has("END") {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(guest.lines)
}

fn print_boot(index: usize, boot: &BTreeMap<String, ModeRun>) {
    for (mode, run) in boot {
        let rates: Vec<String> = run.rates.iter().map(|r| format!("{r:.0}")).collect();
        match &run.probe {
            Some(p) => println!(
                "  boot {index} {mode:<6} n={} p50={} us p90={} us p99={} us max={} us \
                 stamps={} kicks={} enq_preempt={} dispatch_first={} no_task={} exit={} iter/s {}",
                p.n,
                p.p50_us,
                p.p90_us,
                p.p99_us,
                p.max_us,
                p.stamps,
                p.kicks,
                p.enq_preempt,
                p.dispatch_first,
                p.no_task,
                p.exit,
                rates.join("+")
            ),
            None => println!("  boot {index} {mode:<6} no result"),
        }
        for error in &run.errors {
            println!("  boot {index} {mode:<6} error: {error}");
        }
    }
}

fn print_summary(boots: &[BTreeMap<String, ModeRun>]) {
    println!(
        "\nmedians over {} boots (TCG: only ratios mean anything):",
        boots.len()
    );
    let med = |mode: &str, f: &dyn Fn(&ModeRun) -> Option<f64>| {
        median(
            &boots
                .iter()
                .filter_map(|b| b.get(mode).and_then(f))
                .collect::<Vec<_>>(),
        )
    };
    let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let mut p50 = BTreeMap::new();
    for mode in MODES {
        let m50 = med(mode, &|r| r.probe.as_ref().map(|p| p.p50_us as f64));
        let m99 = med(mode, &|r| r.probe.as_ref().map(|p| p.p99_us as f64));
        let n = med(mode, &|r| r.probe.as_ref().map(|p| p.n as f64));
        let rate = med(mode, &|r| {
            (r.rates.len() == 2).then(|| r.rates.iter().sum::<f64>())
        });
        p50.insert(mode, m50);
        println!(
            "  {mode:<6} arrival->running p50 {} us  p99 {} us  (n {})  jobs' iterations/s {}",
            show(m50),
            show(m99),
            show(n),
            show(rate)
        );
    }
    if let (Some(Some(scx)), Some(Some(agent))) = (p50.get("scx"), p50.get("agent")) {
        println!("  p50 ratio scx / agent: {:.2}", scx / agent);
    }
    if let (Some(Some(agent)), Some(Some(plain))) = (p50.get("agent"), p50.get("plain")) {
        println!("  p50 ratio agent / plain: {:.2}", agent / plain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_result_line_parses_with_every_counter() {
        let line = "SCX RESULT mode=sched n=5120 p50_us=41 p90_us=230 p99_us=1900 \
                    max_us=16384 stamps=6000 kicks=5800 enq_preempt=12 dispatch_first=5700 exit=0";
        let r = ProbeResult::parse(line).unwrap();
        assert_eq!(r.mode, "sched");
        assert_eq!((r.n, r.p50_us, r.p90_us, r.p99_us), (5120, 41, 230, 1900));
        assert_eq!(r.max_us, 16384);
        assert_eq!((r.stamps, r.kicks), (6000, 5800));
        assert_eq!((r.enq_preempt, r.dispatch_first, r.exit), (12, 5700, 0));
    }

    #[test]
    fn an_error_line_or_a_garbled_result_is_no_result() {
        assert!(ProbeResult::parse("SCX ERROR load: Invalid argument").is_none());
        assert!(ProbeResult::parse("SCX RESULT mode=probe n=abc").is_none());
        assert!(ProbeResult::parse("SCX RESULT n=3").is_none());
    }

    #[test]
    fn a_boot_groups_results_job_rates_and_errors_by_mode() {
        let lines: Vec<String> = [
            "KERNEL 7.2.13+deb14-cloud-amd64",
            "SCX plain SCX RESULT mode=probe n=10 p50_us=300 p90_us=900 p99_us=4000 max_us=8192 \
             stamps=11 kicks=0 enq_preempt=0 dispatch_first=0 exit=0",
            "SCX plain SYNTH cosched-synth: job a rank 0/2 ring udp spin: 1234 iterations in \
             10.001 s (123.4/s), wait 50.0%, cpu 5.000 s, sent 1234 recv 1234 empty polls 9",
            "SCX plain SYNTH cosched-synth: job b rank 0/2 ring udp spin: 1000 iterations in \
             10.000 s (100.0/s), wait 50.0%",
            "SCX scx SCX ERROR attach struct_ops: Operation not supported",
            "SCX scx SYNTH ",
        ]
        .map(String::from)
        .to_vec();
        let boot = parse_boot(&lines);
        let plain = &boot["plain"];
        assert_eq!(plain.probe.as_ref().unwrap().p50_us, 300);
        assert_eq!(plain.rates, [123.4, 100.0]);
        let scx = &boot["scx"];
        assert!(scx.probe.is_none());
        assert_eq!(scx.errors.len(), 2);
        assert!(scx.errors[0].contains("struct_ops"));
    }

    #[test]
    fn boots_rotate_the_order_of_the_modes() {
        assert_eq!(modes_for(0), ["plain", "agent", "scx", "scx-fifo"]);
        assert_eq!(modes_for(1), ["agent", "scx", "scx-fifo", "plain"]);
        assert_eq!(modes_for(4), modes_for(0));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
