//! The coordinator's config per column: `paired-gang-ahead` needs
//! `paired_schedule_ahead = true`, `gang` and `paired-gang` need it left
//! out (the coordinator's default). The key is read at start only, so the
//! coordinator is restarted (idle, same slice, enforcement and classes)
//! when the next coordinator column needs the other config; columns
//! without the coordinator take it as it is.
use std::time::Duration;

use anyhow::Context as _;

use super::columns::Column;
use crate::{
    bench::coordinator::IDLE_COORDINATOR_POLICY,
    cluster::{Cluster, CoordinatorNode, CoordinatorOptions, coordinator},
    progress::say,
};

/// How long a restarted coordinator may take to be joined by every agent.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// The options to restart `current` with before `column`, if its config
/// is not the one the column needs (or it is not running); `None`: keep
/// it.
pub fn restart_options(
    current: &CoordinatorNode,
    running: bool,
    column: &Column,
) -> Option<CoordinatorOptions> {
    let want = column.paired_schedule_ahead()?;
    if running && current.paired_schedule_ahead == want {
        return None;
    }
    Some(CoordinatorOptions {
        policy: IDLE_COORDINATOR_POLICY.into(),
        slice_ms: current.slice_ms,
        stop_inactive: current.stop_inactive,
        bin_dir: None,
        classes: current.classes.clone(),
        paired_schedule_ahead: want,
    })
}

/// Gives the cluster's coordinator the config `column` needs (a restart
/// when it differs; the agents rejoin before this returns).
pub fn ensure(cluster: &mut Cluster, column: &Column) -> anyhow::Result<()> {
    let Some(current) = cluster.coordinator.as_ref() else {
        return Ok(());
    };
    let Some(options) = restart_options(current, current.alive(), column) else {
        return Ok(());
    };
    say(
        "bench",
        format!(
            "restarting the coordinator {} paired_schedule_ahead for {}",
            if options.paired_schedule_ahead {
                "with"
            } else {
                "without"
            },
            column.label()
        ),
    );
    coordinator::restart(cluster, &options, RESTART_TIMEOUT)
        .with_context(|| format!("restarting the coordinator for {}", column.label()))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::cluster::coordinator::config_toml;

    fn cluster_with(paired_schedule_ahead: bool) -> Cluster {
        let mut cluster = Cluster::plan(2, &[0, 1], "local", 9464).unwrap();
        let options = CoordinatorOptions {
            policy: IDLE_COORDINATOR_POLICY.into(),
            slice_ms: 10,
            stop_inactive: true,
            bin_dir: None,
            classes: None,
            paired_schedule_ahead,
        };
        cluster.coordinator =
            Some(CoordinatorNode::plan(&cluster, &options, Path::new("/r")).unwrap());
        cluster
    }

    /// The config the coordinator runs with during `column`, starting from
    /// one with `from` (what `ensure` would write).
    fn config_during(from: bool, column: &str) -> String {
        let cluster = cluster_with(from);
        let current = cluster.coordinator.as_ref().unwrap();
        let column = Column::parse(column, 10).unwrap();
        match restart_options(current, true, &column) {
            Some(options) => {
                let next = CoordinatorNode::plan(&cluster, &options, Path::new("/r")).unwrap();
                assert_eq!(next.slice_ms, 10, "the slice is kept");
                assert_eq!(next.policy, IDLE_COORDINATOR_POLICY, "restarted idle");
                config_toml(&cluster, &next)
            }
            None => config_toml(&cluster, current),
        }
    }

    fn says_ahead(config: &str) -> bool {
        let parsed: toml::Table = toml::from_str(config).unwrap();
        parsed
            .get("paired_schedule_ahead")
            .and_then(|v| v.as_bool())
            == Some(true)
    }

    #[test]
    fn paired_gang_ahead_runs_with_the_key_from_either_config() {
        for from in [false, true] {
            assert!(
                says_ahead(&config_during(from, "paired-gang-ahead")),
                "from {from}"
            );
        }
    }

    #[test]
    fn the_other_coordinator_columns_run_without_the_key_from_either_config() {
        for column in ["gang", "paired-gang"] {
            for from in [false, true] {
                let config = config_during(from, column);
                assert!(
                    !config.contains("paired_schedule_ahead"),
                    "{column} from {from}:\n{config}"
                );
            }
        }
    }

    #[test]
    fn columns_without_the_coordinator_restart_nothing() {
        for column in ["local", "yield", "dcs"] {
            let cluster = cluster_with(true);
            let current = cluster.coordinator.as_ref().unwrap();
            let column = Column::parse(column, 10).unwrap();
            assert!(restart_options(current, true, &column).is_none());
            assert!(restart_options(current, false, &column).is_none());
        }
    }

    #[test]
    fn a_coordinator_with_the_right_config_is_kept_unless_it_died() {
        let cluster = cluster_with(true);
        let current = cluster.coordinator.as_ref().unwrap();
        let ahead = Column::parse("paired-gang-ahead", 10).unwrap();
        assert!(restart_options(current, true, &ahead).is_none());
        assert!(restart_options(current, false, &ahead).is_some());
    }
}
