//! Every `--wait` mode × {udp, tcp} as real processes on 127.0.0.1: the run
//! completes with every frame accounted for, and with a zero-timeout poll
//! (which answers at once) the ranks of master-worker, which wait for each
//! other every iteration, record empty waits. A yield gives the peer time to
//! send: the receive after it may find data every time.

mod common;

use common::{job_lock, reports};
use cosched_synth::modes::WaitMode;

const ITERATIONS: u64 = 200;

fn check(wait: &str, proto: &str) {
    let _serial = job_lock();
    let iterations = ITERATIONS.to_string();
    let reports = reports(
        2,
        &[
            "--job",
            &format!("wait-{wait}-{proto}"),
            "--pattern",
            "master-worker",
            "--proto",
            proto,
            "--recv",
            "spin",
            "--wait",
            wait,
            "--iterations",
            &iterations,
            "--compute-us",
            "5",
            "--timeout",
            "5",
        ],
    );
    for r in &reports {
        let who = format!("{wait} {proto} rank {}", r.rank);
        assert_eq!(r.wait_mode.as_str(), wait, "{who}");
        assert_eq!(r.iterations, ITERATIONS, "{who}");
        assert_eq!(r.data_messages_sent, ITERATIONS, "{who}");
        assert_eq!(r.data_messages_received, ITERATIONS, "{who}");
        assert_eq!(
            (r.rejected_messages, r.unexpected_messages),
            (0, 0),
            "{who}"
        );
        if wait != "yield" {
            assert!(r.empty_polls > 0, "{who}: never found its socket empty");
        }
    }
}

macro_rules! wait_tests {
    ($($name:ident: $wait:literal $proto:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check($wait, $proto);
            }
        )*
    };
}

wait_tests! {
    poll_udp: "poll" "udp";
    poll_tcp: "poll" "tcp";
    epoll_udp: "epoll" "udp";
    epoll_tcp: "epoll" "tcp";
    yield_udp: "yield" "udp";
    yield_tcp: "yield" "tcp";
    recv_tcp: "recv" "tcp";
}

#[test]
fn default_wait_is_the_receive_loop() {
    assert_eq!(WaitMode::default(), WaitMode::Recv);
}
