//! The per-connection state machine: handshake, then sealing and opening.
//!
//! Pure: it turns received bytes into [`Inbound`] events and messages into
//! bytes to send, and never touches a socket or a clock (handshake timeouts
//! belong to the caller). Any error during the handshake fails the session
//! for good; after it, only [fatal](WireError::is_fatal) errors do.

use super::channel::{Opener, Sealer};
use super::decoder::FrameDecoder;
use super::error::{RejectReason, WireError};
use super::frame::{RawFrame, seal_frame};
use super::handshake::{Hello, HelloAck, HelloConfirm, Nonce, PeerInfo, Role, check_identity};
use super::header::{PROTOCOL_MAJOR, ProtocolVersion};
use super::keys::{SessionKeys, handshake_key};
use super::kind::MessageKind;
use super::mac::{TagKey, ct_eq};
use super::message::Message;
use super::payload;
use super::secret::SharedSecret;

/// Who this end is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    pub role: Role,
    /// This end's name, shown to the peer (1 to 255 bytes).
    pub node_name: String,
    /// Optional features this end supports, for the peer to adapt to.
    pub capabilities: Vec<String>,
    pub secret: SharedSecret,
}

impl SessionConfig {
    /// A config without capabilities.
    pub fn new(role: Role, node_name: impl Into<String>, secret: SharedSecret) -> Self {
        SessionConfig {
            role,
            node_name: node_name.into(),
            capabilities: Vec::new(),
            secret,
        }
    }
}

/// Where a session is, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Responder, waiting for the initiator's `Hello`.
    AwaitingHello,
    /// Initiator, `Hello` sent, waiting for `HelloAck`.
    AwaitingAck,
    /// Responder, `HelloAck` sent, waiting for `HelloConfirm`.
    AwaitingConfirm,
    Established,
    /// Unusable; the reason it failed.
    Failed(RejectReason),
}

impl SessionState {
    fn describe(self) -> &'static str {
        match self {
            SessionState::AwaitingHello => "awaiting Hello",
            SessionState::AwaitingAck => "awaiting HelloAck",
            SessionState::AwaitingConfirm => "awaiting HelloConfirm",
            SessionState::Established => "established",
            SessionState::Failed(_) => "failed",
        }
    }
}

/// What one received frame produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// The handshake moved on: write these bytes to the peer.
    Reply(Vec<u8>),
    /// The handshake finished. Write `reply` (if any) before any message.
    Established {
        peer: PeerInfo,
        reply: Option<Vec<u8>>,
    },
    /// An authenticated message.
    Message(Message),
}

/// One end of one connection.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    handshake_key: TagKey,
    /// Frames the handshake reads; handed to the [`Opener`] once established.
    decoder: FrameDecoder,
    state: State,
}

#[derive(Debug)]
enum State {
    AwaitingHello,
    AwaitingAck {
        nonce: Nonce,
    },
    AwaitingConfirm {
        keys: SessionKeys,
        peer: PeerInfo,
        hello_sequence: u64,
    },
    Established {
        sealer: Sealer,
        opener: Opener,
        peer: PeerInfo,
    },
    Failed(RejectReason),
}

impl Session {
    /// Starts a connection as its initiator: the session, and the `Hello`
    /// frame to write first.
    pub fn initiate(config: SessionConfig) -> Result<(Session, Vec<u8>), WireError> {
        check_own_identity(&config)?;
        let nonce = Nonce::random()?;
        let hello = Hello {
            role: config.role,
            node_name: config.node_name.clone(),
            protocol: ProtocolVersion::CURRENT,
            nonce,
            capabilities: config.capabilities.clone(),
        };
        let handshake_key = handshake_key(&config.secret);
        let frame = seal_frame(
            &handshake_key,
            MessageKind::Hello.code(),
            0,
            0,
            &payload::encode(&hello)?,
        )?;
        let session = Session {
            config,
            handshake_key,
            decoder: FrameDecoder::new(),
            state: State::AwaitingAck { nonce },
        };
        Ok((session, frame))
    }

    /// Accepts a connection as its responder; it waits for the `Hello`.
    pub fn accept(config: SessionConfig) -> Result<Session, WireError> {
        check_own_identity(&config)?;
        Ok(Session {
            handshake_key: handshake_key(&config.secret),
            config,
            decoder: FrameDecoder::new(),
            state: State::AwaitingHello,
        })
    }

    /// Consumes bytes from `input` until one frame is complete and processed
    /// (its result returned) or `input` is empty (`Ok(None)`).
    pub fn receive(&mut self, input: &mut &[u8]) -> Result<Option<Inbound>, WireError> {
        let result = match &mut self.state {
            State::Failed(earlier) => {
                return Err(WireError::AlreadyFailed { earlier: *earlier });
            }
            State::Established { opener, .. } => opener
                .receive(input)
                .map(|message| message.map(Inbound::Message)),
            _ => match self.decoder.decode(input) {
                Ok(Some(frame)) => return self.receive_frame(&frame).map(Some),
                Ok(None) => Ok(None),
                Err(error) => Err(error),
            },
        };
        self.fail_if_fatal(result)
    }

    /// Iterates over the results of the frames `chunk` completes. Drain it:
    /// bytes it has not reached when dropped are not consumed. It ends early
    /// once the session fails.
    pub fn push<'s, 'c>(&'s mut self, chunk: &'c [u8]) -> Inbounds<'s, 'c> {
        Inbounds {
            session: self,
            input: chunk,
            done: false,
        }
    }

    /// Processes one already-decoded frame.
    pub fn receive_frame(&mut self, frame: &RawFrame) -> Result<Inbound, WireError> {
        match &mut self.state {
            State::Failed(earlier) => Err(WireError::AlreadyFailed { earlier: *earlier }),
            State::Established { opener, .. } => {
                let result = opener.open_frame(frame).map(Inbound::Message);
                self.fail_if_fatal(result)
            }
            _ => {
                let result = self.handshake_step(frame);
                if let Err(error) = &result {
                    self.state = State::Failed(error.reject_reason());
                }
                result
            }
        }
    }

    /// The frame bytes for `message`; only once established.
    pub fn seal(&mut self, message: &Message) -> Result<Vec<u8>, WireError> {
        let result = match &mut self.state {
            State::Established { sealer, .. } => sealer.seal(message),
            State::Failed(earlier) => Err(WireError::AlreadyFailed { earlier: *earlier }),
            _ => Err(WireError::NotEstablished {
                kind: message.kind(),
            }),
        };
        self.fail_if_fatal(result)
    }

    /// Call at end of input: an error if a frame was left incomplete.
    pub fn finish(&self) -> Result<(), WireError> {
        match &self.state {
            State::Established { opener, .. } => opener.finish(),
            State::Failed(earlier) => Err(WireError::AlreadyFailed { earlier: *earlier }),
            _ => self.decoder.finish(),
        }
    }

    /// Splits an established session into its sending and receiving halves
    /// (for separate writer and reader tasks); gives the session back if it
    /// is not established (boxed: a session is a few hundred bytes).
    pub fn into_split(self) -> Result<(Sealer, Opener, PeerInfo), Box<Session>> {
        match self.state {
            State::Established {
                sealer,
                opener,
                peer,
            } => Ok((sealer, opener, peer)),
            state => Err(Box::new(Session { state, ..self })),
        }
    }

    pub fn state(&self) -> SessionState {
        match &self.state {
            State::AwaitingHello => SessionState::AwaitingHello,
            State::AwaitingAck { .. } => SessionState::AwaitingAck,
            State::AwaitingConfirm { .. } => SessionState::AwaitingConfirm,
            State::Established { .. } => SessionState::Established,
            State::Failed(reason) => SessionState::Failed(*reason),
        }
    }

    pub fn is_established(&self) -> bool {
        matches!(self.state, State::Established { .. })
    }

    pub fn role(&self) -> Role {
        self.config.role
    }

    /// The peer, once established.
    pub fn peer(&self) -> Option<&PeerInfo> {
        match &self.state {
            State::Established { peer, .. } => Some(peer),
            _ => None,
        }
    }

    fn fail_if_fatal<T>(&mut self, result: Result<T, WireError>) -> Result<T, WireError> {
        if let Err(error) = &result
            && error.is_fatal()
            && !matches!(self.state, State::Failed(_))
        {
            self.state = State::Failed(error.reject_reason());
        }
        result
    }

    fn handshake_step(&mut self, frame: &RawFrame) -> Result<Inbound, WireError> {
        let expected = match self.state {
            State::AwaitingHello => MessageKind::Hello,
            State::AwaitingAck { .. } => MessageKind::HelloAck,
            _ => MessageKind::HelloConfirm,
        };
        let kind = MessageKind::from_code(frame.header.kind).ok_or(WireError::UnknownKind {
            kind: frame.header.kind,
            major: frame.header.version.major,
            minor: frame.header.version.minor,
        })?;
        if kind != expected {
            return Err(if kind.is_handshake() {
                WireError::UnexpectedMessage {
                    kind,
                    state: self.state().describe(),
                }
            } else {
                WireError::NotEstablished { kind }
            });
        }
        match std::mem::replace(&mut self.state, State::Failed(RejectReason::Handshake)) {
            State::AwaitingHello => self.on_hello(frame),
            State::AwaitingAck { nonce } => self.on_ack(frame, nonce),
            State::AwaitingConfirm {
                keys,
                peer,
                hello_sequence,
            } => self.on_confirm(frame, keys, peer, hello_sequence),
            State::Established { .. } | State::Failed(_) => {
                unreachable!("handshake_step runs only during the handshake")
            }
        }
    }

    fn on_hello(&mut self, frame: &RawFrame) -> Result<Inbound, WireError> {
        if !frame.is_tagged_by(&self.handshake_key) {
            return Err(frame.bad_tag());
        }
        let hello: Hello = payload::decode(&frame.payload)?;
        check_peer_identity(self.config.role, hello.role, &hello.protocol)?;
        check_identity(&hello.node_name, &hello.capabilities)?;
        let responder_nonce = Nonce::random()?;
        let keys = SessionKeys::derive(
            &self.config.secret,
            self.config.role,
            &hello.nonce,
            &responder_nonce,
        );
        let ack = HelloAck {
            role: self.config.role,
            node_name: self.config.node_name.clone(),
            protocol: ProtocolVersion::CURRENT,
            initiator_nonce: hello.nonce,
            responder_nonce,
            capabilities: self.config.capabilities.clone(),
            proof: keys.responder_proof,
        };
        let reply = seal_frame(
            &self.handshake_key,
            MessageKind::HelloAck.code(),
            keys.session_id,
            0,
            &payload::encode(&ack)?,
        )?;
        let peer = PeerInfo {
            role: hello.role,
            node_name: hello.node_name,
            protocol: hello.protocol,
            capabilities: hello.capabilities,
            session_id: keys.session_id,
        };
        self.state = State::AwaitingConfirm {
            keys,
            peer,
            hello_sequence: frame.header.sequence,
        };
        Ok(Inbound::Reply(reply))
    }

    fn on_ack(&mut self, frame: &RawFrame, nonce: Nonce) -> Result<Inbound, WireError> {
        if !frame.is_tagged_by(&self.handshake_key) {
            return Err(frame.bad_tag());
        }
        let ack: HelloAck = payload::decode(&frame.payload)?;
        if ack.initiator_nonce != nonce {
            return Err(WireError::Handshake {
                detail: "HelloAck answers another connection's nonce",
            });
        }
        check_peer_identity(self.config.role, ack.role, &ack.protocol)?;
        check_identity(&ack.node_name, &ack.capabilities)?;
        let keys = SessionKeys::derive(
            &self.config.secret,
            self.config.role,
            &nonce,
            &ack.responder_nonce,
        );
        if frame.header.session_id != keys.session_id {
            return Err(WireError::WrongSession {
                found: frame.header.session_id,
                expected: keys.session_id,
            });
        }
        if !ct_eq(&ack.proof.0, &keys.responder_proof.0) {
            return Err(WireError::Handshake {
                detail: "responder's proof does not match",
            });
        }
        let mut sealer = Sealer::new(keys.send, keys.session_id, 1);
        let confirm = HelloConfirm {
            proof: keys.initiator_proof,
        };
        let reply = sealer.seal_raw(
            MessageKind::HelloConfirm.code(),
            &payload::encode(&confirm)?,
        )?;
        let opener = Opener::new(
            keys.recv,
            keys.session_id,
            frame.header.sequence,
            std::mem::take(&mut self.decoder),
        );
        let peer = PeerInfo {
            role: ack.role,
            node_name: ack.node_name,
            protocol: ack.protocol,
            capabilities: ack.capabilities,
            session_id: keys.session_id,
        };
        self.state = State::Established {
            sealer,
            opener,
            peer: peer.clone(),
        };
        Ok(Inbound::Established {
            peer,
            reply: Some(reply),
        })
    }

    fn on_confirm(
        &mut self,
        frame: &RawFrame,
        keys: SessionKeys,
        peer: PeerInfo,
        hello_sequence: u64,
    ) -> Result<Inbound, WireError> {
        let mut opener = Opener::new(
            keys.recv,
            keys.session_id,
            hello_sequence,
            std::mem::take(&mut self.decoder),
        );
        opener.authenticate(frame)?;
        let confirm: HelloConfirm = payload::decode(&frame.payload)?;
        if !ct_eq(&confirm.proof.0, &keys.initiator_proof.0) {
            return Err(WireError::Handshake {
                detail: "initiator's proof does not match",
            });
        }
        self.state = State::Established {
            sealer: Sealer::new(keys.send, keys.session_id, 1),
            opener,
            peer: peer.clone(),
        };
        Ok(Inbound::Established { peer, reply: None })
    }
}

fn check_own_identity(config: &SessionConfig) -> Result<(), WireError> {
    check_identity(&config.node_name, &config.capabilities).map_err(|_| WireError::Handshake {
        detail: "this end's node name or capabilities are malformed",
    })
}

fn check_peer_identity(
    own_role: Role,
    peer_role: Role,
    protocol: &ProtocolVersion,
) -> Result<(), WireError> {
    if protocol.major != PROTOCOL_MAJOR {
        return Err(WireError::UnsupportedVersion {
            major: protocol.major,
            minor: protocol.minor,
        });
    }
    if peer_role != own_role.peer() {
        return Err(WireError::Handshake {
            detail: "peer has the same role as this end",
        });
    }
    Ok(())
}

/// The results of the frames one chunk completes; see [`Session::push`].
#[derive(Debug)]
pub struct Inbounds<'s, 'c> {
    session: &'s mut Session,
    input: &'c [u8],
    done: bool,
}

impl Iterator for Inbounds<'_, '_> {
    type Item = Result<Inbound, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.session.receive(&mut self.input) {
            Ok(Some(inbound)) => Some(Ok(inbound)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = matches!(self.session.state(), SessionState::Failed(_));
                Some(Err(error))
            }
        }
    }
}
