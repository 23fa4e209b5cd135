//! Async helpers (feature `tokio`): run the handshake on a byte stream, then
//! read and write messages on its two halves.
//!
//! A thin shell around the pure [`Session`]: all protocol decisions are made
//! there. Handshake and idle timeouts are the caller's (wrap the futures in
//! `tokio::time::timeout`).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::channel::{Opener, Sealer};
use super::clock::monotonic_ns;
use super::error::WireError;
use super::handshake::PeerInfo;
use super::message::Message;
use super::session::{Inbound, Session, SessionConfig};
use super::stamped::ArrivalStamp;

/// Bytes read from the stream at a time.
const READ_CHUNK_LEN: usize = 16 * 1024;

/// Why a stream operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("connection i/o failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("peer closed the connection during the handshake")]
    ClosedDuringHandshake,
}

impl StreamError {
    /// A bounded label: `io`, `closed_during_handshake`, or a
    /// [`WireError::reason`].
    pub fn reason(&self) -> &'static str {
        match self {
            StreamError::Io(_) => "io",
            StreamError::Wire(error) => error.reason(),
            StreamError::ClosedDuringHandshake => "closed_during_handshake",
        }
    }

    /// Whether the connection must be closed after this error from
    /// [`WireReader::recv`] or [`WireWriter::send`] (see
    /// [`WireError::is_fatal`]). A failed [`initiate`] or [`accept`] leaves no
    /// connection at all, whatever the error.
    pub fn is_fatal(&self) -> bool {
        match self {
            StreamError::Wire(error) => error.is_fatal(),
            StreamError::Io(_) | StreamError::ClosedDuringHandshake => true,
        }
    }
}

/// An established connection's halves and what the handshake learnt.
#[derive(Debug)]
pub struct Connection<R, W> {
    pub reader: WireReader<R>,
    pub writer: WireWriter<W>,
    pub peer: PeerInfo,
}

/// Opens the connection as initiator: writes `Hello`, completes the handshake.
pub async fn initiate<R, W>(
    reader: R,
    mut writer: W,
    config: SessionConfig,
) -> Result<Connection<R, W>, StreamError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (session, hello) = Session::initiate(config)?;
    write_frame(&mut writer, &hello).await?;
    finish_handshake(session, reader, writer).await
}

/// Accepts the connection as responder: waits for `Hello`, completes the handshake.
pub async fn accept<R, W>(
    reader: R,
    writer: W,
    config: SessionConfig,
) -> Result<Connection<R, W>, StreamError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    finish_handshake(Session::accept(config)?, reader, writer).await
}

async fn finish_handshake<R, W>(
    mut session: Session,
    reader: R,
    mut writer: W,
) -> Result<Connection<R, W>, StreamError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buffer = ReadBuffer::new(reader);
    loop {
        let Some(inbound) = buffer.next(|input| session.receive(input)).await? else {
            session.finish()?;
            return Err(StreamError::ClosedDuringHandshake);
        };
        match inbound {
            Inbound::Reply(bytes) => write_frame(&mut writer, &bytes).await?,
            Inbound::Established { reply, .. } => {
                if let Some(bytes) = reply {
                    write_frame(&mut writer, &bytes).await?;
                }
                break;
            }
            Inbound::Message(_) => unreachable!("a session yields messages only once established"),
        }
    }
    let Ok((sealer, opener, peer)) = session.into_split() else {
        unreachable!("the loop ends only once established")
    };
    Ok(Connection {
        reader: WireReader { buffer, opener },
        writer: WireWriter { writer, sealer },
        peer,
    })
}

/// The receiving half of an established connection.
#[derive(Debug)]
pub struct WireReader<R> {
    buffer: ReadBuffer<R>,
    opener: Opener,
}

impl<R: AsyncRead + Unpin> WireReader<R> {
    /// The underlying reader (e.g. to ask when the bytes of the message
    /// just received arrived).
    pub fn get_ref(&self) -> &R {
        &self.buffer.reader
    }

    /// The next authenticated message; `Ok(None)` when the peer closed the
    /// stream between frames. After an error that is not fatal, the bad
    /// frame is skipped and calling again goes on with the next one.
    ///
    /// Cancel safe when the reader's `read` is (as tokio's sockets are): the
    /// only await is that read, and all progress is kept in `self`.
    pub async fn recv(&mut self) -> Result<Option<Message>, StreamError> {
        let opener = &mut self.opener;
        match self.buffer.next(|input| opener.receive(input)).await? {
            Some(message) => Ok(Some(message)),
            None => {
                self.opener.finish()?;
                Ok(None)
            }
        }
    }

    pub fn session_id(&self) -> u64 {
        self.opener.session_id()
    }
}

impl<R: AsyncRead + Unpin + ArrivalStamp> WireReader<R> {
    /// Like [`WireReader::recv`], with when the message arrived
    /// (CLOCK_MONOTONIC ns): the arrival of the read that brought its last
    /// byte (for a message split across reads, the later one; for several
    /// messages in one read, that read's, i.e. its newest segment's, which
    /// is when the last of them was complete). Now if the reader knows no
    /// arrival.
    pub async fn recv_stamped(&mut self) -> Result<Option<(Message, u64)>, StreamError> {
        let message = self.recv().await?;
        // The buffer holds bytes of the latest read only (it reads again
        // once the decoder used them all), so that read completed `message`.
        let arrived_ns = self
            .buffer
            .reader
            .last_arrival_ns()
            .unwrap_or_else(monotonic_ns);
        Ok(message.map(|message| (message, arrived_ns)))
    }
}

/// The sending half of an established connection.
#[derive(Debug)]
pub struct WireWriter<W> {
    writer: W,
    sealer: Sealer,
}

impl<W: AsyncWrite + Unpin> WireWriter<W> {
    /// Seals `message` and writes (and flushes) its frame.
    pub async fn send(&mut self, message: &Message) -> Result<(), StreamError> {
        let frame = self.sealer.seal(message)?;
        write_frame(&mut self.writer, &frame).await
    }

    /// Shuts the stream's write side down (the peer's reader sees a clean end).
    pub async fn shutdown(&mut self) -> Result<(), StreamError> {
        Ok(self.writer.shutdown().await?)
    }

    pub fn session_id(&self) -> u64 {
        self.sealer.session_id()
    }
}

async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &[u8],
) -> Result<(), StreamError> {
    writer.write_all(frame).await?;
    writer.flush().await?;
    Ok(())
}

/// Bytes read from the stream but not yet consumed by the decoder.
#[derive(Debug)]
struct ReadBuffer<R> {
    reader: R,
    bytes: Box<[u8]>,
    start: usize,
    end: usize,
}

impl<R: AsyncRead + Unpin> ReadBuffer<R> {
    fn new(reader: R) -> Self {
        ReadBuffer {
            reader,
            bytes: vec![0; READ_CHUNK_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Feeds buffered bytes to `step` (which consumes from the front and
    /// returns an item or `None` once it used them all), reading more as
    /// needed; `Ok(None)` at end of stream.
    async fn next<T>(
        &mut self,
        mut step: impl FnMut(&mut &[u8]) -> Result<Option<T>, WireError>,
    ) -> Result<Option<T>, StreamError> {
        loop {
            if self.start < self.end {
                let mut input = &self.bytes[self.start..self.end];
                let result = step(&mut input);
                self.start = self.end - input.len();
                if let Some(item) = result? {
                    return Ok(Some(item));
                }
            }
            let read = self.reader.read(&mut self.bytes).await?;
            self.start = 0;
            self.end = read;
            if read == 0 {
                return Ok(None);
            }
        }
    }
}
