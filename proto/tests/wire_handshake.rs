//! The three-message handshake: success, identity checks, and replays by a
//! third party who recorded an earlier connection.

#[path = "wire_support.rs"]
mod support;

use cosched_proto::wire::{
    Heartbeat, Inbound, Message, RejectReason, Role, Session, SessionConfig, SessionState,
    handshake::{Hello, Nonce},
};
use support::{
    agent_config, coordinator_config, establish, establish_recorded, open_one, receive_one, secret,
};

fn heartbeat(seq: u64) -> Message {
    Message::Heartbeat(Heartbeat { seq, t1_ns: 0 })
}

#[test]
fn handshake_establishes_both_ends_with_each_others_identity() {
    let (agent, coordinator) = establish();
    assert!(agent.is_established() && coordinator.is_established());
    let seen_by_agent = agent.peer().unwrap();
    let seen_by_coordinator = coordinator.peer().unwrap();
    assert_eq!(seen_by_agent.role, Role::Coordinator);
    assert_eq!(seen_by_agent.node_name, "coordinator");
    assert_eq!(seen_by_coordinator.role, Role::Agent);
    assert_eq!(seen_by_coordinator.node_name, "node-a");
    assert_eq!(
        seen_by_coordinator.capabilities,
        vec!["ebpf".to_string(), "sched_deadline".to_string()]
    );
    assert_eq!(seen_by_agent.session_id, seen_by_coordinator.session_id);
}

#[test]
fn states_progress_through_the_handshake() {
    let (mut agent, hello) = Session::initiate(agent_config()).unwrap();
    let mut coordinator = Session::accept(coordinator_config()).unwrap();
    assert_eq!(agent.state(), SessionState::AwaitingAck);
    assert_eq!(coordinator.state(), SessionState::AwaitingHello);
    let Ok(Inbound::Reply(ack)) = receive_one(&mut coordinator, &hello) else {
        panic!("expected HelloAck");
    };
    assert_eq!(coordinator.state(), SessionState::AwaitingConfirm);
    let Ok(Inbound::Established {
        reply: Some(confirm),
        ..
    }) = receive_one(&mut agent, &ack)
    else {
        panic!("expected HelloConfirm");
    };
    assert_eq!(agent.state(), SessionState::Established);
    // The coordinator must not send before it has the confirm.
    assert_eq!(
        coordinator.seal(&heartbeat(1)).unwrap_err().reason(),
        "not_established"
    );
    receive_one(&mut coordinator, &confirm).unwrap();
    assert_eq!(coordinator.state(), SessionState::Established);
}

#[test]
fn coordinator_may_initiate_too() {
    let (mut coordinator, hello) = Session::initiate(coordinator_config()).unwrap();
    let mut agent = Session::accept(agent_config()).unwrap();
    let Ok(Inbound::Reply(ack)) = receive_one(&mut agent, &hello) else {
        panic!("expected HelloAck");
    };
    let Ok(Inbound::Established {
        reply: Some(confirm),
        ..
    }) = receive_one(&mut coordinator, &ack)
    else {
        panic!("expected HelloConfirm");
    };
    receive_one(&mut agent, &confirm).unwrap();
    let frame = coordinator.seal(&heartbeat(5)).unwrap();
    assert_eq!(open_one(&mut agent, &frame), Ok(heartbeat(5)));
}

#[test]
fn confirm_and_first_messages_may_arrive_in_one_chunk() {
    let (mut agent, hello) = Session::initiate(agent_config()).unwrap();
    let mut coordinator = Session::accept(coordinator_config()).unwrap();
    let Ok(Inbound::Reply(ack)) = receive_one(&mut coordinator, &hello) else {
        panic!("expected HelloAck");
    };
    let Ok(Inbound::Established {
        reply: Some(confirm),
        ..
    }) = receive_one(&mut agent, &ack)
    else {
        panic!("expected HelloConfirm");
    };
    let mut chunk = confirm;
    chunk.extend(agent.seal(&heartbeat(1)).unwrap());
    chunk.extend(agent.seal(&heartbeat(2)).unwrap());
    let results: Vec<_> = coordinator.push(&chunk).collect();
    assert_eq!(results.len(), 3);
    assert!(matches!(results[0], Ok(Inbound::Established { .. })));
    assert_eq!(results[1], Ok(Inbound::Message(heartbeat(1))));
    assert_eq!(results[2], Ok(Inbound::Message(heartbeat(2))));
}

#[test]
fn session_ids_differ_between_connections() {
    let (first, _) = establish();
    let (second, _) = establish();
    assert_ne!(
        first.peer().unwrap().session_id,
        second.peer().unwrap().session_id
    );
}

#[test]
fn two_ends_with_the_same_role_are_refused() {
    let (_, hello) = Session::initiate(agent_config()).unwrap();
    let mut other_agent =
        Session::accept(SessionConfig::new(Role::Agent, "node-b", secret())).unwrap();
    let error = receive_one(&mut other_agent, &hello).unwrap_err();
    assert_eq!(error.reason(), "handshake");
    assert_eq!(
        other_agent.state(),
        SessionState::Failed(RejectReason::Handshake)
    );
}

#[test]
fn hello_sent_to_an_initiator_is_unexpected() {
    let (_, hello) = Session::initiate(coordinator_config()).unwrap();
    let (mut agent, _) = Session::initiate(agent_config()).unwrap();
    let error = receive_one(&mut agent, &hello).unwrap_err();
    assert_eq!(error.reason(), "unexpected_message");
}

#[test]
fn replayed_hello_and_confirm_cannot_open_a_session() {
    // A third party recorded a whole connection, then replays the agent's
    // side to a fresh coordinator.
    let (mut agent, _, record) = establish_recorded();
    let recorded_message = agent.seal(&heartbeat(1)).unwrap();

    let mut victim = Session::accept(coordinator_config()).unwrap();
    let Ok(Inbound::Reply(fresh_ack)) = receive_one(&mut victim, &record.hello) else {
        panic!("a replayed Hello still gets an answer, with a fresh nonce");
    };
    assert_ne!(fresh_ack, record.ack);
    let error = receive_one(&mut victim, &record.confirm).unwrap_err();
    assert_eq!(error.reason(), "wrong_session");
    assert!(!victim.is_established());

    // Nor does skipping the confirm help.
    let mut victim = Session::accept(coordinator_config()).unwrap();
    receive_one(&mut victim, &record.hello).unwrap();
    let error = receive_one(&mut victim, &recorded_message).unwrap_err();
    assert_eq!(error.reason(), "not_established");

    // Forging the new session id into the old confirm breaks its tag.
    let mut victim = Session::accept(coordinator_config()).unwrap();
    let Ok(Inbound::Reply(fresh_ack)) = receive_one(&mut victim, &record.hello) else {
        panic!("expected HelloAck");
    };
    let mut forged = record.confirm.clone();
    forged[12..20].copy_from_slice(&fresh_ack[12..20]);
    let error = receive_one(&mut victim, &forged).unwrap_err();
    assert_eq!(error.reason(), "bad_tag");
}

#[test]
fn replayed_ack_cannot_complete_a_new_initiators_handshake() {
    let (_, _, record) = establish_recorded();
    let (mut agent, _) = Session::initiate(agent_config()).unwrap();
    let error = receive_one(&mut agent, &record.ack).unwrap_err();
    assert_eq!(error.reason(), "handshake");
    assert!(error.to_string().contains("nonce"), "{error}");
}

#[test]
fn failed_handshake_stays_failed() {
    let (_, _, record) = establish_recorded();
    let (mut agent, _) = Session::initiate(agent_config()).unwrap();
    assert!(receive_one(&mut agent, &record.ack).is_err());
    let error = receive_one(&mut agent, &record.ack).unwrap_err();
    assert_eq!(error.reason(), "already_failed");
    assert_eq!(agent.finish().unwrap_err().reason(), "already_failed");
}

#[test]
fn split_halves_carry_messages_both_ways() {
    let (agent, coordinator) = establish();
    let (mut agent_tx, mut agent_rx, agent_peer) = agent.into_split().unwrap();
    let (mut coordinator_tx, mut coordinator_rx, _) = coordinator.into_split().unwrap();
    assert_eq!(agent_tx.session_id(), agent_peer.session_id);

    let frame = agent_tx.seal(&heartbeat(1)).unwrap();
    assert_eq!(
        coordinator_rx.receive(&mut &frame[..]),
        Ok(Some(heartbeat(1)))
    );
    let frame = coordinator_tx.seal(&heartbeat(2)).unwrap();
    assert_eq!(
        agent_rx.open_frame(&cosched_proto::wire::decode_frame(&frame).unwrap().0),
        Ok(heartbeat(2))
    );
}

#[test]
fn into_split_before_establishment_gives_the_session_back() {
    let (agent, _) = Session::initiate(agent_config()).unwrap();
    let agent = agent.into_split().unwrap_err();
    assert_eq!(agent.state(), SessionState::AwaitingAck);
}

#[test]
fn hello_payload_is_inspectable_json() {
    let (_, hello) = Session::initiate(agent_config()).unwrap();
    let (frame, used) = cosched_proto::wire::decode_frame(&hello).unwrap();
    assert_eq!(used, hello.len());
    let parsed: Hello = serde_json::from_slice(&frame.payload).unwrap();
    assert_eq!(parsed.role, Role::Agent);
    assert_eq!(parsed.node_name, "node-a");
    assert_ne!(parsed.nonce, Nonce([0; 32]));
}
