//! The monitoring parts against real daemons: promtool checks the rules
//! (and runs their unit tests) and the example config; a real Prometheus
//! (Debian's) scrapes two real agents and a gang coordinator running two
//! jobs, evaluates the rules of configs/prometheus/, and runs every query of
//! the Grafana dashboard (configs/grafana/cosched.json, template variables
//! substituted): each must be accepted, the core ones must return data. A
//! rejected config reload and a stopped coordinator must show up as their
//! alerts. Fails, naming the package, when prometheus or promtool is missing
//! (`cargo xtask test` installs it).
use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use cosched_integration_tests::{
    coord::{TestCluster, exclusive, state},
    free_port,
    netns::in_namespace,
    require_root,
    synth::fine_spin,
};
use serde_json::Value;
use xtask::monitoring::{self, Target};

/// Template variables as Grafana would fill them (node = All).
const VARIABLES: &[(&str, &str)] = &[
    ("node", ".+"),
    ("datasource", "prometheus"),
    ("__rate_interval", "10s"),
    ("__interval", "1s"),
    ("__range", "5m"),
];

/// Dashboard queries that must return data on a cluster running gang jobs.
const CORE: &[&str] = &[
    "Agents up / A",
    "Job CPU / A",
    "Agent CPU / A",
    "Agent events / A",
    "Agent events / B",
    "Managed tasks and jobs / A",
    "Managed tasks and jobs / B",
    "Coordinator up and agents connected / A",
    "Coordinator up and agents connected / B",
    "Matrix: jobs / A",
    "Slices / A",
    "Slices / B",
    "Slice switch skew / A",
    "Slice switch skew / B",
    "Gang mode and clocks / A",
    "Config reloads / B",
    "variable node",
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Prometheus inside node 0's namespace, killed on drop.
struct TestPrometheus {
    child: Child,
    dir: tempfile::TempDir,
    listen: SocketAddr,
    ns: String,
}

impl TestPrometheus {
    fn start(ns: &str, targets: &[Target], rules: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        let text = monitoring::config(targets, Duration::from_secs(1), &[rules.to_path_buf()]);
        std::fs::write(&config, text).unwrap();
        monitoring::promtool(dir.path(), &["check", "config", "prometheus.yml"])
            .unwrap_or_else(|e| panic!("{e:#}"));
        let listen: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .arg("--")
            .arg("prometheus")
            .args(monitoring::server_args(
                &config,
                &dir.path().join("data"),
                listen,
            ))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting prometheus");
        let prometheus = Self {
            child,
            dir,
            listen,
            ns: ns.to_owned(),
        };
        let ready = prometheus.api(|addr| monitoring::wait_ready(addr, Duration::from_secs(30)));
        if let Err(error) = ready {
            panic!("{error:#}\n{}", prometheus.log());
        }
        prometheus
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Runs `f` with Prometheus's address from inside its namespace.
    fn api<T: Send>(&self, f: impl FnOnce(SocketAddr) -> T + Send) -> T {
        let addr = self.listen;
        in_namespace(&self.ns, move || f(addr))
    }

    fn query(&self, expr: &str) -> anyhow::Result<monitoring::QueryResult> {
        self.api(|addr| monitoring::query(addr, expr))
    }

    /// The series of `expr`, panicking (with the log) when it is refused.
    fn series(&self, expr: &str) -> Vec<Value> {
        self.query(expr)
            .unwrap_or_else(|e| panic!("{e:#}\n{}", self.log()))
            .series
    }

    /// Polls until `expr` returns at least `n` series.
    fn wait_for(&self, what: &str, expr: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let series = self.series(expr);
            if series.len() >= n {
                return series;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out waiting for {what}: `{expr}` returned {series:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// `/api/v1/rules` groups.
    fn rules(&self) -> Value {
        let (status, body) = self
            .api(|addr| monitoring::http_get(addr, "/api/v1/rules"))
            .unwrap();
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["data"]["groups"].clone()
    }
}

impl Drop for TestPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (name, health, lastError) of every rule.
fn rule_health(groups: &Value) -> Vec<(String, String, String)> {
    groups
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["rules"].as_array().cloned().unwrap_or_default())
        .map(|rule| {
            let text = |key: &str| rule[key].as_str().unwrap_or_default().to_owned();
            (text("name"), text("health"), text("lastError"))
        })
        .collect()
}

fn labels(series: &[Value], label: &str) -> Vec<String> {
    let mut values: Vec<String> = series
        .iter()
        .filter_map(|s| s["metric"][label].as_str().map(str::to_owned))
        .collect();
    values.sort();
    values
}

#[test]
fn prometheus_runs_the_rules_and_every_dashboard_query_against_real_daemons() {
    require_root();
    monitoring::require_tools().unwrap_or_else(|e| panic!("{e:#}"));
    let root = workspace_root();
    let rules_dir = monitoring::rules_dir(&root);
    for args in [
        ["check", "rules", monitoring::RULES_FILE],
        ["test", "rules", monitoring::RULES_TEST_FILE],
        ["check", "config", monitoring::EXAMPLE_CONFIG],
    ] {
        let out = monitoring::promtool(&rules_dir, &args).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(out.contains("SUCCESS"), "promtool {args:?}: {out}");
    }
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(monitoring::DASHBOARD)).unwrap())
            .expect("the dashboard is JSON");
    let queries = monitoring::dashboard_queries(&dashboard, VARIABLES);
    for core in CORE {
        assert!(
            queries.iter().any(|q| q.origin == *core),
            "no dashboard query {core:?}"
        );
    }
    assert!(
        queries.iter().all(|q| !q.expr.contains('$')),
        "a variable is left: {queries:#?}"
    );

    let _serial = exclusive();
    let mut cluster = TestCluster::gang_stopping(91);
    let coordinator = &cluster.coordinator;
    let (agents, nodes) = (&cluster.agents, &cluster.nodes);
    let targets = [
        Target::agent(
            "n0",
            format!("{}:{}", nodes.addr[0], agents[0].metrics_port),
        ),
        Target::agent(
            "n1",
            format!("{}:{}", nodes.addr[1], agents[1].metrics_port),
        ),
        Target::coordinator(format!("127.0.0.1:{}", coordinator.metrics_port)),
    ];
    let prometheus = TestPrometheus::start(
        &nodes.ns[0],
        &targets,
        &rules_dir.join(monitoring::RULES_FILE),
    );
    let args = fine_spin("udp", "12");
    let jobs = [
        coordinator.submit_synth("a", 2, &args),
        coordinator.submit_synth("b", 2, &args),
    ];

    let timeout = Duration::from_secs(30);
    let up = prometheus.wait_for("every target scraped", "up == 1", 3, timeout);
    assert_eq!(
        labels(&up, "job"),
        ["cosched-agent", "cosched-agent", "cosched-coordinator"]
    );
    assert_eq!(labels(&up, "node"), ["n0", "n1"]);
    prometheus.wait_for(
        "slices and job CPU in two scrapes",
        "rate(cosched_slices_total[10s]) > 0 or sum(rate(cosched_job_cpu_seconds_total[10s])) > 0",
        1,
        timeout,
    );
    // Both jobs' CPU on both nodes, named by `cosched_job` (the agents' own
    // `job` label, renamed), not `exported_job`.
    let per_job = prometheus.wait_for(
        "both jobs' CPU on both nodes",
        "sum by (node, cosched_job) (rate(cosched_job_cpu_seconds_total[10s])) > 0",
        4,
        timeout,
    );
    assert_eq!(labels(&per_job, "cosched_job"), ["a", "a", "b", "b"]);
    assert!(
        prometheus
            .series("cosched_job_cpu_seconds_total{exported_job!=\"\"}")
            .is_empty()
    );
    prometheus.wait_for(
        "slice switch skew",
        "histogram_quantile(0.99, sum by (le) (rate(cosched_slice_switch_skew_seconds_bucket[10s]))) >= 0",
        1,
        timeout,
    );

    // Every rule evaluated without an error.
    let started = Instant::now();
    let health = loop {
        let health = rule_health(&prometheus.rules());
        if health.len() >= 14 && health.iter().all(|(_, h, _)| h == "ok") {
            break health;
        }
        let failed: Vec<_> = health.iter().filter(|(_, h, _)| h == "err").collect();
        assert!(failed.is_empty(), "rules failed to evaluate: {failed:#?}");
        assert!(
            started.elapsed() < timeout,
            "rules not evaluated: {health:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    println!("{} rules evaluated, all ok", health.len());

    // Every dashboard query accepted; the core ones return data.
    let mut refused = Vec::new();
    let mut empty = Vec::new();
    for query in &queries {
        match prometheus.query(&query.expr) {
            Ok(result) => {
                println!(
                    "{:>3} series  {}: {}",
                    result.series.len(),
                    query.origin,
                    query.expr
                );
                if !result.warnings.is_empty() {
                    refused.push(format!("{}: warnings {:?}", query.origin, result.warnings));
                }
                if result.series.is_empty() && CORE.contains(&query.origin.as_str()) {
                    empty.push(format!("{}: {}", query.origin, query.expr));
                }
            }
            Err(error) => refused.push(format!("{}: {error:#}", query.origin)),
        }
    }
    assert!(
        refused.is_empty(),
        "dashboard queries refused: {refused:#?}"
    );
    assert!(
        empty.is_empty(),
        "core dashboard queries without data: {empty:#?}"
    );
    println!("{} dashboard queries accepted", queries.len());

    // A rejected reload on n1 fires its alert for n1 only.
    std::fs::write(&agents[1].config_path, "node = [not toml\n").unwrap();
    agents[1].signal(libc::SIGHUP);
    let firing = prometheus.wait_for(
        "CoschedConfigReloadRejected firing",
        "ALERTS{alertname=\"CoschedConfigReloadRejected\", alertstate=\"firing\"}",
        1,
        timeout,
    );
    assert_eq!(labels(&firing, "node"), ["n1"], "{firing:?}");

    for id in jobs {
        let done = coordinator.wait_job(id, Duration::from_secs(30), |job| state(job) != "running");
        assert_eq!(state(&done), "completed", "{done:#}\n{}", cluster.logs());
    }

    // The coordinator stops: its target goes down and its alert is pending
    // (it fires after 1 minute).
    cluster.coordinator.stop();
    let pending = prometheus.wait_for(
        "CoschedCoordinatorDown pending",
        "ALERTS{alertname=\"CoschedCoordinatorDown\"}",
        1,
        timeout,
    );
    assert_eq!(labels(&pending, "job"), ["cosched-coordinator"]);
}
