//! `guard profile list | show NAME [--resolved] | check FILE`.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::{preview_vars, CliError};
use crate::policy;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// The built-in profiles.
    List,
    /// Print a profile's source, or with --resolved the policy it resolves to.
    Show {
        name: String,
        #[arg(long)]
        resolved: bool,
        /// The workspace to resolve {workspace} against (default: the current directory).
        #[arg(short, long)]
        workspace: Option<PathBuf>,
    },
    /// Parse and validate a profile file.
    Check { file: PathBuf },
}

pub fn run(cmd: ProfileCommand) -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    match cmd {
        ProfileCommand::List => {
            for name in policy::builtin_names() {
                let desc = policy::builtin_source(name)
                    .and_then(description)
                    .unwrap_or_default();
                writeln!(out, "{name:<10} {desc}").map_err(CliError::Stdout)?;
            }
        }
        ProfileCommand::Show {
            name,
            resolved,
            workspace,
        } => {
            if resolved {
                let p = policy::load(&[name], &preview_vars(workspace)?)?;
                write!(out, "{}", policy::render(&p)).map_err(CliError::Stdout)?;
            } else if let Some(src) = policy::builtin_source(&name) {
                write!(out, "{src}").map_err(CliError::Stdout)?;
            } else {
                let text = std::fs::read_to_string(&name).map_err(|e| {
                    CliError::Usage(format!(
                        "no built-in profile or file named {name}: {e}\nhint: `guard profile list` shows the built-in names"
                    ))
                })?;
                write!(out, "{text}").map_err(CliError::Stdout)?;
            }
        }
        ProfileCommand::Check { file } => {
            let p = policy::check(&file, &preview_vars(None)?)?;
            writeln!(
                out,
                "{}: ok (profile {}, {} rules)",
                file.display(),
                p.name,
                p.rules.len()
            )
            .map_err(CliError::Stdout)?;
        }
    }
    Ok(0)
}

/// The `description = "..."` line of a profile source.
fn description(src: &str) -> Option<String> {
    src.lines().find_map(|l| {
        let l = l.trim();
        let rest = l
            .strip_prefix("description")?
            .trim_start()
            .strip_prefix('=')?
            .trim();
        Some(rest.trim_matches('"').to_string())
    })
}
