//! Running external commands with errors that say what ran and how it failed.

use std::process::{Command, Output, Stdio};

use anyhow::{Context as _, Result, bail};

/// How many trailing output lines a failure message quotes.
const TAIL_LINES: usize = 30;

/// The command line as a user would type it, for messages.
pub fn describe(command: &Command) -> String {
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    words.extend(command.get_args().map(|arg| {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            format!("'{}'", arg.replace('\'', r"'\''"))
        } else {
            arg.into_owned()
        }
    }));
    words.join(" ")
}

/// Runs a command with its output going to our terminal; fails on a non-zero exit.
pub fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .with_context(|| format!("could not start `{}`", describe(command)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(command));
    }
    Ok(())
}

/// Runs a command with its output captured and returns its stdout; on failure
/// the error quotes the end of its stderr and stdout.
pub fn capture(command: &mut Command) -> Result<String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not start `{}`", describe(command)))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}){}",
            describe(command),
            output.status,
            quoted_tail(&output)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Runs a command for a yes/no question (is it installed? does it work?):
/// its stdout when it succeeds, `None` when it fails or cannot start.
pub fn probe(command: &mut Command) -> Option<String> {
    let output = command.stdin(Stdio::null()).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The last lines of some text, for error messages.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn quoted_tail(output: &Output) -> String {
    let mut text = String::new();
    for stream in [&output.stderr, &output.stdout] {
        let stream = String::from_utf8_lossy(stream);
        let stream = tail(stream.trim_end(), TAIL_LINES);
        if !stream.is_empty() {
            text.push_str("\n  | ");
            text.push_str(&stream.replace('\n', "\n  | "));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_quotes_arguments_with_spaces() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo hi", "it's"]);
        assert_eq!(describe(&command), r"sh -c 'echo hi' 'it'\''s'");
    }

    #[test]
    fn capture_reports_the_failing_output() {
        let error = capture(Command::new("sh").args(["-c", "echo oops >&2; exit 3"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("exit status: 3"), "{error}");
        assert!(error.contains("| oops"), "{error}");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
