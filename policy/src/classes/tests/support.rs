//! Small helpers the class scenarios share.

pub const MS: u64 = 1_000_000;

pub fn ms(n: u64) -> u64 {
    n * MS
}
