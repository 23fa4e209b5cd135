//! Arbitrary bytes into a session (fresh responder, fresh initiator, or
//! established), in chunks: no panic, and nothing is ever accepted, since the
//! input cannot carry a valid tag.
#![no_main]

use cosched_proto::wire::{Inbound, Role, Session, SessionConfig, SharedSecret};
use libfuzzer_sys::fuzz_target;

fn config(role: Role) -> SessionConfig {
    let secret = SharedSecret::from_bytes(vec![0x5a; 32]).expect("32-byte secret");
    SessionConfig::new(role, "fuzz", secret)
}

fn established_coordinator() -> Session {
    let (mut agent, hello) = Session::initiate(config(Role::Agent)).expect("initiate");
    let mut coordinator = Session::accept(config(Role::Coordinator)).expect("accept");
    let Ok(Some(Inbound::Reply(ack))) = coordinator.receive(&mut &hello[..]) else {
        panic!("handshake: no HelloAck");
    };
    let Ok(Some(Inbound::Established {
        reply: Some(confirm),
        ..
    })) = agent.receive(&mut &ack[..])
    else {
        panic!("handshake: no HelloConfirm");
    };
    coordinator
        .receive(&mut &confirm[..])
        .expect("handshake: confirm accepted");
    coordinator
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, bytes)) = data.split_first() else {
        return;
    };
    let mut session = match seed % 3 {
        0 => Session::accept(config(Role::Coordinator)).expect("accept"),
        1 => Session::initiate(config(Role::Agent)).expect("initiate").0,
        _ => established_coordinator(),
    };
    let chunk_len = usize::from(seed / 3).max(1);
    for chunk in bytes.chunks(chunk_len) {
        for result in session.push(chunk) {
            assert!(result.is_err(), "accepted fuzz input: {result:?}");
        }
    }
    let _ = session.finish();
});
