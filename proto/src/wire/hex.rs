//! Lowercase hex for the secret format and for nonces and proofs in JSON
//! payloads (readable in a packet capture, unlike arrays of numbers).

use std::fmt;

/// Why a hex string was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HexError {
    OddLength,
    NotHex { at: usize },
    WrongLength { expected: usize, found: usize },
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HexError::OddLength => f.write_str("odd number of hex digits"),
            HexError::NotHex { at } => write!(f, "character {at} is not a hex digit"),
            HexError::WrongLength { expected, found } => {
                write!(f, "expected {expected} bytes, found {found}")
            }
        }
    }
}

pub(crate) fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

pub(crate) fn decode(text: &str) -> Result<Vec<u8>, HexError> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(HexError::OddLength);
    }
    digits
        .chunks_exact(2)
        .enumerate()
        .map(|(index, pair)| {
            let high = digit(pair[0]).ok_or(HexError::NotHex { at: index * 2 })?;
            let low = digit(pair[1]).ok_or(HexError::NotHex { at: index * 2 + 1 })?;
            Ok(high << 4 | low)
        })
        .collect()
}

pub(crate) fn decode_array<const N: usize>(text: &str) -> Result<[u8; N], HexError> {
    if text.len() != N * 2 {
        return Err(HexError::WrongLength {
            expected: N,
            found: text.len() / 2,
        });
    }
    let bytes = decode(text)?;
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes);
    Ok(out)
}

fn digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Serde adapter for fixed-size byte arrays as hex strings.
pub(crate) mod fixed {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(crate) fn serialize<S: Serializer, const N: usize>(
        bytes: &[u8; N],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&super::encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>, const N: usize>(
        deserializer: D,
    ) -> Result<[u8; N], D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        super::decode_array(&text).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_junk() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&bytes)), Ok(bytes));
        assert_eq!(decode("ABcd"), Ok(vec![0xab, 0xcd]));
        assert_eq!(decode("abc"), Err(HexError::OddLength));
        assert_eq!(decode("zz"), Err(HexError::NotHex { at: 0 }));
        assert_eq!(decode("0é0"), Err(HexError::NotHex { at: 1 }));
        assert!(decode_array::<4>("0011").is_err());
    }
}
