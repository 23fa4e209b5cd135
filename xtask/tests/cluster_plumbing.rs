//! End-to-end check of the local cluster's plumbing (namespaces, bridge,
//! cgroups, pinning, cleanup) with a stand-in agent, so it does not depend on
//! the real agent. It needs root, changes the machine and would take down a
//! cluster someone is using, so it runs only on request:
//! `cargo test -p xtask -- --ignored`.

use std::{
    fs,
    io::Read as _,
    process::Stdio,
    thread,
    time::{Duration, Instant},
};

use xtask::{
    cluster::{self, AgentCommand, Cluster, UpOptions},
    workspace::Workspace,
};

const PORT: u16 = 47_311;

#[test]
#[ignore = "needs root; brings a real cluster up and down"]
fn up_connects_the_nodes_and_down_removes_everything() {
    let workspace = Workspace::locate().unwrap();
    assert!(
        Cluster::try_load().unwrap().is_none(),
        "a cluster is up already; this test would take it down"
    );
    let options = UpOptions {
        nodes: 3,
        agent: Some(AgentCommand::Shell(
            r#"touch "$COSCHED_CONTROL_SOCKET"; exec sleep 600"#.to_owned(),
        )),
        ..UpOptions::default()
    };
    let cluster = cluster::up(&workspace, &options).unwrap();
    assert_eq!(Cluster::load().unwrap(), cluster);

    for node in &cluster.nodes {
        assert!(node.agent_alive(), "{} agent not running", node.name);
        let pid = node.agent_pid.unwrap();
        let cgroup = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(
            cgroup.contains(&format!("0::/cosched/{}", node.name)),
            "{cgroup}"
        );
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        assert!(
            status.contains(&format!("Cpus_allowed_list:\t{}\n", node.cpu)),
            "{} agent not pinned to cpu {}",
            node.name,
            node.cpu
        );
    }

    // n0 -> n1 over the bridge, with a listener inside n1.
    let (n0, n1) = (&cluster.nodes[0], &cluster.nodes[1]);
    let mut listener = n1
        .command("busybox")
        .args(["nc", "-l", "-p", &PORT.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let target = format!("/dev/tcp/{}/{PORT}", n1.address);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let sent = n0
            .command("bash")
            .args(["-c", &format!("echo hello-from-n0 > {target}")])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if sent.success() {
            break;
        }
        assert!(Instant::now() < deadline, "n0 could not reach {target}");
        thread::sleep(Duration::from_millis(50));
    }
    let mut received = String::new();
    listener
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut received)
        .unwrap();
    listener.wait().unwrap();
    assert_eq!(received.trim(), "hello-from-n0");

    let report = cluster::down().unwrap();
    assert_eq!(report.namespaces_deleted.len(), 3);
    assert!(report.state_dir_removed);
    let status = cluster::status().unwrap();
    assert!(!status.up);
    assert!(status.leftovers.is_empty(), "{:?}", status.leftovers);
    for node in &cluster.nodes {
        assert!(!node.agent_alive());
    }
    assert!(cluster::down().unwrap().nothing_done());
}
