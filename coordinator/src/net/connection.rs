//! One agent connection, from handshake to close.

use std::{net::SocketAddr, sync::Mutex, time::Duration};

use cosched_proto::wire::{
    ErrorReport, Heartbeat, HeartbeatReply, Message, ProtocolVersion, Register, SessionConfig,
    stamped::ArrivalStamp,
    stream::{StreamError, WireReader, WireWriter},
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::mpsc,
    time::{Instant, sleep_until},
};

use super::handshake::{self, PreAuthGate};
use crate::{clock::monotonic_ns, metrics::Metrics};

/// Heartbeats sent right after registration, `BURST_SPACING` apart, so the
/// clock offset is estimated before the first slice.
const BURST: u64 = 4;
const BURST_SPACING: Duration = Duration::from_millis(20);
/// Messages queued for one agent before the connection is deemed stuck.
pub const OUTBOX_LEN: usize = 1024;

/// What a connection tells the main loop.
#[derive(Debug)]
pub enum ConnEvent {
    /// The agent completed the handshake and registered.
    Registered {
        conn: u64,
        register: Register,
        peer: SocketAddr,
        /// The version the agent announced in the handshake.
        protocol: ProtocolVersion,
        outbox: mpsc::Sender<Outgoing>,
    },
    /// A message other than heartbeats, received at `received_ns` (when the
    /// kernel received its bytes: the heartbeat reply's t4).
    Message {
        conn: u64,
        message: Message,
        received_ns: u64,
    },
    Closed {
        conn: u64,
        reason: String,
    },
}

/// What the main loop sends down a connection.
#[derive(Debug)]
pub enum Outgoing {
    Message(Message),
    /// Tell the agent why (as an `Error` message), then close.
    Refuse(String),
}

/// What every connection task shares.
pub struct ConnContext {
    pub session: SessionConfig,
    pub events: mpsc::Sender<ConnEvent>,
    pub metrics: Metrics,
    pub heartbeat_interval: Duration,
    pub heartbeat_timeout: Duration,
    /// From connecting to `Register`.
    pub handshake_timeout: Duration,
    /// The connections that have not authenticated yet.
    pub gate: Mutex<PreAuthGate>,
}

impl ConnContext {
    pub(super) fn rejected(&self, error: &StreamError, conn: u64, peer: SocketAddr) {
        let reason = error.reason();
        if reason != "io" {
            self.metrics
                .wire_rejected
                .with_label_values(&[reason])
                .inc();
        }
        tracing::warn!(conn, %peer, reason, "agent connection: {error}");
    }
}

/// Runs one connection until it closes; every outcome is reported to the
/// main loop (once registered) and counted. Messages are stamped with when
/// `reader` says their bytes arrived (the kernel's receive stamp on a
/// socket), not when this task got to read them: heartbeat replies wait
/// here behind every other connection's work, and a late t4 biases the
/// node's clock offset estimate by half the wait.
pub async fn serve_connection<R, W>(
    reader: R,
    writer: W,
    peer: SocketAddr,
    conn: u64,
    context: &ConnContext,
) where
    R: AsyncRead + ArrivalStamp + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some((reader, writer, register, protocol)) =
        handshake::register(reader, writer, peer, conn, context).await
    else {
        return;
    };
    let (outbox, inbox) = mpsc::channel(OUTBOX_LEN);
    let registered = ConnEvent::Registered {
        conn,
        register,
        peer,
        protocol,
        outbox,
    };
    if context.events.send(registered).await.is_err() {
        return;
    }
    let reason = run(reader, writer, inbox, conn, peer, context).await;
    tracing::info!(conn, %peer, %reason, "agent connection closed");
    context
        .metrics
        .connections
        .with_label_values(&["closed"])
        .inc();
    let _ = context
        .events
        .send(ConnEvent::Closed { conn, reason })
        .await;
}

pub(super) async fn refuse<W: AsyncWrite + Unpin>(
    writer: &mut WireWriter<W>,
    reason: &str,
    context: &ConnContext,
) {
    tracing::warn!(reason, "refusing agent");
    context
        .metrics
        .connections
        .with_label_values(&["refused"])
        .inc();
    let report = Message::Error(ErrorReport {
        reason: reason.to_string(),
    });
    let _ = writer.send(&report).await;
    let _ = writer.shutdown().await;
}

/// The registered connection's loop; returns why it ended.
async fn run<R, W>(
    mut reader: WireReader<R>,
    mut writer: WireWriter<W>,
    mut inbox: mpsc::Receiver<Outgoing>,
    conn: u64,
    peer: SocketAddr,
    context: &ConnContext,
) -> String
where
    R: AsyncRead + ArrivalStamp + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut last_heard = Instant::now();
    let mut heartbeats_sent = 0u64;
    let mut next_heartbeat = Instant::now();
    loop {
        tokio::select! {
            received = reader.recv_stamped() => {
                match received {
                    Ok(Some((Message::Heartbeat(heartbeat), received_ns))) => {
                        last_heard = Instant::now();
                        let reply = HeartbeatReply::answering(&heartbeat, received_ns, monotonic_ns());
                        if let Err(error) = writer.send(&Message::HeartbeatReply(reply)).await {
                            return format!("sending a heartbeat reply: {error}");
                        }
                    }
                    Ok(Some((message, received_ns))) => {
                        last_heard = Instant::now();
                        let event = ConnEvent::Message { conn, message, received_ns };
                        if context.events.send(event).await.is_err() {
                            return "coordinator shutting down".into();
                        }
                    }
                    Ok(None) => return "the agent closed the connection".into(),
                    Err(error) => {
                        context.rejected(&error, conn, peer);
                        if error.is_fatal() {
                            return format!("fatal wire error: {error}");
                        }
                    }
                }
            }
            outgoing = inbox.recv() => match outgoing {
                Some(Outgoing::Message(message)) => {
                    if let Err(error) = writer.send(&message).await {
                        return format!("sending {}: {error}", message.kind());
                    }
                }
                Some(Outgoing::Refuse(reason)) => {
                    refuse(&mut writer, &reason, context).await;
                    return format!("refused: {reason}");
                }
                None => return "closed by the coordinator (replaced or not keeping up)".into(),
            },
            () = sleep_until(next_heartbeat) => {
                if last_heard.elapsed() > context.heartbeat_timeout {
                    return format!("no message for {:?} (heartbeat timeout)", context.heartbeat_timeout);
                }
                heartbeats_sent += 1;
                let heartbeat = Heartbeat { seq: heartbeats_sent, t1_ns: monotonic_ns() };
                if let Err(error) = writer.send(&Message::Heartbeat(heartbeat)).await {
                    return format!("sending a heartbeat: {error}");
                }
                next_heartbeat += if heartbeats_sent < BURST {
                    BURST_SPACING
                } else {
                    context.heartbeat_interval
                };
            }
        }
    }
}
