//! The shared secret's config format.

use cosched_proto::wire::{MIN_SECRET_LEN, SecretError, SharedSecret};

const HEX_32: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

#[test]
fn hex_with_and_without_prefix_is_the_same_secret() {
    let bare = SharedSecret::parse(HEX_32).unwrap();
    let prefixed = SharedSecret::parse(&format!("hex:{HEX_32}")).unwrap();
    let upper = SharedSecret::parse(&HEX_32.to_uppercase()).unwrap();
    assert_eq!(bare, prefixed);
    assert_eq!(bare, upper);
}

#[test]
fn base64_with_or_without_padding_is_accepted() {
    // 16 bytes 0..16 in standard base64.
    let padded = SharedSecret::parse("base64:AAECAwQFBgcICQoLDA0ODw==").unwrap();
    let unpadded = SharedSecret::parse("base64:AAECAwQFBgcICQoLDA0ODw").unwrap();
    let hex = SharedSecret::parse("hex:000102030405060708090a0b0c0d0e0f").unwrap();
    assert_eq!(padded, hex);
    assert_eq!(unpadded, hex);
}

#[test]
fn surrounding_whitespace_is_ignored() {
    let secret = SharedSecret::parse(&format!("  hex:{HEX_32}\n")).unwrap();
    assert_eq!(secret, SharedSecret::parse(HEX_32).unwrap());
}

#[test]
fn secrets_shorter_than_sixteen_bytes_are_rejected() {
    let fifteen = "00".repeat(MIN_SECRET_LEN - 1);
    assert_eq!(
        SharedSecret::parse(&fifteen),
        Err(SecretError::TooShort { len: 15 })
    );
    assert!(SharedSecret::parse(&"00".repeat(MIN_SECRET_LEN)).is_ok());
    assert_eq!(
        SharedSecret::parse(""),
        Err(SecretError::TooShort { len: 0 })
    );
    assert_eq!(
        SharedSecret::parse("base64:AAECAw=="),
        Err(SecretError::TooShort { len: 4 })
    );
}

#[test]
fn overlong_secrets_are_rejected() {
    assert_eq!(
        SharedSecret::parse(&"ab".repeat(1025)),
        Err(SecretError::TooLong { len: 1025 })
    );
}

#[test]
fn plain_text_and_bad_encodings_are_rejected() {
    for text in [
        "correct horse battery staple!",
        "hex:0g0102030405060708090a0b0c0d0e0f",
        "hex:0001020304050607080900a0b0c0d0e0f",
        "base64:not base64 at all!!!",
    ] {
        let error = SharedSecret::parse(text).unwrap_err();
        assert!(
            matches!(error, SecretError::BadEncoding { .. }),
            "{text:?} gave {error:?}"
        );
    }
}

#[test]
fn debug_output_redacts_the_bytes() {
    let secret = SharedSecret::parse(HEX_32).unwrap();
    let shown = format!("{secret:?}");
    assert!(!shown.contains("0102"), "{shown}");
    assert!(shown.contains("32 bytes"), "{shown}");
}

#[test]
fn generated_secret_round_trips_through_config_text() {
    let secret = SharedSecret::generate().unwrap();
    let text = secret.to_config_text();
    assert!(text.starts_with("hex:"));
    assert_eq!(SharedSecret::parse(&text).unwrap(), secret);
    assert_ne!(SharedSecret::generate().unwrap(), secret);
}

#[test]
fn secret_deserializes_from_a_config_string() {
    #[derive(Debug, serde::Deserialize)]
    struct Config {
        secret: SharedSecret,
    }
    let config: Config = serde_json::from_str(&format!(r#"{{"secret":"hex:{HEX_32}"}}"#)).unwrap();
    assert_eq!(config.secret, SharedSecret::parse(HEX_32).unwrap());
    let short = serde_json::from_str::<Config>(r#"{"secret":"hex:0011"}"#);
    assert!(short.unwrap_err().to_string().contains("at least 16"));
}
