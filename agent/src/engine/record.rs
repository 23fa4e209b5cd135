//! Timeline recording (the `timeline` control request): off unless asked,
//! one at a time, bounded in time and in records. While it runs, the eBPF
//! side queues a record per context switch of a managed task and per spin
//! episode start and end (into its own ring, which the daemon drains on a
//! short timer), and the engine notes its own level changes and the
//! coordinator's slices as it applies them.
use cosched_agent_common::{TimelineRecord, timeline_kind};
use cosched_policy::local::Level;
use cosched_proto::timeline::{
    Action, DEFAULT_MAX_EVENTS, Decision, MAX_DURATION_MS, MAX_EVENTS, NodeTimeline, Slice,
    SliceNumber, Spin, Switch, TimelineJob,
};

use super::{Engine, realise::level_name};
use crate::kernel::Kernel;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    #[error(
        "a timeline recording is already running on this node (one at a time; it ends in {remaining_ms} ms)"
    )]
    Busy { remaining_ms: u64 },
    #[error("timeline duration must be 1..={MAX_DURATION_MS} ms, not {0}")]
    BadDuration(u64),
    #[error("timeline max_events must be 1..={MAX_EVENTS}, not {0}")]
    BadMaxEvents(u32),
    #[error("cannot turn timeline recording on: {0}")]
    Kernel(String),
}

/// A recording in progress.
#[derive(Debug)]
pub(super) struct Recording {
    deadline_ns: u64,
    max_events: u32,
    lost_at_start: u64,
    timeline: NodeTimeline,
    records: Vec<TimelineRecord>,
}

impl Recording {
    fn events(&self) -> usize {
        let t = &self.timeline;
        t.switches.len() + t.spins.len() + t.actions.len() + t.slices.len() + t.decisions.len()
    }

    fn full(&self) -> bool {
        self.events() >= self.max_events as usize
    }

    /// The timeline, if it has room for one more entry; a full one is
    /// marked truncated instead, so the reader knows entries were dropped.
    fn room(&mut self) -> Option<&mut NodeTimeline> {
        if self.full() {
            self.timeline.truncated = true;
            return None;
        }
        Some(&mut self.timeline)
    }
}

fn slice_of(gang: Option<&super::Gang>, ts_ns: u64) -> Slice {
    Slice {
        ts_ns,
        active: gang.map(|g| {
            let mut jobs: Vec<_> = g.active.iter().copied().collect();
            jobs.sort_unstable();
            jobs
        }),
        number: None,
    }
}

impl<K: Kernel> Engine<K> {
    /// Starts a recording of `duration_ms`; returns when it ends
    /// (CLOCK_MONOTONIC ns).
    pub fn start_recording(
        &mut self,
        duration_ms: u64,
        max_events: Option<u32>,
    ) -> Result<u64, RecordError> {
        let now = self.k.now_ns();
        if let Some(r) = &self.recording {
            return Err(RecordError::Busy {
                remaining_ms: r.deadline_ns.saturating_sub(now) / 1_000_000,
            });
        }
        if duration_ms == 0 || duration_ms > MAX_DURATION_MS {
            return Err(RecordError::BadDuration(duration_ms));
        }
        let max_events = max_events.unwrap_or(DEFAULT_MAX_EVENTS);
        if max_events == 0 || max_events > MAX_EVENTS {
            return Err(RecordError::BadMaxEvents(max_events));
        }
        // Records left from an earlier recording that ended in between two
        // drains are not this one's.
        let mut stale = Vec::new();
        let _ = self.k.drain_timeline(&mut stale);
        self.k
            .set_recording(true)
            .map_err(|e| RecordError::Kernel(e.to_string()))?;
        let lost_at_start = self.k.drops().map_or(0, |d| d.timeline_lost);
        let mut timeline = NodeTimeline {
            node: self.cfg.node.clone(),
            cpus: self.node_cpus(),
            start_ns: now,
            ..NodeTimeline::default()
        };
        // Where every task stands as the recording starts.
        timeline.actions = self
            .reg
            .tasks()
            .map(|(tid, s)| Action {
                ts_ns: now,
                tid,
                job: s.job,
                level: level_name(s.realised.level).into(),
            })
            .collect();
        if self.gang.is_some() {
            timeline.slices.push(slice_of(self.gang.as_ref(), now));
        }
        timeline.jobs = self.timeline_jobs();
        self.recording = Some(Recording {
            deadline_ns: now + duration_ms * 1_000_000,
            max_events,
            lost_at_start,
            timeline,
            records: Vec::new(),
        });
        tracing::info!(duration_ms, max_events, "timeline recording started");
        Ok(now + duration_ms * 1_000_000)
    }

    /// When the recording in progress must end (None: none runs).
    pub fn recording_deadline(&self) -> Option<u64> {
        self.recording.as_ref().map(|r| r.deadline_ns)
    }

    /// Whether the recording in progress is due to end now: its time is
    /// up or it holds as many records as it may.
    pub fn recording_due(&self) -> bool {
        let now_ns = self.k.now_ns();
        self.recording
            .as_ref()
            .is_some_and(|r| now_ns >= r.deadline_ns || r.full())
    }

    /// Takes the eBPF side's timeline records into the recording (nothing
    /// without one).
    pub fn drain_timeline(&mut self) {
        let Some(r) = self.recording.as_mut() else {
            return;
        };
        let mut records = std::mem::take(&mut r.records);
        records.clear();
        if let Err(e) = self.k.drain_timeline(&mut records) {
            tracing::warn!("draining timeline records: {e}");
        }
        for rec in &records {
            let Some(t) = r.room() else {
                break;
            };
            match rec.kind {
                timeline_kind::SWITCH => t.switches.push(Switch {
                    ts_ns: rec.ts_ns,
                    cpu: rec.cpu,
                    prev_tid: rec.prev_tid,
                    prev_job: rec.prev_job,
                    next_tid: rec.next_tid,
                    next_job: rec.next_job,
                }),
                timeline_kind::SPIN_START | timeline_kind::SPIN_END => t.spins.push(Spin {
                    ts_ns: rec.ts_ns,
                    tid: rec.prev_tid,
                    job: rec.prev_job,
                    start: rec.kind == timeline_kind::SPIN_START,
                }),
                _ => {}
            }
        }
        r.records = records;
    }

    /// Ends the recording in progress and returns it.
    pub fn finish_recording(&mut self) -> Option<NodeTimeline> {
        self.recording.as_ref()?;
        if let Err(e) = self.k.set_recording(false) {
            tracing::warn!("turning timeline recording off: {e}");
        }
        self.drain_timeline();
        let r = self.recording.take()?;
        let now = self.k.now_ns();
        let mut t = r.timeline;
        t.end_ns = if t.truncated {
            t.switches.last().map_or(now, |s| s.ts_ns).min(now)
        } else {
            now.min(r.deadline_ns.max(t.start_ns))
        };
        t.end_ns = t.end_ns.max(t.start_ns);
        t.lost = self
            .k
            .drops()
            .map_or(0, |d| d.timeline_lost.saturating_sub(r.lost_at_start));
        // Jobs known at the start (some may be forgotten since) and now.
        let mut jobs = std::mem::take(&mut t.jobs);
        for j in self.timeline_jobs() {
            if !jobs.iter().any(|k| k.job_id == j.job_id) {
                jobs.push(j);
            }
        }
        jobs.sort_by_key(|j| j.job_id);
        t.jobs = jobs;
        tracing::info!(
            switches = t.switches.len(),
            spins = t.spins.len(),
            actions = t.actions.len(),
            truncated = t.truncated,
            lost = t.lost,
            "timeline recording finished"
        );
        Some(t)
    }

    fn timeline_jobs(&self) -> Vec<TimelineJob> {
        self.reg
            .jobs()
            .map(|j| TimelineJob {
                job_id: j.id,
                name: j.name.clone(),
            })
            .collect()
    }

    /// A task's level changed (recorded while recording).
    pub(super) fn record_action(&mut self, tid: u32, level: Level) {
        let Some(timeline) = self.recording.as_mut().and_then(Recording::room) else {
            return;
        };
        let job = self.reg.task(tid).map_or(0, |s| s.job);
        timeline.actions.push(Action {
            ts_ns: self.k.now_ns(),
            tid,
            job,
            level: level_name(level).into(),
        });
    }

    /// The policy decided something for `tid`, for `reason` (a level
    /// change, or a boost it refused): recorded while recording, so a probe
    /// sees why a task was handed back without a boost.
    pub(super) fn record_decision(&mut self, tid: u32, reason: &str) {
        let Some(timeline) = self.recording.as_mut().and_then(Recording::room) else {
            return;
        };
        let job = self.reg.task(tid).map_or(0, |s| s.job);
        timeline.decisions.push(Decision {
            ts_ns: self.k.now_ns(),
            tid,
            job,
            reason: reason.into(),
        });
    }

    /// The coordinator's slice changed (recorded while recording).
    pub(super) fn record_slice(&mut self) {
        let Some(timeline) = self.recording.as_mut().and_then(Recording::room) else {
            return;
        };
        timeline
            .slices
            .push(slice_of(self.gang.as_ref(), self.k.now_ns()));
    }

    /// The coordinator's switch to `number` was applied: the slice change
    /// it made (recorded just before, by the gang overlay) gets its number,
    /// so recordings of separate machines can be matched slice by slice.
    /// A switch that changed nothing on this node has no record to number.
    pub fn slice_switched(&mut self, number: SliceNumber) {
        let Some(last) = self
            .recording
            .as_mut()
            .and_then(|r| r.timeline.slices.last_mut())
        else {
            return;
        };
        if last.number.is_none() {
            last.number = Some(number);
        }
    }
}
