//! Range checks of config values, with the message every daemon uses:
//! `KEY VALUE out of range LOW..=HIGH`.
use std::{fmt::Display, ops::RangeInclusive};

/// `Ok` if `value` lies in `range`, else the message naming `key`.
pub fn check<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: RangeInclusive<T>,
) -> Result<(), String> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{key} {value} out of range {}..={}",
            range.start(),
            range.end()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_the_message_names_key_value_and_range() {
        assert!(check("n", 1, 1..=3).is_ok() && check("n", 3, 1..=3).is_ok());
        assert_eq!(check("n", 4, 1..=3).unwrap_err(), "n 4 out of range 1..=3");
    }
}
