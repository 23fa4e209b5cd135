//! A progress line on stderr for long runs: simulated time, jobs done, events
//! and their rate, at most once a second.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::executive::Ns;

pub struct Progress {
    enabled: bool,
    started: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Self {
        let now = Instant::now();
        Self {
            enabled,
            started: now,
            last: now,
            shown: false,
        }
    }

    /// Shows the state if a second passed since the last line.
    pub fn update(&mut self, sim_now: Ns, done: usize, total: usize, events: u64) {
        if !self.enabled || self.last.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        let wall = self.started.elapsed().as_secs_f64().max(1e-9);
        let pct = if total > 0 {
            done as f64 * 100.0 / total as f64
        } else {
            100.0
        };
        eprint!(
            "\r[{:>6.1} s] sim {:>10.1} s  jobs {done}/{total} ({pct:5.1} %)  events {:.1} M ({:.2} M/s)   ",
            wall,
            sim_now as f64 / 1e9,
            events as f64 / 1e6,
            events as f64 / 1e6 / wall
        );
        let _ = std::io::stderr().flush();
        self.shown = true;
    }

    /// Ends the line.
    pub fn finish(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }
}
