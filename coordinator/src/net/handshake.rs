//! From accept to registration: the stage before a peer has proved it holds
//! the secret, bounded in time (the handshake time-out covers everything up
//! to `Register`) and in number (the [gate](super::gate)). Every way it can
//! fail is counted in `cosched_wire_rejected_total` by reason.

use std::{net::SocketAddr, sync::Mutex};

use cosched_proto::wire::{
    Message, ProtocolVersion, Register,
    stream::{self, WireReader, WireWriter},
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    sync::oneshot,
    time::{Instant, timeout_at},
};

use super::{
    connection::{ConnContext, refuse},
    gate::{Eviction, Gate, Ticket},
};

/// Unauthenticated connections, each with how to tell it it was evicted.
pub type PreAuthGate = Gate<oneshot::Sender<Eviction>>;

/// A connection's place in the gate; leaving it (on authentication or on any
/// early return) is the drop.
struct Waiting<'g> {
    gate: &'g Mutex<PreAuthGate>,
    ticket: Ticket,
}

impl Waiting<'_> {
    fn enter(
        gate: &Mutex<PreAuthGate>,
        peer: SocketAddr,
    ) -> (Waiting<'_>, oneshot::Receiver<Eviction>) {
        let (tell, evicted) = oneshot::channel();
        let mut waiting = gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (ticket, pushed_out) = waiting.enter(peer.ip(), tell);
        for (tell, why) in pushed_out {
            let _ = tell.send(why);
        }
        (Waiting { gate, ticket }, evicted)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .leave(self.ticket);
    }
}

/// Runs the handshake and waits for `Register` (under the authenticated
/// name), with the protocol version the agent announced; `None` when the
/// connection failed, was refused or was evicted (already counted and
/// logged).
pub(super) async fn register<R, W>(
    reader: R,
    writer: W,
    peer: SocketAddr,
    conn: u64,
    context: &ConnContext,
) -> Option<(WireReader<R>, WireWriter<W>, Register, ProtocolVersion)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let deadline = Instant::now() + context.handshake_timeout;
    let (waiting, mut evicted) = Waiting::enter(&context.gate, peer);
    let established = tokio::select! {
        established = timeout_at(deadline, stream::accept(reader, writer, context.session.clone())) => established,
        Ok(why) = &mut evicted => {
            tracing::debug!(conn, %peer, reason = why.reason(), "unauthenticated connection evicted");
            handshake_failed(context, why.reason());
            return None;
        }
    };
    drop(waiting);
    let mut connection = match established {
        Ok(Ok(connection)) => connection,
        Ok(Err(error)) => {
            context.rejected(&error, conn, peer);
            handshake_failed(context, "");
            return None;
        }
        Err(_) => {
            tracing::debug!(conn, %peer, "handshake timed out");
            handshake_failed(context, "handshake_timeout");
            return None;
        }
    };
    let authenticated = &connection.peer.node_name;
    match first_register(&mut connection.reader, deadline, conn, peer, context).await {
        Ok(register) if register.node_name == *authenticated => Some((
            connection.reader,
            connection.writer,
            register,
            connection.peer.protocol,
        )),
        Ok(register) => {
            let why = format!(
                "registered as {:?} but authenticated as {authenticated:?}",
                register.node_name
            );
            refuse(&mut connection.writer, &why, context).await;
            None
        }
        Err(why) => {
            refuse(&mut connection.writer, &why, context).await;
            None
        }
    }
}

/// Counts a connection that never authenticated, under `reason` in the
/// rejections unless it was counted there already (empty `reason`).
fn handshake_failed(context: &ConnContext, reason: &str) {
    if !reason.is_empty() {
        context
            .metrics
            .wire_rejected
            .with_label_values(&[reason])
            .inc();
    }
    context
        .metrics
        .connections
        .with_label_values(&["handshake_failed"])
        .inc();
}

async fn first_register<R: AsyncRead + Unpin>(
    reader: &mut WireReader<R>,
    deadline: Instant,
    conn: u64,
    peer: SocketAddr,
    context: &ConnContext,
) -> Result<Register, String> {
    loop {
        let Ok(received) = timeout_at(deadline, reader.recv()).await else {
            context
                .metrics
                .wire_rejected
                .with_label_values(&["register_timeout"])
                .inc();
            return Err("no Register before the handshake timeout".into());
        };
        match received {
            Ok(Some(Message::Register(register))) => return Ok(register),
            Ok(Some(other)) => {
                context
                    .metrics
                    .wire_rejected
                    .with_label_values(&["unexpected_message"])
                    .inc();
                return Err(format!("expected Register first, got {}", other.kind()));
            }
            Ok(None) => return Err("closed before registering".into()),
            Err(error) => {
                context.rejected(&error, conn, peer);
                if error.is_fatal() {
                    return Err(error.to_string());
                }
            }
        }
    }
}
