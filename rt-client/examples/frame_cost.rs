//! What one frame report costs: N back-to-back `frame_done` calls into a
//! real counter file (docs/rt-frames.md has the numbers).
//!
//! `cargo run --release -p cosched-rt --example frame_cost [-- N]`
//! (N defaults to 10^7; the file goes to `$COSCHED_RT_DIR`, else to a
//! temporary directory removed at the end).

use std::hint::black_box;
use std::time::Instant;

fn main() {
    let calls: u64 = std::env::args()
        .nth(1)
        .map_or(10_000_000, |n| n.parse().expect("N: a number of calls"));
    let scratch = std::env::var_os("COSCHED_RT_DIR").is_none().then(|| {
        let dir = std::env::temp_dir().join(format!("cosched-rt-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        // SAFETY: single-threaded here; nothing else reads the environment.
        unsafe { std::env::set_var("COSCHED_RT_DIR", &dir) };
        dir
    });
    match cosched_rt::init() {
        Ok(()) => println!(
            "counter file: {}",
            cosched_rt::counter_path().unwrap().display()
        ),
        Err(err) => println!("no counter file ({err}): counting in memory"),
    }

    // The vDSO clock read alone, the floor of a frame's cost.
    let clock_ns = per_call(calls, || {
        black_box(Instant::now());
    });
    let frame_ns = per_call(calls, || {
        black_box(cosched_rt::frame_done()).ok();
    });
    println!("calls: {calls}");
    println!("clock_gettime(CLOCK_MONOTONIC): {clock_ns:.1} ns per call");
    println!("cosched_rt::frame_done:         {frame_ns:.1} ns per call");
    println!("frames counted: {}", cosched_rt::frames());

    if let Some(dir) = scratch {
        std::fs::remove_dir_all(dir).ok();
    }
}

/// Mean wall time of `f` over `calls` calls, after a warm-up.
fn per_call(calls: u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..calls / 100 {
        f();
    }
    let began = Instant::now();
    for _ in 0..calls {
        f();
    }
    began.elapsed().as_nanos() as f64 / calls as f64
}
