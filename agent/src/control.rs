//! The control socket server: the JSON-lines server of `cosched_proto`
//! (connection cap, line limit, idle time-out, an error reply for every bad
//! line) speaking the control protocol, its requests handed to the daemon's
//! main loop.
use std::{os::unix::fs::PermissionsExt as _, path::Path};

use anyhow::Context as _;
use cosched_proto::{
    control::{Request, Response},
    jsonl::{self, LineLimits},
};
use tokio::{net::UnixListener, sync::mpsc};

/// A request on its way to the main loop, with where to send the reply.
pub type Call = jsonl::Call<Request, Response>;

/// A request from the user socket, with who sent it.
pub type UserCall = jsonl::PeerCall<Request, Response>;

/// Binds the socket (replacing a stale one from a crashed agent), mode 0600.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    bind_mode(path, 0o600)
}

/// Binds the user socket, mode 0666: any local user may connect; what
/// it may ask is judged per request by the caller's peer credentials.
pub fn bind_user(path: &Path) -> anyhow::Result<UnixListener> {
    bind_mode(path, 0o666)
}

fn bind_mode(path: &Path, mode: u32) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing stale {}", path.display()));
        }
        _ => {}
    }
    let l = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}

/// Serves the socket until the task is dropped.
pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>, limits: LineLimits) {
    jsonl::serve(listener, calls, limits, Response::Error).await;
}

/// Serves the user socket until the task is dropped.
pub async fn serve_user(listener: UnixListener, calls: mpsc::Sender<UserCall>, limits: LineLimits) {
    jsonl::serve_peers(listener, calls, limits, Response::Error).await;
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead as _, BufReader, Write as _},
        os::unix::net::UnixStream,
        time::Duration,
    };

    use cosched_proto::control::{Client, Reply};

    use super::*;

    /// Serves a socket in `dir` whose main loop answers `done` to `status`.
    fn serve_in(dir: &Path, limits: LineLimits) -> (tokio::runtime::Runtime, std::path::PathBuf) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let path = dir.join("run/agent.sock");
        std::fs::create_dir_all(dir.join("run")).unwrap();
        std::fs::write(&path, "stale").unwrap();
        let listener = runtime.block_on(async { bind(&path) }).unwrap();
        let (calls, mut incoming) = mpsc::channel::<Call>(4);
        runtime.spawn(serve(listener, calls, limits));
        runtime.spawn(async move {
            while let Some((request, reply)) = incoming.recv().await {
                let answer = match request {
                    Request::Status => Response::Ok(Reply::Done),
                    other => Response::Error(format!("unexpected {other:?}")),
                };
                let _ = reply.send(answer);
            }
        });
        (runtime, path)
    }

    /// Sends raw bytes, returns the reply line (empty if closed first).
    fn exchange(stream: &mut UnixStream, bytes: &[u8]) -> String {
        stream.write_all(bytes).unwrap();
        let mut line = String::new();
        BufReader::new(stream.try_clone().unwrap())
            .read_line(&mut line)
            .unwrap();
        line
    }

    #[test]
    fn the_socket_is_private_and_answers_good_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let (runtime, path) = serve_in(dir.path(), LineLimits::default());
        std::thread::spawn(move || runtime.block_on(std::future::pending::<()>()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut client = Client::connect(&path).unwrap();
        assert_eq!(
            client
                .call(&Request::Status, Duration::from_secs(10))
                .unwrap(),
            Reply::Done
        );
        let mut raw = UnixStream::connect(&path).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let reply = exchange(&mut raw, b"{\"op\":\"status\"}\xc3\n");
        assert!(reply.contains("not valid UTF-8"), "{reply}");
        let reply = exchange(&mut raw, b"{\"op\":\"reload\",\"force\":true}\n");
        assert!(reply.contains("unknown field `force`"), "{reply}");
        let reply = exchange(&mut raw, b"{\"op\":\"status\"}\n");
        assert_eq!(reply, "{\"ok\":\"done\"}\n");
    }

    #[test]
    fn the_connection_cap_comes_from_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let limits = LineLimits {
            max_connections: 1,
            ..LineLimits::default()
        };
        let (runtime, path) = serve_in(dir.path(), limits);
        std::thread::spawn(move || runtime.block_on(std::future::pending::<()>()));
        let mut first = Client::connect(&path).unwrap();
        assert_eq!(
            first
                .call(&Request::Status, Duration::from_secs(10))
                .unwrap(),
            Reply::Done
        );
        // Told at once, before it sends anything.
        let second = UnixStream::connect(&path).unwrap();
        second
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut reply = String::new();
        BufReader::new(second).read_line(&mut reply).unwrap();
        let reply: Response = serde_json::from_str(&reply).unwrap();
        assert_eq!(
            reply,
            Response::Error("too many connections (at most 1); try again later".into())
        );
    }
}
