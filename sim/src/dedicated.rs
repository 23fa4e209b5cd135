//! The time a job takes on a dedicated system (the slowdown's denominator,
//! ClusterSchedSim §2.2): the same model, the job alone on as many nodes as it
//! needs, no coordinator and the baseline local policy.

use cosched_policy::local::{LocalPolicyConfig, PolicyKind};

use crate::config::{ClusterParams, GlobalMode, SchedParams, SimConfig};
use crate::executive::{Calendar, Executive, Ns};
use crate::model::{Cluster, SetupError};
use crate::workload::JobSpec;

/// The configuration of `spec`'s dedicated run: as many nodes as it needs,
/// no coordinator, the baseline local policy.
pub fn dedicated_config(spec: &JobSpec, cluster: &ClusterParams) -> SimConfig {
    SimConfig {
        cluster: ClusterParams {
            nodes: spec.nodes.max(1),
            ..cluster.clone()
        },
        sched: SchedParams {
            global: GlobalMode::Local,
            mpl: 1,
            local: LocalPolicyConfig::for_kind(PolicyKind::Local),
            ..SchedParams::default()
        },
    }
}

/// Runs `spec` alone and returns its run time.
pub fn dedicated_ns(spec: &JobSpec, cluster: &ClusterParams) -> Result<Ns, SetupError> {
    let config = dedicated_config(spec, cluster);
    let alone = JobSpec {
        arrival: 0,
        ..spec.clone()
    };
    let mut calendar = Calendar::default();
    let model = Cluster::new(config, vec![alone], &mut calendar)?;
    let mut ex = Executive::from_parts(model, calendar);
    ex.run_while(|model, _| !model.all_done());
    let run = &ex.model.jobs[0];
    Ok(run.end.unwrap_or(ex.calendar.now()) - run.start.unwrap_or(0))
}
