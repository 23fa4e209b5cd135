//! Debian cloud kernels for the VM tests: resolved and downloaded with apt
//! through a private configuration (its own source list, package lists and
//! cache under the cache directory, so the machine's apt sources stay as they
//! are), unpacked with `dpkg-deb -x`, and kept: a second run downloads
//! nothing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

use anyhow::{Context as _, Result, bail};

use crate::{process, progress::say};

/// The kernels `vm-test --kernel` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelChoice {
    /// What `--kernel` takes.
    pub key: &'static str,
    /// The Debian suite whose `linux-image-cloud-amd64` is taken.
    pub suite: &'static str,
}

pub const KERNELS: [KernelChoice; 3] = [
    KernelChoice {
        key: "7.x",
        suite: "sid",
    },
    KernelChoice {
        key: "6.12",
        suite: "trixie",
    },
    KernelChoice {
        key: "6.1",
        suite: "bookworm",
    },
];

/// `--kernel` values: one key or `all`.
pub fn choose(arg: &str) -> Result<Vec<KernelChoice>> {
    if arg == "all" {
        return Ok(KERNELS.to_vec());
    }
    match KERNELS.iter().find(|k| k.key == arg) {
        Some(k) => Ok(vec![*k]),
        None => bail!(
            "unknown kernel {arg:?}: one of {}, or all",
            KERNELS.map(|k| k.key).join(", ")
        ),
    }
}

/// A kernel unpacked in the cache.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub choice: KernelChoice,
    /// The package version (e.g. `7.2.13-1`).
    pub version: String,
    pub vmlinuz: PathBuf,
    /// Where the package trees were unpacked (modules are looked up here).
    pub tree: PathBuf,
}

/// The meta package every suite has; it depends on the versioned image.
const META: &str = "linux-image-cloud-amd64";
/// Package lists older than this are refreshed.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// apt with a private configuration for one suite under `dir`.
pub(crate) struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    fn new(cache: &Path, suite: &str) -> Result<Self> {
        Self::with_source(cache, suite, "deb", suite)
    }

    /// A private apt under `cache/apt/<name>` whose one source line is
    /// `<kind> … <suite> main` (`kind` is `deb` or `deb-src`).
    pub(crate) fn with_source(cache: &Path, name: &str, kind: &str, suite: &str) -> Result<Self> {
        let dir = cache.join("apt").join(name);
        for sub in ["lists/partial", "cache/archives/partial", "etc"] {
            fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("could not create {}", dir.join(sub).display()))?;
        }
        let line = format!(
            "{kind} [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
             http://deb.debian.org/debian {suite} main\n"
        );
        fs::write(dir.join("etc/sources.list"), line)?;
        Ok(Self { dir })
    }

    pub(crate) fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        command.args([
            "-q",
            "-o",
            &format!("Dir::Etc::SourceList={}", d("etc/sources.list")),
            "-o",
            "Dir::Etc::SourceParts=/dev/null",
            "-o",
            &format!("Dir::State::Lists={}", d("lists")),
            "-o",
            &format!("Dir::Cache={}", d("cache")),
            "-o",
            "APT::Sandbox::User=root",
            "-o",
            "Debug::NoLocking=1",
        ]);
        command
    }

    pub(crate) fn update_if_stale(&self) -> Result<()> {
        let fresh = fs::read_dir(self.dir.join("lists"))?
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with("_Packages") || name.ends_with("_Sources")
            })
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .any(|t| {
                SystemTime::now()
                    .duration_since(t)
                    .is_ok_and(|age| age < LISTS_MAX_AGE)
            });
        if !fresh {
            process::capture(self.command("apt-get").arg("update"))
                .context("could not fetch the Debian package lists for the VM kernels")?;
        }
        Ok(())
    }

    /// `Version` and `Depends` of the suite's version of `package`.
    fn show(&self, package: &str) -> Result<(String, Vec<String>)> {
        let text = process::capture(self.command("apt-cache").args([
            "show",
            "--no-all-versions",
            package,
        ]))?;
        Ok(parse_show(&text))
    }
}

/// `Version` and the package names of `Depends` in `apt-cache show` output
/// (alternatives and version constraints dropped).
fn parse_show(text: &str) -> (String, Vec<String>) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    let depends = field("Depends:")
        .split(',')
        .map(|d| {
            d.split('|')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .filter(|d| !d.is_empty())
        .collect();
    (field("Version:"), depends)
}

/// The packages that hold the kernel and its modules: the versioned image
/// and, where Debian splits them out (7.x), its `linux-binary-*` and
/// `linux-modules-*`.
fn kernel_packages(image: &str, image_depends: &[String]) -> Vec<String> {
    let mut out = vec![image.to_string()];
    out.extend(
        image_depends
            .iter()
            .filter(|d| d.starts_with("linux-binary-") || d.starts_with("linux-modules-"))
            .cloned(),
    );
    out
}

/// Resolves, downloads and unpacks the suite's cloud kernel (cached).
pub fn fetch(cache: &Path, choice: KernelChoice) -> Result<Kernel> {
    let apt = PrivateApt::new(cache, choice.suite)?;
    apt.update_if_stale()?;
    let (version, depends) = apt.show(META)?;
    let image = depends
        .iter()
        .find(|d| d.starts_with("linux-image-"))
        .with_context(|| format!("{META} ({}) depends on no linux-image-*", choice.suite))?
        .clone();
    let tree = cache.join("kernels").join(&image);
    let done = tree.join(".unpacked");
    if !done.exists() {
        let (_, image_depends) = apt.show(&image)?;
        let packages = kernel_packages(&image, &image_depends);
        let debs = cache.join("debs");
        fs::create_dir_all(&debs)?;
        say(
            "vm",
            format!("downloading {} ({})", packages.join(" "), choice.suite),
        );
        process::capture(
            apt.command("apt-get")
                .current_dir(&debs)
                .arg("download")
                .args(&packages),
        )
        .context("could not download the kernel packages")?;
        fs::create_dir_all(&tree)?;
        for entry in fs::read_dir(&debs)? {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if packages.iter().any(|p| name.starts_with(&format!("{p}_"))) {
                process::capture(Command::new("dpkg-deb").arg("-x").arg(&path).arg(&tree))?;
                fs::remove_file(&path)?;
            }
        }
        fs::write(&done, &version)?;
    }
    let vmlinuz = find_file(&tree, &|name| name.starts_with("vmlinuz"))
        .with_context(|| format!("no vmlinuz in {}", tree.display()))?;
    Ok(Kernel {
        choice,
        version,
        vmlinuz,
        tree,
    })
}

/// The first file under `dir` whose name satisfies `want` (depth first).
pub fn find_file(dir: &Path, want: &dyn Fn(&str) -> bool) -> Option<PathBuf> {
    let mut entries: Vec<_> = fs::read_dir(dir).ok()?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type().ok()?;
        if kind.is_dir() {
            if let Some(found) = find_file(&path, want) {
                return Some(found);
            }
        } else if kind.is_file() && want(&entry.file_name().to_string_lossy()) {
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_7x_image_pulls_its_binary_and_modules_packages() {
        let show = "Package: linux-image-7.2.13+deb14-cloud-amd64\nVersion: 7.2.13-1\n\
                    Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
                    linux-base-7.2.13+deb14-cloud-amd64 (= 7.2.13-1), \
                    linux-binary-7.2.13+deb14-cloud-amd64 (= 7.2.13-1), \
                    linux-modules-7.2.13+deb14-cloud-amd64 (= 7.2.13-1)\n";
        let (version, depends) = parse_show(show);
        assert_eq!(version, "7.2.13-1");
        assert_eq!(
            kernel_packages("linux-image-7.2.13+deb14-cloud-amd64", &depends),
            [
                "linux-image-7.2.13+deb14-cloud-amd64",
                "linux-binary-7.2.13+deb14-cloud-amd64",
                "linux-modules-7.2.13+deb14-cloud-amd64"
            ]
        );
    }

    #[test]
    fn a_6_1_image_is_one_package() {
        let (_, depends) = parse_show("Depends: kmod, linux-base (>= 4.3~), initramfs-tools\n");
        assert_eq!(
            kernel_packages("linux-image-6.1.0-56-cloud-amd64", &depends).len(),
            1
        );
    }

    #[test]
    fn kernel_choice_takes_a_key_or_all() {
        assert_eq!(choose("6.12").unwrap()[0].suite, "trixie");
        assert_eq!(choose("all").unwrap().len(), 3);
        assert!(
            choose("5.10")
                .unwrap_err()
                .to_string()
                .contains("7.x, 6.12, 6.1")
        );
    }
}
