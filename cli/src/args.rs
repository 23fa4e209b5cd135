//! Parsing of the CLI's value arguments, with errors that say what is
//! expected.

use std::collections::BTreeMap;

/// `be` (best effort, the default) or `rt:<period_ns>:<frames>:<work_ns>`
/// (the syntax `cosched-synth --rt` shares).
pub use cosched_proto::class::parse_class;

/// `KEY=VALUE` pairs into an environment map.
pub fn parse_env(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(format!("bad --env {pair:?}: use KEY=VALUE")),
        })
        .collect()
}

/// The job's command and arguments: `--command` and the trailing words, or
/// the first trailing word as the command.
pub fn command_line(
    command: Option<String>,
    trailing: Vec<String>,
) -> Result<(String, Vec<String>), String> {
    match command {
        Some(command) => Ok((command, trailing)),
        None => {
            let mut words = trailing.into_iter();
            let command = words
                .next()
                .ok_or("no command: use --command CMD or `-- CMD ARGS...`")?;
            Ok((command, words.collect()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_pairs_need_a_key_and_an_equals_sign() {
        let env = parse_env(&["A=1".into(), "B=x=y".into()]).unwrap();
        assert_eq!(env["B"], "x=y");
        assert!(parse_env(&["A".into()]).is_err());
        assert!(parse_env(&["=1".into()]).is_err());
    }

    #[test]
    fn the_command_comes_from_the_flag_or_the_first_trailing_word() {
        assert_eq!(
            command_line(Some("/bin/a".into()), vec!["x".into()]),
            Ok(("/bin/a".into(), vec!["x".into()]))
        );
        assert_eq!(
            command_line(None, vec!["/bin/b".into(), "y".into()]),
            Ok(("/bin/b".into(), vec!["y".into()]))
        );
        assert!(command_line(None, vec![]).is_err());
    }
}
