//! Command-line interface: clap definitions here, one file per subcommand.
//!
//! Every subcommand returns the process exit status or a [`CliError`], which `main` prints
//! (with its source chain and hint) and maps to status 125.

mod doctor;
mod exec;
mod log;
mod profile;
mod progress;
mod runs;
mod txn;

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use exec::ExecArgs;

/// guard: run commands and AI agents in a transactional, audited sandbox.
#[derive(Debug, Parser)]
#[command(name = "guard", version, about, long_about = None)]
pub struct Cli {
    /// Diagnostic output on stderr: error, warn, info, debug, trace.
    #[arg(long, global = true, env = "GUARD_LOG", default_value = "warn")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run CMD under a profile: Landlock, seccomp, judged calls, audit log.
    Exec(ExecArgs),
    /// List recorded runs, newest first.
    Runs,
    /// Show a run's audit log (the newest run by default).
    Log(log::LogArgs),
    /// What a run changed in its workspace: added, modified, deleted, metadata.
    Diff(txn::DiffArgs),
    /// Undo a run (or roll it back to a checkpoint) after it ended.
    Rollback(txn::RollbackArgs),
    /// Revert the newest rollback of a run (an undo of an undo redoes it).
    Undo(txn::UndoArgs),
    /// Restore workspaces left by runs whose guard was killed or crashed.
    Recover(txn::RecoverArgs),
    /// Delete the journals of older runs, keeping the newest.
    Prune(txn::PruneArgs),
    /// List, show or check profiles.
    Profile {
        #[command(subcommand)]
        command: profile::ProfileCommand,
    },
    /// How a profile judges an exec, without running anything.
    Explain {
        /// Profiles to apply, in order (built-in name or file).
        #[arg(short, long = "profile")]
        profile: Vec<String>,
        /// The workspace to assume (default: the current directory).
        #[arg(short, long)]
        workspace: Option<PathBuf>,
        /// The command line to judge.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Kernel features, what guard enforces here and what it degrades.
    Doctor {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Exec(Box<exec::ExecError>),
    #[error(transparent)]
    Policy(Box<crate::policy::PolicyError>),
    #[error(transparent)]
    State(#[from] crate::journal::StateError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error("{0}")]
    Usage(String),
    #[error("cannot write to stdout")]
    Stdout(#[source] std::io::Error),
}

impl From<exec::ExecError> for CliError {
    fn from(e: exec::ExecError) -> Self {
        CliError::Exec(Box::new(e))
    }
}

impl From<crate::policy::PolicyError> for CliError {
    fn from(e: crate::policy::PolicyError) -> Self {
        CliError::Policy(Box::new(e))
    }
}

impl CliError {
    /// The exit status for this error: 127 / 126 when the command cannot be found or executed
    /// (as shells and `env` report it), 125 for everything else guard could not do.
    pub fn exit_code(&self) -> i32 {
        use crate::launch::CommandError;
        let CliError::Exec(e) = self else {
            return crate::launch::EXIT_GUARD_ERROR;
        };
        match e.as_ref() {
            exec::ExecError::Command(CommandError::NotFound { .. }) => {
                crate::launch::EXIT_NOT_FOUND
            }
            exec::ExecError::Command(CommandError::NotExecutable { .. }) => {
                crate::launch::EXIT_NOT_EXECUTABLE
            }
            _ => crate::launch::EXIT_GUARD_ERROR,
        }
    }
}

/// Run the parsed command line; returns the exit status.
pub fn run(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Command::Exec(args) => exec::run(args),
        Command::Runs => runs::run(),
        Command::Log(args) => log::run(args),
        Command::Diff(args) => txn::diff(args),
        Command::Rollback(args) => txn::rollback(args),
        Command::Undo(args) => txn::undo(args),
        Command::Recover(args) => txn::recover(args),
        Command::Prune(args) => txn::prune(args),
        Command::Profile { command } => profile::run(command),
        Command::Explain {
            profile,
            workspace,
            command,
        } => profile::explain(&profile, workspace, &command),
        Command::Doctor { json } => doctor::run(json),
    }
}

/// The variables profiles expand, for commands that do not start a run.
pub(crate) fn preview_vars(workspace: Option<PathBuf>) -> Result<crate::policy::Vars, CliError> {
    let workspace = match workspace {
        Some(w) => w,
        None => std::env::current_dir()
            .map_err(|e| CliError::Usage(format!("cannot read the current directory: {e}")))?,
    };
    let workspace = std::fs::canonicalize(&workspace).unwrap_or(workspace);
    Ok(crate::policy::Vars {
        workspace,
        home: std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
        tmp: std::env::temp_dir().join("guard-RUN"),
        state: crate::journal::state_dir()?,
    })
}
