//! The start handshake: no rank begins iteration 0 before every rank is up.
//!
//! UDP: every other rank sends hello to rank 0 every 50 ms until it gets
//! start (not merely ack, so a lost start is repaired by the next hello);
//! rank 0 acks each hello and, once it heard everyone, sends start to all.
//! TCP: building the mesh already collected every hello at rank 0, which
//! then sends start over each stream.
//!
//! Hellos carry the sender's stop iteration; rank 0 refuses to start ranks
//! with different run lengths, which the stop agreement cannot reconcile.

use std::time::{Duration, Instant};

use super::{RunError, Session};
use crate::header::Kind;
use crate::modes::{Proto, RecvMode};
use crate::stop::describe_run_length;

/// How often a UDP rank repeats its hello while waiting for start.
pub const HELLO_RESEND: Duration = Duration::from_millis(50);

impl Session {
    pub(super) fn start_handshake(&mut self) -> Result<(), RunError> {
        if self.config.size == 1 {
            return Ok(());
        }
        let began = Instant::now();
        let deadline = began + self.config.timeout;
        if self.config.rank == 0 {
            self.gather_hellos(began, deadline)?;
            self.state.handshake.start_sent = true;
            for rank in 1..self.config.size {
                self.send(Kind::Start, rank)?;
            }
            self.state.handshake.started = true;
            Ok(())
        } else {
            self.await_start(began, deadline)
        }
    }

    fn gather_hellos(&mut self, began: Instant, deadline: Instant) -> Result<(), RunError> {
        if self.config.proto == Proto::Tcp {
            return Ok(());
        }
        let everyone: Vec<usize> = (1..self.config.size).collect();
        loop {
            if let Some((peer, theirs)) = self.state.handshake.length_mismatch {
                return Err(RunError::RunLengthMismatch {
                    peer,
                    theirs: describe_run_length(theirs),
                    ours: describe_run_length(self.state.engine.stop().stop_iter()),
                });
            }
            let missing = self.state.handshake.missing_hellos();
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(RunError::HandshakeTimeout {
                    rank: 0,
                    waited: began.elapsed(),
                    what: format!("no hello from rank(s) {missing:?}"),
                });
            }
            self.receive_once(&everyone, RecvMode::Block, deadline)?;
        }
    }

    fn await_start(&mut self, began: Instant, deadline: Instant) -> Result<(), RunError> {
        let resend_hellos = self.config.proto == Proto::Udp;
        let mut next_hello = began;
        while !self.state.handshake.started {
            let now = Instant::now();
            if now >= deadline {
                return Err(RunError::HandshakeTimeout {
                    rank: self.config.rank,
                    waited: began.elapsed(),
                    what: "no start from rank 0".to_owned(),
                });
            }
            if resend_hellos && now >= next_hello {
                self.send(Kind::Hello, 0)?;
                next_hello = now + HELLO_RESEND;
            }
            let wake = if resend_hellos {
                next_hello.min(deadline)
            } else {
                deadline
            };
            self.receive_once(&[0], RecvMode::Block, wake)?;
        }
        Ok(())
    }
}
