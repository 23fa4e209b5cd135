//! System packages, installed with apt only when missing.

use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::{process, progress::say};

/// A Debian package and why cosched needs it (shown when it is installed).
#[derive(Debug, Clone, Copy)]
pub struct Package {
    pub name: &'static str,
    pub needed_for: &'static str,
}

/// Packages the project needs at run time on the host.
pub const RUNTIME_PACKAGES: &[Package] = &[
    Package {
        name: "iproute2",
        needed_for: "ip: network namespaces, veth pairs, the cluster bridge",
    },
    Package {
        name: "util-linux",
        needed_for: "nsenter and taskset: start processes inside a node, pinned",
    },
    Package {
        name: "procps",
        needed_for: "kill: stopping agents",
    },
    Package {
        name: "qemu-system-x86",
        needed_for: "VM integration tests",
    },
    Package {
        name: "busybox-static",
        needed_for: "the initramfs of VM integration tests",
    },
    // Real MPI programs (`cluster mpirun`, `bench mpi`, the MPI integration
    // tests). Debian's `mpirun`/`mpicc` alternatives point at one of the two
    // libraries, so everything calls the explicit names (`mpirun.openmpi`,
    // `mpicc.mpich`, ...).
    Package {
        name: "openmpi-bin",
        needed_for: "mpirun.openmpi: real MPI jobs across the cluster's nodes",
    },
    Package {
        name: "libopenmpi-dev",
        needed_for: "mpicc.openmpi: building the MPI benchmarks against OpenMPI",
    },
    Package {
        name: "mpich",
        needed_for: "mpiexec.hydra: real MPI jobs with MPICH",
    },
    Package {
        name: "libmpich-dev",
        needed_for: "mpicc.mpich: building the MPI benchmarks against MPICH",
    },
    Package {
        name: "hpcc",
        needed_for: "the HPC Challenge benchmark, a packaged real MPI program",
    },
];

/// Installs the packages that are not installed yet (running `apt-get update`
/// once first, as a fresh machine's package lists may be empty or stale).
pub fn ensure(packages: &[Package]) -> Result<()> {
    let names: Vec<&str> = packages.iter().map(|package| package.name).collect();
    let missing = missing(&names)?;
    if missing.is_empty() {
        say(
            "setup",
            format!("apt packages present ({})", names.join(", ")),
        );
        return Ok(());
    }
    for package in packages.iter().filter(|p| missing.contains(&p.name)) {
        say(
            "setup",
            format!("installing {} ({})", package.name, package.needed_for),
        );
    }
    process::capture(Command::new("apt-get").args(["update", "-q"]))
        .context("could not refresh the apt package lists")?;
    process::capture(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing),
    )
    .context("could not install the missing apt packages")?;
    let still_missing = self::missing(&missing)?;
    if !still_missing.is_empty() {
        bail!(
            "apt-get reported success but these packages are still not installed: {}",
            still_missing.join(", ")
        );
    }
    say(
        "setup",
        format!("apt packages installed ({})", missing.join(", ")),
    );
    Ok(())
}

/// The packages dpkg does not list as installed.
fn missing<'a>(names: &[&'a str]) -> Result<Vec<&'a str>> {
    // dpkg-query exits non-zero when a package is unknown, but still prints
    // the known ones, so its status is not an error here.
    let output = Command::new("dpkg-query")
        .args(["--show", "--showformat", "${Package} ${Status}\\n"])
        .args(names)
        .output()
        .context("could not run dpkg-query: setup needs a Debian-based system with apt")?;
    let listing = String::from_utf8_lossy(&output.stdout);
    Ok(names
        .iter()
        .copied()
        .filter(|name| !is_installed(&listing, name))
        .collect())
}

/// Whether `dpkg-query` output (`<package>[:arch] <status>` lines) shows
/// the package as installed.
fn is_installed(listing: &str, name: &str) -> bool {
    listing.lines().any(|line| {
        let Some((package, status)) = line.split_once(' ') else {
            return false;
        };
        let package = package.split(':').next().unwrap_or(package);
        package == name && status.trim() == "install ok installed"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_installed_status_from_dpkg_query() {
        let listing = "iproute2 install ok installed\nprocps deinstall ok config-files\n\
                       libc6:amd64 install ok installed\n";
        assert!(is_installed(listing, "iproute2"));
        assert!(is_installed(listing, "libc6"));
        assert!(!is_installed(listing, "procps"));
        assert!(!is_installed(listing, "qemu-system-x86"));
    }
}
