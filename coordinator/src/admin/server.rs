//! The admin socket server: one JSON request per line, handed to the main
//! loop; one JSON response per line back. Malformed lines get an error
//! response naming the problem and the connection stays usable; lines longer
//! than [`MAX_LINE`] close it.

use std::{os::unix::fs::PermissionsExt as _, path::Path};

use anyhow::Context as _;
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream},
    sync::{mpsc, oneshot},
};

use super::protocol::{MAX_LINE, Request, Response};

/// A request on its way to the main loop, with where to send the answer.
pub type Call = (Request, oneshot::Sender<Response>);

/// Binds the socket (replacing a stale one), mode 0600: only root talks to
/// the coordinator.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            return Err(error).with_context(|| format!("removing stale {}", path.display()));
        }
        _ => {}
    }
    let listener =
        UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream, calls.clone()));
            }
            Err(error) => {
                tracing::warn!("admin socket accept: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn connection(stream: UnixStream, calls: mpsc::Sender<Call>) {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut line = String::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_line(&mut line)
            .await;
        let length = match read {
            Ok(0) => return,
            Ok(length) => length,
            Err(error) => {
                tracing::debug!("admin connection: {error}");
                return;
            }
        };
        if length > MAX_LINE || !line.ends_with('\n') {
            let too_long = Response::Error(format!("request longer than {MAX_LINE} bytes"));
            let _ = reply(&mut writer, &too_long).await;
            return;
        }
        let response = match serde_json::from_str::<Request>(line.trim_end()) {
            Err(error) => Response::Error(format!("malformed request: {error}")),
            Ok(request) => {
                let (sender, receiver) = oneshot::channel();
                if calls.send((request, sender)).await.is_err() {
                    return;
                }
                match receiver.await {
                    Ok(response) => response,
                    Err(_) => return,
                }
            }
        };
        if reply(&mut writer, &response).await.is_err() {
            return;
        }
    }
}

async fn reply(
    writer: &mut tokio::net::unix::OwnedWriteHalf,
    response: &Response,
) -> std::io::Result<()> {
    let mut line = serde_json::to_string(response).expect("responses serialise");
    line.push('\n');
    writer.write_all(line.as_bytes()).await
}
