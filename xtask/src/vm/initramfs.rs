//! The guests' initramfs: an uncompressed `newc` cpio archive (the kernel
//! unpacks it as its root file system) with busybox-static, the guest script
//! as `/init`, the release binaries and the glibc libraries they link
//! (copied from the host as `ldd` lists them: the binaries stay the ones the
//! host tests), `chrt` from util-linux, and the kernel's virtio network
//! modules.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, Result, bail};

use crate::process;

/// An entry of the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File { data: Vec<u8>, mode: u32 },
    CharDev { major: u32, minor: u32 },
}

/// Files by absolute path in the guest; parent directories are added.
#[derive(Debug, Default)]
pub struct Initramfs {
    entries: BTreeMap<String, Entry>,
}

impl Initramfs {
    pub fn new() -> Self {
        let mut me = Self::default();
        me.add_dir("/dev");
        me.entries
            .insert("/dev/console".into(), Entry::CharDev { major: 5, minor: 1 });
        me
    }

    fn add_dir(&mut self, path: &str) {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            self.entries.entry(at.clone()).or_insert(Entry::Dir);
        }
    }

    pub fn add_bytes(&mut self, path: &str, data: Vec<u8>, mode: u32) {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.add_dir(parent);
        }
        self.entries
            .insert(path.to_string(), Entry::File { data, mode });
    }

    /// Copies a host file (symlinks followed) to `path`.
    pub fn add_file(&mut self, path: &str, host: &Path, mode: u32) -> Result<()> {
        let data = fs::read(host).with_context(|| format!("could not read {}", host.display()))?;
        self.add_bytes(path, data, mode);
        Ok(())
    }

    /// Copies a dynamically linked host program and every library `ldd`
    /// lists for it, at the same paths.
    pub fn add_program(&mut self, path: &str, host: &Path) -> Result<()> {
        self.add_file(path, host, 0o755)?;
        let listing = process::capture(Command::new("ldd").arg(host))
            .with_context(|| format!("ldd {}", host.display()))?;
        for lib in ldd_paths(&listing) {
            if !self.entries.contains_key(&lib) {
                self.add_file(&lib, Path::new(&lib), 0o755)?;
            }
        }
        Ok(())
    }

    /// The archive bytes.
    pub fn to_cpio(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (ino, (path, entry)) in self.entries.iter().enumerate() {
            let name = path.trim_start_matches('/');
            let (mode, data, rdev): (u32, &[u8], (u32, u32)) = match entry {
                Entry::Dir => (0o040755, &[], (0, 0)),
                Entry::File { data, mode } => (0o100000 | mode, data, (0, 0)),
                Entry::CharDev { major, minor } => (0o020600, &[], (*major, *minor)),
            };
            push_entry(&mut out, ino as u32 + 1, name, mode, data, rdev);
        }
        push_entry(&mut out, 0, "TRAILER!!!", 0, &[], (0, 0));
        out
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        fs::write(path, self.to_cpio())
            .with_context(|| format!("could not write {}", path.display()))
    }
}

fn push_entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let fields = [
        ino,
        mode,
        0,
        0,
        nlink,
        0,
        data.len() as u32,
        0,
        0,
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The library paths in `ldd` output (`name => /path (addr)` and the
/// interpreter's `/path (addr)`); the vDSO has no file.
fn ldd_paths(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let target = line.split_once("=>").map_or(line, |(_, t)| t).trim();
            let path = target.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

/// A host program by name (first in PATH), for the guests.
pub fn host_program(name: &str) -> Result<PathBuf> {
    for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] {
        let path = Path::new(dir).join(name);
        if path.is_file() {
            return Ok(path);
        }
    }
    bail!("{name} not found on this machine: run `cargo xtask setup`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_listing_gives_libraries_and_the_interpreter_not_the_vdso() {
        let listing = "\tlinux-vdso.so.1 (0x00007fc3ade51000)\n\
                       \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                       \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                       \t/lib64/ld-linux-x86-64.so.2 (0x00007fc3ade53000)\n";
        assert_eq!(
            ldd_paths(listing),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
    }

    #[test]
    fn archive_has_parents_before_children_a_console_and_a_trailer() {
        let mut fs = Initramfs::new();
        fs.add_bytes("/bin/busybox", b"elf".to_vec(), 0o755);
        let cpio = fs.to_cpio();
        let text = String::from_utf8_lossy(&cpio);
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} missing"))
        };
        assert!(at("bin\0") < at("bin/busybox\0"));
        assert!(text.contains("dev/console\0"));
        assert!(text.ends_with('\0') && text.contains("TRAILER!!!\0"));
        assert!(cpio.len().is_multiple_of(4));
        // newc header: magic, then the file mode of bin/busybox (0o100755).
        let busybox = at("bin/busybox\0") - 110;
        assert_eq!(&cpio[busybox..busybox + 6], b"070701");
        assert_eq!(&cpio[busybox + 14..busybox + 22], b"000081ed");
    }
}
