//! Which file a rank's command runs, found the way the launcher's gate
//! `exec`s it: a command containing `/` is a path (relative ones from the
//! agent's working directory, which the gate inherits); a bare name is
//! looked up in the rank's `PATH` (the job's own `PATH` if it sets one, else
//! the agent's), first match that is an executable file, an empty entry
//! meaning the working directory. The coordinator asks this before it admits
//! a job, and the launcher asks it before it starts a rank, so both refuse a
//! missing program with the same reason.

use std::{
    ffi::{CString, OsStr, OsString},
    fs,
    os::unix::{ffi::OsStrExt as _, fs::PermissionsExt as _},
    path::{Path, PathBuf},
};

/// The search path when neither the job nor the agent has a `PATH`.
const DEFAULT_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// The `PATH` the gate gets before the job's own environment is applied.
pub fn agent_search_path() -> OsString {
    std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into())
}

/// The `PATH` a rank's command is looked up in: the job's, else the agent's.
pub fn rank_search_path(job_path: Option<&str>) -> OsString {
    job_path.map_or_else(agent_search_path, OsString::from)
}

/// Finds `command` from this agent (its working directory, `job_path` or
/// its own `PATH`): the file it would run, or why it cannot.
pub fn find(command: &str, job_path: Option<&str>) -> Result<PathBuf, String> {
    let cwd = std::env::current_dir()
        .map_err(|error| format!("the agent's working directory is unknown: {error}"))?;
    resolve(command, &rank_search_path(job_path), &cwd)
}

/// Finds `command` in `search_path`, relative paths from `cwd`.
pub fn resolve(command: &str, search_path: &OsStr, cwd: &Path) -> Result<PathBuf, String> {
    if command.is_empty() {
        return Err("empty command".into());
    }
    if command.contains('/') {
        let path = cwd.join(command);
        return match executable(&path) {
            Ok(()) => Ok(path),
            Err(why) if Path::new(command).is_relative() => Err(format!(
                "{command}: {why} (relative to the agent's working directory {})",
                cwd.display()
            )),
            Err(why) => Err(format!("{command}: {why}")),
        };
    }
    let mut not_executable = Vec::new();
    for dir in search_path.as_bytes().split(|&byte| byte == b':') {
        let dir = if dir.is_empty() {
            cwd.to_path_buf()
        } else {
            cwd.join(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(command);
        match executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(Problem::Missing) => {}
            Err(problem) => not_executable.push(format!("{} ({problem})", candidate.display())),
        }
    }
    let mut reason = format!(
        "{command}: not found in PATH {}",
        search_path.to_string_lossy()
    );
    if !not_executable.is_empty() {
        reason.push_str(&format!(
            "; present but not runnable: {}",
            not_executable.join(", ")
        ));
    }
    Err(reason)
}

/// Why a path cannot be executed.
#[derive(Debug, PartialEq, Eq)]
enum Problem {
    Missing,
    Directory,
    NoExecuteBit,
    Denied,
    Other(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing => f.write_str("no such file"),
            Problem::Directory => f.write_str("is a directory"),
            Problem::NoExecuteBit => f.write_str("not executable (no x permission bit)"),
            Problem::Denied => f.write_str("execution denied (noexec mount or access rules)"),
            Problem::Other(why) => f.write_str(why),
        }
    }
}

/// An executable file `exec` would accept (its mode and `access(X_OK)`, which
/// also sees `noexec` mounts).
fn executable(path: &Path) -> Result<(), Problem> {
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(Problem::Missing),
        Err(error) if error.raw_os_error() == Some(libc::ENOTDIR) => return Err(Problem::Missing),
        Err(error) => return Err(Problem::Other(error.to_string())),
    };
    if metadata.is_dir() {
        return Err(Problem::Directory);
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(Problem::NoExecuteBit);
    }
    let Ok(text) = CString::new(path.as_os_str().as_bytes()) else {
        return Err(Problem::Other("path contains a NUL byte".into()));
    };
    // SAFETY: a valid NUL-terminated path; access only reads it.
    if unsafe { libc::access(text.as_ptr(), libc::X_OK) } != 0 {
        return Err(Problem::Denied);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with `bin/run` (executable), `bin/data` (not), `sub/`.
    fn layout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(dir.path().join("sub")).unwrap();
        for (name, mode) in [("run", 0o755), ("data", 0o644)] {
            let file = bin.join(name);
            fs::write(&file, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&file, fs::Permissions::from_mode(mode)).unwrap();
        }
        dir
    }

    fn path_of(dirs: &[&Path]) -> OsString {
        std::env::join_paths(dirs).unwrap()
    }

    #[test]
    fn absolute_and_relative_paths_are_taken_as_they_are() {
        let dir = layout();
        let root = dir.path();
        let empty = OsString::new();
        let run = root.join("bin/run");
        assert_eq!(
            resolve(run.to_str().unwrap(), &empty, Path::new("/")),
            Ok(run.clone())
        );
        assert_eq!(resolve("bin/run", &empty, root), Ok(run.clone()));
        assert_eq!(
            resolve("./bin/run", &empty, root),
            Ok(root.join("./bin/run"))
        );
        let error = resolve("bin/gone", &empty, root).unwrap_err();
        assert_eq!(
            error,
            format!(
                "bin/gone: no such file (relative to the agent's working directory {})",
                root.display()
            )
        );
        let error = resolve("/nonexistent/program", &empty, root).unwrap_err();
        assert_eq!(error, "/nonexistent/program: no such file");
    }

    #[test]
    fn files_that_cannot_run_say_why() {
        let dir = layout();
        let root = dir.path();
        let data = root.join("bin/data");
        let error = resolve(data.to_str().unwrap(), OsStr::new(""), root).unwrap_err();
        assert!(
            error.ends_with("not executable (no x permission bit)"),
            "{error}"
        );
        let sub = root.join("sub");
        let error = resolve(sub.to_str().unwrap(), OsStr::new(""), root).unwrap_err();
        assert!(error.ends_with("is a directory"), "{error}");
        let error = resolve("bin/run/x", OsStr::new(""), root).unwrap_err();
        assert!(error.contains("no such file"), "{error}");
    }

    #[test]
    fn bare_names_are_looked_up_in_path_in_order() {
        let dir = layout();
        let root = dir.path();
        let bin = root.join("bin");
        let sub = root.join("sub");
        let search = path_of(&[&sub, &bin]);
        assert_eq!(resolve("run", &search, Path::new("/")), Ok(bin.join("run")));
        let error = resolve("missing", &search, Path::new("/")).unwrap_err();
        assert_eq!(
            error,
            format!("missing: not found in PATH {}", search.to_string_lossy())
        );
        let error = resolve("data", &search, Path::new("/")).unwrap_err();
        assert!(
            error.contains("present but not runnable")
                && error.contains(&bin.join("data").display().to_string()),
            "{error}"
        );
    }

    #[test]
    fn an_empty_path_entry_is_the_working_directory() {
        let dir = layout();
        let bin = dir.path().join("bin");
        assert_eq!(
            resolve("run", OsStr::new("/nonexistent:"), &bin),
            Ok(bin.join("run"))
        );
        assert!(resolve("run", OsStr::new("/nonexistent"), &bin).is_err());
        // Relative PATH entries are relative to the working directory too.
        assert_eq!(
            resolve("run", OsStr::new("bin"), dir.path()),
            Ok(dir.path().join("bin/run"))
        );
    }

    #[test]
    fn the_jobs_path_wins_over_the_agents() {
        assert_eq!(rank_search_path(Some("/opt/x")), OsString::from("/opt/x"));
        assert_eq!(rank_search_path(None), agent_search_path());
        assert!(resolve("", OsStr::new("/bin"), Path::new("/")).is_err());
    }
}
