//! JSON payload encoding shared by every message type, with a per-type
//! semantic check on both sides (a peer's bad value is rejected on arrival,
//! and our own is refused before it is sent).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::WireError;
use super::header::MAX_PAYLOAD_LEN;
use super::kind::MessageKind;

/// A message body carried in one frame kind.
pub(crate) trait Payload: Serialize + DeserializeOwned {
    const KIND: MessageKind;

    /// Rules serde cannot express (ranges, relations between fields).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

pub(crate) fn encode<P: Payload>(payload: &P) -> Result<Vec<u8>, WireError> {
    payload
        .check()
        .map_err(|detail| WireError::payload_encode(P::KIND, detail))?;
    let bytes =
        serde_json::to_vec(payload).map_err(|error| WireError::payload_encode(P::KIND, error))?;
    if bytes.len() > MAX_PAYLOAD_LEN {
        return Err(WireError::payload_encode(
            P::KIND,
            format_args!(
                "{} bytes exceed the {MAX_PAYLOAD_LEN}-byte payload limit",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

pub(crate) fn decode<P: Payload>(bytes: &[u8]) -> Result<P, WireError> {
    let payload: P =
        serde_json::from_slice(bytes).map_err(|error| WireError::payload_decode(P::KIND, error))?;
    payload
        .check()
        .map_err(|detail| WireError::payload_decode(P::KIND, detail))?;
    Ok(payload)
}
