//! Clock offset estimation from heartbeat exchanges.

use crate::global::{
    ClockError, ClockOffsetConfig, ClockOffsetEstimator, HeartbeatTimestamps, ScheduleClockBounds,
};

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// An exchange sent at coordinator time `sent`, to an agent whose clock is
/// ahead by `offset`, taking `forward` and `backward` ns on the wire and
/// held `held` ns by the agent.
fn exchange(sent: u64, offset: i64, forward: u64, held: u64, backward: u64) -> HeartbeatTimestamps {
    let agent_receive = (sent + forward).checked_add_signed(offset).unwrap();
    HeartbeatTimestamps {
        coordinator_send_ns: sent,
        agent_receive_ns: agent_receive,
        agent_send_ns: agent_receive + held,
        coordinator_receive_ns: sent + forward + held + backward,
    }
}

#[test]
fn symmetric_exchange_gives_the_exact_offset_and_delay() {
    let sample = exchange(1_000 * MS, 5 * MS as i64, 100 * US, 20 * US, 100 * US)
        .sample()
        .unwrap();
    assert_eq!(sample.offset_ns, 5 * MS as i64);
    assert_eq!(sample.round_trip_ns, 200 * US);
}

#[test]
fn clock_offset_uses_min_rtt_sample() {
    let true_offset = 5 * MS as i64;
    let mut estimator = ClockOffsetEstimator::default();
    let script = [
        // Queueing on the way out: offset looks 1 ms larger.
        exchange(
            1_000 * MS,
            true_offset,
            100 * US + 2 * MS,
            10 * US,
            100 * US,
        ),
        // Queueing on the way back: offset looks 1.5 ms smaller.
        exchange(
            2_000 * MS,
            true_offset,
            100 * US,
            10 * US,
            100 * US + 3 * MS,
        ),
        // Quiet network, symmetric.
        exchange(3_000 * MS, true_offset, 100 * US, 10 * US, 100 * US),
        // Asymmetric jitter again after the quiet sample.
        exchange(4_000 * MS, true_offset, 600 * US, 10 * US, 100 * US),
    ];
    let samples: Vec<_> = script.iter().map(|e| e.sample().unwrap()).collect();
    assert_eq!(samples[0].offset_ns, true_offset + MS as i64);
    assert_eq!(samples[1].offset_ns, true_offset - 1_500 * US as i64);
    let mut last = None;
    for exchange in script {
        last = Some(estimator.record(exchange).unwrap());
    }
    let estimate = last.unwrap();
    assert_eq!(estimate.offset_ns, true_offset, "the quiet sample wins");
    assert_eq!(estimate.round_trip_ns, 200 * US);
    assert_eq!(estimate.uncertainty_ns, 100 * US);
    assert_eq!(estimator.to_agent_clock(10_000 * MS), Some(10_005 * MS));
    assert_eq!(estimate.to_coordinator_clock(10_005 * MS), 10_000 * MS);
}

#[test]
fn agent_clock_behind_the_coordinator_gives_a_negative_offset() {
    let mut estimator = ClockOffsetEstimator::default();
    let estimate = estimator
        .record(exchange(
            9_000 * MS,
            -(7 * MS as i64),
            50 * US,
            5 * US,
            50 * US,
        ))
        .unwrap();
    assert_eq!(estimate.offset_ns, -(7 * MS as i64));
    assert_eq!(estimate.to_agent_clock(9_500 * MS), 9_493 * MS);
    assert_eq!(estimate.to_agent_clock(MS), 0, "saturates at zero");
}

#[test]
fn old_samples_leave_the_window() {
    let mut estimator = ClockOffsetEstimator::new(ClockOffsetConfig {
        window_samples: 3,
        max_sample_age_ns: u64::MAX,
    });
    // The best sample comes first, with an offset of 5 ms...
    estimator
        .record(exchange(1_000 * MS, 5 * MS as i64, 10 * US, 0, 10 * US))
        .unwrap();
    // ...then the clock drifts to 6 ms and the network is noisier.
    for i in 0..2 {
        let estimate = estimator
            .record(exchange(
                (2 + i) * 1_000 * MS,
                6 * MS as i64,
                50 * US,
                0,
                50 * US,
            ))
            .unwrap();
        assert_eq!(
            estimate.offset_ns,
            5 * MS as i64,
            "best sample still in the window"
        );
    }
    let estimate = estimator
        .record(exchange(4_000 * MS, 6 * MS as i64, 50 * US, 0, 50 * US))
        .unwrap();
    assert_eq!(
        estimate.offset_ns,
        6 * MS as i64,
        "the 5 ms sample fell out"
    );
    assert_eq!(estimator.samples().count(), 3);
}

#[test]
fn samples_older_than_the_age_limit_are_dropped() {
    let mut estimator = ClockOffsetEstimator::new(ClockOffsetConfig {
        window_samples: 100,
        max_sample_age_ns: 10_000 * MS,
    });
    estimator
        .record(exchange(1_000 * MS, 5 * MS as i64, 10 * US, 0, 10 * US))
        .unwrap();
    let estimate = estimator
        .record(exchange(20_000 * MS, 6 * MS as i64, 50 * US, 0, 50 * US))
        .unwrap();
    assert_eq!(estimate.offset_ns, 6 * MS as i64);
    assert_eq!(estimator.samples().count(), 1);
}

#[test]
fn impossible_exchanges_are_refused_and_change_nothing() {
    let mut estimator = ClockOffsetEstimator::default();
    let good = exchange(1_000 * MS, 0, 10 * US, 0, 10 * US);
    let reply_first = HeartbeatTimestamps {
        coordinator_receive_ns: good.coordinator_send_ns - 1,
        ..good
    };
    assert!(matches!(
        estimator.record(reply_first),
        Err(ClockError::ReplyBeforeRequest { .. })
    ));
    let agent_backwards = HeartbeatTimestamps {
        agent_send_ns: good.agent_receive_ns - 1,
        ..good
    };
    assert!(matches!(
        estimator.record(agent_backwards),
        Err(ClockError::AgentRepliedBeforeReceiving { .. })
    ));
    let held_too_long = HeartbeatTimestamps {
        agent_send_ns: good.agent_receive_ns + 30 * US,
        ..good
    };
    assert!(matches!(
        estimator.record(held_too_long),
        Err(ClockError::AgentHeldLongerThanRoundTrip { .. })
    ));
    assert_eq!(estimator.estimate(), None);
    assert_eq!(estimator.to_agent_clock(5), None);
}

#[test]
fn far_apart_clocks_are_handled_without_overflow() {
    let sample = HeartbeatTimestamps {
        coordinator_send_ns: 10,
        agent_receive_ns: u64::MAX - 100,
        agent_send_ns: u64::MAX - 90,
        coordinator_receive_ns: 40,
    }
    .sample();
    assert_eq!(sample, Err(ClockError::OffsetOutOfRange));
}

#[test]
fn a_burst_of_late_heartbeats_does_not_move_the_offset() {
    let true_offset = 3 * MS as i64;
    let mut estimator = ClockOffsetEstimator::default();
    // A quiet exchange first: 40 µs round trip.
    estimator
        .record(exchange(1_000 * MS, true_offset, 20 * US, 5 * US, 20 * US))
        .unwrap();
    // Then a switch burst: replies queue behind it for milliseconds, one
    // way only (each alone would put the offset 1-4 ms off).
    for i in 1..8 {
        let estimate = estimator
            .record(exchange(
                (1_000 + i * 20) * MS,
                true_offset,
                20 * US,
                5 * US,
                i * MS / 2 + 20 * US,
            ))
            .unwrap();
        assert_eq!(estimate.offset_ns, true_offset, "late reply {i}");
        assert_eq!(estimate.uncertainty_ns, 20 * US);
    }
}

#[test]
fn an_uncertain_estimate_is_followed_exactly_and_a_certain_one_within_the_redrift() {
    let bounds = ScheduleClockBounds {
        max_uncertainty_ns: 250 * US,
        redrift_ns: 100 * US,
    };
    let slice_at = 2_000 * MS;
    let mut estimator = ClockOffsetEstimator::default();
    assert!(
        !bounds.certain(estimator.estimate().as_ref()),
        "no estimate yet"
    );
    // Registration burst: 2 ms round trips, the offset is only known to ±1 ms.
    let uncertain = estimator
        .record(exchange(1_000 * MS, 0, 1_500 * US, 10 * US, 500 * US))
        .unwrap();
    assert_eq!(uncertain.uncertainty_ns, MS);
    assert!(!bounds.certain(Some(&uncertain)));
    // A slightly better sample moves the instant by 10 µs: passed on.
    let better = estimator
        .record(exchange(1_100 * MS, 0, 1_500 * US, 10 * US, 480 * US))
        .unwrap();
    assert_eq!(better.offset_ns - uncertain.offset_ns, 10 * US as i64);
    assert!(!bounds.still_stands(
        uncertain.to_agent_clock(slice_at),
        better.to_agent_clock(slice_at),
        Some(&better)
    ));
    // A quiet exchange: ±50 µs, certain; what the uncertain one told
    // (500 µs off) does not stand.
    let certain = estimator
        .record(exchange(1_500 * MS, 0, 50 * US, 10 * US, 50 * US))
        .unwrap();
    assert!(bounds.certain(Some(&certain)));
    assert!(!bounds.still_stands(
        better.to_agent_clock(slice_at),
        certain.to_agent_clock(slice_at),
        Some(&certain)
    ));
}

#[test]
fn a_better_sample_moving_the_instant_less_than_the_redrift_keeps_the_schedule() {
    let bounds = ScheduleClockBounds::default();
    let mut estimator = ClockOffsetEstimator::default();
    let first = estimator
        .record(exchange(1_000 * MS, 0, 150 * US, 10 * US, 50 * US))
        .unwrap();
    assert!(bounds.certain(Some(&first)));
    let better = estimator
        .record(exchange(1_500 * MS, 0, 20 * US, 10 * US, 20 * US))
        .unwrap();
    assert_eq!(first.offset_ns - better.offset_ns, 50 * US as i64);
    let slice_at = 2_000 * MS;
    assert!(bounds.still_stands(
        first.to_agent_clock(slice_at),
        better.to_agent_clock(slice_at),
        Some(&better)
    ));
    assert!(!bounds.still_stands(slice_at, slice_at + bounds.redrift_ns + 1, Some(&better)));
}
