//! `guard runs [--json]`: the recorded runs ([`History::runs`]), newest first, one line each.
//! The command is collapsed onto one line (a multi-line script reads as its words) and
//! shortened to fit; `--json` prints each run's `run.json` as one JSON line, whole.

use std::io::{IsTerminal, Write};

use clap::Args;

use super::CliError;
use crate::audit::escape_for_terminal;
use crate::run::History;

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// One JSON object per run and line (the run's metadata, command unshortened).
    #[arg(long)]
    pub json: bool,
}

/// Columns when stdout is not a terminal, or its width is unknown.
const DEFAULT_WIDTH: usize = 120;
/// The command keeps at least this many characters, however narrow the terminal.
const MIN_COMMAND: usize = 20;

pub fn run(args: RunsArgs) -> Result<i32, CliError> {
    let history = History::open()?;
    let runs = history.runs();
    let mut out = std::io::stdout().lock();
    if runs.is_empty() && !args.json {
        writeln!(out, "no runs recorded in {}", history.state_dir().display())
            .map_err(CliError::Stdout)?;
        return Ok(0);
    }
    let width = terminal_width();
    for r in runs {
        let line = match (&r.meta, args.json) {
            (Some(m), true) => serde_json::to_string(m).unwrap_or_default(),
            (None, true) => serde_json::json!({ "id": r.id, "state": "unknown" }).to_string(),
            (Some(m), false) => {
                let head = format!(
                    "{id}  {state:<9} {status:>4}  {profile:<8} {ws}  ",
                    id = r.id,
                    state = m.state,
                    status = m.status.map_or_else(|| "-".into(), |s| s.to_string()),
                    profile = escape_for_terminal(m.profile.as_bytes()),
                    ws = escape_for_terminal(m.workspace.as_os_str().as_encoded_bytes()),
                );
                let room = width.saturating_sub(head.chars().count()).max(MIN_COMMAND);
                head + &shorten(&m.command.join(" "), room)
            }
            (None, false) => format!("{}  (no metadata)", r.id),
        };
        writeln!(out, "{line}").map_err(CliError::Stdout)?;
    }
    Ok(0)
}

/// `COLUMNS`, else [`DEFAULT_WIDTH`]; on a terminal as in a pipe, so output does not change
/// shape when redirected, except that a terminal's `COLUMNS` is honoured.
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|_| std::io::stdout().is_terminal())
        .unwrap_or(DEFAULT_WIDTH)
}

/// `text` on one line: runs of whitespace (newlines included) become one space, control
/// characters are escaped, and what does not fit in `max` characters becomes `...`.
fn shorten(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let shown = escape_for_terminal(one_line.as_bytes());
    if shown.chars().count() <= max {
        return shown;
    }
    let keep = max.saturating_sub(3);
    shown.chars().take(keep).collect::<String>() + "..."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_collapse_onto_one_shortened_line() {
        let script = "sh -c set -e\n  cargo build\n\n  cargo test --all\tfoo\n";
        assert_eq!(
            shorten(script, 80),
            "sh -c set -e cargo build cargo test --all foo"
        );
        let short = shorten(script, 20);
        assert_eq!(short, "sh -c set -e carg...");
        assert_eq!(short.chars().count(), 20);
        assert_eq!(shorten("rm \u{1b}[2J", 20), "rm \\u{1b}[2J");
    }
}
