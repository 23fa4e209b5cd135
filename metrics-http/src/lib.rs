//! The Prometheus endpoint of the cosched daemons: `GET /metrics` renders a
//! registry in the text exposition format, `GET /` says what the daemon is.
//!
//! Connections are capped and a client that does not send a request's
//! headers within the idle time-out (an idle keep-alive connection, or a
//! slowloris trickling bytes) is closed, so clients cannot use up the
//! daemon's file descriptors, which its other sockets need.
mod limits;

use std::{sync::Arc, time::Duration};

use hyper_util::{
    rt::{TokioIo, TokioTimer},
    service::TowerToHyperService,
};
pub use limits::HttpLimits;
use prometheus::{Encoder as _, Registry, TextEncoder};
use tokio::{net::TcpListener, sync::Semaphore};

/// The longest a connection lives, whatever it does: the time-outs cover
/// reading requests, this bounds a client that stops reading a response.
/// Scrapers just connect again.
const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);

/// What a connection over the cap gets before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 21\r\nconnection: close\r\n\r\ntoo many connections\n";

/// Serves `registry` on `listener` until the task is dropped; `banner` is the
/// body of `GET /` (e.g. "cosched-agent: see /metrics\n").
pub async fn serve(
    listener: TcpListener,
    registry: Registry,
    banner: &'static str,
    limits: HttpLimits,
) {
    let app = router(registry, banner);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, most likely: let some close.
                tracing::warn!("accepting a metrics connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // A fresh socket's send buffer is empty: this does not block.
            let _ = stream.try_write(BUSY);
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.idle_timeout())
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(MAX_CONNECTION_AGE, connection).await;
            drop(slot);
        });
    }
}

fn router(registry: Registry, banner: &'static str) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move {
                    let mut body = Vec::new();
                    let _ = TextEncoder::new().encode(&registry.gather(), &mut body);
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        body,
                    )
                }
            }),
        )
        .route("/", get(move || async move { banner }))
}

#[cfg(test)]
mod tests;
