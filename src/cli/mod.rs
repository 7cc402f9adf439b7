//! Command-line interface: clap definitions here, one file per subcommand.
//!
//! Every subcommand returns the process exit status or a [`CliError`], which `main` prints
//! (with its source chain and hint) and maps to status 125.

mod conventions;
mod diff;
mod doctor;
mod exec;
mod explain;
mod learn;
mod log;
mod profile;
mod progress;
mod report;
mod runs;
mod txn;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use conventions::init_diagnostics;
pub use exec::ExecArgs;

/// The exit statuses, listed under `guard --help`.
const EXIT_STATUS_HELP: &str = "\
Exit status:
  N        guard exec, learn: the command's own status (128+N when signal N ended it)
  120      guard exec: the run was stopped by policy (on-deny = kill, --atomic)
  125      guard itself failed: usage, profile, setup, state directory
  126      guard exec, learn: the command cannot be executed
  127      guard exec, learn: the command was not found
  1        guard log --verify: a hash chain does not hold;
           guard explain: the profile would refuse an operation;
           guard doctor: guard runs here, degraded (2: it cannot run here)
  0        everything else that succeeded";

/// guard: run commands and AI agents in a transactional, audited sandbox.
#[derive(Debug, Parser)]
#[command(
    name = "guard",
    version = env!("GUARD_VERSION"),
    about,
    long_about = None,
    after_help = EXIT_STATUS_HELP
)]
pub struct Cli {
    /// Diagnostic output on stderr: error, warn, info, debug, trace.
    #[arg(long, global = true, env = "GUARD_LOG", default_value = "warn")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

/// `guard exec ...` alone: the global options and the one subcommand. See [`Cli::parse_args`].
#[derive(Debug, Parser)]
#[command(name = "guard")]
struct ExecOnly {
    #[arg(long, global = true, env = "GUARD_LOG", default_value = "warn")]
    log_level: String,
    #[command(subcommand)]
    command: ExecOnlyCommand,
}

#[derive(Debug, Subcommand)]
enum ExecOnlyCommand {
    Exec(ExecArgs),
}

impl Cli {
    /// The command line of this process, parsed. clap builds every argument of every
    /// subcommand before it looks at one (about 0.1 ms of each `guard exec` here, a few
    /// percent of its start-up), so a command line that starts with `exec` is parsed first
    /// by a parser that knows that subcommand alone. Whatever it does not accept as a run
    /// (`--help`, `--version`, a usage error) goes to the whole parser, so what the user
    /// sees is the whole parser's; what it accepts, the whole parser parses alike (the
    /// same derive of [`ExecArgs`] and the same global option).
    pub fn parse_args() -> Result<Cli, clap::Error> {
        Cli::parse_args_from(std::env::args_os())
    }

    /// [`Cli::parse_args`] of `args` (`args[0]` is the program).
    pub fn parse_args_from<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        if let Some(cli) = plain_exec(&args, |name| std::env::var_os(name).is_some()) {
            return Ok(cli);
        }
        if args.get(1).is_some_and(|a| a == "exec") {
            if let Ok(ExecOnly {
                log_level,
                command: ExecOnlyCommand::Exec(exec),
            }) = ExecOnly::try_parse_from(&args)
            {
                return Ok(Cli {
                    log_level,
                    command: Command::Exec(exec),
                });
            }
        }
        Cli::try_parse_from(args)
    }
}

/// `guard exec` with only the options a run is usually started with, taken without clap:
/// building even [`ExecOnly`]'s parser cost some 80 µs of every start (the arguments' help
/// texts, the value parsers, clap's own tables), the command line's share of a start's time
/// that could go. It takes `-p`/`--profile`, `-w`/`--workspace`, `--audit-log`, `--summary`
/// and `--audit-otlp` with their value as the next argument or after `=` (a long option),
/// the flags `--atomic`, `--verify`, `--keep-caps`, `--no-config`, `--no-sync-wake-up` and
/// `--no-addfd` once each, then the command after `--` or from its first argument that is no
/// option.
/// Anything else, and any command line while a variable an option can come from
/// (`env_set`) is set, is `None`: the parsers behind it decide, and a test holds every
/// command line this one takes to the whole parser's reading of it.
fn plain_exec(args: &[std::ffi::OsString], env_set: impl Fn(&str) -> bool) -> Option<Cli> {
    if args.get(1).is_none_or(|a| a != "exec") || EXEC_ENV.iter().copied().any(env_set) {
        return None;
    }
    let mut a = ExecArgs {
        profile: Vec::new(),
        workspace: None,
        audit_log: None,
        summary: None,
        audit_otlp: None,
        atomic: false,
        verify: false,
        landlock_abi: None,
        no_sync_wake_up: false,
        no_addfd: false,
        keep_caps: false,
        no_config: false,
        command: Vec::new(),
    };
    let mut i = 2;
    while let Some(arg) = args.get(i) {
        i += 1;
        let bytes = std::os::unix::ffi::OsStrExt::as_bytes(arg.as_os_str());
        if bytes == b"--" {
            a.command = args[i..].to_vec();
            break;
        }
        if !bytes.starts_with(b"-") {
            // The command's first word.
            a.command = args[i - 1..].to_vec();
            break;
        }
        // An option that is no UTF-8 is for clap to refuse.
        let text = arg.to_str()?;
        let flag = match text {
            "--atomic" => Some(&mut a.atomic),
            "--verify" => Some(&mut a.verify),
            "--keep-caps" => Some(&mut a.keep_caps),
            "--no-config" => Some(&mut a.no_config),
            "--no-sync-wake-up" => Some(&mut a.no_sync_wake_up),
            "--no-addfd" => Some(&mut a.no_addfd),
            _ => None,
        };
        if let Some(flag) = flag {
            if std::mem::replace(flag, true) {
                return None; // given twice: clap's error
            }
            continue;
        }
        let (name, inline) = match text.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (text, None),
        };
        let value: &str = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i - 1)?.to_str()?
            }
        };
        if value.is_empty() || (inline.is_none() && value.starts_with('-')) {
            return None;
        }
        match name {
            "-p" | "--profile" => a.profile.push(value.to_owned()),
            "-w" | "--workspace" if a.workspace.is_none() => a.workspace = Some(value.into()),
            "--audit-log" if a.audit_log.is_none() => a.audit_log = Some(value.into()),
            "--summary" if a.summary.is_none() => a.summary = Some(value.into()),
            "--audit-otlp" if a.audit_otlp.is_none() => a.audit_otlp = Some(value.to_owned()),
            _ => return None,
        }
    }
    if a.command.is_empty() {
        return None;
    }
    Some(Cli {
        log_level: "warn".to_owned(),
        command: Command::Exec(a),
    })
}

/// The variables an option of `guard exec` can come from (clap's `env`): while one is set,
/// [`plain_exec`] leaves the command line to clap. A test holds the list to `ExecArgs`.
const EXEC_ENV: &[&str] = &[
    "GUARD_LOG",
    "GUARD_LANDLOCK_ABI",
    "GUARD_NO_SYNC_WAKE_UP",
    "GUARD_NO_ADDFD",
];

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run CMD under a profile: Landlock, seccomp, judged calls, audit log.
    Exec(ExecArgs),
    /// Run CMD observed and write the profile it needs on top of the base profiles.
    ///
    /// CMD runs once with nothing refused (its changes to the workspace are journaled, as in
    /// any run), every call guard judges and every file it opens for reading recorded. Then
    /// each call is judged again against the base, and what the base refuses becomes an entry
    /// of the profile: read and write roots (widened to a directory, with {workspace}, {home}
    /// and {tmp}), net.connect targets, names for net.resolve, allow rules for a command line
    /// or a change a rule or protect refused. Each entry is commented with the first call that
    /// needed it. Use it on top of the same base: guard exec -p BASE -p FILE -- CMD.
    ///
    /// Learn sees only this run: not another input, a warm cache or another answer from the
    /// network; not what the seccomp deny list refuses (no profile allows it); not the
    /// environment variables the base removes. A refused bind is noted, not learned. The
    /// configuration files found without a flag are not used: the profile extends the
    /// bases named with -p.
    Learn(learn::LearnArgs),
    /// List recorded runs, newest first, one line each.
    Runs(runs::RunsArgs),
    /// Show a run's audit log (the newest run by default).
    Log(log::LogArgs),
    /// A run's refused calls for CI: Markdown, GitHub annotations and job summary, GitLab.
    Report(report::ReportArgs),
    /// What a run changed in its workspace: added, modified, deleted, metadata.
    Diff(diff::DiffArgs),
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
    /// How a run would treat a read, write, delete, connect or exec, and which layer decides.
    ///
    /// Nothing is run: the seccomp filter, the supervisor and Landlock are asked as a run
    /// under the same profiles (and the configuration files found for the workspace, unless
    /// --no-config) would ask them. For a refusal it also prints the line the refused process
    /// would be told on its stderr.
    ///
    /// The answer is for the filesystem as it is now (a run judges each call as it finds
    /// it) and for the call a shell makes: --write is an open that creates and truncates,
    /// --delete an unlink (rmdir for a directory), a connect by name is a lookup of the name
    /// (as a run judges it) and then a connect to its first address. Renames, links, metadata
    /// changes and binds are not asked; neither are the run's private {tmp} (named after the
    /// run) nor whether anything answers on the network.
    Explain(explain::ExplainArgs),
    /// Kernel features, what guard enforces here and what it degrades.
    Doctor {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// Print the man page (guard.1), or write every page (guard.1, guard-exec.1, ...) to DIR.
    Man {
        /// Write guard.1 and one page per subcommand to DIR.
        #[arg(short, long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Exec(Box<crate::run::RunError>),
    #[error(transparent)]
    Policy(Box<crate::policy::PolicyError>),
    #[error(transparent)]
    State(#[from] crate::journal::StateError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error(transparent)]
    History(Box<crate::run::HistoryError>),
    #[error(transparent)]
    Learn(Box<crate::run::learn::LearnError>),
    #[error("{0}")]
    Usage(String),
    #[error("cannot write to stdout")]
    Stdout(#[source] std::io::Error),
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<crate::run::RunError> for CliError {
    fn from(e: crate::run::RunError) -> Self {
        CliError::Exec(Box::new(e))
    }
}

impl From<crate::policy::PolicyError> for CliError {
    fn from(e: crate::policy::PolicyError) -> Self {
        CliError::Policy(Box::new(e))
    }
}

impl From<crate::run::HistoryError> for CliError {
    fn from(e: crate::run::HistoryError) -> Self {
        CliError::History(Box::new(e))
    }
}

impl CliError {
    /// Whether this is a write to a closed pipe on stdout (`guard log | head -1`): not an
    /// error, the reader has seen enough.
    pub fn is_broken_pipe(&self) -> bool {
        let io = match self {
            CliError::Stdout(e) => e,
            CliError::Audit(crate::audit::AuditError::Output { source }) => source,
            _ => return false,
        };
        io.kind() == std::io::ErrorKind::BrokenPipe
    }

    /// The exit status for this error: 127 / 126 when the command cannot be found or executed
    /// (as shells and `env` report it), 125 for everything else guard could not do.
    pub fn exit_code(&self) -> i32 {
        use crate::launch::CommandError;
        let CliError::Exec(e) = self else {
            return crate::launch::EXIT_GUARD_ERROR;
        };
        match e.as_ref() {
            crate::run::RunError::Command(CommandError::NotFound { .. }) => {
                crate::launch::EXIT_NOT_FOUND
            }
            crate::run::RunError::Command(CommandError::NotExecutable { .. }) => {
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
        Command::Learn(args) => learn::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Log(args) => log::run(args),
        Command::Report(args) => report::run(args),
        Command::Diff(args) => diff::run(args),
        Command::Rollback(args) => txn::rollback(args),
        Command::Undo(args) => txn::undo(args),
        Command::Recover(args) => txn::recover(args),
        Command::Prune(args) => txn::prune(args),
        Command::Profile { command } => profile::run(command),
        Command::Explain(args) => explain::run(args),
        Command::Doctor { json } => doctor::run(json),
        Command::Completions { shell } => conventions::completions(shell),
        Command::Man { out_dir } => conventions::man(out_dir.as_deref()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Both parsers' result, as text (the parsed types have no `PartialEq`).
    fn both(args: &[&str]) -> (String, String) {
        let whole = Cli::try_parse_from(args).map(|c| format!("{c:?}"));
        let fast = Cli::parse_args_from(args).map(|c| format!("{c:?}"));
        match (whole, fast) {
            (Ok(w), Ok(f)) => (w, f),
            (Err(w), Err(f)) => (w.to_string(), f.to_string()),
            (w, f) => panic!("{args:?}: whole parser {w:?}, fast one {f:?}"),
        }
    }

    #[test]
    fn an_exec_command_line_parses_as_the_whole_parser_parses_it() {
        for args in [
            &["guard", "exec", "--", "true"][..],
            &["guard", "exec", "true", "-x", "--y"],
            &[
                "guard", "exec", "-p", "agent", "-p", "x.toml", "--atomic", "--", "sh", "-c",
                "exit 3",
            ],
            &["guard", "exec", "--atomic", "--verify", "--", "true"],
            &[
                "guard",
                "exec",
                "--log-level",
                "debug",
                "-w",
                "/tmp",
                "--",
                "make",
                "test",
            ],
            &["guard", "--log-level", "debug", "exec", "--", "true"],
            &["guard", "exec", "--no-such-option", "--", "true"],
            &["guard", "exec"],
            &["guard", "exec", "--help"],
            &["guard", "exec", "-h"],
            &["guard", "exec", "--version"],
            &["guard", "exec", "-p"],
            &["guard", "runs"],
            &["guard", "--version"],
        ] {
            let (whole, fast) = both(args);
            assert_eq!(whole, fast, "{args:?}");
        }
        // The fast parser does take the runs (not the whole parser behind it every time).
        for args in [
            &["guard", "exec", "--", "true"][..],
            &[
                "guard", "exec", "-p", "agent", "--atomic", "--", "sh", "-c", "exit 3",
            ],
            &["guard", "exec", "--log-level", "debug", "--", "true"],
        ] {
            assert!(ExecOnly::try_parse_from(args).is_ok(), "{args:?}");
        }
        assert!(ExecOnly::try_parse_from(["guard", "exec", "--help"]).is_err());
    }

    fn plain(args: &[&str]) -> Option<String> {
        let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        plain_exec(&args, |_| false).map(|c| format!("{c:?}"))
    }

    /// Every command line the parser without clap takes, it reads as the whole parser does;
    /// the rest it leaves to the parsers behind it.
    #[test]
    fn the_plain_exec_parser_reads_what_it_takes_as_clap_does() {
        let taken: &[&[&str]] = &[
            &["guard", "exec", "--", "true"],
            &["guard", "exec", "true"],
            &["guard", "exec", "true", "-x", "--y", "--", "z"],
            &["guard", "exec", "--", "--help", "-p"],
            &[
                "guard", "exec", "-p", "a", "-p", "b.toml", "--atomic", "sh", "-c",
            ],
            &[
                "guard",
                "exec",
                "--profile",
                "strict",
                "--profile=ci",
                "--",
                "make",
            ],
            &[
                "guard",
                "exec",
                "-w",
                "/tmp/w",
                "--no-config",
                "--keep-caps",
                "make",
                "-j2",
            ],
            &[
                "guard",
                "exec",
                "--workspace=/w",
                "--audit-log",
                "/a.jsonl",
                "--",
                "x",
            ],
            &[
                "guard",
                "exec",
                "--summary",
                "s.json",
                "--audit-otlp=http://127.0.0.1:4318",
                "x",
            ],
            &[
                "guard",
                "exec",
                "--no-sync-wake-up",
                "--no-addfd",
                "--",
                "x",
            ],
            &["guard", "exec", "--profile=a=b", "x"],
        ];
        for args in taken {
            let whole = Cli::try_parse_from(*args).map(|c| format!("{c:?}"));
            assert_eq!(plain(args).as_ref(), whole.as_ref().ok(), "{args:?}");
        }
        let left: &[&[&str]] = &[
            &["guard", "exec"],
            &["guard", "exec", "--"],
            &["guard", "exec", "--help"],
            &["guard", "exec", "-h", "--", "x"],
            &["guard", "exec", "--version"],
            &["guard", "exec", "-p"],
            &["guard", "exec", "-p", "--", "x"],
            &["guard", "exec", "-p", "-x", "y"],
            &["guard", "exec", "-pagent", "x"],
            &["guard", "exec", "-p=agent", "x"],
            &["guard", "exec", "--profile=", "x"],
            &["guard", "exec", "--atomic", "--atomic", "x"],
            &["guard", "exec", "--verify", "--verify", "x"],
            &["guard", "exec", "-w", "a", "-w", "b", "x"],
            &["guard", "exec", "--log-level", "debug", "--", "x"],
            &["guard", "exec", "--landlock-abi", "3", "--", "x"],
            &["guard", "exec", "--no-such-option", "--", "x"],
            &["guard", "exec", "-", "x"],
            &["guard", "--log-level", "debug", "exec", "--", "x"],
            &["guard", "runs"],
        ];
        for args in left {
            assert_eq!(plain(args), None, "{args:?}");
        }
        // Words that are no UTF-8: the command's first one is taken, one like an option not.
        use std::os::unix::ffi::OsStrExt;
        let word = std::ffi::OsStr::from_bytes(b"caf\xe9").to_os_string();
        let dash = std::ffi::OsStr::from_bytes(b"-\xe9").to_os_string();
        let with = |w: &std::ffi::OsString| -> Vec<std::ffi::OsString> {
            vec!["guard".into(), "exec".into(), w.clone(), "x".into()]
        };
        let whole = Cli::try_parse_from(with(&word)).map(|c| format!("{c:?}"));
        assert_eq!(
            plain_exec(&with(&word), |_| false).map(|c| format!("{c:?}")),
            whole.ok()
        );
        assert!(plain_exec(&with(&dash), |_| false).is_none());
        // An option's variable set: clap reads it.
        let args: Vec<std::ffi::OsString> = ["guard", "exec", "--", "x"]
            .iter()
            .map(Into::into)
            .collect();
        for var in EXEC_ENV {
            assert!(plain_exec(&args, |v| v == *var).is_none(), "{var}");
        }
        // Those are all there are: an option read from a new variable must be listed.
        use clap::CommandFactory;
        let cmd = ExecOnly::command();
        let exec = cmd.find_subcommand("exec").expect("exec");
        let mut from_env: Vec<String> = cmd
            .get_arguments()
            .chain(exec.get_arguments())
            .filter_map(|a| Some(a.get_env()?.to_string_lossy().into_owned()))
            .collect();
        from_env.sort();
        from_env.dedup();
        let mut listed: Vec<String> = EXEC_ENV.iter().map(|v| v.to_string()).collect();
        listed.sort();
        assert_eq!(from_env, listed);
    }
}
