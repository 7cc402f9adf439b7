//! `guard profile list | show [NAME] [--resolved] | check FILE | trust [FILE]` and
//! `guard explain`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::{preview_vars, CliError};
use crate::policy::{self, Op, Request};
use crate::run::config;

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// The built-in profiles.
    List,
    /// Print a profile's source, or with --resolved the policy a run in the workspace would
    /// get: NAME (default: agent) layered over the configuration files found for the
    /// workspace, each file that contributed named.
    Show {
        /// A built-in name or a file; with --resolved, repeat to layer as -p does.
        name: Vec<String>,
        #[arg(long)]
        resolved: bool,
        /// The workspace to resolve {workspace} against and to look for .guard.toml from
        /// (default: the current directory).
        #[arg(short, long)]
        workspace: Option<PathBuf>,
        /// With --resolved: leave out the configuration files found without a flag.
        #[arg(long)]
        no_config: bool,
    },
    /// Parse and validate a profile file.
    Check { file: PathBuf },
    /// Trust a workspace's .guard.toml as it is now, so runs use it (default: the one found
    /// from the current directory). A file that changes is untrusted again.
    Trust {
        /// The file (default: the nearest .guard.toml up to the repository's root).
        file: Option<PathBuf>,
    },
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
            no_config,
        } => {
            if resolved {
                let vars = preview_vars(workspace)?;
                let found = if no_config {
                    config::ConfigFiles::default()
                } else {
                    config::discover(
                        &vars.workspace,
                        &vars.state,
                        config::user_dir(|k| std::env::var_os(k)),
                    )
                };
                let mut p = policy::load_layers(&name, &found.layers(), &vars)?;
                p.guard_files.extend(found.user_dir.clone());
                if let Some(path) = found.untrusted() {
                    writeln!(
                        out,
                        "# not used, not trusted: {} (hint: `guard profile trust {}`)",
                        path.display(),
                        path.display()
                    )
                    .map_err(CliError::Stdout)?;
                }
                write!(out, "{}", policy::render(&p)).map_err(CliError::Stdout)?;
                return Ok(0);
            }
            let [name] = name.as_slice() else {
                return Err(CliError::Usage(
                    "name one profile to show its source\nhint: add --resolved to see layers resolved".into(),
                ));
            };
            let name = name.clone();
            if let Some(src) = policy::builtin_source(&name) {
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
        ProfileCommand::Trust { file } => {
            let state = crate::journal::state_dir()?;
            let file = match file {
                Some(f) => f,
                None => {
                    let cwd = std::env::current_dir().map_err(|e| {
                        CliError::Usage(format!("cannot read the current directory: {e}"))
                    })?;
                    let found = config::discover(&cwd, &state, None);
                    found.workspace.map(|(p, _)| p).ok_or_else(|| {
                        CliError::Usage(format!(
                            "no {} here or above, up to the repository's root\nhint: name the file",
                            policy::WORKSPACE_CONFIG
                        ))
                    })?
                }
            };
            // A file that does not resolve is not worth trusting.
            policy::check(&file, &preview_vars(None)?)?;
            let sum = config::trust(&file, &state)
                .map_err(|e| CliError::Usage(format!("{e}: {}", source_text(&e))))?;
            writeln!(out, "trusted {} (sha256 {sum})", file.display()).map_err(CliError::Stdout)?;
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

fn source_text(e: &dyn std::error::Error) -> String {
    e.source().map(ToString::to_string).unwrap_or_default()
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

/// `guard explain`: how the profile judges an exec of `command`.
pub fn explain(
    profiles: &[String],
    workspace: Option<PathBuf>,
    command: &[OsString],
) -> Result<i32, CliError> {
    let vars = preview_vars(workspace)?;
    let specs = if profiles.is_empty() {
        vec!["agent".to_string()]
    } else {
        profiles.to_vec()
    };
    let p = policy::load(&specs, &vars)?;
    let exe = command
        .first()
        .and_then(|c| crate::launch::resolve_program(c, std::env::var_os("PATH").as_deref()).ok());
    let cwd = std::env::current_dir().ok();
    let req = Request {
        argv: command,
        exe: exe.as_deref(),
        cwd: cwd.as_deref(),
        ..Request::new(Op::Exec)
    };
    let v = policy::decide(&p, &req);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{action} (rule {rule}){reason}",
        action = v.action.as_str(),
        rule = v.rule,
        reason = v.reason.map(|r| format!(": {r}")).unwrap_or_default()
    )
    .map_err(CliError::Stdout)?;
    Ok(
        if matches!(v.action, policy::Action::Allow | policy::Action::Risky) {
            0
        } else {
            1
        },
    )
}
