//! Building our MPI benchmarks (`xtask/mpi/*.c`) with each library's
//! `mpicc` into `<target>/mpi/<library>/`, only when a source is newer than
//! the binary; and HPCC's input file, whose problem size we choose.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::SystemTime,
};

use anyhow::{Context as _, Result};

use super::Library;
use crate::process;

/// The programs built from `xtask/mpi/<name>.c`.
pub const PROGRAMS: [&str; 4] = ["pingpong", "allreduce", "halo", "testloop"];
/// The header every program includes.
const HEADER: &str = "mpibench.h";

/// HPCC's HPL matrix order: a dedicated run of the whole suite on two
/// single-CPU nodes takes about 2 s with it (RandomAccess and FFT sizes
/// follow from it).
pub const HPCC_MATRIX_ORDER: u32 = 700;

/// Where the sources live in the repository.
pub fn source_dir(workspace_root: &Path) -> PathBuf {
    workspace_root.join("xtask").join("mpi")
}

/// Builds every program for `lib` into `out_dir` (created), skipping those
/// that are up to date; returns `out_dir`.
pub fn ensure(source_dir: &Path, lib: Library, out_dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let header = modified(&source_dir.join(HEADER));
    for name in PROGRAMS {
        let source = source_dir.join(format!("{name}.c"));
        let binary = out_dir.join(name);
        let newest_input = modified(&source).max(header);
        if modified(&binary) >= newest_input && binary.is_file() {
            continue;
        }
        let mut cc = Command::new(lib.mpicc());
        cc.args(["-O2", "-Wall", "-Wextra", "-Werror"]);
        if lib == Library::Mpich {
            // MPICH's MPI_STATUSES_IGNORE is the constant pointer 1, which
            // GCC 12 mistakes for an empty array it would overflow.
            cc.arg("-Wno-stringop-overflow");
        }
        cc.arg("-o").arg(&binary).arg(&source);
        process::capture(&mut cc).with_context(|| {
            format!(
                "building {name} with {} (run `cargo xtask setup` for the MPI packages)",
                lib.mpicc()
            )
        })?;
    }
    Ok(out_dir.to_path_buf())
}

/// `<target>/mpi/<lib>`: the build directory of one library.
pub fn out_dir(target_dir: &Path, lib: Library) -> PathBuf {
    target_dir.join("mpi").join(lib.as_str())
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// HPCC's input (`hpccinf.txt`, read from the working directory): Debian's
/// example with a 1 x 2 process grid (one rank per node on two nodes) and
/// an HPL matrix of order `n`.
pub fn hpcc_input(n: u32, p: u32, q: u32) -> String {
    format!(
        "HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
{n:<12} Ns
1            # of NBs
80           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
{p:<12} Ps
{q:<12} Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                      		Number of additional problem sizes for PTRANS
1200 10000 30000        	values of N
0                       	number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64       	values of NB
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpcc_input_sets_the_problem_and_the_grid() {
        let text = hpcc_input(700, 1, 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[5], "700          Ns");
        assert_eq!(lines[10], "1            Ps");
        assert_eq!(lines[11], "2            Qs");
        assert_eq!(lines.len(), 36);
        assert!(lines[31].starts_with("##### This line (no. 32)"));
    }
}
