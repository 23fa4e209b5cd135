//! `cargo xtask vm-test`: the release binaries in three QEMU guests (TCG: the
//! host's KVM does not work for QEMU) on Debian's own kernels, on a real
//! virtio network between them (a QEMU multicast socket network on the
//! host's loopback): the coordinator in one, an agent in each of the others.
//!
//! Each guest boots an initramfs whose `/init` is [`guest.sh`](guest.sh): it
//! reports what its kernel has, runs its role's checks and prints `VMTEST `
//! lines on its serial console, which the host reads ([`report`]). Nothing is
//! driven interactively: the agents' VMs run their local checks, then join
//! the coordinator, whose VM runs two gang jobs across them.
//!
//! Kernels and unpacked packages are cached under `~/.cache/cosched/vm`;
//! initramfs images and console logs go to `target/vm/<kernel>/`.

pub mod initramfs;
pub mod kernels;
pub mod report;
pub mod scx;

use std::{
    collections::BTreeMap,
    fs,
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{progress::say, setup::bpf_linker};
use initramfs::Initramfs;
use kernels::{Kernel, KernelChoice};
use report::{AGENT_VMS, COORDINATOR_VM, Check, Guest, Verdict};

/// The guest script, installed as `/init`.
pub(crate) const GUEST_SCRIPT: &str = include_str!("guest.sh");
/// Binaries the guests run (from the release build).
pub const GUEST_BINARIES: [&str; 4] = [
    "cosched-agent",
    "cosched-coordinator",
    "cosched",
    "cosched-synth",
];
/// The virtio network modules, in load order (the guest skips those built
/// into its kernel).
const MODULES: [&str; 8] = [
    "virtio",
    "virtio_ring",
    "virtio_pci_legacy_dev",
    "virtio_pci_modern_dev",
    "virtio_pci",
    "failover",
    "net_failover",
    "virtio_net",
];
const SUBNET: &str = "10.77.0";
/// Longest one kernel's run may take (a passing 7.x run takes about 2 minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(420);

#[derive(Debug, Clone)]
pub struct VmTestOptions {
    pub kernels: Vec<KernelChoice>,
    /// Directory with the release binaries.
    pub bin_dir: PathBuf,
    /// Where images and console logs go.
    pub out_dir: PathBuf,
    /// Longest a kernel's run may take.
    pub timeout: Duration,
}

/// One kernel's run.
#[derive(Debug, Clone)]
pub struct KernelRun {
    pub kernel: Kernel,
    pub guests: BTreeMap<String, Guest>,
    pub checks: Vec<Check>,
    pub seconds: f64,
    pub log_dir: PathBuf,
}

impl KernelRun {
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
    }
}

/// The cache of kernels and package lists.
pub fn cache_dir() -> Result<PathBuf> {
    Ok(bpf_linker::cache_dir()?.join("vm"))
}

/// What the VM tests need on the host; the error says how to get it.
pub fn check_host() -> Result<()> {
    let mut missing = Vec::new();
    for (program, package) in [
        ("qemu-system-x86_64", "qemu-system-x86"),
        ("busybox", "busybox-static"),
        ("chrt", "util-linux"),
        ("apt-get", "apt"),
        ("dpkg-deb", "dpkg"),
    ] {
        if initramfs::host_program(program).is_err() {
            missing.push(format!("{program} (package {package})"));
        }
    }
    if !missing.is_empty() {
        bail!(
            "the VM tests need {}: run `cargo xtask setup` (it installs qemu-system-x86 and \
             busybox-static)",
            missing.join(", ")
        );
    }
    let busybox = fs::read(initramfs::host_program("busybox")?)?;
    if !is_static_elf(&busybox) {
        bail!(
            "/bin/busybox is dynamically linked: the guests need busybox-static \
             (`apt-get install busybox-static`, or `cargo xtask setup`)"
        );
    }
    Ok(())
}

/// An ELF with no program interpreter (PT_INTERP) is statically linked.
fn is_static_elf(bytes: &[u8]) -> bool {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 {
        return false;
    }
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    (0..phnum as usize).all(|i| {
        let at = phoff + i * phentsize;
        bytes.get(at..at + 4).is_none_or(|t| t != [3, 0, 0, 0])
    })
}

/// Runs every chosen kernel in turn.
pub fn run(options: &VmTestOptions) -> Result<Vec<KernelRun>> {
    check_host()?;
    for name in GUEST_BINARIES {
        let path = options.bin_dir.join(name);
        if !path.is_file() {
            bail!(
                "{} is missing: build the workspace (release)",
                path.display()
            );
        }
    }
    let cache = cache_dir()?;
    let mut runs = Vec::new();
    for choice in &options.kernels {
        let kernel = kernels::fetch(&cache, *choice)
            .with_context(|| format!("could not get the {} kernel", choice.key))?;
        say(
            "vm",
            format!(
                "kernel {} ({} {})",
                choice.key, choice.suite, kernel.version
            ),
        );
        let run = run_kernel(options, kernel)?;
        print_run(&run);
        runs.push(run);
    }
    Ok(runs)
}

fn build_initramfs(options: &VmTestOptions, kernel: &Kernel, path: &Path) -> Result<()> {
    let mut image = Initramfs::new();
    image.add_file("/bin/busybox", &initramfs::host_program("busybox")?, 0o755)?;
    image.add_bytes("/init", GUEST_SCRIPT.as_bytes().to_vec(), 0o755);
    for name in GUEST_BINARIES {
        image.add_program(&format!("/bin/{name}"), &options.bin_dir.join(name))?;
    }
    // busybox has no chrt; the watcher runs at SCHED_FIFO with util-linux's.
    image.add_program("/usr/bin/chrt", &initramfs::host_program("chrt")?)?;
    for module in MODULES {
        let file = kernels::find_file(&kernel.tree, &|name| {
            name == format!("{module}.ko") || name == format!("{module}.ko.xz")
        });
        if let Some(file) = file {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            image.add_file(&format!("/lib/modules/{name}"), &file, 0o644)?;
        }
    }
    let mut secret = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut secret))
        .context("reading /dev/urandom for the guests' shared secret")?;
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    image.add_bytes(
        "/etc/cosched/secret",
        format!("hex:{hex}\n").into_bytes(),
        0o600,
    );
    image.write(path)
}

/// A guest: its QEMU and the thread that reads its console.
struct Vm {
    child: Child,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_vm(
    kernel: &Kernel,
    initrd: &Path,
    name: &'static str,
    index: u8,
    mcast_port: u16,
    log: &Path,
    lines: mpsc::Sender<(&'static str, String)>,
) -> Result<Vm> {
    let role = if name == COORDINATOR_VM {
        "coordinator"
    } else {
        "agent"
    };
    // Agents get two vCPUs: the node is CPU 0, the watcher that looks at
    // the ranks runs on CPU 1.
    let cpus = if role == "agent" { "2" } else { "1" };
    let append = format!(
        "console=ttyS0 quiet loglevel=1 panic=-1 cosched.role={role} cosched.name={name} \
         cosched.ip={SUBNET}.{ip} cosched.coord={SUBNET}.10",
        ip = 10 + index
    );
    let mut command = Command::new("qemu-system-x86_64");
    command
        .args(["-accel", "tcg", "-cpu", "max", "-m", "512", "-smp", cpus])
        .args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
        .args(["-no-reboot"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", &append])
        .args([
            "-netdev",
            &format!("socket,id=net0,mcast=230.0.77.1:{mcast_port},localaddr=127.0.0.1"),
            "-device",
            &format!(
                "virtio-net-pci,netdev=net0,mac=52:54:00:77:00:{:02x}",
                10 + index
            ),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .context("could not start qemu-system-x86_64")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let stderr = child.stderr.take().context("qemu stderr")?;
    let mut file = fs::File::create(log)?;
    let err_lines = lines.clone();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = err_lines.send((name, format!("qemu: {line}")));
        }
    });
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            let _ = writeln!(file, "{line}");
            let _ = lines.send((name, line));
            buf.clear();
        }
    });
    Ok(Vm { child })
}

fn run_kernel(options: &VmTestOptions, kernel: Kernel) -> Result<KernelRun> {
    let log_dir = options.out_dir.join(kernel.choice.key);
    fs::create_dir_all(&log_dir)?;
    let initrd = log_dir.join("initramfs.cpio");
    build_initramfs(options, &kernel, &initrd)?;
    // A port of our own, so parallel runs on one machine never share a network.
    let mcast_port = 20000 + (std::process::id() % 20000) as u16;
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let mut vms = Vec::new();
    for (index, name) in [COORDINATOR_VM, AGENT_VMS[0], AGENT_VMS[1]]
        .into_iter()
        .enumerate()
    {
        if name == AGENT_VMS[1] {
            // Boots later, so its clock differs from the others' by more
            // than the `timeline_clock` check could mistake.
            thread::sleep(report::CLOCK_STAGGER);
        }
        let log = log_dir.join(format!("{name}.log"));
        vms.push(spawn_vm(
            &kernel,
            &initrd,
            name,
            index as u8,
            mcast_port,
            &log,
            tx.clone(),
        )?);
    }
    drop(tx);
    say(
        "vm",
        format!("3 guests booting (TCG); consoles in {}", log_dir.display()),
    );
    let mut guests: BTreeMap<String, Guest> = BTreeMap::new();
    let deadline = started + options.timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            say("vm", format!("timed out after {:?}", options.timeout));
            break;
        }
        let (vm, line) = match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(got) => got,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let guest = guests.entry(vm.to_string()).or_default();
        let before = guest.lines.len();
        guest.push_console_line(&line);
        if guest.lines.len() > before {
            let last = guest.lines.last().map(String::as_str).unwrap_or("");
            if last.starts_with("CHECK") || last.starts_with("KERNEL") {
                say(&format!("vm {vm}"), last);
            }
        }
        if finished(&guests) {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    drop(vms);
    let checks = report::decide(&guests);
    Ok(KernelRun {
        kernel,
        guests,
        checks,
        seconds,
        log_dir,
    })
}

/// The run is over when the coordinator's VM ended, or when both agents'
/// VMs are done and one of them has no agent to join with.
fn finished(guests: &BTreeMap<String, Guest>) -> bool {
    if guests.get(COORDINATOR_VM).is_some_and(|g| g.has("END")) {
        return true;
    }
    let agents: Vec<&Guest> = AGENT_VMS.iter().filter_map(|vm| guests.get(*vm)).collect();
    agents.len() == 2
        && agents.iter().all(|g| g.has("DONE"))
        && agents.iter().any(|g| {
            g.lines
                .iter()
                .any(|l| l.starts_with("CHECK attach FAIL") || l.starts_with("CHECK rejoin FAIL"))
        })
}

fn print_run(run: &KernelRun) {
    let release = run
        .guests
        .get(AGENT_VMS[0])
        .and_then(|g| g.kernel_release())
        .unwrap_or("?");
    println!(
        "\n== kernel {} ({release}, Debian {} {}) — {:.0} s ==",
        run.kernel.choice.key, run.kernel.choice.suite, run.kernel.version, run.seconds
    );
    for check in &run.checks {
        let verdict = match check.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotApplicable => "n/a ",
        };
        println!(
            "  {verdict}  {:<6} {:<20} {}",
            check.vm, check.name, check.detail
        );
    }
    if run.failed() {
        for (vm, guest) in &run.guests {
            for line in guest.log() {
                println!("  log {vm}: {line}");
            }
        }
        println!("  consoles: {}", run.log_dir.display());
    }
}
