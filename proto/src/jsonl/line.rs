//! Reading one request line without buffering more than the limit allows.
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

use super::memory;

/// Capacity a connection keeps between requests; a larger buffer (left by a
/// long request) is freed once its request is answered.
const KEPT_CAPACITY: usize = 64 * 1024;

/// How reading a line ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineEnd {
    /// A whole line is in the buffer (without its newline).
    Complete,
    /// The line passed the limit; the rest of it was not read.
    TooLong,
    /// The stream ended in the middle of a line.
    Unterminated,
    /// The stream ended between lines.
    Closed,
}

/// One connection's line buffer. It grows only as far as the line limit,
/// and a large one is freed (and its memory handed back to the system, see
/// [`memory`]) when its request is done or its connection closes.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    bytes: Vec<u8>,
}

impl LineBuffer {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Empties the buffer for the next line, freeing it if it grew large.
    pub(crate) fn reset(&mut self) {
        if self.bytes.capacity() > KEPT_CAPACITY {
            memory::free_large(std::mem::take(&mut self.bytes));
        } else {
            self.bytes.clear();
        }
    }

    /// Appends `chunk`, growing the capacity by doubling but never past `max`.
    fn extend(&mut self, chunk: &[u8], max: usize) {
        let needed = self.bytes.len() + chunk.len();
        if needed > self.bytes.capacity() {
            let target = (self.bytes.capacity() * 2).clamp(needed, max.max(needed));
            self.bytes.reserve_exact(target - self.bytes.len());
        }
        self.bytes.extend_from_slice(chunk);
    }
}

impl Drop for LineBuffer {
    fn drop(&mut self) {
        self.reset();
    }
}

/// Reads the next line (at most `max` bytes before its newline) into `line`,
/// which [`LineBuffer::reset`] must have emptied.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut LineBuffer,
    max: usize,
) -> std::io::Result<LineEnd> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.bytes.is_empty() {
                LineEnd::Closed
            } else {
                LineEnd::Unterminated
            });
        }
        let newline = available.iter().position(|&byte| byte == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        if line.bytes.len() + chunk.len() > max {
            let read = available.len();
            reader.consume(read);
            return Ok(LineEnd::TooLong);
        }
        line.extend(chunk, max);
        let used = chunk.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            return Ok(LineEnd::Complete);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::BufReader;

    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<(LineEnd, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = LineBuffer::default();
        let mut out = Vec::new();
        loop {
            line.reset();
            let end = read_line(&mut reader, &mut line, max).await.unwrap();
            let stop = end != LineEnd::Complete;
            out.push((end, line.as_bytes().to_vec()));
            if stop {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_at_newlines_across_reads() {
        let out = lines(b"{\"op\":\"jobs\"}\nab\n", 64).await;
        assert_eq!(
            out,
            [
                (LineEnd::Complete, b"{\"op\":\"jobs\"}".to_vec()),
                (LineEnd::Complete, b"ab".to_vec()),
                (LineEnd::Closed, Vec::new()),
            ]
        );
    }

    #[tokio::test]
    async fn a_line_at_the_limit_passes_and_one_byte_more_does_not() {
        let out = lines(b"12345678\n123456789\n", 8).await;
        assert_eq!(out[0], (LineEnd::Complete, b"12345678".to_vec()));
        assert_eq!(out[1].0, LineEnd::TooLong);
        assert_eq!(out.len(), 2);
    }

    #[tokio::test]
    async fn a_stream_ending_mid_line_is_unterminated() {
        let out = lines(b"ok\nhalf", 64).await;
        assert_eq!(out[1], (LineEnd::Unterminated, b"half".to_vec()));
    }

    #[test]
    fn the_buffer_never_grows_past_the_limit_and_large_ones_are_freed() {
        let mut line = LineBuffer::default();
        for _ in 0..1000 {
            line.extend(&[b'x'; 100], 100_000);
        }
        assert_eq!(line.bytes.len(), 100_000);
        assert_eq!(line.bytes.capacity(), 100_000);
        line.reset();
        assert_eq!(line.bytes.capacity(), 0);
    }
}
