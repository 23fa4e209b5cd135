//! Accepting agent connections.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use cosched_proto::wire::stamped::StampedRead;
use tokio::net::{TcpListener, TcpSocket};

use super::connection::{ConnContext, serve_connection};

/// Connections the kernel completes ahead of the accept loop. A burst larger
/// than this has SYNs dropped, and a dropped SYN costs a real agent a 1 s
/// retransmission: the default (128) is small next to the 256 unauthenticated
/// connections the gate lets wait.
const BACKLOG: u32 = 1024;

/// Binds the agents' listener (address reusable at once after a restart).
pub fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)
}

/// Accepts connections until the task is dropped. Every connection is
/// accepted at once (none waits in the kernel's backlog behind idle ones);
/// the unauthenticated ones are bounded by the context's gate.
pub async fn accept_loop(listener: TcpListener, context: Arc<ConnContext>) {
    static NEXT_CONN: AtomicU64 = AtomicU64::new(1);
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
                let context = context.clone();
                tokio::spawn(async move {
                    let (reader, writer) = stream.into_split();
                    // Receives stamped by the kernel (heartbeat replies' t4).
                    let reader = StampedRead::new(reader);
                    serve_connection(reader, writer, peer, conn, &context).await;
                });
            }
            Err(error) => {
                // Out of file descriptors, most likely: let some close.
                tracing::warn!("accepting an agent connection: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
