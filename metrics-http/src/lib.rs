//! The Prometheus endpoint of the cosched daemons: `GET /metrics` renders a
//! registry in the text exposition format, `GET /` says what the daemon is.
use prometheus::{Encoder as _, Registry, TextEncoder};

/// Serves `registry` on `listener` until the task is dropped; `banner` is the
/// body of `GET /` (e.g. "cosched-agent: see /metrics\n").
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Registry,
    banner: &'static str,
) -> std::io::Result<()> {
    use axum::{Router, routing::get};
    let app = Router::new()
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
        .route("/", get(move || async move { banner }));
    axum::serve(listener, app).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn metrics_are_served_in_text_format_and_root_names_the_daemon() {
        let registry = Registry::new();
        let c = prometheus::IntCounter::new("cosched_test_total", "A test counter.").unwrap();
        registry.register(Box::new(c.clone())).unwrap();
        c.inc_by(3);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, registry, "test daemon\n"));
        let m = get(addr, "/metrics").await;
        assert!(m.contains("text/plain; version=0.0.4"), "{m}");
        assert!(m.contains("cosched_test_total 3"), "{m}");
        assert!(get(addr, "/").await.ends_with("test daemon\n"));
    }
}
