//! The line server: accepts connections up to a cap, reads one request per
//! line, hands it to the daemon's main loop and writes the reply back.
//!
//! Every line gets a reply: a line that is not UTF-8 or not a valid request
//! is answered with an error naming the problem, and the connection stays
//! usable. A line over the limit, a client silent past the idle time-out and
//! a connection over the cap are answered with an error, then closed.
use std::{sync::Arc, time::Duration};

use serde::{Serialize, de::DeserializeOwned};
use tokio::{
    io::{AsyncWriteExt as _, BufReader},
    net::{UnixListener, UnixStream, unix::OwnedWriteHalf},
    sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot},
    time::timeout,
};

use super::{
    LineLimits,
    line::{LineBuffer, LineEnd, read_line},
};

/// A request on its way to the main loop, with where to send the reply.
pub type Call<Q, R> = (Q, oneshot::Sender<R>);

/// A request with who sent it (a socket any user may connect to).
pub type PeerCall<Q, R> = (Q, Peer, oneshot::Sender<R>);

/// The process on the other end of a connection, as the kernel recorded it
/// when it connected (`SO_PEERCRED`): not something the client says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub gid: u32,
    /// None when the peer is in another pid namespace.
    pub pid: Option<i32>,
}

/// Serves `listener` until the task is dropped: requests of type `Q` go to
/// `calls`, replies of type `R` come back; `error` turns a message into the
/// protocol's error reply.
pub async fn serve<Q, R>(
    listener: UnixListener,
    calls: mpsc::Sender<Call<Q, R>>,
    limits: LineLimits,
    error: fn(String) -> R,
) where
    Q: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    serve_as(listener, calls, limits, error, |request, _, reply| {
        (request, reply)
    })
    .await;
}

/// [`serve`] for a socket whose requests are judged by who sends them:
/// each request goes to `calls` with the connection's peer credentials. A
/// connection whose credentials cannot be read is refused.
pub async fn serve_peers<Q, R>(
    listener: UnixListener,
    calls: mpsc::Sender<PeerCall<Q, R>>,
    limits: LineLimits,
    error: fn(String) -> R,
) where
    Q: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
{
    serve_as(listener, calls, limits, error, |request, peer, reply| {
        (request, peer, reply)
    })
    .await;
}

async fn serve_as<Q, R, M>(
    listener: UnixListener,
    calls: mpsc::Sender<M>,
    limits: LineLimits,
    error: fn(String) -> R,
    wrap: fn(Q, Peer, oneshot::Sender<R>) -> M,
) where
    Q: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
    M: Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(accept_error) => {
                // Out of file descriptors, most likely: let some close.
                tracing::warn!("accepting a connection on a line socket: {accept_error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            let busy = format!(
                "too many connections (at most {}); try again later",
                limits.max_connections
            );
            refuse_at_once(&stream, &error(busy));
            continue;
        };
        let peer = match stream.peer_cred() {
            Ok(cred) => Peer {
                uid: cred.uid(),
                gid: cred.gid(),
                pid: cred.pid(),
            },
            Err(e) => {
                refuse_at_once(&stream, &error(format!("reading peer credentials: {e}")));
                continue;
            }
        };
        let connection = Connection {
            calls: calls.clone(),
            limits,
            error,
            wrap,
            peer,
            _slot: permit,
        };
        tokio::spawn(connection.run(stream));
    }
}

/// Writes `reply` if the socket takes it without waiting (a fresh socket's
/// buffer is empty, so it does), then drops the connection.
fn refuse_at_once<R: Serialize>(stream: &UnixStream, reply: &R) {
    if let Ok(line) = encode(reply) {
        let _ = stream.try_write(&line);
    }
}

struct Connection<Q, R, M> {
    calls: mpsc::Sender<M>,
    limits: LineLimits,
    error: fn(String) -> R,
    wrap: fn(Q, Peer, oneshot::Sender<R>) -> M,
    peer: Peer,
    /// The connection's place under the cap, given back when it ends.
    _slot: OwnedSemaphorePermit,
}

impl<Q, R, M> Connection<Q, R, M>
where
    Q: DeserializeOwned + Send + 'static,
    R: Serialize + Send + 'static,
    M: Send + 'static,
{
    async fn run(self, stream: UnixStream) {
        let (reader, mut writer) = stream.into_split();
        let mut reader = BufReader::new(reader);
        let mut line = LineBuffer::default();
        let idle = self.limits.idle_timeout();
        let max = self.limits.max_line_bytes;
        loop {
            line.reset();
            let end = match timeout(idle, read_line(&mut reader, &mut line, max)).await {
                Ok(Ok(end)) => end,
                Ok(Err(_)) => return,
                Err(_) => {
                    let why = format!("no complete request within {idle:?}; closing");
                    self.send(&mut writer, why).await;
                    return;
                }
            };
            let request = match end {
                LineEnd::Complete => self.parse(line.as_bytes()),
                LineEnd::Closed => return,
                LineEnd::TooLong => {
                    let why = format!("request longer than {max} bytes; closing");
                    self.send(&mut writer, why).await;
                    return;
                }
                LineEnd::Unterminated => {
                    let why = "request not ended by a newline; closing".to_string();
                    self.send(&mut writer, why).await;
                    return;
                }
            };
            line.reset();
            let reply = match request {
                Ok(request) => match self.call(request).await {
                    Some(reply) => reply,
                    None => {
                        self.send(&mut writer, "shutting down".into()).await;
                        return;
                    }
                },
                Err(why) => (self.error)(why),
            };
            let Ok(line) = encode(&reply) else {
                return;
            };
            drop(reply);
            if !self.write(&mut writer, &line).await {
                return;
            }
        }
    }

    /// The request on a line, or the error reply's text.
    fn parse(&self, line: &[u8]) -> Result<Q, String> {
        let text = std::str::from_utf8(line).map_err(|utf8| {
            format!(
                "request is not valid UTF-8 (invalid byte at offset {})",
                utf8.valid_up_to()
            )
        })?;
        serde_json::from_str(text).map_err(|json| format!("malformed request: {json}"))
    }

    /// The main loop's reply; `None` when it is gone.
    async fn call(&self, request: Q) -> Option<R> {
        let (reply_to, reply) = oneshot::channel();
        let call = (self.wrap)(request, self.peer, reply_to);
        self.calls.send(call).await.ok()?;
        reply.await.ok()
    }

    /// Writes an error reply (best effort: the connection closes next).
    async fn send(&self, writer: &mut OwnedWriteHalf, why: String) {
        if let Ok(line) = encode(&(self.error)(why)) {
            let _ = self.write(writer, &line).await;
        }
    }

    /// Writes one reply line; false when the connection is unusable (or the
    /// client did not take the reply within the idle time-out).
    async fn write(&self, writer: &mut OwnedWriteHalf, line: &[u8]) -> bool {
        matches!(
            timeout(self.limits.idle_timeout(), writer.write_all(line)).await,
            Ok(Ok(()))
        )
    }
}

fn encode<R: Serialize>(reply: &R) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(reply)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
