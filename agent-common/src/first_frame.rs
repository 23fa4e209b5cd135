//! The first-frame gate of a real-time job (see docs/rt-frames.md).
//!
//! Under 1GS with admission control the coordinator picks the instant an RT
//! job's first frame starts (inside the job's start row, with room on both
//! sides, so every window ends with a margin). The agent publishes it in
//! the job's counter directory, next to the processes' frame counters, as
//! `<dir>/`[`FILE_NAME`]; `cosched_rt_init()` in the client library waits
//! for it:
//!
//! - **no file**: no gate, the first frame starts at once;
//! - a **pending** gate (`at_ns` 0): the agent was told the job's first
//!   frame will be gated; wait for the instant, at most `max_wait_ns` from
//!   the start of the wait, then start anyway;
//! - an **instant** (`at_ns` > 0, CLOCK_MONOTONIC ns): sleep until it (at
//!   once when it has passed), at most `max_wait_ns`.
//!
//! The agent replaces the file by renaming a complete new one over it, so a
//! reader sees the old or the new record, never a mix; readers copy the
//! bytes ([`FirstFrameGate::decode`]), they do not map the file.

/// The gate's file name inside the job's counter directory (no process's
/// counter, `<tgid>.frames`, can have it).
pub const FILE_NAME: &str = "first-frame";
/// First field of a gate record ("CSRTGATE" little-endian).
pub const MAGIC: u64 = u64::from_le_bytes(*b"CSRTGATE");
/// Layout version; a reader refuses others.
pub const VERSION: u32 = 1;
/// Bytes of one record, and of its file.
pub const SIZE: usize = 32;

/// The content of the gate file: native byte order (it never leaves the
/// machine), no implicit padding.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstFrameGate {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// [`SIZE`].
    pub size: u32,
    /// When the job's first frame starts (CLOCK_MONOTONIC ns of this
    /// machine); 0 while pending.
    pub at_ns: u64,
    /// The longest a process waits at the gate, from the start of its wait
    /// (ns): a gate that never opens does not keep a job from starting.
    pub max_wait_ns: u64,
}
const _: () = assert!(core::mem::size_of::<FirstFrameGate>() == SIZE);
const _: () = assert!(core::mem::align_of::<FirstFrameGate>() == 8);

/// Why a gate record was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateError {
    /// Fewer than [`SIZE`] bytes.
    Short(usize),
    BadMagic(u64),
    BadVersion(u32),
    BadSize(u32),
}

impl core::fmt::Display for GateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GateError::Short(n) => write!(f, "{n} bytes, not {SIZE}"),
            GateError::BadMagic(m) => write!(f, "magic {m:#x} is not a first-frame gate"),
            GateError::BadVersion(v) => write!(f, "version {v}, not {VERSION}"),
            GateError::BadSize(s) => write!(f, "size {s}, not {SIZE}"),
        }
    }
}

/// What a process does at the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateState {
    /// The instant is not known yet: look again (until the wait's bound).
    Pending,
    /// Start the first frame at this instant (CLOCK_MONOTONIC ns).
    At(u64),
}

impl FirstFrameGate {
    /// A gate whose instant is not known yet.
    pub const fn pending(max_wait_ns: u64) -> Self {
        Self::at(0, max_wait_ns)
    }

    /// A gate that opens at `at_ns` (0 means pending).
    pub const fn at(at_ns: u64, max_wait_ns: u64) -> Self {
        FirstFrameGate {
            magic: MAGIC,
            version: VERSION,
            size: SIZE as u32,
            at_ns,
            max_wait_ns,
        }
    }

    /// Pending, or the instant.
    pub const fn state(&self) -> GateState {
        match self.at_ns {
            0 => GateState::Pending,
            at => GateState::At(at),
        }
    }

    /// The file's bytes.
    pub fn encode(&self) -> [u8; SIZE] {
        let mut out = [0u8; SIZE];
        out[0..8].copy_from_slice(&self.magic.to_ne_bytes());
        out[8..12].copy_from_slice(&self.version.to_ne_bytes());
        out[12..16].copy_from_slice(&self.size.to_ne_bytes());
        out[16..24].copy_from_slice(&self.at_ns.to_ne_bytes());
        out[24..32].copy_from_slice(&self.max_wait_ns.to_ne_bytes());
        out
    }

    /// The record in `bytes` (a copy of the file), checked.
    pub fn decode(bytes: &[u8]) -> Result<Self, GateError> {
        if bytes.len() < SIZE {
            return Err(GateError::Short(bytes.len()));
        }
        let u64_at = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let gate = FirstFrameGate {
            magic: u64_at(0),
            version: u32_at(8),
            size: u32_at(12),
            at_ns: u64_at(16),
            max_wait_ns: u64_at(24),
        };
        if gate.magic != MAGIC {
            return Err(GateError::BadMagic(gate.magic));
        }
        if gate.version != VERSION {
            return Err(GateError::BadVersion(gate.version));
        }
        if gate.size != SIZE as u32 {
            return Err(GateError::BadSize(gate.size));
        }
        Ok(gate)
    }
}

/// What a process waiting at the gate does next, at `now_ns`, having
/// started to wait at `began_ns`: sleep until an instant (the gate's, or
/// the wait's bound if that comes first), look again (pending, bound not
/// reached), or go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateStep {
    /// Start the first frame now.
    Go,
    /// Sleep until this instant, then go.
    SleepUntil(u64),
    /// Pending: look at the file again after a short sleep.
    Poll,
}

/// The wait's decision for `gate` (`None`: no gate file, or one that
/// cannot be read as a gate: go at once).
pub fn step(gate: Option<&FirstFrameGate>, began_ns: u64, now_ns: u64) -> GateStep {
    let Some(gate) = gate else {
        return GateStep::Go;
    };
    let bound = began_ns.saturating_add(gate.max_wait_ns);
    match gate.state() {
        GateState::At(at) if at <= now_ns => GateStep::Go,
        GateState::At(at) => GateStep::SleepUntil(at.min(bound)),
        GateState::Pending if now_ns >= bound => GateStep::Go,
        GateState::Pending => GateStep::Poll,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_survives_its_own_bytes() {
        for gate in [FirstFrameGate::pending(5), FirstFrameGate::at(123, 7)] {
            assert_eq!(FirstFrameGate::decode(&gate.encode()), Ok(gate));
        }
        assert_eq!(FirstFrameGate::pending(5).state(), GateState::Pending);
        assert_eq!(FirstFrameGate::at(9, 5).state(), GateState::At(9));
    }

    #[test]
    fn a_short_foreign_or_newer_record_is_refused() {
        let good = FirstFrameGate::at(1, 2).encode();
        assert_eq!(
            FirstFrameGate::decode(&good[..31]),
            Err(GateError::Short(31))
        );
        let mut foreign = good;
        foreign[0] ^= 1;
        assert!(matches!(
            FirstFrameGate::decode(&foreign),
            Err(GateError::BadMagic(_))
        ));
        let mut newer = good;
        newer[8..12].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(
            FirstFrameGate::decode(&newer),
            Err(GateError::BadVersion(2))
        );
        let mut sized = good;
        sized[12..16].copy_from_slice(&64u32.to_ne_bytes());
        assert_eq!(FirstFrameGate::decode(&sized), Err(GateError::BadSize(64)));
    }

    #[test]
    fn without_a_gate_the_first_frame_starts_at_once() {
        assert_eq!(step(None, 100, 100), GateStep::Go);
    }

    #[test]
    fn a_future_instant_is_slept_to_and_a_past_one_goes_at_once() {
        let gate = FirstFrameGate::at(500, 1_000);
        assert_eq!(step(Some(&gate), 100, 200), GateStep::SleepUntil(500));
        assert_eq!(step(Some(&gate), 100, 500), GateStep::Go);
        assert_eq!(step(Some(&gate), 100, 900), GateStep::Go);
    }

    #[test]
    fn an_instant_beyond_the_wait_bound_is_cut_to_the_bound() {
        let gate = FirstFrameGate::at(10_000, 1_000);
        assert_eq!(step(Some(&gate), 100, 200), GateStep::SleepUntil(1_100));
    }

    #[test]
    fn a_pending_gate_is_polled_until_the_bound_then_given_up() {
        let gate = FirstFrameGate::pending(1_000);
        assert_eq!(step(Some(&gate), 100, 200), GateStep::Poll);
        assert_eq!(step(Some(&gate), 100, 1_099), GateStep::Poll);
        assert_eq!(step(Some(&gate), 100, 1_100), GateStep::Go);
    }
}
