//! Config reloads, the coordinator's policy override, and what a policy
//! change needs beyond the policy: the eBPF wake-up settings and the agent's
//! own priority.
use cosched_policy::local::{LocalPolicyConfig, PolicyKind, WakeInterest};
use cosched_proto::control::ReloadOutcome;

use super::Engine;
use crate::{
    config::{Config, ConfigError},
    kernel::{Kernel, SchedAttr, SchedPolicy, sched_attr::FLAG_RESET_ON_FORK},
    policy_driver::PolicyDriver,
    wakeup,
};

pub(super) fn driver_for(policy: &LocalPolicyConfig, tick_us: u64) -> PolicyDriver {
    PolicyDriver::new(policy, tick_us).unwrap_or_else(|e| {
        // Unreachable for a validated config; never run without a policy.
        tracing::error!(
            "policy {}: {e}; running local (no intervention)",
            policy.kind
        );
        PolicyDriver::new(&Default::default(), tick_us).expect("local policy always builds")
    })
}

impl<K: Kernel> Engine<K> {
    /// The policy configuration running now: the file's, with the
    /// coordinator's choice of policy while it has one.
    fn running_policy_config(&self) -> LocalPolicyConfig {
        let mut policy = self.cfg.local_policy();
        if let Some(kind) = self.policy_override {
            policy.kind = kind;
        }
        policy
    }

    /// Validates and applies a new config (`Err` = it could not be read or
    /// parsed). The old config stays unless the new one is fully valid.
    pub fn reload(&mut self, new: Result<Config, ConfigError>) -> ReloadOutcome {
        let checked = new.and_then(|c| {
            self.cfg.check_reload(&c)?;
            c.check_machine(self.online_cpus)?;
            Ok(c)
        });
        let outcome = match checked {
            Ok(c) => {
                let changed = c != self.cfg;
                let classes_changed = c.classes != self.cfg.classes;
                let before = (
                    self.running_policy_config(),
                    self.cfg.policy_tick_us,
                    self.cfg.agent_priority,
                );
                self.cfg = c;
                let after = (
                    self.running_policy_config(),
                    self.cfg.policy_tick_us,
                    self.cfg.agent_priority,
                );
                if before != after {
                    self.switch_policy();
                }
                self.apply_wake_settings();
                self.update_own_priority();
                if classes_changed {
                    // Say again which EDF mechanism is in force.
                    if let Some(probe) = self.edf_probe.clone() {
                        self.set_edf_probe(probe);
                    }
                    // The mode, band and EDF realisation apply at once; a
                    // new budget slack to the RT jobs classified from now on
                    // (a job keeps the budget its windows started with).
                    self.apply_class_mode();
                    let tids = self.reg.task_ids();
                    self.realize_all(&tids, None);
                }
                ReloadOutcome {
                    accepted: true,
                    message: if changed {
                        "config applied".into()
                    } else {
                        "config unchanged".into()
                    },
                }
            }
            Err(e) => ReloadOutcome {
                accepted: false,
                message: format!("{e}; keeping the running config"),
            },
        };
        let label = if outcome.accepted {
            "accepted"
        } else {
            "rejected"
        };
        self.metrics.reloads.with_label_values(&[label]).inc();
        self.metrics.config_ok.set(outcome.accepted as i64);
        if outcome.accepted {
            tracing::info!("config reload: {}", outcome.message);
        } else {
            tracing::error!("config reload rejected: {}", outcome.message);
        }
        self.last_reload = Some(outcome.clone());
        outcome
    }

    /// What the coordinator asks for: the local policy to run (None: the
    /// config file's) and whether it enforces slices (the agent then runs
    /// real-time to switch on time). Not a config reload: the file's config
    /// stays as it is, and comes back in force when the coordinator leaves.
    pub fn set_coordinator_policy(&mut self, policy: Option<PolicyKind>, slices_enforced: bool) {
        let before = self.running_policy_config();
        self.policy_override = policy;
        self.slices_enforced = slices_enforced;
        if self.running_policy_config() != before {
            self.switch_policy();
            tracing::info!(policy = %self.running_policy(), "local policy set for the coordinator");
        }
        self.update_own_priority();
    }

    /// Replaces the running policy without losing any task: the old one hands
    /// every task back, the new one is told about every task.
    fn switch_policy(&mut self) {
        self.release_policy();
        let policy = self.running_policy_config();
        self.driver = driver_for(&policy, self.cfg.policy_tick_us);
        self.interest = WakeInterest::of(&policy);
        let now = self.k.now_ns();
        let tasks: Vec<(u32, u32)> = self.reg.tasks().map(|(t, s)| (t, s.job)).collect();
        for (tid, job) in tasks {
            self.driver.task_added(tid, job, now);
        }
        self.apply_policy_actions(None);
        let tids = self.reg.task_ids();
        self.realize_all(&tids, None);
        self.apply_wake_settings();
        tracing::info!(policy = %policy.kind, "local policy switched");
    }

    /// Tells the eBPF side what the running policy needs to hear at once,
    /// and both sides where a wait ends (the spin gap).
    pub(super) fn apply_wake_settings(&mut self) {
        let gap_ns = self.cfg.detect.spin_gap_us * 1000;
        self.driver.set_spin_gap(gap_ns);
        let settings = wakeup::settings(&self.interest, self.cfg.ebpf.wake_batch_bytes, gap_ns);
        if let Err(e) = self.k.set_settings(settings) {
            tracing::warn!("updating eBPF settings: {e}");
        }
    }

    /// Runs the agent's own thread at SCHED_FIFO `agent_priority` while a
    /// policy acts or gang slices are enforced (so it preempts the jobs to
    /// react and to switch on time), back to SCHED_OTHER otherwise. Reset on
    /// fork, so the processes the agent launches never inherit it.
    pub(super) fn update_own_priority(&mut self) {
        // The same moments decide whether idle CPUs may halt.
        self.update_low_latency();
        let priority = self.own_priority();
        if self.own_priority_applied == Some(priority) {
            return;
        }
        let mut attr = if priority > 0 {
            SchedAttr::with_policy(SchedPolicy::Fifo, 0, priority)
        } else {
            SchedAttr::other(0)
        };
        attr.flags = FLAG_RESET_ON_FORK;
        match self.k.set_own_attr(&attr) {
            Ok(()) => self.own_priority_applied = Some(priority),
            Err(e) => tracing::warn!("cannot set the agent's own priority: {e}"),
        }
    }

    /// The agent's own scheduling priority while it acts (0: time-shared).
    ///
    /// Under plain Linux scheduling (`local`, no slices), or a policy that
    /// is dormant (FCS without gang slots: it acts on nothing until a slot
    /// broadcast comes, see `LocalPolicy::dormant`), it stays time-shared,
    /// unless a job runs at a real-time priority of its own, or the class
    /// overlay gives RT jobs theirs: such a job (always below the agent's
    /// priority, see `reserve_job` and the RT band's check) would otherwise
    /// delay the agent's answers and its exit.
    pub fn own_priority(&self) -> u32 {
        let active = self.driver.acting()
            || self.slices_enforced
            || self.reg.has_realtime_job()
            || self.class_overlay_acts();
        if active { self.cfg.agent_priority } else { 0 }
    }

    /// A class mode with a running RT job: the overlay gives its tasks FIFO
    /// priorities, above a time-shared agent that must end them.
    fn class_overlay_acts(&self) -> bool {
        self.classes.mode().is_some()
            && self
                .reg
                .jobs()
                .any(|j| j.rt.is_some() && j.state == cosched_proto::control::JobState::Running)
    }
}
