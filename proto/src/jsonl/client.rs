//! The blocking client: one request line, one reply line.
use std::{
    io::{self, BufRead as _, BufReader, Write as _},
    os::unix::net::UnixStream,
    path::Path,
    time::Duration,
};

use serde::{Serialize, de::DeserializeOwned};

#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("socket I/O: {0}")]
    Io(#[from] io::Error),
    #[error("malformed reply: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("the peer closed the connection without replying")]
    Closed,
}

pub struct LineClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl LineClient {
    pub fn connect(path: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(path)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    /// Sends `request` as one line and reads one reply line (waiting at most
    /// `timeout`).
    pub fn call<Q: Serialize, R: DeserializeOwned>(
        &mut self,
        request: &Q,
        timeout: Duration,
    ) -> Result<R, LineError> {
        self.writer.set_read_timeout(Some(timeout))?;
        let mut line = serde_json::to_string(request)?;
        line.push('\n');
        self.writer.write_all(line.as_bytes())?;
        let mut answer = String::new();
        if self.reader.read_line(&mut answer)? == 0 {
            return Err(LineError::Closed);
        }
        Ok(serde_json::from_str(&answer)?)
    }
}

/// Whether this process runs as root (effective uid 0): clients of both
/// daemons then use the root-only socket, everyone else the user socket
/// next to it.
pub fn caller_is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
