//! `guard runs`: the recorded runs, newest first.

use std::io::Write;

use super::CliError;
use crate::journal;

pub fn run() -> Result<i32, CliError> {
    let state = journal::state_dir()?;
    let runs = journal::list_runs(&state);
    let mut out = std::io::stdout().lock();
    if runs.is_empty() {
        writeln!(out, "no runs recorded in {}", state.display()).map_err(CliError::Stdout)?;
        return Ok(0);
    }
    for r in runs {
        let line = match r.read_meta() {
            Ok(m) => format!(
                "{id}  {state:<7} {status:>4}  {profile:<8} {ws}  {cmd}",
                id = r.id,
                state = m.state,
                status = m
                    .status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "-".into()),
                profile = m.profile,
                ws = m.workspace.display(),
                cmd = m.command.join(" "),
            ),
            Err(_) => format!("{}  (no metadata)", r.id),
        };
        writeln!(out, "{line}").map_err(CliError::Stdout)?;
    }
    Ok(0)
}
