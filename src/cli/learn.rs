//! `guard learn -o FILE [-p BASE]... [-w DIR] -- CMD`: run CMD observed and write the profile
//! it needs on top of BASE ([`RunBuilder::learn`](crate::run::RunBuilder::learn)); this file
//! only parses and prints.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::{progress, CliError};
use crate::run::learn::LearnError;
use crate::run::{Profiles, Run};

#[derive(Debug, Args)]
pub struct LearnArgs {
    /// Where to write the learned profile (it extends the base profiles).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// The base profile to extend: a built-in name or a TOML file; repeat to layer (default:
    /// agent).
    #[arg(short, long = "profile", value_name = "BASE")]
    pub profile: Vec<String>,
    /// The workspace: writable, journaled (default: the current directory).
    #[arg(short, long)]
    pub workspace: Option<PathBuf>,
    /// The command and its arguments. It runs observed: nothing is refused, so run only
    /// commands you trust; its changes to the workspace are journaled (`guard rollback`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

pub fn run(args: LearnArgs) -> Result<i32, CliError> {
    let name = args
        .output
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "learned".into());
    let mut run = Run::builder(Profiles::new(args.profile))
        .forward_signals(true)
        .subreaper(true)
        .notices(|notice| eprintln!("guard: {notice}"))
        .rollback_progress(progress::reporter("rolling back"));
    if let Some(dir) = args.workspace {
        run = run.workspace(dir);
    }
    let learned = match run.learn(&args.command, &name) {
        Ok(l) => l,
        Err(LearnError::Run(e)) => return Err(e.into()),
        Err(e) => return Err(CliError::Learn(Box::new(e))),
    };
    std::fs::write(&args.output, &learned.profile).map_err(|source| CliError::Write {
        path: args.output.clone(),
        source,
    })?;
    for line in &learned.not_learned {
        eprintln!("guard: learn: {line}");
    }
    eprintln!(
        "guard: learned {} entr{} from run {} (exit status {}); wrote {}",
        learned.entries,
        if learned.entries == 1 { "y" } else { "ies" },
        learned.outcome.run_id,
        learned.outcome.status,
        args.output.display()
    );
    Ok(learned.outcome.exit_code())
}
