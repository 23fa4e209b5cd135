//! The admin socket server: the JSON-lines server of `cosched_proto`
//! (connection cap, line limit, idle time-out, an error response for every
//! bad line) speaking the admin protocol, its requests handed to the main
//! loop.

use std::{os::unix::fs::PermissionsExt as _, path::Path};

use anyhow::Context as _;
use cosched_proto::jsonl::{self, LineLimits};
use tokio::{net::UnixListener, sync::mpsc};

use super::protocol::{Request, Response};

/// A request on its way to the main loop, with where to send the answer.
pub type Call = jsonl::Call<Request, Response>;

/// A request from the user socket, with who sent it.
pub type UserCall = jsonl::PeerCall<Request, Response>;

/// Binds the admin socket (replacing a stale one), mode 0600: root only.
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    bind_mode(path, 0o600)
}

/// Binds the user socket, mode 0666: any local user may connect; what they
/// may ask is judged per request from their peer credentials
/// (`admin::users`).
pub fn bind_user(path: &Path) -> anyhow::Result<UnixListener> {
    bind_mode(path, 0o666)
}

fn bind_mode(path: &Path, mode: u32) -> anyhow::Result<UnixListener> {
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
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// Serves the socket until the task is dropped.
pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>, limits: LineLimits) {
    jsonl::serve(listener, calls, limits, Response::Error).await;
}

/// Serves the user socket until the task is dropped.
pub async fn serve_user(listener: UnixListener, calls: mpsc::Sender<UserCall>, limits: LineLimits) {
    jsonl::serve_peers(listener, calls, limits, Response::Error).await;
}
