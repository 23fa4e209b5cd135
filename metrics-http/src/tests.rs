//! The endpoint over real TCP on 127.0.0.1.
use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

use super::*;

async fn start(limits: HttpLimits) -> SocketAddr {
    let registry = Registry::new();
    let counter = prometheus::IntCounter::new("cosched_test_total", "A test counter.").unwrap();
    registry.register(Box::new(counter.clone())).unwrap();
    counter.inc_by(3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, registry, "test daemon\n", limits));
    addr
}

fn limits(max_connections: usize, idle_timeout_ms: u64) -> HttpLimits {
    HttpLimits {
        max_connections,
        idle_timeout_ms,
    }
}

/// Everything the server sends until it closes (10 s at most).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the server did not close the connection");
    String::from_utf8_lossy(&out).into_owned()
}

async fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    read_to_close(&mut stream).await
}

/// One keep-alive request; returns the response head and body once the whole
/// body (by its content-length) arrived.
async fn keep_alive_get(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(read > 0, "closed mid-response");
        response.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&response).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .expect("a content-length")
                .parse()
                .unwrap();
            if body.len() >= length {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn metrics_are_served_in_text_format_and_root_names_the_daemon() {
    let addr = start(HttpLimits::default()).await;
    let metrics = get(addr, "/metrics").await;
    assert!(metrics.contains("text/plain; version=0.0.4"), "{metrics}");
    assert!(metrics.contains("cosched_test_total 3"), "{metrics}");
    assert!(get(addr, "/").await.ends_with("test daemon\n"));
    assert!(get(addr, "/nothing").await.starts_with("HTTP/1.0 404"));
}

#[tokio::test]
async fn a_keep_alive_connection_serves_requests_then_is_closed_when_idle() {
    let addr = start(limits(4, 300)).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    for _ in 0..2 {
        assert!(
            keep_alive_get(&mut stream)
                .await
                .contains("cosched_test_total 3")
        );
    }
    let idle_since = Instant::now();
    assert_eq!(read_to_close(&mut stream).await, "");
    assert!(idle_since.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_slowloris_client_is_dropped_after_the_idle_time_out() {
    let addr = start(limits(4, 300)).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    // A header byte every 50 ms: it never completes a request.
    let trickle = tokio::spawn(async move {
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: "
            .iter()
            .cycle()
        {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut rest)).await;
    trickle.abort();
    assert!(read.is_ok(), "the slowloris client was never dropped");
    let text = String::from_utf8_lossy(&rest);
    assert!(!text.contains("cosched_test_total"), "{text}");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn connections_over_the_cap_get_503_and_a_freed_slot_is_reused() {
    let addr = start(limits(2, 60_000)).await;
    let first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    assert!(
        keep_alive_get(&mut second)
            .await
            .contains("cosched_test_total 3")
    );
    let mut third = TcpStream::connect(addr).await.unwrap();
    let busy = read_to_close(&mut third).await;
    assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
    assert!(busy.ends_with("too many connections\n"), "{busy}");
    drop(first);
    let started = Instant::now();
    loop {
        let answer = get(addr, "/metrics").await;
        if answer.contains("cosched_test_total 3") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the freed slot was not reused: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        keep_alive_get(&mut second)
            .await
            .contains("cosched_test_total 3")
    );
}

#[test]
fn limits_default_and_validate() {
    let defaults = HttpLimits::default();
    assert_eq!(
        (defaults.max_connections, defaults.idle_timeout_ms),
        (64, 10_000)
    );
    defaults.validate().unwrap();
    assert!(
        limits(0, 1000)
            .validate()
            .unwrap_err()
            .contains("max_connections")
    );
    assert!(
        limits(1, 10)
            .validate()
            .unwrap_err()
            .contains("idle_timeout_ms")
    );
}
