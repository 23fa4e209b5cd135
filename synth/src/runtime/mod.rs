//! Running one rank for real: sockets, handshake, measured loop.

mod counters;
mod error;
mod frames;
mod handshake;
mod measure;
mod rt;

use std::time::Instant;

pub use error::RunError;

use crate::config::{Config, RunLength};
use crate::engine::RankEngine;
use crate::header::{Header, Kind, job_hash};
use crate::modes::{Proto, RecvMode};
use crate::stop::StopAgreement;
use crate::transport::tcp::TcpTransport;
use crate::transport::tcp_mesh::MeshSpec;
use crate::transport::udp::UdpTransport;
use crate::transport::{Transport, TransportError};
use frames::RankState;

/// A rank whose peers are all up: ready to run its measured window.
pub struct Session {
    config: Config,
    transport: Box<dyn Transport>,
    state: RankState,
    job_hash: u64,
    /// Outgoing frame, rewritten (header only) for every send.
    frame: Vec<u8>,
    /// Scratch list of senders a receive step still waits for.
    missing: Vec<usize>,
}

impl Session {
    /// Opens the sockets and runs the start handshake; returns once every
    /// rank is known to be up.
    pub fn establish(config: Config) -> Result<Session, RunError> {
        let rank = config.rank;
        let stop = match config.length {
            RunLength::Iterations(count) => StopAgreement::fixed(count),
            RunLength::Duration(_) => StopAgreement::open(),
        };
        let engine = RankEngine::new(config.pattern, rank, config.size, stop);
        let job_hash = job_hash(&config.job);
        let mut state = RankState::new(engine, job_hash);
        let mut frame = vec![0; config.msg_bytes];
        let setup = |source| RunError::Setup { rank, source };
        let transport: Box<dyn Transport> = match config.proto {
            Proto::Udp => Box::new(UdpTransport::bind(rank, &config.peers).map_err(setup)?),
            Proto::Tcp => {
                hello_header(&config, job_hash, state.engine.stop().stop_iter())
                    .encode_into(&mut frame)
                    .expect("msg_bytes is validated to hold a header");
                let spec = MeshSpec {
                    rank,
                    peers: &config.peers,
                    msg_bytes: config.msg_bytes,
                    job_hash,
                    hello: &frame,
                    stop_iter: state.engine.stop().stop_iter(),
                    deadline: Instant::now() + config.timeout,
                };
                let (transport, traffic) = TcpTransport::establish(&spec).map_err(setup)?;
                state.counters.count_mesh(&traffic, config.msg_bytes);
                Box::new(transport)
            }
        };
        let mut transport = transport;
        transport
            .set_wait(config.wait)
            .map_err(|source| RunError::Setup { rank, source })?;
        let mut session = Session {
            config,
            transport,
            state,
            job_hash,
            frame,
            missing: Vec::new(),
        };
        session.start_handshake()?;
        Ok(session)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Sends one `kind` frame to `to`, stamped with the current iteration
    /// and this rank's stop iteration.
    fn send(&mut self, kind: Kind, to: usize) -> Result<(), RunError> {
        let engine = &self.state.engine;
        let header = Header {
            kind,
            src: self.config.rank as u32,
            len: self.config.msg_bytes as u32,
            job_hash: self.job_hash,
            iteration: if kind.is_handshake() {
                0
            } else {
                engine.iteration()
            },
            stop_iter: engine.stop().stop_iter(),
        };
        header
            .encode_into(&mut self.frame)
            .expect("msg_bytes is validated to hold a header");
        let deadline = Instant::now() + self.config.timeout;
        let state = &mut self.state;
        let sent = self
            .transport
            .send(to, &self.frame, deadline, &mut |bytes, peer| {
                state.on_frame(bytes, peer)
            });
        sent.map_err(|source| self.transport_error(source))?;
        self.state.counters.count_sent(kind, self.config.msg_bytes);
        Ok(())
    }

    /// One receive attempt (see [`Transport::receive`]), then any replies
    /// the received frames called for. Returns the empty polls.
    fn receive_once(
        &mut self,
        from: &[usize],
        mode: RecvMode,
        deadline: Instant,
    ) -> Result<u64, RunError> {
        let state = &mut self.state;
        let received = self
            .transport
            .receive(from, mode, deadline, &mut |bytes, peer| {
                state.on_frame(bytes, peer)
            });
        let empty_polls = received.map_err(|source| self.transport_error(source))?;
        while let Some((to, kind)) = self.state.handshake.replies.pop() {
            self.send(kind, to)?;
        }
        Ok(empty_polls)
    }

    fn transport_error(&self, source: TransportError) -> RunError {
        RunError::Transport {
            rank: self.config.rank,
            iteration: self.state.engine.iteration(),
            source,
        }
    }
}

fn hello_header(config: &Config, job_hash: u64, stop_iter: u64) -> Header {
    Header {
        kind: Kind::Hello,
        src: config.rank as u32,
        len: config.msg_bytes as u32,
        job_hash,
        iteration: 0,
        stop_iter,
    }
}
