//! Accepting agent connections.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use tokio::{net::TcpListener, sync::Semaphore};

use super::connection::{ConnContext, serve_connection};

/// Accepts connections until the task is dropped; at most `max_connections`
/// are served at once (others wait in the kernel's backlog).
pub async fn accept_loop(listener: TcpListener, context: Arc<ConnContext>, max_connections: usize) {
    static NEXT_CONN: AtomicU64 = AtomicU64::new(1);
    let slots = Arc::new(Semaphore::new(max_connections));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
                let context = context.clone();
                tokio::spawn(async move {
                    let (reader, writer) = stream.into_split();
                    serve_connection(reader, writer, peer, conn, &context).await;
                    drop(permit);
                });
            }
            Err(error) => {
                tracing::warn!("accepting an agent connection: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
