//! The async helpers (feature `tokio`) over an in-memory duplex stream.
#![cfg(feature = "tokio")]

#[path = "wire_support.rs"]
mod support;

use cosched_proto::wire::stream::{self, StreamError};
use cosched_proto::wire::{Heartbeat, Message, Role};
use support::{agent_config, coordinator_config, one_of_each_message, other_secret};
use tokio::io::{AsyncWriteExt, duplex, split};

fn heartbeat(seq: u64) -> Message {
    Message::Heartbeat(Heartbeat { seq, t1_ns: 0 })
}

#[tokio::test]
async fn handshake_and_messages_over_a_stream() {
    let (agent_end, coordinator_end) = duplex(1024);
    let (agent_read, agent_write) = split(agent_end);
    let (coordinator_read, coordinator_write) = split(coordinator_end);
    let (agent, coordinator) = tokio::join!(
        stream::initiate(agent_read, agent_write, agent_config()),
        stream::accept(coordinator_read, coordinator_write, coordinator_config()),
    );
    let mut agent = agent.unwrap();
    let mut coordinator = coordinator.unwrap();
    assert_eq!(agent.peer.role, Role::Coordinator);
    assert_eq!(coordinator.peer.node_name, "node-a");
    assert_eq!(agent.writer.session_id(), coordinator.reader.session_id());

    // More bytes than the duplex buffer holds, so reads and writes interleave.
    let sender = tokio::spawn(async move {
        for message in one_of_each_message() {
            agent.writer.send(&message).await.unwrap();
        }
        agent.writer.shutdown().await.unwrap();
        agent
    });
    for expected in one_of_each_message() {
        assert_eq!(coordinator.reader.recv().await.unwrap(), Some(expected));
    }
    assert_eq!(coordinator.reader.recv().await.unwrap(), None);
    let mut agent = sender.await.unwrap();

    coordinator.writer.send(&heartbeat(3)).await.unwrap();
    assert_eq!(agent.reader.recv().await.unwrap(), Some(heartbeat(3)));
}

#[tokio::test]
async fn wrong_secret_fails_the_handshake_with_a_reason() {
    let (agent_end, coordinator_end) = duplex(4096);
    let (agent_read, agent_write) = split(agent_end);
    let (coordinator_read, coordinator_write) = split(coordinator_end);
    let mut config = agent_config();
    config.secret = other_secret();
    let coordinator = tokio::spawn(stream::accept(
        coordinator_read,
        coordinator_write,
        coordinator_config(),
    ));
    let agent = tokio::spawn(stream::initiate(agent_read, agent_write, config));
    let error = coordinator.await.unwrap().unwrap_err();
    assert_eq!(error.reason(), "bad_tag");
    // The coordinator dropped its end; the agent sees the connection close.
    let error = agent.await.unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            StreamError::ClosedDuringHandshake | StreamError::Io(_)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_non_cosched_client_is_rejected_without_waiting_for_a_whole_header() {
    let (mut client, server) = duplex(4096);
    let (server_read, server_write) = split(server);
    client.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let error = stream::accept(server_read, server_write, coordinator_config())
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "bad_magic");
}

#[tokio::test]
async fn peer_closing_mid_frame_is_truncated() {
    let (agent_end, coordinator_end) = duplex(4096);
    let (agent_read, agent_write) = split(agent_end);
    let (coordinator_read, coordinator_write) = split(coordinator_end);
    let (_, hello) = cosched_proto::wire::Session::initiate(agent_config()).unwrap();
    let mut agent_write = agent_write;
    agent_write
        .write_all(&hello[..hello.len() / 2])
        .await
        .unwrap();
    agent_write.shutdown().await.unwrap();
    drop(agent_read);
    let error = stream::accept(coordinator_read, coordinator_write, coordinator_config())
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "truncated");
}
