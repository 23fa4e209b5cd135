//! How many datagrams the kernel dropped on one UDP socket.
//!
//! UDP loses frames silently when a receive buffer overflows; a rank would
//! then wait for a message that never comes. Reading the socket's drop
//! counter from /proc/net/udp{,6} (matched by socket inode) turns that
//! timeout into an explained one and lets results show lossy runs.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;

/// The kernel's drop count for `socket`, or `None` if it cannot be read.
pub fn socket_drops(socket: &impl AsRawFd) -> Option<u64> {
    let inode = fs::metadata(format!("/proc/self/fd/{}", socket.as_raw_fd()))
        .ok()?
        .ino();
    // The table is read in chunks while other sockets come and go, which can
    // skip a row; a few rereads make a miss very unlikely.
    (0..READ_ATTEMPTS).find_map(|_| {
        ["/proc/self/net/udp", "/proc/self/net/udp6"]
            .iter()
            .filter_map(|path| fs::read_to_string(path).ok())
            .find_map(|table| drops_for_inode(&table, inode))
    })
}

const READ_ATTEMPTS: usize = 5;

/// Finds the `drops` column of the row whose `inode` column is `inode` in
/// the text of /proc/net/udp (same layout for udp6).
pub fn drops_for_inode(table: &str, inode: u64) -> Option<u64> {
    const INODE_COLUMN: usize = 9;
    const DROPS_COLUMN: usize = 12;
    table.lines().skip(1).find_map(|line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let row_inode: u64 = columns.get(INODE_COLUMN)?.parse().ok()?;
        if row_inode != inode {
            return None;
        }
        columns.get(DROPS_COLUMN)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    const TABLE: &str = "\
   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 0100007F:1B58 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0
  124: 0100007F:1B59 00000000:0000 07 00000000:00000300 00:00000000 00000000     0        0 4343 2 0000000000000000 17
";

    #[test]
    fn finds_the_row_by_inode() {
        assert_eq!(drops_for_inode(TABLE, 4343), Some(17));
        assert_eq!(drops_for_inode(TABLE, 4242), Some(0));
        assert_eq!(drops_for_inode(TABLE, 1), None);
        assert_eq!(drops_for_inode("", 4242), None);
    }

    #[test]
    fn a_fresh_socket_has_no_drops() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(socket_drops(&socket), Some(0));
    }

    #[test]
    fn overflowing_the_buffer_is_counted() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let target = receiver.local_addr().unwrap();
        // Far more than any receive buffer holds, never read.
        for _ in 0..4096 {
            sender.send_to(&[0u8; 1400], target).unwrap();
        }
        assert!(socket_drops(&receiver).unwrap() > 0);
    }
}
