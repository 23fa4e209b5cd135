//! The events that change 1GS: an arrival, a departure (or cancellation), the
//! end of an RT job's allowed wait. Each arrival and departure runs the whole
//! of §4.1: evict expired waits, cleanse replicas, allocate waiting jobs in
//! arrival order, then the four replication steps.

use serde::{Deserialize, Serialize};

use super::error::OneLevelGangError;
use super::job::OneGsJob;
use super::state::{Allocation, OneLevelGang, WaitingJob};
use crate::classes::Class;
use crate::global::{JobId, NodeIndex, QueuePolicy, RowIndex};

/// What happened to a job on arrival.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalDecision {
    /// It holds these rows (ascending) on these columns (ascending).
    Allocated {
        rows: Vec<RowIndex>,
        columns: Vec<NodeIndex>,
    },
    /// It waits; `position` 0 is the head of its class's queue.
    Waiting { position: usize },
    /// An RT job needing more rows than the whole RT set could only wait for
    /// w and be evicted; it is turned away at once instead.
    Refused { rows_needed: u64, rt_rows: usize },
}

/// The result of [`OneLevelGang::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Waiting { position: usize },
    Refused { rows_needed: u64, rt_rows: usize },
}

/// An RT job whose wait ran out (§3.2: rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evicted {
    pub job: OneGsJob,
    pub waited_ns: u64,
}

/// The result of [`OneLevelGang::evict_expired`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expired {
    pub evicted: Vec<Evicted>,
    /// Waiting jobs allocated because an evicted job no longer holds them
    /// back (strict FCFS only).
    pub started: Vec<JobId>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArriveOutcome {
    pub decision: ArrivalDecision,
    /// Waiting jobs allocated by this event, other than the arriving one.
    pub started: Vec<JobId>,
    /// RT jobs evicted at this instant, before the arrival was handled.
    pub evicted: Vec<Evicted>,
}

/// Where a departing job was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    Allocated(Allocation),
    Waiting(WaitingJob),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepartOutcome {
    pub removed: Removed,
    /// Waiting jobs allocated into the room it left.
    pub started: Vec<JobId>,
    pub evicted: Vec<Evicted>,
}

impl OneLevelGang {
    /// A job arrives at `now_ns`. Errors leave the state unchanged.
    pub fn arrive(
        &mut self,
        job: OneGsJob,
        now_ns: u64,
    ) -> Result<ArriveOutcome, OneLevelGangError> {
        self.check_new(&job)?;
        let evicted = self.evict_waits(now_ns);
        self.cleanse();
        let enqueued = self.enqueue(job, now_ns)?;
        let mut started = self.allocate_waiting();
        self.optimize();
        let decision = match (enqueued, self.allocated.get(&job.id)) {
            (
                Enqueued::Refused {
                    rows_needed,
                    rt_rows,
                },
                _,
            ) => ArrivalDecision::Refused {
                rows_needed,
                rt_rows,
            },
            (_, Some(held)) => ArrivalDecision::Allocated {
                rows: held.rows.clone(),
                columns: held.columns.clone(),
            },
            (Enqueued::Waiting { .. }, None) => ArrivalDecision::Waiting {
                position: self.queue_position(job.id).expect("queued above"),
            },
        };
        started.retain(|&id| id != job.id);
        Ok(ArriveOutcome {
            decision,
            started,
            evicted,
        })
    }

    /// A job leaves at `now_ns`: finished if allocated, withdrawn if
    /// waiting. Unknown ids are an error and change nothing.
    pub fn depart(&mut self, job: JobId, now_ns: u64) -> Result<DepartOutcome, OneLevelGangError> {
        let removed = if let Some(held) = self.allocated.remove(&job) {
            for cell in self.cells.iter_mut().flatten() {
                if cell.is_some_and(|taken| taken.job == job) {
                    *cell = None;
                }
            }
            self.satisfied.remove(&job);
            Removed::Allocated(held)
        } else if let Some(position) = self.queue_position(job) {
            let class = if self.rt_queue.iter().any(|waiting| waiting.job.id == job) {
                Class::RealTime
            } else {
                Class::BestEffort
            };
            Removed::Waiting(
                self.queue_mut(class)
                    .remove(position)
                    .expect("position is in the queue"),
            )
        } else {
            return Err(OneLevelGangError::UnknownJob(job));
        };
        self.generation += 1;
        let evicted = self.evict_waits(now_ns);
        let started = self.reoptimize();
        Ok(DepartOutcome {
            removed,
            started,
            evicted,
        })
    }

    /// Removes the RT jobs whose wait has run out by `now_ns` (they waited w:
    /// at arrival + w they are evicted, as in Figure 2 (k)). The matrix does
    /// not change, except under `StrictFcfs`, where an evicted head may have
    /// held back jobs that fit: then the event's allocation and optimisation
    /// run again.
    pub fn evict_expired(&mut self, now_ns: u64) -> Expired {
        let evicted = self.evict_waits(now_ns);
        let started = if !evicted.is_empty() && self.config.queue == QueuePolicy::StrictFcfs {
            self.reoptimize()
        } else {
            Vec::new()
        };
        Expired { evicted, started }
    }

    fn evict_waits(&mut self, now_ns: u64) -> Vec<Evicted> {
        let mut evicted = Vec::new();
        self.rt_queue.retain(|waiting| {
            let expired = waiting.deadline_ns().is_some_and(|end| now_ns >= end);
            if expired {
                evicted.push(Evicted {
                    job: waiting.job,
                    waited_ns: now_ns.saturating_sub(waiting.arrived_ns),
                });
            }
            !expired
        });
        if !evicted.is_empty() {
            self.generation += 1;
        }
        evicted
    }

    /// Puts a job at the back of its class's queue without allocating
    /// anything: the first half of an arrival, public so a simulator can
    /// show each step (Figure 2 (i): three arrivals, then one allocation).
    /// An RT job needing more rows than the RT set has is refused instead.
    pub fn enqueue(&mut self, job: OneGsJob, now_ns: u64) -> Result<Enqueued, OneLevelGangError> {
        self.check_new(&job)?;
        let rows_needed = job.rows_to_hold(&self.config);
        let rt_rows = self.split.rt_rows;
        if job.class() == Class::RealTime && rows_needed > rt_rows as u64 {
            return Ok(Enqueued::Refused {
                rows_needed,
                rt_rows,
            });
        }
        let waiting = WaitingJob {
            job,
            arrived_ns: now_ns,
            order: self.next_order,
        };
        self.next_order += 1;
        self.generation += 1;
        let queue = self.queue_mut(job.class());
        queue.push_back(waiting);
        Ok(Enqueued::Waiting {
            position: queue.len() - 1,
        })
    }

    fn check_new(&self, job: &OneGsJob) -> Result<(), OneLevelGangError> {
        if job.nodes == 0 {
            return Err(OneLevelGangError::EmptyJob(job.id));
        }
        if job.nodes > self.nodes() {
            return Err(OneLevelGangError::JobLargerThanCluster {
                id: job.id,
                requested: job.nodes,
                nodes: self.nodes(),
            });
        }
        if let Some(spec) = job.rt_spec() {
            spec.validate()
                .map_err(|source| OneLevelGangError::InvalidRtSpec { id: job.id, source })?;
            let cycle_ns = self.config.cycle_ns();
            if self.config.admission_control && !super::phase::is_phase_locked(spec, cycle_ns) {
                return Err(OneLevelGangError::WindowOutOfPhase {
                    id: job.id,
                    window_ns: spec.window_ns(),
                    cycle_ns,
                });
            }
        }
        if self.is_known(job.id) {
            return Err(OneLevelGangError::DuplicateJob(job.id));
        }
        Ok(())
    }
}
