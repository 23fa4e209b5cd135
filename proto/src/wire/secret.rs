//! The cluster's shared secret and its text format in configs.
//!
//! Format (surrounding whitespace is ignored, so a secret file may end in a
//! newline):
//!
//! - `hex:<hex digits>` — an even number of hex digits, either case;
//! - `base64:<standard base64>` — RFC 4648 alphabet, `=` padding optional;
//! - `<hex digits>` — bare hex, same as `hex:`.
//!
//! The decoded secret must be [`MIN_SECRET_LEN`] (16) to [`MAX_SECRET_LEN`]
//! bytes; 32 random bytes (`openssl rand -hex 32`) is the recommendation.
//! Anything else is rejected, never silently used as raw text, so a typo
//! cannot turn into a weak key.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD_INDIFFERENT;
use serde::Deserialize;

use super::hex;

/// Fewest secret bytes accepted (128 bits).
pub const MIN_SECRET_LEN: usize = 16;
/// Most secret bytes accepted; longer keys add nothing to HMAC-SHA256.
pub const MAX_SECRET_LEN: usize = 1024;

/// Why a configured secret was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("shared secret is {len} bytes; at least {MIN_SECRET_LEN} are required")]
    TooShort { len: usize },
    #[error("shared secret is {len} bytes; at most {MAX_SECRET_LEN} are allowed")]
    TooLong { len: usize },
    #[error("shared secret is not valid {encoding}: {detail}")]
    BadEncoding {
        encoding: &'static str,
        detail: String,
    },
    #[error("cannot generate a secret: {detail}")]
    Rng { detail: String },
}

/// The shared secret every coordinator and agent of a cluster holds.
///
/// `Debug` never prints the bytes, and there is no `Serialize`, so the secret
/// cannot leak into logs or a dumped config by accident.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SharedSecret(Vec<u8>);

impl SharedSecret {
    /// Parses the config text format described in the module docs.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let text = text.trim();
        let bytes = if let Some(encoded) = text.strip_prefix("base64:") {
            STANDARD_NO_PAD_INDIFFERENT
                .decode(encoded.trim())
                .map_err(|error| SecretError::BadEncoding {
                    encoding: "base64",
                    detail: error.to_string(),
                })?
        } else {
            let encoded = text.strip_prefix("hex:").unwrap_or(text).trim();
            hex::decode(encoded).map_err(|detail| SecretError::BadEncoding {
                encoding: "hex",
                detail: detail.to_string(),
            })?
        };
        Self::from_bytes(bytes)
    }

    /// Uses raw bytes as the secret, checking their length.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, SecretError> {
        match bytes.len() {
            len if len < MIN_SECRET_LEN => Err(SecretError::TooShort { len }),
            len if len > MAX_SECRET_LEN => Err(SecretError::TooLong { len }),
            _ => Ok(SharedSecret(bytes)),
        }
    }

    /// A fresh 32-byte secret from the system's random generator, for
    /// `cosched`'s "make me a secret" command and for tests.
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(|error| SecretError::Rng {
            detail: error.to_string(),
        })?;
        Self::from_bytes(bytes)
    }

    /// The secret in the `hex:` config format, for writing a new secret file.
    pub fn to_config_text(&self) -> String {
        format!("hex:{}", hex::encode(&self.0))
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl FromStr for SharedSecret {
    type Err = SecretError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl TryFrom<String> for SharedSecret {
    type Error = SecretError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl fmt::Debug for SharedSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedSecret(<{} bytes redacted>)", self.0.len())
    }
}
