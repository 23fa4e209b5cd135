//! Running totals that end up in the report.

use std::time::Duration;

use crate::header::Kind;
use crate::transport::tcp_mesh::MeshTraffic;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub messages_sent: u64,
    pub data_sent: u64,
    pub handshake_sent: u64,
    pub bytes_sent: u64,
    pub messages_received: u64,
    pub data_received: u64,
    pub handshake_received: u64,
    pub rejected: u64,
    pub unexpected: u64,
    pub bytes_received: u64,
    pub empty_polls: u64,
    /// Time inside receive steps of the measured window.
    pub wait: Duration,
}

impl Counters {
    pub fn count_sent(&mut self, kind: Kind, bytes: usize) {
        self.messages_sent += 1;
        self.bytes_sent += bytes as u64;
        if kind.is_handshake() {
            self.handshake_sent += 1;
        } else {
            self.data_sent += 1;
        }
    }

    /// Adds the hellos moved while the TCP mesh was built.
    pub fn count_mesh(&mut self, traffic: &MeshTraffic, msg_bytes: usize) {
        self.messages_sent += traffic.hellos_sent;
        self.handshake_sent += traffic.hellos_sent;
        self.bytes_sent += traffic.hellos_sent * msg_bytes as u64;
        self.messages_received += traffic.hellos_received + traffic.rejected;
        self.handshake_received += traffic.hellos_received;
        self.rejected += traffic.rejected;
        self.bytes_received += traffic.bytes_received;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sent_frames_are_split_by_kind() {
        let mut counters = Counters::default();
        counters.count_sent(Kind::Hello, 64);
        counters.count_sent(Kind::Data, 64);
        counters.count_sent(Kind::Reply, 64);
        assert_eq!(counters.messages_sent, 3);
        assert_eq!(counters.handshake_sent, 1);
        assert_eq!(counters.data_sent, 2);
        assert_eq!(counters.bytes_sent, 192);
    }

    #[test]
    fn mesh_traffic_counts_as_handshake() {
        let mut counters = Counters::default();
        let traffic = MeshTraffic {
            hellos_sent: 2,
            hellos_received: 1,
            rejected: 1,
            bytes_received: 100,
        };
        counters.count_mesh(&traffic, 50);
        assert_eq!(counters.messages_sent, 2);
        assert_eq!(counters.handshake_sent, 2);
        assert_eq!(counters.bytes_sent, 100);
        assert_eq!(counters.messages_received, 2);
        assert_eq!(counters.handshake_received, 1);
        assert_eq!(counters.rejected, 1);
        assert_eq!(counters.bytes_received, 100);
    }
}
