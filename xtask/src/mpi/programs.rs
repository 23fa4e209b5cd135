//! Naming a program to run: one of our benchmarks (built on demand for the
//! library), HPCC (the packaged binary, with its input file written into
//! the job's working directory), or any other command as given.
use std::path::Path;

use anyhow::{Context as _, Result};

use super::{Library, build};
use crate::workspace::Workspace;

/// HPCC's binary (Debian builds it against OpenMPI only).
pub const HPCC: &str = "hpcc";

/// The program to launch for `name`: our benchmark's binary for `lib`
/// (built if needed), or `name` itself.
pub fn resolve(workspace: &Workspace, lib: Library, name: &str) -> Result<String> {
    if !build::PROGRAMS.contains(&name) {
        return Ok(name.to_string());
    }
    let target = workspace.metadata()?.target_dir.clone();
    let dir = build::ensure(
        &build::source_dir(workspace.root()),
        lib,
        &build::out_dir(&target, lib),
    )?;
    Ok(dir.join(name).display().to_string())
}

/// Writes what `program` reads from its working directory `dir`: HPCC's
/// input for a grid of `ranks` ranks (1 x ranks).
pub fn prepare_workdir(program: &str, ranks: usize, dir: &Path) -> Result<()> {
    if Path::new(program).file_name().is_some_and(|n| n == HPCC) {
        let path = dir.join("hpccinf.txt");
        std::fs::write(
            &path,
            build::hpcc_input(build::HPCC_MATRIX_ORDER, 1, ranks as u32),
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Whether `lib` can run `program` (HPCC is packaged for OpenMPI only).
pub fn supported(lib: Library, program: &str) -> bool {
    program != HPCC || lib == Library::Openmpi
}
