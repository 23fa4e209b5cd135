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

/// Serves the socket until the task is dropped.
pub async fn serve(listener: UnixListener, calls: mpsc::Sender<Call>, limits: LineLimits) {
    jsonl::serve(listener, calls, limits, Response::Error).await;
}
