//! Message kind codes carried in the frame header.
//!
//! Codes are grouped by purpose with gaps, so later minor versions can add
//! kinds next to their relatives; a code this build does not know is rejected
//! as [`super::WireError::UnknownKind`] after the frame is authenticated.
//! Each kind knows the minor version that introduced it
//! ([`MessageKind::since_minor`]): a sender checks the minor its peer
//! announced in the handshake before it sends a newer kind, so an older peer
//! is never asked something it cannot answer.

use std::fmt;

/// What a frame's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MessageKind {
    Hello = 1,
    HelloAck = 2,
    HelloConfirm = 3,
    Register = 16,
    Heartbeat = 17,
    HeartbeatReply = 18,
    SetPolicy = 19,
    Error = 20,
    ClassSettings = 21,
    LaunchJob = 32,
    CancelJob = 33,
    JobExited = 34,
    ReapRanks = 35,
    RanksReaped = 36,
    CheckProgram = 37,
    ProgramChecked = 38,
    ExpectJob = 39,
    SwitchSlice = 48,
    SliceSwitched = 49,
    UtilReport = 50,
    SwitchDivision = 51,
    DivisionSwitched = 52,
    FrameReport = 53,
    SliceSchedule = 54,
    FirstFrameAt = 55,
}

impl MessageKind {
    /// Every kind this build knows.
    pub const ALL: [MessageKind; 25] = [
        MessageKind::Hello,
        MessageKind::HelloAck,
        MessageKind::HelloConfirm,
        MessageKind::Register,
        MessageKind::Heartbeat,
        MessageKind::HeartbeatReply,
        MessageKind::SetPolicy,
        MessageKind::Error,
        MessageKind::ClassSettings,
        MessageKind::LaunchJob,
        MessageKind::CancelJob,
        MessageKind::JobExited,
        MessageKind::ReapRanks,
        MessageKind::RanksReaped,
        MessageKind::CheckProgram,
        MessageKind::ProgramChecked,
        MessageKind::ExpectJob,
        MessageKind::SwitchSlice,
        MessageKind::SliceSwitched,
        MessageKind::UtilReport,
        MessageKind::SwitchDivision,
        MessageKind::DivisionSwitched,
        MessageKind::FrameReport,
        MessageKind::SliceSchedule,
        MessageKind::FirstFrameAt,
    ];

    /// The header code.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The kind for a header code, if this build knows it.
    pub fn from_code(code: u16) -> Option<Self> {
        MessageKind::ALL
            .into_iter()
            .find(|kind| kind.code() == code)
    }

    /// The minor protocol version (of major [`super::PROTOCOL_MAJOR`]) that
    /// introduced this kind: a peer announcing an older minor does not know it.
    pub const fn since_minor(self) -> u8 {
        match self {
            MessageKind::ReapRanks
            | MessageKind::RanksReaped
            | MessageKind::CheckProgram
            | MessageKind::ProgramChecked => 1,
            MessageKind::ExpectJob => 2,
            MessageKind::ClassSettings
            | MessageKind::SwitchDivision
            | MessageKind::DivisionSwitched
            | MessageKind::FrameReport => 3,
            MessageKind::SliceSchedule => super::slices::SCHEDULE_SINCE_MINOR,
            MessageKind::FirstFrameAt => super::frame_reports::FIRST_FRAME_SINCE_MINOR,
            _ => 0,
        }
    }

    /// Whether a peer speaking `version` (same major) knows this kind.
    pub const fn known_to(self, version: super::ProtocolVersion) -> bool {
        version.minor >= self.since_minor()
    }

    /// Whether the session consumes this kind itself during the handshake.
    pub const fn is_handshake(self) -> bool {
        matches!(
            self,
            MessageKind::Hello | MessageKind::HelloAck | MessageKind::HelloConfirm
        )
    }

    /// A stable name for logs.
    pub const fn name(self) -> &'static str {
        match self {
            MessageKind::Hello => "Hello",
            MessageKind::HelloAck => "HelloAck",
            MessageKind::HelloConfirm => "HelloConfirm",
            MessageKind::Register => "Register",
            MessageKind::Heartbeat => "Heartbeat",
            MessageKind::HeartbeatReply => "HeartbeatReply",
            MessageKind::SetPolicy => "SetPolicy",
            MessageKind::Error => "Error",
            MessageKind::ClassSettings => "ClassSettings",
            MessageKind::LaunchJob => "LaunchJob",
            MessageKind::CancelJob => "CancelJob",
            MessageKind::JobExited => "JobExited",
            MessageKind::ReapRanks => "ReapRanks",
            MessageKind::RanksReaped => "RanksReaped",
            MessageKind::CheckProgram => "CheckProgram",
            MessageKind::ProgramChecked => "ProgramChecked",
            MessageKind::ExpectJob => "ExpectJob",
            MessageKind::SwitchSlice => "SwitchSlice",
            MessageKind::SliceSwitched => "SliceSwitched",
            MessageKind::UtilReport => "UtilReport",
            MessageKind::SwitchDivision => "SwitchDivision",
            MessageKind::DivisionSwitched => "DivisionSwitched",
            MessageKind::FrameReport => "FrameReport",
            MessageKind::SliceSchedule => "SliceSchedule",
            MessageKind::FirstFrameAt => "FirstFrameAt",
        }
    }
}

impl fmt::Display for MessageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        for kind in MessageKind::ALL {
            assert_eq!(MessageKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(MessageKind::from_code(0), None);
        assert_eq!(MessageKind::from_code(u16::MAX), None);
    }

    #[test]
    fn no_kind_is_newer_than_this_build_and_1_0_peers_miss_only_newer_kinds() {
        let current = crate::wire::ProtocolVersion::CURRENT;
        let first = crate::wire::ProtocolVersion { major: 1, minor: 0 };
        for kind in MessageKind::ALL {
            assert!(kind.known_to(current), "{kind} is newer than this build");
        }
        assert!(MessageKind::LaunchJob.known_to(first));
        assert!(!MessageKind::CheckProgram.known_to(first));
        assert!(!MessageKind::ReapRanks.known_to(first));
        let second = crate::wire::ProtocolVersion { major: 1, minor: 1 };
        assert!(MessageKind::ReapRanks.known_to(second));
        assert!(!MessageKind::ExpectJob.known_to(second));
        let third = crate::wire::ProtocolVersion { major: 1, minor: 2 };
        assert!(MessageKind::ExpectJob.known_to(third));
        for kind in [
            MessageKind::ClassSettings,
            MessageKind::SwitchDivision,
            MessageKind::DivisionSwitched,
            MessageKind::FrameReport,
        ] {
            assert!(!kind.known_to(third), "{kind} is 1.3");
        }
        let fourth = crate::wire::ProtocolVersion { major: 1, minor: 4 };
        assert!(!MessageKind::SliceSchedule.known_to(fourth));
        let sixth = crate::wire::ProtocolVersion { major: 1, minor: 6 };
        assert!(!MessageKind::FirstFrameAt.known_to(sixth));
    }
}
