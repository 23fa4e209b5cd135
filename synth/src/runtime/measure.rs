//! The measured window: the iteration loop and the report built from it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::error::drops_note;
use super::rt::RtRun;
use super::{RunError, Session};
use crate::clock::{burn_cpu, process_cpu_time, sleep_until_unix_ns, unix_now_ns};
use crate::config::RunLength;
use crate::header::Kind;
use crate::pattern::Step;
use crate::report::{RunReport, ratio};

/// Where the window began and ended, by the clocks the report needs.
struct Window {
    started_unix_ns: u64,
    finished_unix_ns: u64,
    elapsed: Duration,
    cpu: Duration,
}

impl Session {
    /// Runs the measured window (after `--start-at-unix-ns`, if given) and
    /// reports it.
    pub fn run(mut self) -> Result<RunReport, RunError> {
        if let Some(at) = self.config.start_at_unix_ns {
            sleep_until_unix_ns(at);
        }
        let mut rt = self.config.rt.map(RtRun::begin);
        let started_unix_ns = unix_now_ns();
        let began = Instant::now();
        let cpu_before = process_cpu_time();
        self.iterate(began, rt.as_mut())?;
        let window = Window {
            started_unix_ns,
            finished_unix_ns: unix_now_ns(),
            elapsed: began.elapsed(),
            cpu: process_cpu_time().saturating_sub(cpu_before),
        };
        let mut report = self.report(&window);
        report.rt = rt.map(RtRun::report);
        Ok(report)
    }

    fn iterate(&mut self, began: Instant, mut rt: Option<&mut RtRun>) -> Result<(), RunError> {
        let duration = match self.config.length {
            RunLength::Duration(duration) => Some(duration),
            RunLength::Iterations(_) => None,
        };
        let decides = self.config.rank == 0 && duration.is_some();
        let plan = self.state.engine.plan().clone();
        while let Some(index) = self.state.engine.step_index() {
            if decides
                && index == 0
                && !self.state.engine.stop().is_decided()
                && duration.is_some_and(|d| began.elapsed() >= d)
            {
                self.state.engine.decide_stop();
            }
            match &plan.steps()[index] {
                Step::Compute => {
                    if let Some(rt) = rt.as_deref_mut() {
                        rt.frame_started();
                    }
                    black_box(burn_cpu(self.config.compute));
                }
                Step::Io => {
                    if self.config.does_io(self.state.engine.iteration()) {
                        std::thread::sleep(self.config.io);
                    }
                }
                Step::Send { kind, to } => {
                    for &peer in to {
                        self.send(*kind, peer)?;
                    }
                }
                Step::Receive { kind, from } => self.receive_step(*kind, from)?,
                Step::Release => {
                    if let Some(rt) = rt.as_deref_mut() {
                        rt.release();
                    }
                }
                Step::FrameDone => {
                    if let Some(rt) = rt.as_deref_mut() {
                        rt.frame_done();
                    }
                }
            }
            self.state.engine.complete_step();
        }
        Ok(())
    }

    /// Waits until this iteration's `kind` frame from every rank in `from`
    /// is in, spinning or blocking per `--recv`, at most `--timeout`.
    fn receive_step(&mut self, kind: Kind, from: &[usize]) -> Result<(), RunError> {
        let began = Instant::now();
        let deadline = began + self.config.timeout;
        let mut missing = std::mem::take(&mut self.missing);
        let outcome = loop {
            if self.state.engine.receive_ready(kind, from) {
                self.state.engine.consume(kind, from);
                break Ok(());
            }
            if Instant::now() >= deadline {
                self.state.engine.missing_into(kind, from, &mut missing);
                break Err(RunError::ReceiveTimeout {
                    rank: self.config.rank,
                    iteration: self.state.engine.iteration(),
                    kind,
                    missing: missing.clone(),
                    waited: began.elapsed(),
                    note: drops_note(self.transport.kernel_drops()),
                });
            }
            self.state.engine.missing_into(kind, from, &mut missing);
            match self.receive_once(&missing, self.config.recv, deadline) {
                Ok(empty_polls) => self.state.counters.empty_polls += empty_polls,
                Err(err) => break Err(err),
            }
        };
        self.missing = missing;
        self.state.counters.wait += began.elapsed();
        outcome
    }

    fn report(&self, window: &Window) -> RunReport {
        let config = &self.config;
        let counters = &self.state.counters;
        let elapsed_s = window.elapsed.as_secs_f64();
        let wait_s = counters.wait.as_secs_f64();
        let iterations = self.state.engine.iterations_completed();
        RunReport {
            job: config.job.clone(),
            rank: config.rank,
            size: config.size,
            pattern: config.pattern,
            proto: config.proto,
            recv_mode: config.recv,
            wait_mode: config.wait,
            compute_us: config.compute.as_micros() as u64,
            io_us: config.io.as_micros() as u64,
            io_every: config.io_every,
            msg_bytes: config.msg_bytes,
            iterations,
            elapsed_s,
            iterations_per_s: ratio(iterations as f64, elapsed_s),
            wait_s,
            wait_fraction: ratio(wait_s, elapsed_s),
            messages_sent: counters.messages_sent,
            messages_received: counters.messages_received,
            data_messages_sent: counters.data_sent,
            data_messages_received: counters.data_received,
            handshake_messages_sent: counters.handshake_sent,
            handshake_messages_received: counters.handshake_received,
            rejected_messages: counters.rejected,
            unexpected_messages: counters.unexpected,
            bytes_sent: counters.bytes_sent,
            bytes_received: counters.bytes_received,
            empty_polls: counters.empty_polls,
            cpu_s: window.cpu.as_secs_f64(),
            started_unix_ns: window.started_unix_ns,
            finished_unix_ns: window.finished_unix_ns,
            pid: std::process::id(),
            udp_drops: self.transport.kernel_drops(),
            rt: None,
        }
    }
}
