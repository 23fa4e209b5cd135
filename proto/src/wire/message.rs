//! The application messages a session carries after the handshake.

use super::classes::{ClassSettings, DivisionSwitched, SwitchDivision};
use super::error::WireError;
use super::frame_reports::{FirstFrameAt, FrameReport};
use super::jobs::{CancelJob, ExpectJob, JobExited, LaunchJob};
use super::kind::MessageKind;
use super::leftovers::{RanksReaped, ReapRanks};
use super::node::{ErrorReport, Heartbeat, HeartbeatReply, Register, SetPolicy};
use super::payload::{self, Payload};
use super::programs::{CheckProgram, ProgramChecked};
use super::slices::{SliceSchedule, SliceSwitched, SwitchSlice, UtilReport};

/// Declares [`Message`] from one list: each variant travels as the frame
/// kind of the same name and carries the body type given, so adding a
/// message is one line here (plus its kind number in `kind.rs`).
macro_rules! messages {
    ($($variant:ident($body:ty)),* $(,)?) => {
        /// Any post-handshake message, in either direction.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Message {
            $($variant($body),)*
        }

        impl Message {
            /// The frame kind this message travels as.
            pub fn kind(&self) -> MessageKind {
                match self {
                    $(Message::$variant(_) => <$body>::KIND,)*
                }
            }

            /// The payload bytes (JSON), after checking the message's own rules.
            pub fn encode_payload(&self) -> Result<Vec<u8>, WireError> {
                match self {
                    $(Message::$variant(body) => payload::encode(body),)*
                }
            }

            /// Decodes and checks a payload of `kind`. Handshake kinds are not
            /// messages: they are [`WireError::UnexpectedMessage`] here.
            pub fn decode_payload(kind: MessageKind, bytes: &[u8]) -> Result<Self, WireError> {
                Ok(match kind {
                    $(MessageKind::$variant => Message::$variant(payload::decode(bytes)?),)*
                    MessageKind::Hello | MessageKind::HelloAck | MessageKind::HelloConfirm => {
                        return Err(WireError::UnexpectedMessage {
                            kind,
                            state: "established",
                        });
                    }
                })
            }
        }

        $(impl From<$body> for Message {
            fn from(body: $body) -> Self {
                Message::$variant(body)
            }
        })*
    };
}

messages!(
    Register(Register),
    Heartbeat(Heartbeat),
    HeartbeatReply(HeartbeatReply),
    SetPolicy(SetPolicy),
    Error(ErrorReport),
    ClassSettings(ClassSettings),
    LaunchJob(LaunchJob),
    CancelJob(CancelJob),
    JobExited(JobExited),
    ReapRanks(ReapRanks),
    RanksReaped(RanksReaped),
    CheckProgram(CheckProgram),
    ProgramChecked(ProgramChecked),
    ExpectJob(ExpectJob),
    SwitchSlice(SwitchSlice),
    SliceSwitched(SliceSwitched),
    UtilReport(UtilReport),
    SwitchDivision(SwitchDivision),
    DivisionSwitched(DivisionSwitched),
    FrameReport(FrameReport),
    SliceSchedule(SliceSchedule),
    FirstFrameAt(FirstFrameAt),
);
