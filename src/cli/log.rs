//! `guard log [RUN] [--denied] [--json] [--follow]`: read a run's audit log.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::audit;
use crate::journal;

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The run id (default: the newest run), or a path to an audit log file.
    pub run: Option<String>,
    /// Only denials and kills.
    #[arg(long)]
    pub denied: bool,
    /// Print the raw JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events until the run ends.
    #[arg(long)]
    pub follow: bool,
}

fn log_path(run: Option<&str>) -> Result<PathBuf, CliError> {
    if let Some(r) = run {
        let p = PathBuf::from(r);
        if p.is_file() {
            return Ok(p);
        }
    }
    let state = journal::state_dir()?;
    let runs = journal::list_runs(&state);
    let found = match run {
        None => runs.first(),
        Some(id) => runs.iter().find(|r| r.id == id || r.id.starts_with(id)),
    };
    match found {
        Some(r) => Ok(r.audit_log()),
        None => Err(CliError::Usage(match run {
            Some(id) => format!(
                "no run {id} in {}\nhint: `guard runs` lists them",
                state.display()
            ),
            None => format!("no runs recorded in {}", state.display()),
        })),
    }
}

pub fn run(args: LogArgs) -> Result<i32, CliError> {
    let path = log_path(args.run.as_deref())?;
    let filter = audit::Filter {
        denied_only: args.denied,
    };
    let mut out = std::io::stdout().lock();
    if args.follow {
        if args.json {
            audit::follow_with(&path, filter, &|| false, &mut |v| writeln!(out, "{v}"))?;
        } else {
            audit::follow(&path, filter, &mut out, &|| false)?;
        }
        return Ok(0);
    }
    for event in audit::read_events(&path)? {
        if !filter.matches(&event) {
            continue;
        }
        let line = if args.json {
            event.to_string()
        } else {
            audit::format_human(&event)
        };
        writeln!(out, "{line}").map_err(CliError::Stdout)?;
    }
    Ok(0)
}
