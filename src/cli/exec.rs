//! `guard exec`: turn the arguments into a [`Run`](crate::Run) and print what the run says.
//! The run itself lives in the library (`src/run/`); this file only parses and prints.
//!
//! The CLI is the whole process, so it opts into the process-wide settings a library user
//! would not want: signals sent to guard are forwarded to the command, and guard is a child
//! subreaper that ends every orphan of the tree.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

use super::{progress, CliError};
use crate::run::{Profiles, Run, RunError, DEFAULT_KEEP_RUNS};

/// The arguments of `guard exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Profile to apply: a built-in name or a TOML file; repeat to layer (default: agent).
    #[arg(short, long = "profile")]
    pub profile: Vec<String>,
    /// The workspace: writable, journaled (default: the current directory).
    #[arg(short, long)]
    pub workspace: Option<PathBuf>,
    /// Also write the audit log to FILE (it is always kept in the run directory).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Write the run summary (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Also send every audit event to an OpenTelemetry collector (OTLP/HTTP logs), e.g.
    /// http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else
    /// $OTEL_EXPORTER_OTLP_ENDPOINT). Never slows the command: what cannot be sent is counted.
    #[arg(long, value_name = "URL")]
    pub audit_otlp: Option<String>,
    /// Roll the whole run back if the command fails or a call is denied.
    #[arg(long)]
    pub atomic: bool,
    /// Digest the whole workspace (names, types, modes, contents) before the command starts and
    /// after a rollback during the run, and say when they differ (without it, a rollback checks
    /// each path it restored; the digest reads every file twice)
    #[arg(long)]
    pub verify: bool,
    /// Use at most this Landlock ABI version (to test degraded kernels).
    #[arg(long, env = "GUARD_LANDLOCK_ABI", value_name = "N")]
    pub landlock_abi: Option<u8>,
    /// Do not use SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP even when the kernel has it.
    #[arg(long, env = "GUARD_NO_SYNC_WAKE_UP", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::FalseyValueParser::new())]
    pub no_sync_wake_up: bool,
    /// Do not inject descriptors with SECCOMP_IOCTL_NOTIF_ADDFD even when the kernel can: judged
    /// write-opens are then continued (raceable; to test older kernels).
    #[arg(long, env = "GUARD_NO_ADDFD", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::FalseyValueParser::new())]
    pub no_addfd: bool,
    /// Keep the capabilities of a root caller (dropped by default).
    #[arg(long)]
    pub keep_caps: bool,
    /// Use no configuration file found without a flag ($XDG_CONFIG_HOME/guard/config.toml,
    /// the workspace's .guard.toml): only the profiles named with -p (default: agent).
    #[arg(long)]
    pub no_config: bool,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Run `guard exec`. Returns the exit status guard should end with.
pub fn run(args: ExecArgs) -> Result<i32, CliError> {
    Ok(exec(args)?)
}

fn exec(args: ExecArgs) -> Result<i32, RunError> {
    let keep_runs = std::env::var("GUARD_KEEP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KEEP_RUNS);
    let mut run = Run::builder(Profiles::new(args.profile))
        .atomic(args.atomic)
        .verify(args.verify)
        .sync_wake_up(!args.no_sync_wake_up)
        .addfd(!args.no_addfd)
        .keep_caps(args.keep_caps)
        .config_files(!args.no_config)
        .keep_runs(Some(keep_runs))
        .forward_signals(true)
        .subreaper(true)
        .notices(|notice| eprintln!("guard: {notice}"))
        .rollback_progress(progress::reporter("rolling back"));
    if let Some(abi) = args.landlock_abi {
        run = run.max_landlock_abi(abi);
    }
    if let Some(dir) = args.workspace {
        run = run.workspace(dir);
    }
    if let Some(file) = args.audit_log {
        run = run.audit_log(file);
    }
    if let Some(url) = args.audit_otlp {
        run = run.audit_otlp(url);
    }
    if let Some(file) = args.summary {
        run = run.summary(file);
    }
    let running = run.spawn(&args.command)?;
    // guard's own descriptors (a pidfd per cached caller, kept directories, a pinned
    // descriptor per call in hand) count against its soft limit, not the command's: the
    // command was forked with the limit guard was given, and keeps it.
    if let Err(e) = crate::sys::process::raise_open_file_limit() {
        tracing::debug!("cannot raise guard's open-file limit: {e}");
    }
    let outcome = running.wait()?;
    if let Some(line) = outcome.refusals_line() {
        eprintln!("guard: {line}");
    }
    Ok(outcome.exit_code())
}
