//! The C ABI as a C program uses it: tests/c/frames.c is compiled with `cc`
//! against the static and the shared library cargo built for this test,
//! run with `COSCHED_RT_DIR` set, and its counter files are read back with
//! the layout the agent reads (`cosched_agent_common::rt_frames`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cosched_agent_common::rt_frames::{FrameRecord, MAGIC, SIZE, VERSION};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Where cargo put the libraries this test was built with: next to this
/// test executable, in `target/<profile>/deps`. Cargo builds every crate
/// type of the library (one rustc run) before the tests that use it, and
/// names the static and shared ones without a hash; the copies one level
/// up are only refreshed by `cargo build`, so they may be stale.
fn artifact_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe
        .parent()
        .expect("test executable in target/<profile>/deps");
    for lib in ["libcosched_rt.a", "libcosched_rt.so"] {
        assert!(
            dir.join(lib).is_file(),
            "{lib} not found in {}: the crate must keep crate-type staticlib and cdylib",
            dir.display()
        );
    }
    dir.to_path_buf()
}

#[derive(Clone, Copy, Debug)]
enum Link {
    Static,
    Shared,
}

/// Compiles frames.c into `out` against the library, `cc` failing loudly.
fn compile(link: Link, out: &Path) -> PathBuf {
    let libs = artifact_dir();
    let exe = out.join(format!("frames-{link:?}"));
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11",
        "-D_GNU_SOURCE",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
    ])
    .arg("-I")
    .arg(Path::new(MANIFEST_DIR).join("include"))
    .arg(Path::new(MANIFEST_DIR).join("tests/c/frames.c"))
    .arg("-o")
    .arg(&exe);
    match link {
        // The libraries `rustc --print native-static-libs` names.
        Link::Static => cc.arg(libs.join("libcosched_rt.a")).args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
        ]),
        Link::Shared => cc
            .arg(libs.join("libcosched_rt.so"))
            .arg(format!("-Wl,-rpath,{}", libs.display()))
            .arg("-lpthread"),
    };
    let output = cc.output().unwrap_or_else(|err| {
        panic!(
            "cannot run `cc` ({err}): a C compiler is required for this test (apt-get install gcc)"
        )
    });
    assert!(
        output.status.success(),
        "cc failed for {link:?}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Runs the program; its stdout lines split into words.
fn run(exe: &Path, rt_dir: &Path, args: [&str; 4]) -> Vec<Vec<String>> {
    let output = Command::new(exe)
        .args(args)
        .env("COSCHED_RT_DIR", rt_dir)
        .output()
        .expect("run the C program");
    assert!(
        output.status.success(),
        "{} {args:?} exited with {}: {}",
        exe.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The value after `key` on a line.
fn field(line: &[String], key: &str) -> i64 {
    let at = line.iter().position(|word| word == key).expect(key);
    line[at + 1].parse().expect("a number")
}

fn record(rt_dir: &Path, pid: i64) -> FrameRecord {
    let bytes = fs::read(rt_dir.join(format!("{pid}.frames"))).expect("the counter file");
    let bytes: [u8; SIZE] = bytes.try_into().expect("a file of exactly one counter");
    FrameRecord::from_bytes(&bytes)
}

#[test]
fn a_c_program_reports_frames_from_threads_and_its_forked_child_has_its_own() {
    let work = tempfile::tempdir().unwrap();
    for link in [Link::Static, Link::Shared] {
        let exe = compile(link, work.path());
        let rt_dir = tempfile::tempdir().unwrap();
        let lines = run(&exe, rt_dir.path(), ["40000", "4", "7", "0"]);
        let (first, child, parent) = (&lines[0], &lines[1], &lines[2]);
        assert_eq!(field(first, "frames"), 40_000, "{link:?}");
        assert_eq!(field(first, "failed"), 0, "{link:?}");

        let pid = field(first, "pid");
        let mine = record(rt_dir.path(), pid);
        assert_eq!(
            (mine.magic, mine.version, mine.size, i64::from(mine.pid)),
            (MAGIC, VERSION, SIZE as u32, pid)
        );
        assert_eq!(
            mine.frames, 40_001,
            "{link:?}: the threads' frames and one after the fork"
        );
        assert_eq!(field(parent, "frames"), 40_001);
        assert!(mine.last_frame_ns >= mine.created_ns);
        let sample = mine.cpu_sample().expect("a CPU sample");
        assert!(sample.frames <= mine.frames && sample.at_ns >= mine.created_ns);

        let child_pid = field(child, "child");
        assert_ne!(child_pid, pid);
        assert_eq!(field(child, "frames"), 7);
        let theirs = record(rt_dir.path(), child_pid);
        assert_eq!((i64::from(theirs.pid), theirs.frames), (child_pid, 7));
    }
}

#[test]
fn without_a_directory_frames_count_in_memory_and_the_error_comes_once() {
    let work = tempfile::tempdir().unwrap();
    let exe = compile(Link::Shared, work.path());
    let missing = work.path().join("no-such-dir");
    let lines = run(&exe, &missing, ["1000", "4", "0", "0"]);
    assert_eq!(field(&lines[0], "frames"), 1000);
    assert_eq!(
        field(&lines[0], "failed"),
        1,
        "one call, of one thread, says why"
    );

    let lines = run(&exe, &missing, ["1000", "2", "0", "1"]);
    assert_eq!(field(&lines[0], "init"), -i64::from(libc::ENOENT));
    assert_eq!(field(&lines[0], "failed"), 0, "init already said it");
    assert_eq!(field(&lines[0], "frames"), 1000);
    assert!(!missing.exists());
}
