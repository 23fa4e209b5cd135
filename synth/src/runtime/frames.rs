//! What a rank does with each received frame: validate, count, and hand
//! it to the handshake or the engine. No I/O: replies rank 0 owes are queued
//! for the session to send.

use crate::engine::{Arrival, RankEngine};
use crate::header::{Header, Kind};
use crate::inbox::Filing;

use super::counters::Counters;

/// Start-handshake progress of one rank.
#[derive(Debug)]
pub struct Handshake {
    /// Rank 0 may start iterating (always true on rank 0 once it sent start).
    pub started: bool,
    /// Rank 0 has sent start; later hellos are answered with start again.
    pub start_sent: bool,
    /// Rank 0: which ranks' hellos arrived (index 0 unused).
    pub hello_from: Vec<bool>,
    /// Frames rank 0 owes in answer to hellos.
    pub replies: Vec<(usize, Kind)>,
    /// Rank 0: a rank whose hello carried another run length (rank, its stop iteration).
    pub length_mismatch: Option<(usize, u64)>,
}

impl Handshake {
    fn new(size: usize) -> Self {
        Self {
            started: size == 1,
            start_sent: false,
            hello_from: vec![false; size],
            replies: Vec::new(),
            length_mismatch: None,
        }
    }

    /// Ranks rank 0 has not heard from.
    pub fn missing_hellos(&self) -> Vec<usize> {
        (1..self.hello_from.len())
            .filter(|&rank| !self.hello_from[rank])
            .collect()
    }
}

pub struct RankState {
    pub engine: RankEngine,
    pub counters: Counters,
    pub handshake: Handshake,
    job_hash: u64,
}

impl RankState {
    pub fn new(engine: RankEngine, job_hash: u64) -> Self {
        Self {
            handshake: Handshake::new(engine.size()),
            engine,
            counters: Counters::default(),
            job_hash,
        }
    }

    /// Takes one frame as the socket delivered it; `stream_peer` is the
    /// rank whose TCP stream carried it (UDP: `None`).
    pub fn on_frame(&mut self, bytes: &[u8], stream_peer: Option<usize>) {
        self.counters.messages_received += 1;
        self.counters.bytes_received += bytes.len() as u64;
        let Ok(header) = Header::decode(bytes) else {
            self.counters.rejected += 1;
            return;
        };
        let src = header.src as usize;
        let foreign = header.job_hash != self.job_hash
            || src >= self.engine.size()
            || src == self.engine.rank()
            || stream_peer.is_some_and(|peer| peer != src);
        if foreign {
            self.counters.rejected += 1;
            return;
        }
        if header.kind.is_handshake() {
            self.counters.handshake_received += 1;
            self.on_handshake(&header);
            self.engine.observe_stop(header.stop_iter);
            return;
        }
        self.counters.data_received += 1;
        if self.engine.arrive(&header) != Arrival::Filed(Filing::Accepted) {
            self.counters.unexpected += 1;
        }
    }

    fn on_handshake(&mut self, header: &Header) {
        let is_root = self.engine.rank() == 0;
        let src = header.src as usize;
        match header.kind {
            Kind::Hello if is_root && self.handshake.start_sent => {
                // Its start was lost or crossed this hello: repeat it.
                self.handshake.replies.push((src, Kind::Start));
            }
            Kind::Hello if is_root => {
                if header.stop_iter != self.engine.stop().stop_iter() {
                    self.handshake.length_mismatch = Some((src, header.stop_iter));
                }
                self.handshake.hello_from[src] = true;
                self.handshake.replies.push((src, Kind::Ack));
            }
            Kind::Start if src == 0 => self.handshake.started = true,
            Kind::Ack if src == 0 => {}
            _ => self.counters.unexpected += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::job_hash;
    use crate::pattern::Pattern;
    use crate::stop::{NO_STOP, StopAgreement};

    const JOB: &str = "frames";

    fn state(rank: usize, size: usize) -> RankState {
        let engine = RankEngine::new(Pattern::Ring, rank, size, StopAgreement::open());
        RankState::new(engine, job_hash(JOB))
    }

    fn frame(kind: Kind, src: u32, iteration: u64, job: &str) -> Vec<u8> {
        let mut bytes = vec![0; 64];
        Header {
            kind,
            src,
            len: 64,
            job_hash: job_hash(job),
            iteration,
            stop_iter: NO_STOP,
        }
        .encode_into(&mut bytes)
        .unwrap();
        bytes
    }

    #[test]
    fn root_acks_hellos_then_answers_late_ones_with_start() {
        let mut root = state(0, 3);
        root.on_frame(&frame(Kind::Hello, 2, 0, JOB), None);
        assert_eq!(root.handshake.missing_hellos(), vec![1]);
        assert_eq!(root.handshake.replies, vec![(2, Kind::Ack)]);
        root.handshake.replies.clear();
        root.handshake.start_sent = true;
        root.on_frame(&frame(Kind::Hello, 2, 0, JOB), None);
        assert_eq!(root.handshake.replies, vec![(2, Kind::Start)]);
        assert_eq!(root.counters.handshake_received, 2);
        assert_eq!(root.counters.messages_received, 2);
    }

    #[test]
    fn root_notices_a_rank_with_another_run_length() {
        let engine = RankEngine::new(Pattern::Ring, 0, 2, StopAgreement::fixed(10));
        let mut root = RankState::new(engine, job_hash(JOB));
        root.on_frame(&frame(Kind::Hello, 1, 0, JOB), None);
        assert_eq!(root.handshake.length_mismatch, Some((1, NO_STOP)));
        assert_eq!(
            root.engine.stop().stop_iter(),
            9,
            "a hello must not shorten the run"
        );
        let mut open_root = state(0, 2);
        open_root.on_frame(&frame(Kind::Hello, 1, 0, JOB), None);
        assert_eq!(open_root.handshake.length_mismatch, None);
    }

    #[test]
    fn start_from_rank_zero_starts_a_member() {
        let mut member = state(1, 3);
        member.on_frame(&frame(Kind::Ack, 0, 0, JOB), None);
        assert!(!member.handshake.started);
        member.on_frame(&frame(Kind::Start, 2, 0, JOB), None);
        assert!(!member.handshake.started, "only rank 0 may start a job");
        member.on_frame(&frame(Kind::Start, 0, 0, JOB), None);
        assert!(member.handshake.started);
        assert_eq!(member.counters.unexpected, 1);
    }

    #[test]
    fn foreign_frames_are_counted_and_rejected() {
        let mut member = state(1, 3);
        member.on_frame(&frame(Kind::Data, 0, 0, "other-job"), None);
        member.on_frame(&frame(Kind::Data, 0, 0, JOB)[..30], None);
        let mut bad_magic = frame(Kind::Data, 0, 0, JOB);
        bad_magic[0] = 0;
        member.on_frame(&bad_magic, None);
        member.on_frame(&frame(Kind::Data, 9, 0, JOB), None);
        member.on_frame(&frame(Kind::Data, 1, 0, JOB), None);
        member.on_frame(&frame(Kind::Data, 0, 0, JOB), Some(2));
        assert_eq!(member.counters.rejected, 6);
        assert_eq!(member.counters.messages_received, 6);
        assert_eq!(member.counters.bytes_received, 5 * 64 + 30);
        assert_eq!(member.counters.data_received, 0);
        assert_eq!(member.engine.buffered(), 0);
    }

    #[test]
    fn pattern_frames_reach_the_engine() {
        let mut member = state(1, 3);
        member.on_frame(&frame(Kind::Data, 0, 0, JOB), Some(0));
        assert!(member.engine.receive_ready(Kind::Data, &[0]));
        member.on_frame(&frame(Kind::Data, 0, 0, JOB), Some(0));
        member.on_frame(&frame(Kind::Data, 2, 0, JOB), None);
        assert_eq!(member.counters.data_received, 3);
        assert_eq!(member.counters.unexpected, 2, "duplicate and wrong sender");
    }
}
