//! The typed client both local admin protocols share: a request type, a
//! reply type and the daemon's name, over [`LineClient`]. The agent's control
//! socket and the coordinator's admin socket differ only in those three.
use std::{
    marker::PhantomData,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::{LineClient, LineError};

/// What a daemon answers on its socket: its reply or a human-readable
/// error. On the wire `{"ok": …}` or `{"error": "…"}`.
// Built once per request and serialised at once: boxing the reply would
// only complicate matching.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict<R> {
    Ok(R),
    Error(String),
}

/// One local admin protocol, as its clients see it.
pub trait Protocol {
    type Request: Serialize;
    type Reply: DeserializeOwned;
    /// The socket in messages: "agent control socket".
    const SOCKET: &'static str;
    /// Who refused, in messages: "agent".
    const DAEMON: &'static str;
    /// Appended to "cannot reach …": what to check first.
    const UNREACHABLE_HINT: &'static str;
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the {socket} at {path}: {source}{hint}")]
    Unreachable {
        socket: &'static str,
        hint: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{socket}: {source}")]
    Line {
        socket: &'static str,
        source: LineError,
    },
    /// The daemon understood the request and refused it.
    #[error("{daemon} refused: {why}")]
    Refused { daemon: &'static str, why: String },
}

impl ClientError {
    /// Why the daemon refused, if it did (rather than being unreachable).
    pub fn refusal(&self) -> Option<&str> {
        match self {
            ClientError::Refused { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// A blocking client of protocol `P`, for tools and tests.
pub struct Client<P> {
    line: LineClient,
    protocol: PhantomData<fn() -> P>,
}

impl<P: Protocol> Client<P> {
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref();
        LineClient::connect(path)
            .map(|line| Self {
                line,
                protocol: PhantomData,
            })
            .map_err(|source| ClientError::Unreachable {
                socket: P::SOCKET,
                hint: P::UNREACHABLE_HINT,
                path: path.display().to_string(),
                source,
            })
    }

    /// Sends `request` and waits (at most `timeout`) for the answer.
    pub fn call(
        &mut self,
        request: &P::Request,
        timeout: Duration,
    ) -> Result<P::Reply, ClientError> {
        let verdict = self
            .line
            .call::<_, Verdict<P::Reply>>(request, timeout)
            .map_err(|source| ClientError::Line {
                socket: P::SOCKET,
                source,
            })?;
        match verdict {
            Verdict::Ok(reply) => Ok(reply),
            Verdict::Error(why) => Err(ClientError::Refused {
                daemon: P::DAEMON,
                why,
            }),
        }
    }
}

/// The user socket next to a daemon's root-only socket `root_socket`:
/// `agent.sock` → `agent-user.sock`, `coordinator.sock` →
/// `coordinator-user.sock` (any other name gets `-user` appended). Any
/// local user may connect to it; the daemon judges each request by the
/// caller's peer credentials.
pub fn user_socket_path(root_socket: &Path) -> PathBuf {
    let name = root_socket
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let user = match name.strip_suffix(".sock") {
        Some(stem) => format!("{stem}-user.sock"),
        None => format!("{name}-user"),
    };
    root_socket.with_file_name(user)
}

/// Where a caller's requests go: root's to the root-only socket, everyone
/// else's to the user socket beside it (where a root-only request is
/// refused with a message saying so, instead of "permission denied").
pub fn socket_for(root_socket: &Path, root: bool) -> PathBuf {
    if root {
        root_socket.to_path_buf()
    } else {
        user_socket_path(root_socket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_socket_sits_next_to_the_root_socket() {
        assert_eq!(
            user_socket_path(Path::new("/run/cosched/agent.sock")),
            Path::new("/run/cosched/agent-user.sock")
        );
        assert_eq!(
            user_socket_path(Path::new("/tmp/x/ctl")),
            Path::new("/tmp/x/ctl-user")
        );
    }

    #[test]
    fn a_user_talks_to_the_user_socket_and_root_to_the_root_socket() {
        let admin = Path::new("/run/cosched/coordinator.sock");
        assert_eq!(
            socket_for(admin, false),
            Path::new("/run/cosched/coordinator-user.sock")
        );
        assert_eq!(socket_for(admin, true), admin);
    }

    #[test]
    fn a_verdict_is_ok_or_error_on_the_wire() {
        let ok: Verdict<u32> = serde_json::from_str(r#"{"ok":3}"#).unwrap();
        assert_eq!(ok, Verdict::Ok(3));
        assert_eq!(
            serde_json::to_string(&Verdict::<u32>::Error("no".into())).unwrap(),
            r#"{"error":"no"}"#
        );
    }

    struct Echo;
    impl Protocol for Echo {
        type Request = String;
        type Reply = String;
        const SOCKET: &'static str = "echo socket";
        const DAEMON: &'static str = "echo";
        const UNREACHABLE_HINT: &'static str = " (is echo running?)";
    }

    #[test]
    fn an_absent_socket_is_named_with_the_hint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sock");
        let Err(e) = Client::<Echo>::connect(&path) else {
            panic!("connected to nothing")
        };
        let text = e.to_string();
        assert!(
            text.starts_with("cannot reach the echo socket at "),
            "{text}"
        );
        assert!(text.ends_with(" (is echo running?)"), "{text}");
        assert_eq!(e.refusal(), None);
    }

    #[test]
    fn a_refusal_names_the_daemon_and_keeps_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("echo.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{BufRead as _, Write as _};
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            std::io::BufReader::new(&stream)
                .read_line(&mut line)
                .unwrap();
            (&stream).write_all(b"{\"error\":\"not today\"}\n").unwrap();
            line
        });
        let e = Client::<Echo>::connect(&path)
            .unwrap()
            .call(&"hi".to_string(), Duration::from_secs(5))
            .unwrap_err();
        assert_eq!(server.join().unwrap(), "\"hi\"\n");
        assert_eq!(e.refusal(), Some("not today"));
        assert_eq!(e.to_string(), "echo refused: not today");
    }
}
