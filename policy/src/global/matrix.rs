//! The Ousterhout matrix: rows are time slots, columns are nodes, each job
//! holds its requested number of columns in exactly one row (ClusterSchedSim §4.1,
//! Paired Gang Scheduling §2.1, the Scheduler Testbed report §2.1), plus the FCFS queue of jobs that do not fit.
//!
//! Rows keep their index for their whole life; the rotation is the set of
//! non-empty rows, so a row that empties simply leaves it.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::column_allocation::choose_columns;
use super::ids::{JobId, JobRequest, NodeIndex, RowIndex};
use super::matrix_config::{MatrixConfig, QueuePolicy};
use super::matrix_error::MatrixError;
use super::matrix_snapshot::MatrixSnapshot;

/// A job that holds cells: its request, its row and its columns (ascending).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedJob {
    pub request: JobRequest,
    pub row: RowIndex,
    pub columns: Vec<NodeIndex>,
}

impl PlacedJob {
    pub fn id(&self) -> JobId {
        self.request.id
    }
}

/// What `submit` did with a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// The job holds cells and is in the rotation.
    Placed(PlacedJob),
    /// The job waits; `position` 0 is the head of the queue.
    Queued { position: usize },
}

/// A job moved to another row, keeping its columns (only its time slot
/// changes, no process moves between nodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowMove {
    pub job: JobId,
    pub from_row: RowIndex,
    pub to_row: RowIndex,
}

/// Where a removed job was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemovedJob {
    Placed(PlacedJob),
    Queued(JobRequest),
}

/// What `remove` did: the job, the re-packing moves, the queued jobs started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveOutcome {
    pub removed: RemovedJob,
    pub moved: Vec<RowMove>,
    pub started: Vec<PlacedJob>,
}

/// The matrix and its queue. Serialises as a [`MatrixSnapshot`] and checks
/// every invariant when deserialised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "MatrixSnapshot", try_from = "MatrixSnapshot")]
pub struct Matrix {
    config: MatrixConfig,
    /// `cells[row][node]`: the job holding that cell.
    cells: Vec<Vec<Option<JobId>>>,
    placed: BTreeMap<JobId, PlacedJob>,
    queue: VecDeque<JobRequest>,
    /// Bumped on every change, so schedulers can tell a stale view.
    generation: u64,
}

impl Matrix {
    /// An empty matrix.
    pub fn new(config: MatrixConfig) -> Result<Self, MatrixError> {
        config.validate()?;
        let cells = vec![vec![None; config.nodes]; config.max_rows];
        Ok(Self {
            config,
            cells,
            placed: BTreeMap::new(),
            queue: VecDeque::new(),
            generation: 0,
        })
    }

    pub fn config(&self) -> &MatrixConfig {
        &self.config
    }

    /// Number of nodes (columns).
    pub fn nodes(&self) -> usize {
        self.config.nodes
    }

    /// Number of rows (the maximum MPL), empty ones included.
    pub fn rows(&self) -> usize {
        self.config.max_rows
    }

    /// Counter bumped on every change of placements or queue.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The job holding `(row, node)`, if any.
    pub fn cell(&self, row: RowIndex, node: NodeIndex) -> Option<JobId> {
        self.cells.get(row)?.get(node).copied().flatten()
    }

    /// Free mask of a row: `free[node]` is true when the cell is empty.
    pub fn free_columns(&self, row: RowIndex) -> Vec<bool> {
        self.cells[row].iter().map(Option::is_none).collect()
    }

    pub fn is_row_empty(&self, row: RowIndex) -> bool {
        self.cells[row].iter().all(Option::is_none)
    }

    /// The rotation: rows holding at least one job, ascending.
    pub fn non_empty_rows(&self) -> Vec<RowIndex> {
        (0..self.rows())
            .filter(|&row| !self.is_row_empty(row))
            .collect()
    }

    /// Jobs of a row, ordered by their first column.
    pub fn row_jobs(&self, row: RowIndex) -> Vec<&PlacedJob> {
        let mut jobs: Vec<&PlacedJob> = self.placed.values().filter(|job| job.row == row).collect();
        jobs.sort_by_key(|job| job.columns[0]);
        jobs
    }

    pub fn placement(&self, job: JobId) -> Option<&PlacedJob> {
        self.placed.get(&job)
    }

    /// Placed jobs in id order.
    pub fn placed_jobs(&self) -> impl Iterator<Item = &PlacedJob> {
        self.placed.values()
    }

    /// Queued jobs, head first.
    pub fn queued_jobs(&self) -> impl Iterator<Item = &JobRequest> {
        self.queue.iter()
    }

    pub fn queue_position(&self, job: JobId) -> Option<usize> {
        self.queue.iter().position(|queued| queued.id == job)
    }

    /// True when no job holds cells.
    pub fn has_no_placed_jobs(&self) -> bool {
        self.placed.is_empty()
    }

    /// The cells `request` would get right now, ignoring the queue: lowest row
    /// with room, columns by the configured strategy.
    pub fn find_room(&self, request: &JobRequest) -> Option<(RowIndex, Vec<NodeIndex>)> {
        (0..self.rows()).find_map(|row| {
            choose_columns(
                self.config.allocation,
                &self.free_columns(row),
                request.nodes,
            )
            .map(|columns| (row, columns))
        })
    }

    /// Admits a job: places it when it fits and the queue lets it (strict
    /// FCFS: nobody overtakes a waiting job), queues it otherwise.
    pub fn submit(&mut self, request: JobRequest) -> Result<SubmitOutcome, MatrixError> {
        self.check_new_request(&request)?;
        let may_overtake_queue =
            self.queue.is_empty() || self.config.queue == QueuePolicy::Backfill;
        let room = may_overtake_queue
            .then(|| self.find_room(&request))
            .flatten();
        self.generation += 1;
        Ok(match room {
            Some((row, columns)) => SubmitOutcome::Placed(self.occupy(request, row, columns)),
            None => {
                self.queue.push_back(request);
                SubmitOutcome::Queued {
                    position: self.queue.len() - 1,
                }
            }
        })
    }

    /// Places a job that already runs on given nodes (launched by
    /// something else: mpirun, srun): the lowest row where all of
    /// `columns` are free. It never queues (its processes exist already)
    /// and it may overtake the queue for the same reason; when no row has
    /// those columns free it is refused and the matrix is unchanged.
    pub fn attach(
        &mut self,
        request: JobRequest,
        columns: &[NodeIndex],
    ) -> Result<PlacedJob, MatrixError> {
        self.check_new_request(&request)?;
        let mut sorted = columns.to_vec();
        sorted.sort_unstable();
        if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(MatrixError::BadAttachedColumns {
                id: request.id,
                node: pair[0],
                nodes: self.nodes(),
            });
        }
        if let Some(&node) = sorted.iter().find(|&&node| node >= self.nodes()) {
            return Err(MatrixError::BadAttachedColumns {
                id: request.id,
                node,
                nodes: self.nodes(),
            });
        }
        if sorted.len() != request.nodes {
            return Err(MatrixError::AttachedColumnsMismatch {
                id: request.id,
                requested: request.nodes,
                columns: sorted,
            });
        }
        let row = (0..self.rows())
            .find(|&row| sorted.iter().all(|&node| self.cells[row][node].is_none()))
            .ok_or_else(|| MatrixError::NoRowFree {
                id: request.id,
                columns: sorted.clone(),
                rows: self.rows(),
            })?;
        self.generation += 1;
        Ok(self.occupy(request, row, sorted))
    }

    /// Removes a placed or queued job, re-packs rows when configured, then
    /// starts queued jobs that now fit.
    pub fn remove(&mut self, job: JobId) -> Result<RemoveOutcome, MatrixError> {
        let removed = if let Some(placed) = self.placed.remove(&job) {
            for &node in &placed.columns {
                self.cells[placed.row][node] = None;
            }
            RemovedJob::Placed(placed)
        } else if let Some(position) = self.queue_position(job) {
            RemovedJob::Queued(
                self.queue
                    .remove(position)
                    .expect("position is in the queue"),
            )
        } else {
            return Err(MatrixError::UnknownJob(job));
        };
        self.generation += 1;
        let moved = if self.config.repack_rows {
            self.repack()
        } else {
            Vec::new()
        };
        let started = self.start_queued_jobs();
        Ok(RemoveOutcome {
            removed,
            moved,
            started,
        })
    }

    /// Moves a placed job to `row`, keeping its columns. Used by re-packing
    /// and by paired gang's slot homogeneity (Paired Gang Scheduling §2.5).
    pub fn move_job_to_row(&mut self, job: JobId, row: RowIndex) -> Result<RowMove, MatrixError> {
        let placed = match self.placed.get(&job) {
            Some(placed) => placed,
            None if self.queue_position(job).is_some() => {
                return Err(MatrixError::JobNotPlaced(job));
            }
            None => return Err(MatrixError::UnknownJob(job)),
        };
        if row >= self.rows() {
            return Err(MatrixError::RowOutOfRange {
                row,
                rows: self.rows(),
            });
        }
        let from_row = placed.row;
        if from_row != row {
            if let Some(&node) = placed
                .columns
                .iter()
                .find(|&&node| self.cells[row][node].is_some())
            {
                return Err(MatrixError::ColumnsTaken { job, row, node });
            }
            let columns = placed.columns.clone();
            for node in columns {
                self.cells[from_row][node] = None;
                self.cells[row][node] = Some(job);
            }
            self.placed.get_mut(&job).expect("checked above").row = row;
            self.generation += 1;
        }
        Ok(RowMove {
            job,
            from_row,
            to_row: row,
        })
    }

    /// Moves every job to the lowest row where all its columns are free.
    /// Rows are visited upwards; a move only frees cells in rows not yet
    /// visited, so one pass reaches the fixed point.
    pub fn repack(&mut self) -> Vec<RowMove> {
        let mut moves = Vec::new();
        for row in 1..self.rows() {
            let jobs: Vec<(JobId, Vec<NodeIndex>)> = self
                .row_jobs(row)
                .into_iter()
                .map(|job| (job.id(), job.columns.clone()))
                .collect();
            for (job, columns) in jobs {
                let lower = (0..row).find(|&target| {
                    columns
                        .iter()
                        .all(|&node| self.cells[target][node].is_none())
                });
                if let Some(target) = lower {
                    moves.push(self.move_job_to_row(job, target).expect("columns are free"));
                }
            }
        }
        moves
    }

    /// Starts queued jobs that fit: under strict FCFS only from the head,
    /// stopping at the first that does not fit; under backfill every job that
    /// fits, in queue order. One pass is enough because starting a job only
    /// takes room away.
    fn start_queued_jobs(&mut self) -> Vec<PlacedJob> {
        let mut started = Vec::new();
        let mut index = 0;
        while index < self.queue.len() {
            match self.find_room(&self.queue[index]) {
                Some((row, columns)) => {
                    let request = self.queue.remove(index).expect("index is in the queue");
                    started.push(self.occupy(request, row, columns));
                }
                None if self.config.queue == QueuePolicy::StrictFcfs => break,
                None => index += 1,
            }
        }
        if !started.is_empty() {
            self.generation += 1;
        }
        started
    }

    fn check_new_request(&self, request: &JobRequest) -> Result<(), MatrixError> {
        if request.nodes == 0 {
            return Err(MatrixError::EmptyJob(request.id));
        }
        if request.nodes > self.nodes() {
            return Err(MatrixError::JobLargerThanCluster {
                id: request.id,
                requested: request.nodes,
                nodes: self.nodes(),
            });
        }
        if self.placed.contains_key(&request.id) || self.queue_position(request.id).is_some() {
            return Err(MatrixError::DuplicateJob(request.id));
        }
        Ok(())
    }

    fn occupy(&mut self, request: JobRequest, row: RowIndex, columns: Vec<NodeIndex>) -> PlacedJob {
        for &node in &columns {
            debug_assert!(
                self.cells[row][node].is_none(),
                "cell ({row}, {node}) is taken"
            );
            self.cells[row][node] = Some(request.id);
        }
        let placed = PlacedJob {
            request,
            row,
            columns,
        };
        self.placed.insert(placed.id(), placed.clone());
        placed
    }

    /// Rebuilds a matrix from its parts; used by [`MatrixSnapshot`], which
    /// has already checked every invariant.
    pub(super) fn from_checked_parts(
        config: MatrixConfig,
        placed: Vec<PlacedJob>,
        queue: Vec<JobRequest>,
        generation: u64,
    ) -> Self {
        let mut matrix = Self::new(config).expect("snapshot config was validated");
        for job in placed {
            let (request, row, columns) = (job.request, job.row, job.columns);
            matrix.occupy(request, row, columns);
        }
        matrix.queue = queue.into();
        matrix.generation = generation;
        matrix
    }
}

impl From<Matrix> for MatrixSnapshot {
    fn from(matrix: Matrix) -> Self {
        MatrixSnapshot {
            config: matrix.config,
            placed: matrix.placed.into_values().collect(),
            queue: matrix.queue.into(),
            generation: matrix.generation,
        }
    }
}
