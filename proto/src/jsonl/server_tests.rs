//! The line server on a real Unix socket in a temporary directory, with the
//! control protocol's types and a main loop that answers `done`.
use std::time::{Duration, Instant};

use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader},
    net::{
        UnixStream,
        unix::{OwnedReadHalf, OwnedWriteHalf},
    },
    sync::mpsc,
};

use super::*;
use crate::control::{Reply, Request, Response};

struct Server {
    dir: tempfile::TempDir,
    /// Requests the main loop answered.
    answered: mpsc::UnboundedReceiver<Request>,
}

impl Server {
    async fn start(limits: LineLimits) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::UnixListener::bind(dir.path().join("s.sock")).unwrap();
        let (calls, mut incoming) = mpsc::channel::<Call<Request, Response>>(8);
        let (seen, answered) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some((request, reply)) = incoming.recv().await {
                let _ = seen.send(request);
                let _ = reply.send(Response::Ok(Reply::Done));
            }
        });
        tokio::spawn(serve(listener, calls, limits, Response::Error));
        Server { dir, answered }
    }

    async fn connect(&self) -> Client {
        let stream = UnixStream::connect(self.dir.path().join("s.sock"))
            .await
            .unwrap();
        let (reader, writer) = stream.into_split();
        Client {
            reader: BufReader::new(reader),
            writer: Some(writer),
        }
    }
}

struct Client {
    reader: BufReader<OwnedReadHalf>,
    /// Taken by tests that write from another task while reading replies.
    writer: Option<OwnedWriteHalf>,
}

impl Client {
    async fn send(&mut self, bytes: &[u8]) {
        let writer = self.writer.as_mut().expect("writer not taken");
        writer.write_all(bytes).await.unwrap();
    }

    /// The next reply, or `None` once the server closed the connection.
    async fn reply(&mut self) -> Option<Response> {
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), self.reader.read_line(&mut line))
            .await
            .expect("a reply or the end within 10 s")
            .unwrap();
        (read > 0).then(|| serde_json::from_str(&line).expect("replies are JSON lines"))
    }

    async fn error(&mut self) -> String {
        match self.reply().await {
            Some(Response::Error(why)) => why,
            other => panic!("expected an error reply, got {other:?}"),
        }
    }

    async fn assert_closed(&mut self) {
        let mut rest = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(10), self.reader.read_to_end(&mut rest))
                .await
                .expect("closed within 10 s");
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "connection still open: {rest:?}"
        );
    }

    async fn assert_answered(&mut self) {
        self.send(b"{\"op\":\"jobs\"}\n").await;
        assert_eq!(self.reply().await, Some(Response::Ok(Reply::Done)));
    }
}

fn limits(max_connections: usize, max_line_bytes: usize, idle_timeout_ms: u64) -> LineLimits {
    LineLimits {
        max_connections,
        max_line_bytes,
        idle_timeout_ms,
    }
}

#[tokio::test]
async fn every_request_line_is_answered_on_one_connection() {
    let mut server = Server::start(LineLimits::default()).await;
    let mut client = server.connect().await;
    client.assert_answered().await;
    client
        .send(b"{\"op\":\"wait\",\"job_id\":3,\"timeout_ms\":5}\r\n")
        .await;
    assert_eq!(client.reply().await, Some(Response::Ok(Reply::Done)));
    assert_eq!(server.answered.recv().await, Some(Request::Jobs));
    assert_eq!(
        server.answered.recv().await,
        Some(Request::Wait {
            job_id: 3,
            timeout_ms: 5
        })
    );
}

#[tokio::test]
async fn invalid_utf8_and_malformed_json_get_clear_errors_and_the_connection_stays() {
    let server = Server::start(LineLimits::default()).await;
    let mut client = server.connect().await;
    client.send(b"{\"op\":\"jobs\xff\"}\n").await;
    let why = client.error().await;
    assert!(
        why.contains("not valid UTF-8") && why.contains("offset 11"),
        "{why}"
    );
    client.send(b"{\"op\":\n").await;
    assert!(client.error().await.starts_with("malformed request"));
    client.send(b"{\"op\":\"status\",\"verbose\":true}\n").await;
    let why = client.error().await;
    assert!(why.contains("unknown field `verbose`"), "{why}");
    client.assert_answered().await;
}

#[tokio::test]
async fn a_line_over_the_limit_is_answered_then_closed_without_buffering_it() {
    let server = Server::start(limits(4, 4096, 60_000)).await;
    let mut client = server.connect().await;
    let mut exactly = b"{\"op\":\"jobs\"".to_vec();
    exactly.resize(4096 - 1, b' ');
    exactly.extend_from_slice(b"}\n");
    client.send(&exactly).await;
    assert_eq!(client.reply().await, Some(Response::Ok(Reply::Done)));
    // A megabyte without a newline: the server stops reading at the limit.
    let mut writer = client.writer.take().unwrap();
    tokio::spawn(async move { writer.write_all(&vec![b'x'; 1 << 20]).await });
    let why = client.error().await;
    assert!(why.contains("longer than 4096 bytes"), "{why}");
    client.assert_closed().await;
}

#[tokio::test]
async fn connections_over_the_cap_are_told_so_and_a_freed_slot_is_reused() {
    let server = Server::start(limits(2, 4096, 60_000)).await;
    let mut first = server.connect().await;
    let mut second = server.connect().await;
    first.assert_answered().await;
    second.assert_answered().await;
    let mut third = server.connect().await;
    let why = third.error().await;
    assert!(why.contains("too many connections (at most 2)"), "{why}");
    third.assert_closed().await;
    drop(first);
    // The slot comes back once the server sees the close.
    let started = Instant::now();
    loop {
        let mut again = server.connect().await;
        again.send(b"{\"op\":\"jobs\"}\n").await;
        match again.reply().await {
            Some(Response::Ok(Reply::Done)) => break,
            other => assert!(
                started.elapsed() < Duration::from_secs(5),
                "the freed slot was not reused: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    second.assert_answered().await;
}

#[tokio::test]
async fn idle_and_trickling_clients_are_closed_after_the_idle_time_out() {
    let server = Server::start(limits(4, 4096, 300)).await;
    let mut idle = server.connect().await;
    idle.assert_answered().await;
    let started = Instant::now();
    let why = idle.error().await;
    assert!(why.contains("no complete request within 300ms"), "{why}");
    idle.assert_closed().await;
    assert!(started.elapsed() >= Duration::from_millis(300));
    // A byte every 50 ms never completes a line: the time-out still ends it.
    let mut trickle = server.connect().await;
    let mut writer = trickle.writer.take().unwrap();
    let started = Instant::now();
    tokio::spawn(async move {
        while writer.write_all(b" ").await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let why = trickle.error().await;
    assert!(why.contains("no complete request"), "{why}");
    trickle.assert_closed().await;
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_peer_socket_hands_each_request_over_with_the_kernels_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let (calls, mut incoming) = mpsc::channel::<PeerCall<Request, Response>>(8);
    tokio::spawn(serve_peers(
        listener,
        calls,
        limits(4, 1024, 10_000),
        Response::Error,
    ));
    let stream = UnixStream::connect(&path).await.unwrap();
    let (reader, writer) = stream.into_split();
    let mut client = Client {
        reader: BufReader::new(reader),
        writer: Some(writer),
    };
    client.send(b"{\"op\":\"status\"}\n").await;
    let (request, peer, reply) = incoming.recv().await.unwrap();
    assert_eq!(request, Request::Status);
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    assert_eq!(
        peer,
        Peer {
            uid,
            gid,
            pid: Some(std::process::id() as i32),
        }
    );
    reply.send(Response::Ok(Reply::Done)).unwrap();
    assert_eq!(client.reply().await, Some(Response::Ok(Reply::Done)));
}
