//! Message kind codes carried in the frame header.
//!
//! Codes are grouped by purpose with gaps, so later minor versions can add
//! kinds next to their relatives; a code this build does not know is rejected
//! as [`super::WireError::UnknownKind`] after the frame is authenticated.

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
    LaunchJob = 32,
    CancelJob = 33,
    JobExited = 34,
    SwitchSlice = 48,
    SliceSwitched = 49,
    UtilReport = 50,
}

impl MessageKind {
    /// Every kind this build knows.
    pub const ALL: [MessageKind; 14] = [
        MessageKind::Hello,
        MessageKind::HelloAck,
        MessageKind::HelloConfirm,
        MessageKind::Register,
        MessageKind::Heartbeat,
        MessageKind::HeartbeatReply,
        MessageKind::SetPolicy,
        MessageKind::Error,
        MessageKind::LaunchJob,
        MessageKind::CancelJob,
        MessageKind::JobExited,
        MessageKind::SwitchSlice,
        MessageKind::SliceSwitched,
        MessageKind::UtilReport,
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
            MessageKind::LaunchJob => "LaunchJob",
            MessageKind::CancelJob => "CancelJob",
            MessageKind::JobExited => "JobExited",
            MessageKind::SwitchSlice => "SwitchSlice",
            MessageKind::SliceSwitched => "SliceSwitched",
            MessageKind::UtilReport => "UtilReport",
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
}
