//! `guard explain`: how a run under the profiles would treat operations, in words or JSON,
//! from [`Explainer`] (the library's): the verdict, the errno, the layer that decides (the
//! seccomp filter, the supervisor, Landlock) and the rule, then each layer the call meets.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::confine::features;
use crate::run::{Explainer, Explanation, Profiles, Question};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("operation").multiple(true).required(true)
    .args(["read", "write", "delete", "connect", "command"])))]
pub struct ExplainArgs {
    /// Profiles to apply, in order (built-in name or file; default: agent).
    #[arg(short, long = "profile")]
    pub profile: Vec<String>,
    /// The workspace to assume (default: the current directory).
    #[arg(short, long)]
    pub workspace: Option<PathBuf>,
    /// Leave out the configuration files found without a flag (the user's config.toml, the
    /// workspace's trusted .guard.toml), as `guard exec --no-config` does.
    #[arg(long)]
    pub no_config: bool,
    /// One JSON object per operation and line.
    #[arg(long)]
    pub json: bool,
    /// Reading PATH (a file's content, or a directory's entries).
    #[arg(long, value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Writing PATH (created if missing, as `> PATH` does).
    #[arg(long, value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// Removing PATH (a file, or an empty directory).
    #[arg(long, value_name = "PATH")]
    pub delete: Vec<PathBuf>,
    /// Connecting to HOST:PORT, IP:PORT, [IPv6]:PORT, /unix/socket or @abstract.
    #[arg(long, value_name = "TARGET")]
    pub connect: Vec<String>,
    /// Assume this Landlock ABI at most, as `guard exec --landlock-abi` does.
    #[arg(long, env = "GUARD_LANDLOCK_ABI", value_name = "N")]
    pub landlock_abi: Option<u8>,
    /// Assume no descriptor injection, as `guard exec --no-addfd` does.
    #[arg(long, env = "GUARD_NO_ADDFD", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::FalseyValueParser::new())]
    pub no_addfd: bool,
    /// Executing this command line (the program found on PATH as a shell finds it).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<OsString>,
}

/// Exit status when the profile refuses one of the operations.
const EXIT_REFUSED: i32 = 1;

pub fn run(args: ExplainArgs) -> Result<i32, CliError> {
    let options = features::Options {
        max_landlock_abi: args.landlock_abi,
        addfd: !args.no_addfd,
        ..features::Options::default()
    };
    let explainer = Explainer::new(
        Profiles::new(args.profile),
        args.workspace,
        &options,
        !args.no_config,
    )?;
    let mut questions: Vec<Question> = Vec::new();
    questions.extend(args.read.into_iter().map(Question::Read));
    questions.extend(args.write.into_iter().map(Question::Write));
    questions.extend(args.delete.into_iter().map(Question::Delete));
    questions.extend(args.connect.into_iter().map(Question::Connect));
    if !args.command.is_empty() {
        questions.push(Question::Exec(args.command));
    }
    let mut out = std::io::stdout().lock();
    let mut refused = false;
    for q in &questions {
        let e = explainer.explain(q);
        refused |= e.refused();
        let text = if args.json { json(&e) } else { words(&e) };
        writeln!(out, "{text}").map_err(CliError::Stdout)?;
    }
    Ok(if refused { EXIT_REFUSED } else { 0 })
}

/// `deny EACCES: write /etc/x (supervisor, rule fs.write-roots): why`, then the steps; `fails`
/// instead of the verdict when guard lets the call through and the kernel fails it.
fn words(e: &Explanation) -> String {
    let errno = e
        .errno
        .map(|n| format!(" {}", crate::audit::errno_name(n)))
        .unwrap_or_default();
    let rule = if e.rule.is_empty() {
        String::new()
    } else {
        format!(", rule {}", e.rule)
    };
    let reason = e
        .reason
        .as_ref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    // Allowed by guard but failed by the kernel (no such file): not a verdict of guard's.
    let verdict = if !e.refused() && e.errno.is_some() {
        "fails"
    } else {
        e.verdict.as_str()
    };
    let mut s = format!(
        "{verdict}{errno}: {} {} ({}{rule}){reason}",
        e.operation,
        crate::audit::escape_for_terminal(e.target.as_bytes()),
        e.layer.as_str(),
    );
    for step in &e.steps {
        s.push_str(&format!("\n  {}: {}", step.layer.as_str(), step.says));
    }
    if let Some(told) = &e.told {
        s.push_str(&format!("\n  the refused process is told: {told}"));
    }
    s
}

fn json(e: &Explanation) -> String {
    serde_json::json!({
        "operation": e.operation,
        "target": e.target,
        "verdict": e.recorded(),
        "errno": e.errno.map(crate::audit::errno_name),
        "layer": e.layer,
        "rule": e.rule,
        "reason": e.reason,
        "steps": e.steps,
        "told": e.told,
    })
    .to_string()
}
