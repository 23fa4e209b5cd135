//! Demotion by cgroup (`demote_cpu_cgroup`): two cgroup-v1 cpu cgroups per
//! node, `<dir>/active` and `<dir>/idle` (`cpu.idle = 1`). While gang slices
//! demote other jobs, managed tasks live in `active` and a task at a low
//! level (demoted, background) in `idle`; outside such slices they stay in
//! their own cgroups (the engine decides, see `Engine::wanted_group`).
//!
//! Why not SCHED_IDLE plus autogroup nice 19 (the mechanism without this
//! setting): with autogroups every job's session is its own CFS group, so a
//! task's SCHED_IDLE only counts inside its own group, and the lag a demoted
//! group entity builds up while it uses the idle time survives the reweight
//! and is repaid by the job that owns the next slot (measured in a gang of
//! 10 ms slices: a demoted compute job still got 45 ms of CPU per 100 ms). In
//! one shared `idle` group the demoted job's debt stays in that group; the
//! slot owner sits alone in `active` (leak 3–5 ms per 100 ms).
//!
//! A move takes the kernel's `cgroup_threadgroup_rwsem` for writing, which
//! waits for an RCU grace period (p50 ~14 ms) unless some cgroup hierarchy is
//! mounted with `favordynmods` (then ~0.1 ms); the option is global in effect.
use std::{
    fs, io,
    path::{Component, Path, PathBuf},
};

/// The cgroup a managed task is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuGroup {
    /// Normal, boosted or stopped tasks.
    Active,
    /// Tasks at a low level: they only get idle time.
    Idle,
}

/// The two cgroups under the configured directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuGroups {
    pub dir: PathBuf,
    pub active: PathBuf,
    pub idle: PathBuf,
}

impl CpuGroups {
    pub fn under(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            active: dir.join("active"),
            idle: dir.join("idle"),
        }
    }

    pub fn path(&self, group: CpuGroup) -> &Path {
        match group {
            CpuGroup::Active => &self.active,
            CpuGroup::Idle => &self.idle,
        }
    }

    /// Whether `dir` is one of the agent's own cgroups (or below them).
    pub fn owns(&self, dir: &Path) -> bool {
        dir.starts_with(&self.active) || dir.starts_with(&self.idle)
    }
}

/// One cgroup mount (`/proc/self/mountinfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// The hierarchy's directory that is mounted (`/` unless bind-mounted).
    pub root: String,
    pub mount_point: PathBuf,
    /// `true` for cgroup v2.
    pub v2: bool,
    /// Super-block options: controllers, `name=`, `favordynmods`, ...
    pub options: Vec<String>,
}

impl CgroupMount {
    pub fn has_option(&self, option: &str) -> bool {
        self.options.iter().any(|o| o == option)
    }
}

/// Octal escapes of mountinfo paths (`\040` = space).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts of a mountinfo text.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let _source = right.next()?;
            let options = right.next().unwrap_or("");
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                root: unescape(left.get(3)?),
                mount_point: PathBuf::from(unescape(left.get(4)?)),
                v2: fstype == "cgroup2",
                options: options.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

pub fn cgroup_mounts() -> io::Result<Vec<CgroupMount>> {
    Ok(parse_mountinfo(&fs::read_to_string(
        "/proc/self/mountinfo",
    )?))
}

/// The mount a directory lies on (the longest mount point that is a prefix).
pub fn mount_of<'a>(mounts: &'a [CgroupMount], dir: &Path) -> Option<&'a CgroupMount> {
    mounts
        .iter()
        .filter(|m| dir.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
}

/// The cgroup-v1 mount with the cpu controller whose root covers `cgroup`
/// (a path relative to the hierarchy, from `/proc/<tid>/cgroup`).
fn cpu_mount_for<'a>(mounts: &'a [CgroupMount], cgroup: &str) -> Option<&'a CgroupMount> {
    mounts
        .iter()
        .filter(|m| !m.v2 && m.has_option("cpu"))
        .filter(|m| Path::new(cgroup).starts_with(&m.root))
        .max_by_key(|m| m.root.len())
}

/// The cpu-controller line of `/proc/<tid>/cgroup` (`4:cpu:/a/b` or
/// `4:cpu,cpuacct:/a/b`): the path relative to the hierarchy's root.
pub fn parse_proc_cgroup_cpu(text: &str) -> Option<&str> {
    text.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers.split(',').any(|c| c == "cpu").then_some(path)
    })
}

/// The directory of a task's cgroup-v1 cpu cgroup. None: no cgroup-v1
/// hierarchy with the cpu controller (or it is not mounted here).
pub fn task_cpu_cgroup(tid: u32) -> io::Result<Option<PathBuf>> {
    let text = fs::read_to_string(format!("/proc/{tid}/cgroup"))?;
    let Some(rel) = parse_proc_cgroup_cpu(&text) else {
        return Ok(None);
    };
    let mounts = cgroup_mounts()?;
    Ok(cpu_mount_for(&mounts, rel).map(|m| {
        let below = Path::new(rel)
            .strip_prefix(&m.root)
            .unwrap_or(Path::new(""));
        m.mount_point.join(below)
    }))
}

/// Mount point of the cgroup-v1 hierarchy with the cpu controller (its root).
pub fn cpu_hierarchy_root() -> io::Result<Option<PathBuf>> {
    Ok(cpu_mount_for(&cgroup_mounts()?, "/").map(|m| m.mount_point.clone()))
}

/// Moves one thread (cgroup v1 `tasks` is per thread).
pub fn move_task(tid: u32, dir: &Path) -> io::Result<()> {
    fs::write(dir.join("tasks"), tid.to_string())
}

/// Threads in a cgroup (its `tasks` file).
pub fn tasks_of(dir: &Path) -> io::Result<Vec<u32>> {
    Ok(fs::read_to_string(dir.join("tasks"))?
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect())
}

/// Whether some mounted cgroup hierarchy has `favordynmods` (from /proc/mounts).
pub fn favordynmods_in(proc_mounts: &str) -> bool {
    proc_mounts.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 4
            && (f[2] == "cgroup" || f[2] == "cgroup2")
            && f[3].split(',').any(|o| o == "favordynmods")
    })
}

pub fn favordynmods_mounted() -> bool {
    fs::read_to_string("/proc/mounts").is_ok_and(|t| favordynmods_in(&t))
}

/// Checks a configured directory (config validation, no file system access).
pub fn check_dir_syntax(dir: &Path) -> Result<(), String> {
    if !dir.is_absolute() {
        return Err(format!(
            "demote_cpu_cgroup {} must be an absolute path",
            dir.display()
        ));
    }
    if dir
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!(
            "demote_cpu_cgroup {} must not contain . or ..",
            dir.display()
        ));
    }
    if dir.parent().is_none() {
        return Err("demote_cpu_cgroup must not be /".into());
    }
    Ok(())
}

/// What [`prepare`] found, for the log.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Some hierarchy has `favordynmods` (task moves are fast).
    pub favordynmods: bool,
    /// Warnings to log (each a complete sentence with the fix).
    pub warnings: Vec<String>,
}

/// Creates `<dir>/active` and `<dir>/idle`, sets `idle/cpu.idle = 1` and
/// gives `active` the real-time runtime of `<dir>` (with RT group scheduling
/// a SCHED_FIFO task cannot run, or be set, in a cgroup without any).
/// Errors name the fix.
pub fn prepare(dir: &Path) -> Result<Prepared, String> {
    check_dir_syntax(dir)?;
    let mounts = cgroup_mounts().map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    let hint = "demote_cpu_cgroup must be a directory of a cgroup-v1 hierarchy with the cpu \
                controller (e.g. /sys/fs/cgroup/cpu/cosched/<node>; `grep cgroup /proc/mounts` \
                shows the hierarchies), or leave it out to demote with SCHED_IDLE and autogroup \
                nice 19";
    match mount_of(&mounts, dir) {
        Some(m) if !m.v2 && m.has_option("cpu") => {}
        Some(m) => {
            return Err(format!(
                "demote_cpu_cgroup {}: the hierarchy mounted at {} has no cpu controller \
                 ({}); {hint}",
                dir.display(),
                m.mount_point.display(),
                if m.v2 {
                    "cgroup v2".to_string()
                } else {
                    format!("options {}", m.options.join(","))
                }
            ));
        }
        None => {
            return Err(format!(
                "demote_cpu_cgroup {} is not on a cgroup file system; {hint}",
                dir.display()
            ));
        }
    }
    let groups = CpuGroups::under(dir);
    for d in [&groups.active, &groups.idle] {
        fs::create_dir_all(d).map_err(|e| format!("creating cgroup {}: {e}", d.display()))?;
    }
    let idle_file = groups.idle.join("cpu.idle");
    if !idle_file.exists() {
        return Err(format!(
            "{} does not exist: this kernel's cpu controller has no cpu.idle (Linux 5.15 or \
             later has it); leave demote_cpu_cgroup out to demote with SCHED_IDLE and autogroup \
             nice 19",
            idle_file.display()
        ));
    }
    fs::write(&idle_file, "1").map_err(|e| format!("writing 1 to {}: {e}", idle_file.display()))?;
    let mut prepared = Prepared {
        favordynmods: favordynmods_mounted(),
        warnings: Vec::new(),
    };
    if let Some(w) = share_rt_runtime(dir, &groups.active) {
        prepared.warnings.push(w);
    }
    if !prepared.favordynmods {
        prepared.warnings.push(format!(
            "no mounted cgroup hierarchy has the favordynmods option: every move of a task \
             between {} and {} waits for an RCU grace period (~14 ms on the machine this \
             was measured on, instead of ~0.1 ms), delaying slot switches; mount one, e.g. \
             `mount -t cgroup -o none,name=cosched-fdm,favordynmods cosched-fdm <empty dir>` \
             (global in effect; `cargo xtask cluster up` does this)",
            groups.active.display(),
            groups.idle.display()
        ));
    }
    Ok(prepared)
}

/// With RT group scheduling (`cpu.rt_runtime_us` exists) `active` gets the
/// RT period and runtime of `dir`; a warning when `dir` has none.
fn share_rt_runtime(dir: &Path, active: &Path) -> Option<String> {
    let runtime_file = active.join("cpu.rt_runtime_us");
    if !runtime_file.exists() {
        return None;
    }
    let read = |p: &Path| {
        fs::read_to_string(p)
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
    };
    let parent_runtime = read(&dir.join("cpu.rt_runtime_us")).unwrap_or(0);
    let parent_period = read(&dir.join("cpu.rt_period_us"));
    if parent_runtime <= 0 {
        return Some(format!(
            "{}/cpu.rt_runtime_us is 0 (RT group scheduling): managed tasks in {} cannot be \
             made SCHED_FIFO/SCHED_RR (boosts of the dcs, sb, pb, fcs policies and fifo/rr job \
             requests fail with EPERM); give {} real-time runtime (write cpu.rt_runtime_us of \
             its parents first, then its own)",
            dir.display(),
            active.display(),
            dir.display()
        ));
    }
    if read(&runtime_file) == Some(parent_runtime) {
        return None;
    }
    let res = (|| {
        if let Some(period) = parent_period {
            // Lower the runtime first: period and runtime are checked together.
            fs::write(&runtime_file, "0")?;
            fs::write(active.join("cpu.rt_period_us"), period.to_string())?;
        }
        fs::write(&runtime_file, parent_runtime.to_string())
    })();
    res.err().map(|e| {
        format!(
            "giving {} the real-time runtime of {} ({parent_runtime} µs): {e}; boosts \
             (SCHED_FIFO) of managed tasks will fail",
            active.display(),
            dir.display()
        )
    })
}

/// The agent's start with `demote_cpu_cgroup`: [`prepare`], warnings logged.
/// An error stops the agent (the message names the fix).
pub fn start(dir: Option<&Path>) -> anyhow::Result<Option<Prepared>> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let prepared = prepare(dir).map_err(anyhow::Error::msg)?;
    for w in &prepared.warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(
        cgroup = %dir.display(),
        favordynmods = prepared.favordynmods,
        "demoting by cgroup: managed tasks in active, demoted ones in idle"
    );
    Ok(Some(prepared))
}

/// `cosched_cgroup_favordynmods`: whether task moves between the demotion
/// cgroups are fast (checked at start).
pub fn export(registry: &prometheus::Registry, prepared: &Prepared) {
    let gauge = prometheus::IntGauge::new(
        "cosched_cgroup_favordynmods",
        "1 when a mounted cgroup hierarchy had the favordynmods option at agent start (task \
         moves between the demotion cgroups take ~0.1 ms), 0 when every move waits for an RCU \
         grace period (~14 ms)",
    )
    .expect("valid metric");
    gauge.set(i64::from(prepared.favordynmods));
    if let Err(e) = registry.register(Box::new(gauge)) {
        tracing::warn!("registering cosched_cgroup_favordynmods: {e}");
    }
}

/// The agent's clean exit: [`remove`], warnings logged.
pub fn finish(dir: Option<&Path>) {
    if let Some(dir) = dir {
        for w in remove(&CpuGroups::under(dir)) {
            tracing::warn!("{w}");
        }
    }
}

/// Removes `active` and `idle` if they are empty (EBUSY: a task is still in
/// one; left alone). Returns the warnings.
pub fn remove(groups: &CpuGroups) -> Vec<String> {
    let mut warnings = Vec::new();
    for d in [&groups.idle, &groups.active] {
        match fs::remove_dir(d) {
            Ok(()) => {}
            Err(e)
                if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::EBUSY) => {
            }
            Err(e) => warnings.push(format!("removing cgroup {}: {e}", d.display())),
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 31 0:39 /sub /mnt/my\\040cpu rw - cgroup cgroup rw,cpu,cpuacct
";

    #[test]
    fn cgroup_mounts_are_parsed_with_their_options() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 5, "tmpfs is not a cgroup mount");
        assert!(m[0].has_option("cpu") && !m[0].v2);
        assert!(!m[1].has_option("cpu"), "cpuset is not cpu");
        assert!(m[3].v2);
        assert_eq!(m[4].mount_point, PathBuf::from("/mnt/my cpu"));
        assert_eq!(m[4].root, "/sub");
        let on = mount_of(&m, Path::new("/sys/fs/cgroup/cpu/cosched/n0")).unwrap();
        assert_eq!(on.mount_point, PathBuf::from("/sys/fs/cgroup/cpu"));
        let v2 = mount_of(&m, Path::new("/sys/fs/cgroup/unified/cosched/n0")).unwrap();
        assert!(v2.v2);
    }

    #[test]
    fn the_cpu_line_of_proc_cgroup_is_found() {
        let text = "12:pids:/\n4:cpuset:/x\n3:cpu:/cosched/n0/idle\n0::/cosched/n0\n";
        assert_eq!(parse_proc_cgroup_cpu(text), Some("/cosched/n0/idle"));
        assert_eq!(
            parse_proc_cgroup_cpu("2:cpu,cpuacct:/a\n"),
            Some("/a"),
            "co-mounted controllers"
        );
        assert_eq!(parse_proc_cgroup_cpu("0::/user.slice\n"), None, "v2 only");
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(
            cpu_mount_for(&m, "/sub/x").unwrap().mount_point,
            PathBuf::from("/mnt/my cpu"),
            "a bind mount of a sub-tree covers only that sub-tree"
        );
        assert_eq!(
            cpu_mount_for(&m, "/cosched").unwrap().mount_point,
            PathBuf::from("/sys/fs/cgroup/cpu")
        );
    }

    #[test]
    fn favordynmods_is_seen_on_any_cgroup_mount() {
        let without = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n";
        assert!(!favordynmods_in(without));
        let with = format!(
            "{without}x /run/x cgroup rw,relatime,name=x,favordynmods 0 0\n\
             tmpfs /t tmpfs rw,favordynmods 0 0\n"
        );
        assert!(favordynmods_in(&with));
        assert!(!favordynmods_in("tmpfs /t tmpfs rw,favordynmods 0 0\n"));
    }

    #[test]
    fn configured_directory_must_be_absolute_and_plain() {
        assert!(check_dir_syntax(Path::new("/sys/fs/cgroup/cpu/cosched/n0")).is_ok());
        assert!(check_dir_syntax(Path::new("cpu/n0")).is_err());
        assert!(check_dir_syntax(Path::new("/sys/fs/cgroup/cpu/../x")).is_err());
        assert!(check_dir_syntax(Path::new("/")).is_err());
    }

    #[test]
    fn groups_live_under_the_directory() {
        let g = CpuGroups::under(Path::new("/c/n0"));
        assert_eq!(g.path(CpuGroup::Idle), Path::new("/c/n0/idle"));
        assert_eq!(g.path(CpuGroup::Active), Path::new("/c/n0/active"));
        assert!(g.owns(Path::new("/c/n0/idle")));
        assert!(!g.owns(Path::new("/c/n0")));
        assert!(!g.owns(Path::new("/c/n0/idler")));
    }
}
