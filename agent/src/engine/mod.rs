//! The agent's core: a synchronous state machine over the [`Kernel`] seam.
//!
//! Data flows one way: kernel events and counter snapshots come in
//! ([`events`], [`driving`]), the local policy and the gang overlay decide
//! what level each task must have ([`gang`]), a pure [`plan`] says what
//! changes on the task and one executor ([`execute`]) applies it through the
//! seam and the restore ledger ([`realise`]). The async daemon around it only
//! moves bytes (sockets, timers, child processes) and calls the intent
//! methods here; everything that decides lives here and is tested with the
//! fake kernel.
//!
//! Per task, everything lives in one [`TaskState`](crate::registry::TaskState)
//! in the registry; [`Engine::forget_task`] is the one way a task goes.
mod attach;
mod classes;
mod driving;
mod events;
pub mod execute;
mod export;
mod gang;
mod job_cpu;
mod jobs;
mod low_latency;
pub mod plan;
mod realise;
mod record;
mod reload;
mod rt;
mod shutdown;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use cosched_agent_common::Event;
use cosched_policy::local::{PolicyKind, WakeInterest};
use cosched_proto::{
    control::{JobInfo, JobState, ReloadOutcome},
    job::JobId,
};

pub use attach::{AttachRequest, Caller};
pub use gang::Gang;
pub use plan::level_attr;
pub use record::RecordError;
pub use rt::RtFrameReport;

use crate::{
    adoption::{Protected, Refusal},
    classes::{ClassMode, ClassOverlay},
    config::Config,
    cpu_group::CpuGroups,
    kernel::{CounterFileOf, Kernel},
    metrics::Metrics,
    policy_driver::PolicyDriver,
    registry::{Job, Registry, RegistryError},
    restore::RestoreLedger,
};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error("invalid scheduling request: {0}")]
    BadSched(String),
    #[error("no such process: {0}")]
    NoSuchProcess(u32),
    #[error("no process given: name at least one pid")]
    NoProcess,
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    #[error("cannot attach cgroup {0}")]
    NoSuchCgroup(String),
    #[error("cannot join: {0}")]
    NotJoinable(String),
    #[error("{0}")]
    BadName(String),
    #[error("invalid class: {0}")]
    BadClass(String),
    #[error("kernel: {0}")]
    Io(#[from] std::io::Error),
}

pub struct Engine<K: Kernel> {
    k: K,
    /// The config as the file says (the coordinator may override its policy).
    cfg: Config,
    /// The local policy the coordinator asks for while it is connected.
    policy_override: Option<PolicyKind>,
    /// The coordinator enforces slices: the agent runs real-time.
    slices_enforced: bool,
    reg: Registry,
    ledger: RestoreLedger,
    metrics: Metrics,
    config_path: String,
    online_cpus: u32,
    /// Exit states of launched main processes reaped by the daemon.
    reaped: HashMap<u32, JobState>,
    /// Main processes the agent launched (their end is known only once reaped).
    launched: HashSet<u32>,
    last_reload: Option<ReloadOutcome>,
    /// The ring's records, reused between drains.
    events: Vec<Event>,
    driver: PolicyDriver,
    /// What the running policy needs to hear at once.
    interest: WakeInterest,
    /// The coordinator's current slice, if the node is in gang mode.
    gang: Option<Gang>,
    /// `demote_cpu_cgroup`: during demoting gang slices managed tasks live
    /// in `active`, low levels in `idle` (None: demotion by SCHED_IDLE and
    /// autogroup nice only).
    cpu_groups: Option<CpuGroups>,
    /// Processes adoption refuses besides the ones it recognises.
    protected: Protected,
    /// The real-time priority the agent last gave itself (None: not yet).
    own_priority_applied: Option<u32>,
    /// Whether the agent last asked to hold the CPU latency request (None:
    /// not yet asked; see `low_latency.rs`).
    low_latency_wanted: Option<bool>,
    /// The eBPF side's waiting detectors, as loaded.
    wait_detectors: Vec<crate::kernel::WaitDetectorState>,
    /// Launcher daemons that joined a job (orted, hydra_pmi_proxy): their
    /// threads are followed (their forks are the job's ranks) but always
    /// left at Normal, never stopped or demoted.
    daemons: HashSet<u32>,
    /// Which class runs and what each task gets (off without a class mode).
    classes: ClassOverlay,
    /// The class mode the coordinator asks for (None: the config's).
    class_override: Option<ClassMode>,
    /// The coordinator holds the class overlay off whatever the config
    /// says (1GS).
    classes_held_off: bool,
    /// The open frame counters of RT processes, by pid.
    rt_readers: HashMap<u32, crate::rt_frames::FrameReader<CounterFileOf<K>>>,
    /// When the RT tick last ran.
    last_rt_tick: u64,
    /// The timeline recording in progress (None: recording is off).
    recording: Option<record::Recording>,
    /// What the kernel said when the daemon asked for SCHED_DEADLINE on a
    /// thread pinned like the node's tasks (None: not probed; the
    /// `edf = "deadline"` tasks then find out one by one).
    edf_probe: Option<Result<(), String>>,
}

impl<K: Kernel> Engine<K> {
    pub fn new(
        k: K,
        cfg: Config,
        mut ledger: RestoreLedger,
        config_path: &str,
        online_cpus: u32,
    ) -> Self {
        let metrics = Metrics::new();
        metrics.config_ok.set(1);
        let wait_detectors = k.wait_detectors();
        metrics.set_wait_detectors(&wait_detectors);
        let cpu_groups = cfg.demote_cpu_cgroup.as_deref().map(CpuGroups::under);
        ledger.set_cpu_groups(cpu_groups.clone());
        let policy = cfg.local_policy();
        let protected = Protected {
            agent: std::process::id(),
            guardian: None,
        };
        // A validated config always has a band; a default one otherwise.
        let band = cfg
            .classes
            .band()
            .or_else(|_| crate::classes::ClassesConfig::default().band())
            .expect("the default band is valid");
        let mut engine = Self {
            classes: ClassOverlay::new(band),
            class_override: None,
            classes_held_off: false,
            rt_readers: HashMap::new(),
            last_rt_tick: 0,
            recording: None,
            edf_probe: None,
            driver: reload::driver_for(&policy, cfg.policy_tick_us),
            interest: WakeInterest::of(&policy),
            cpu_groups,
            policy_override: None,
            slices_enforced: false,
            gang: None,
            k,
            cfg,
            reg: Registry::default(),
            ledger,
            metrics,
            config_path: config_path.to_string(),
            online_cpus,
            reaped: HashMap::new(),
            launched: HashSet::new(),
            last_reload: None,
            events: Vec::new(),
            protected,
            own_priority_applied: None,
            low_latency_wanted: None,
            wait_detectors,
            daemons: HashSet::new(),
        };
        engine.apply_wake_settings();
        engine.update_own_priority();
        engine.apply_class_mode();
        engine
    }

    /// The config as loaded from the file (its policy may be overridden by
    /// the coordinator: see [`Self::running_policy`]).
    pub fn cfg(&self) -> &Config {
        &self.cfg
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn kernel(&self) -> &K {
        &self.k
    }

    /// The kernel, for tests that play the kernel's part.
    #[cfg(test)]
    pub fn kernel_mut(&mut self) -> &mut K {
        &mut self.k
    }

    pub fn node_cpus(&self) -> Vec<u32> {
        self.cfg.node_cpus(self.online_cpus)
    }

    /// The local policy running now.
    pub fn running_policy(&self) -> PolicyKind {
        self.driver.kind()
    }

    pub fn policy_active(&self) -> bool {
        self.driver.active()
    }

    /// The guardian process, which adoption must never take.
    pub fn set_guardian(&mut self, pid: Option<u32>) {
        self.protected.guardian = pid;
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.reg.job(id)
    }

    pub fn job_running(&self, id: JobId) -> bool {
        self.reg
            .job(id)
            .is_some_and(|j| j.state == JobState::Running)
    }

    pub fn job_info(&self, id: JobId) -> Option<JobInfo> {
        self.reg.job(id).map(|j| self.info(j))
    }

    pub fn jobs_info(&self) -> Vec<JobInfo> {
        self.reg.jobs().map(|j| self.info(j)).collect()
    }

    fn info(&self, j: &Job) -> JobInfo {
        let mut info = self.reg.info(j);
        info.rt = self.rt_info(j);
        info
    }

    /// Where a launched job's output goes (shown by `cosched job`).
    pub fn set_job_output(&mut self, id: JobId, stdout: String, stderr: String) {
        if let Some(j) = self.reg.job_mut(id) {
            j.stdout = Some(stdout);
            j.stderr = Some(stderr);
        }
    }

    /// Whether any job still runs (its tasks may all be gone while its
    /// end is not known yet).
    pub fn has_running_jobs(&self) -> bool {
        self.reg.running_jobs() > 0
    }

    /// How many tasks the agent manages.
    pub fn task_count(&self) -> usize {
        self.reg.task_count()
    }

    /// CPU seconds a job's tasks used so far, read now from the eBPF
    /// side's per-task counters (the registry's totals are only refreshed
    /// every poll). [`Engine::jobs_cpu_seconds`] reads several jobs with
    /// fewer system calls.
    pub fn job_cpu_seconds(&self, job: JobId, now_ns: u64) -> Option<f64> {
        let record = self.reg.job(job)?;
        if record.state != JobState::Running {
            return Some(record.totals.cpu_seconds);
        }
        let live: f64 = record
            .live
            .iter()
            .filter_map(|&tid| self.k.task_stat(tid).ok().flatten())
            .map(|stats| crate::registry::task_totals(&stats, now_ns).cpu_seconds)
            .sum();
        Some(record.exited.cpu_seconds + live)
    }
}
