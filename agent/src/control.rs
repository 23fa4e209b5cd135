//! The control socket server: accepts connections, reads one JSON request per
//! line, hands it to the daemon's main loop and writes the reply back.
//! Malformed lines get an error reply naming the problem; the connection stays
//! usable. Lines longer than [`MAX_LINE`] close the connection.
use std::{os::unix::fs::PermissionsExt as _, path::Path};

use anyhow::Context as _;
use cosched_proto::control::{MAX_LINE, Request, Response};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
    sync::{mpsc, oneshot},
};

/// A request on its way to the main loop, with where to send the reply.
pub type Call = (Request, oneshot::Sender<Response>);

/// Binds the socket (replacing a stale one from a crashed agent), mode 0600.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
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
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream, calls.clone()));
            }
            Err(e) => {
                tracing::warn!("control socket accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(stream: UnixStream, calls: mpsc::Sender<Call>) {
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let mut line = String::new();
    loop {
        line.clear();
        // read_line through the limit: a line without '\n' within MAX_LINE ends the connection.
        let n = match (&mut rd)
            .take(MAX_LINE as u64 + 1)
            .read_line(&mut line)
            .await
        {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) => {
                tracing::debug!("control connection: {e}");
                return;
            }
        };
        if n > MAX_LINE || !line.ends_with('\n') {
            let _ = reply(
                &mut wr,
                &Response::Error(format!("request longer than {MAX_LINE} bytes")),
            )
            .await;
            return;
        }
        let resp = match serde_json::from_str::<Request>(line.trim_end()) {
            Err(e) => Response::Error(format!("malformed request: {e}")),
            Ok(req) => {
                let (tx, rx) = oneshot::channel();
                if calls.send((req, tx)).await.is_err() {
                    return; // agent shutting down
                }
                rx.await
                    .unwrap_or_else(|_| Response::Error("agent shutting down".into()))
            }
        };
        if reply(&mut wr, &resp).await.is_err() {
            return;
        }
    }
}

async fn reply(wr: &mut tokio::net::unix::OwnedWriteHalf, r: &Response) -> std::io::Result<()> {
    let mut s = serde_json::to_string(r).map_err(std::io::Error::other)?;
    s.push('\n');
    wr.write_all(s.as_bytes()).await
}
