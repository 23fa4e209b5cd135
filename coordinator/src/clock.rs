//! The clocks the coordinator uses.

/// CLOCK_MONOTONIC in ns (the wire's and the eBPF programs' clock).
pub use cosched_proto::wire::monotonic_ns;

/// Wall-clock milliseconds since the Unix epoch (submission times).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
