//! Refusing unknown keys where serde's `deny_unknown_fields` does not reach:
//! the unit variants of internally tagged enums. `{"op": "status",
//! "verbose": true}` parses as `Status` with the extra key silently dropped,
//! so a misspelt or unsupported option would look accepted.
//!
//! Such a type derives its serde code as inherent functions
//! (`#[serde(remote = "Self")]`) and implements the traits through them:
//!
//! ```ignore
//! impl<'de> Deserialize<'de> for Request {
//!     fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
//!         strict::deserialize(deserializer, |value| Request::deserialize(value), |request| {
//!             Request::serialize(request, serde_json::value::Serializer)
//!         })
//!     }
//! }
//! ```
//!
//! [`deserialize`] parses the input with the derived code, serialises the
//! result again and refuses any key of the input (at any depth) that the
//! result does not have. It suits types whose serialised form holds every
//! field (no `skip_serializing_if`), as requests do.
use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::Value;

/// Deserialises through `derived` and refuses keys the value does not have
/// (see the module docs).
pub fn deserialize<'de, D, T>(
    deserializer: D,
    derived: impl FnOnce(&Value) -> Result<T, serde_json::Error>,
    serialize: impl FnOnce(&T) -> Result<Value, serde_json::Error>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let input = Value::deserialize(deserializer)?;
    let value = derived(&input).map_err(D::Error::custom)?;
    let known = serialize(&value).map_err(D::Error::custom)?;
    match unknown_key(&input, &known) {
        Some(path) => Err(D::Error::custom(format!("unknown field `{path}`"))),
        None => Ok(value),
    }
}

/// The first key path in `input` that `known` lacks.
fn unknown_key(input: &Value, known: &Value) -> Option<String> {
    match (input, known) {
        (Value::Object(input), Value::Object(known)) => {
            input.iter().find_map(|(key, value)| match known.get(key) {
                None => Some(key.clone()),
                Some(inner) => unknown_key(value, inner).map(|path| format!("{key}.{path}")),
            })
        }
        (Value::Array(input), Value::Array(known)) => input
            .iter()
            .zip(known)
            .find_map(|(value, inner)| unknown_key(value, inner)),
        _ => None,
    }
}

/// Test support for protocols built this way: every value round-trips
/// through JSON, and the same value with an extra key is refused naming it.
/// Panics (with the value) otherwise.
pub fn assert_round_trip_refusing_unknown_fields<T>(values: impl IntoIterator<Item = T>)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    for value in values {
        let mut json = serde_json::to_value(&value).unwrap();
        assert_eq!(serde_json::from_value::<T>(json.clone()).unwrap(), value);
        json["verbose"] = true.into();
        let error = serde_json::from_value::<T>(json).unwrap_err();
        assert!(
            error.to_string().contains("unknown field `verbose`"),
            "{value:?}: {error}"
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_checked_at_every_depth() {
        let known = json!({"op": "adopt", "sched": {"class": "idle"}, "pids": [{"a": 1}]});
        assert_eq!(unknown_key(&known, &known), None);
        let input = json!({"op": "adopt", "sched": {"class": "idle", "nice": 3}});
        assert_eq!(unknown_key(&input, &known).as_deref(), Some("sched.nice"));
        let input = json!({"op": "adopt", "pids": [{"a": 1, "b": 2}]});
        assert_eq!(unknown_key(&input, &known).as_deref(), Some("pids.b"));
        assert_eq!(
            unknown_key(&json!({"op": "adopt", "x": 1}), &known).as_deref(),
            Some("x")
        );
    }
}
