//! The application messages a session carries after the handshake.

use super::classes::{ClassSettings, DivisionSwitched, SwitchDivision};
use super::error::WireError;
use super::frame_reports::FrameReport;
use super::jobs::{CancelJob, ExpectJob, JobExited, LaunchJob};
use super::kind::MessageKind;
use super::leftovers::{RanksReaped, ReapRanks};
use super::node::{ErrorReport, Heartbeat, HeartbeatReply, Register, SetPolicy};
use super::payload::{self, Payload};
use super::programs::{CheckProgram, ProgramChecked};
use super::slices::{SliceSwitched, SwitchSlice, UtilReport};

/// Any post-handshake message, in either direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
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
}

impl Message {
    /// The frame kind this message travels as.
    pub fn kind(&self) -> MessageKind {
        match self {
            Message::Register(_) => Register::KIND,
            Message::Heartbeat(_) => Heartbeat::KIND,
            Message::HeartbeatReply(_) => HeartbeatReply::KIND,
            Message::SetPolicy(_) => SetPolicy::KIND,
            Message::Error(_) => ErrorReport::KIND,
            Message::ClassSettings(_) => ClassSettings::KIND,
            Message::LaunchJob(_) => LaunchJob::KIND,
            Message::CancelJob(_) => CancelJob::KIND,
            Message::JobExited(_) => JobExited::KIND,
            Message::ReapRanks(_) => ReapRanks::KIND,
            Message::RanksReaped(_) => RanksReaped::KIND,
            Message::CheckProgram(_) => CheckProgram::KIND,
            Message::ProgramChecked(_) => ProgramChecked::KIND,
            Message::ExpectJob(_) => ExpectJob::KIND,
            Message::SwitchSlice(_) => SwitchSlice::KIND,
            Message::SliceSwitched(_) => SliceSwitched::KIND,
            Message::UtilReport(_) => UtilReport::KIND,
            Message::SwitchDivision(_) => SwitchDivision::KIND,
            Message::DivisionSwitched(_) => DivisionSwitched::KIND,
            Message::FrameReport(_) => FrameReport::KIND,
        }
    }

    /// The payload bytes (JSON), after checking the message's own rules.
    pub fn encode_payload(&self) -> Result<Vec<u8>, WireError> {
        match self {
            Message::Register(body) => payload::encode(body),
            Message::Heartbeat(body) => payload::encode(body),
            Message::HeartbeatReply(body) => payload::encode(body),
            Message::SetPolicy(body) => payload::encode(body),
            Message::Error(body) => payload::encode(body),
            Message::ClassSettings(body) => payload::encode(body),
            Message::LaunchJob(body) => payload::encode(body),
            Message::CancelJob(body) => payload::encode(body),
            Message::JobExited(body) => payload::encode(body),
            Message::ReapRanks(body) => payload::encode(body),
            Message::RanksReaped(body) => payload::encode(body),
            Message::CheckProgram(body) => payload::encode(body),
            Message::ProgramChecked(body) => payload::encode(body),
            Message::ExpectJob(body) => payload::encode(body),
            Message::SwitchSlice(body) => payload::encode(body),
            Message::SliceSwitched(body) => payload::encode(body),
            Message::UtilReport(body) => payload::encode(body),
            Message::SwitchDivision(body) => payload::encode(body),
            Message::DivisionSwitched(body) => payload::encode(body),
            Message::FrameReport(body) => payload::encode(body),
        }
    }

    /// Decodes and checks a payload of `kind`. Handshake kinds are not
    /// messages: they are [`WireError::UnexpectedMessage`] here.
    pub fn decode_payload(kind: MessageKind, bytes: &[u8]) -> Result<Self, WireError> {
        Ok(match kind {
            MessageKind::Register => Message::Register(payload::decode(bytes)?),
            MessageKind::Heartbeat => Message::Heartbeat(payload::decode(bytes)?),
            MessageKind::HeartbeatReply => Message::HeartbeatReply(payload::decode(bytes)?),
            MessageKind::SetPolicy => Message::SetPolicy(payload::decode(bytes)?),
            MessageKind::Error => Message::Error(payload::decode(bytes)?),
            MessageKind::ClassSettings => Message::ClassSettings(payload::decode(bytes)?),
            MessageKind::LaunchJob => Message::LaunchJob(payload::decode(bytes)?),
            MessageKind::CancelJob => Message::CancelJob(payload::decode(bytes)?),
            MessageKind::JobExited => Message::JobExited(payload::decode(bytes)?),
            MessageKind::ReapRanks => Message::ReapRanks(payload::decode(bytes)?),
            MessageKind::RanksReaped => Message::RanksReaped(payload::decode(bytes)?),
            MessageKind::CheckProgram => Message::CheckProgram(payload::decode(bytes)?),
            MessageKind::ProgramChecked => Message::ProgramChecked(payload::decode(bytes)?),
            MessageKind::ExpectJob => Message::ExpectJob(payload::decode(bytes)?),
            MessageKind::SwitchSlice => Message::SwitchSlice(payload::decode(bytes)?),
            MessageKind::SliceSwitched => Message::SliceSwitched(payload::decode(bytes)?),
            MessageKind::UtilReport => Message::UtilReport(payload::decode(bytes)?),
            MessageKind::SwitchDivision => Message::SwitchDivision(payload::decode(bytes)?),
            MessageKind::DivisionSwitched => Message::DivisionSwitched(payload::decode(bytes)?),
            MessageKind::FrameReport => Message::FrameReport(payload::decode(bytes)?),
            MessageKind::Hello | MessageKind::HelloAck | MessageKind::HelloConfirm => {
                return Err(WireError::UnexpectedMessage {
                    kind,
                    state: "established",
                });
            }
        })
    }
}

macro_rules! message_from_body {
    ($($variant:ident($body:ty)),* $(,)?) => {
        $(impl From<$body> for Message {
            fn from(body: $body) -> Self {
                Message::$variant(body)
            }
        })*
    };
}

message_from_body!(
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
);
