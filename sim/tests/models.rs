//! The node, network and program models on small situations whose timing can
//! be worked out by hand.

mod support;

use cosched_policy::local::PolicyKind;
use cosched_sim::config::GlobalMode;
use cosched_sim::workload::{JobSpec, Pattern, RecvMode};
use support::{MS, US, config, response, run};

#[test]
fn a_lone_compute_job_finishes_after_its_work_and_one_context_switch() {
    let cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let job = JobSpec::simple(0, 5 * MS, 1, 1, 30 * MS, Pattern::None);
    let ex = run(cfg.clone(), vec![job]);
    // Time slices expire every 4 ms, but with nothing else to run the task
    // keeps its CPU and no further switch is paid.
    assert_eq!(response(&ex, 0), 30 * MS + cfg.cluster.context_switch_ns);
    assert_eq!(ex.model.counters.context_switches, 1);
    assert_eq!(ex.model.tasks[0].used.compute_ns, 30 * MS);
}

#[test]
fn two_compute_jobs_on_one_cpu_share_it_and_pay_a_switch_per_slice() {
    let cfg = config(1, GlobalMode::Local, PolicyKind::Local);
    let jobs = vec![
        JobSpec::simple(0, 0, 1, 1, 40 * MS, Pattern::None),
        JobSpec::simple(1, 0, 1, 1, 40 * MS, Pattern::None),
    ];
    let ex = run(cfg.clone(), jobs);
    let both = 80 * MS;
    let last = response(&ex, 0).max(response(&ex, 1));
    let switches = ex.model.counters.context_switches;
    assert_eq!(last, both + switches * cfg.cluster.context_switch_ns);
    assert!(
        switches >= 80 / 4 - 1,
        "round robin at 4 ms slices: {switches} switches"
    );
}

/// Rank 1 computes 10 ms, rank 0 only 1 ms, then they exchange one message:
/// rank 0 waits for the late sender.
fn late_sender(recv: RecvMode) -> JobSpec {
    JobSpec {
        rank_compute_ns: vec![MS, 10 * MS],
        recv,
        ..JobSpec::simple(0, 0, 2, 1, MS, Pattern::Ring)
    }
}

#[test]
fn a_spinning_receiver_burns_its_cpu_until_the_late_message_and_goes_on_at_once() {
    let cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    let c = cfg.cluster.clone();
    let ex = run(cfg, vec![late_sender(RecvMode::Spin)]);
    let sent = c.context_switch_ns + 10 * MS + c.send_overhead_ns;
    let delivered = sent + c.net_latency_ns + c.transfer_ns(64);
    assert_eq!(response(&ex, 0), delivered + c.recv_overhead_ns);
    let rank0 = &ex.model.tasks[0].used;
    let spun_from = c.context_switch_ns + MS + c.send_overhead_ns;
    assert_eq!(rank0.spin_ns, delivered - spun_from);
    assert_eq!(
        ex.model.tasks[1].used.spin_ns, 0,
        "rank 1's message was there"
    );
}

#[test]
fn a_blocking_receiver_sleeps_through_the_wait_and_pays_the_wakeup() {
    let cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    let c = cfg.cluster.clone();
    let ex = run(cfg, vec![late_sender(RecvMode::Block)]);
    let sent = c.context_switch_ns + 10 * MS + c.send_overhead_ns;
    let delivered = sent + c.net_latency_ns + c.transfer_ns(64);
    assert_eq!(
        response(&ex, 0),
        delivered + c.wakeup_latency_ns + c.recv_overhead_ns,
        "woken on its idle CPU, no context switch back to itself"
    );
    assert_eq!(ex.model.tasks[0].used.spin_ns, 0);
}

#[test]
fn a_spinning_receiver_takes_cpu_from_a_neighbour_that_a_blocking_one_leaves_it() {
    let finish_of_hog = |recv| {
        let cfg = config(2, GlobalMode::Local, PolicyKind::Local);
        let mut waiter = late_sender(recv);
        waiter.iterations = 20;
        // A CPU-bound job on node 0 only, beside the waiting rank.
        let hog = JobSpec::simple(1, 0, 1, 1, 100 * MS, Pattern::None);
        let ex = run(cfg, vec![waiter, hog]);
        response(&ex, 1)
    };
    let spin = finish_of_hog(RecvMode::Spin);
    let block = finish_of_hog(RecvMode::Block);
    assert!(
        block < spin,
        "blocking receives leave the CPU to the other job: {block} vs {spin}"
    );
}

#[test]
fn messages_to_one_node_queue_at_its_nic() {
    let mut cfg = config(3, GlobalMode::Local, PolicyKind::Local);
    cfg.cluster.net_bandwidth_bytes_per_s = 1e6; // 1 MB/s: 1000 B take 1 ms
    let c = cfg.cluster.clone();
    let mut job = JobSpec::simple(0, 0, 3, 1, MS, Pattern::AllToAll);
    job.message_bytes = 1000;
    let ex = run(cfg, vec![job]);
    // Everyone sends to the other two in rank order, one send overhead
    // each; node 2 is the second destination of both others, so both its
    // messages leave at the second send and the later one waits for the
    // first's DMA (1 ms each).
    let second_send = c.context_switch_ns + MS + 2 * c.send_overhead_ns;
    let last_delivered = second_send + c.net_latency_ns + 2 * MS;
    assert_eq!(response(&ex, 0), last_delivered + c.recv_overhead_ns);
    assert_eq!(ex.model.counters.messages, 6);
}

#[test]
fn a_barrier_rank_waits_for_the_roots_release_after_its_arrival() {
    // `cosched-synth --pattern barrier`: rank 1 sends "arrived" and blocks
    // for rank 0's "release", which rank 0 sends only once the arrival is
    // in. Two messages in a row per iteration, where an exchange has both
    // in flight at once: every iteration is at least one more message
    // latency and wakeup long.
    let cfg = config(2, GlobalMode::Local, PolicyKind::Local);
    let job = |pattern| {
        vec![JobSpec {
            recv: RecvMode::Block,
            ..JobSpec::simple(0, 0, 2, 10, 100 * US, pattern)
        }]
    };
    let exchange = run(cfg.clone(), job(Pattern::NearestNeighbour));
    let barrier = run(cfg.clone(), job(Pattern::Barrier));
    assert_eq!(
        barrier.model.counters.messages,
        exchange.model.counters.messages
    );
    let hop = cfg.cluster.net_latency_ns + cfg.cluster.wakeup_latency_ns;
    assert!(
        response(&barrier, 0) >= response(&exchange, 0) + 10 * hop,
        "barrier {} ns, exchange {} ns",
        response(&barrier, 0),
        response(&exchange, 0)
    );
}
