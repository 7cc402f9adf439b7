//! `guard exec`: resolve the profile, prepare the confinement, start the command under it, run
//! the supervisor, wait, and write the audit log and summary.
//!
//! The order matters and follows `docs/launch.md`: everything that can fail with a clear message
//! happens before the fork; the process is single-threaded when it forks; threads (audit
//! writer, supervisor) start after.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;

use crate::audit::{self, AuditWriter, Event};
use crate::confine;
use crate::journal::{self, Journal, RunDir, RunMeta};
use crate::launch::{self, LaunchSpec, Signals, EXIT_POLICY_STOP};
use crate::policy::{self, Vars};
use crate::supervisor::{Inject, Setup, Shared, Supervisor};
use crate::sys;

/// How many runs' journals are kept (newest first) unless GUARD_KEEP_RUNS says otherwise.
const DEFAULT_KEEP_RUNS: usize = 20;

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
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot use workspace {path}\nhint: pass an existing directory with -w")]
    Workspace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the private temporary directory {path}")]
    Tmp {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the state directory {state} lies inside the write root {root}: the sandbox could rewrite its own journal\nhint: set GUARD_STATE_DIR to a directory outside {root}")]
    StateInsideWriteRoot { state: PathBuf, root: PathBuf },
    #[error(transparent)]
    Command(#[from] launch::CommandError),
    #[error(transparent)]
    Confine(#[from] confine::ConfineError),
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    #[error("cannot set up guard's process: {what}")]
    Setup {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("seccomp user notification is not available: {0}\nhint: guard needs Linux 5.0 or newer with CONFIG_SECCOMP_FILTER")]
    NoNotify(#[source] io::Error),
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    #[error(transparent)]
    Policy(Box<policy::PolicyError>),
    #[error(transparent)]
    State(#[from] journal::StateError),
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

impl From<policy::PolicyError> for ExecError {
    fn from(e: policy::PolicyError) -> Self {
        ExecError::Policy(Box::new(e))
    }
}

/// Run `guard exec`. Returns the exit status guard should end with.
pub fn run(args: ExecArgs) -> Result<i32, super::CliError> {
    Ok(exec(args)?)
}

fn exec(args: ExecArgs) -> Result<i32, ExecError> {
    let started = Instant::now();
    // 1. Workspace, state and run directories, private tmp.
    let ws_arg = match &args.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|source| ExecError::Workspace {
            path: ".".into(),
            source,
        })?,
    };
    let workspace = std::fs::canonicalize(&ws_arg)
        .and_then(|p| {
            if p.is_dir() {
                Ok(p)
            } else {
                Err(io::Error::from_raw_os_error(libc::ENOTDIR))
            }
        })
        .map_err(|source| ExecError::Workspace {
            path: ws_arg.clone(),
            source,
        })?;
    let state = journal::state_dir()?;
    std::fs::create_dir_all(&state).map_err(|source| journal::StateError::Create {
        path: state.clone(),
        source,
    })?;
    let state = std::fs::canonicalize(&state).unwrap_or(state);
    let run_dir = RunDir::create(&state)?;
    let tmp = std::env::temp_dir().join(format!("guard-{}", run_dir.id));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(|source| ExecError::Tmp {
                path: tmp.clone(),
                source,
            })?;
    }
    let result = exec_in(&args, &workspace, &state, &run_dir, &tmp, started);
    if result.is_err() {
        // Nothing of the command ran: this run is not one to recover, nor a default for
        // `guard log`/`diff`/`rollback`.
        let command: Vec<String> = args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        run_dir.record_failed_start(&workspace, &command, &args.profile.join(","));
        run_dir.mark_inactive(&state);
    }
    if let Err(e) = std::fs::remove_dir_all(&tmp) {
        tracing::warn!(
            "cannot remove the private temporary directory {}: {e}",
            tmp.display()
        );
    }
    result
}

fn cstring(bytes: Vec<u8>) -> CString {
    // Interior NULs cannot come from argv or the environment; replace defensively.
    CString::new(bytes).unwrap_or_else(|e| {
        let mut b = e.into_vec();
        b.retain(|&c| c != 0);
        CString::new(b).unwrap_or_default()
    })
}

#[allow(clippy::too_many_lines)]
fn exec_in(
    args: &ExecArgs,
    workspace: &Path,
    state: &Path,
    run_dir: &RunDir,
    tmp: &Path,
    started: Instant,
) -> Result<i32, ExecError> {
    // 2. The policy.
    let vars = Vars {
        workspace: workspace.to_path_buf(),
        home: std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from),
        tmp: tmp.to_path_buf(),
        state: state.to_path_buf(),
    };
    let specs = if args.profile.is_empty() {
        vec!["agent".to_string()]
    } else {
        args.profile.clone()
    };
    let mut policy = policy::load(&specs, &vars)?;
    if policy.net.dns {
        policy.net.connect.extend(crate::supervisor::nameservers());
    }
    for root in &policy.fs.write {
        if state.starts_with(root) {
            return Err(ExecError::StateInsideWriteRoot {
                state: state.to_path_buf(),
                root: root.clone(),
            });
        }
    }
    if args.atomic {
        // Any denial ends the run, any failure too, and both restore the run's start.
        policy.transaction.on_deny = policy::OnDeny::Kill;
        policy.transaction.on_failure = policy::OnFailure::Rollback;
    }
    let policy = Arc::new(policy);
    let otlp = audit::OtlpConfig::detect(args.audit_otlp.as_deref(), &run_dir.id, &|name| {
        std::env::var(name).ok()
    })
    .map_err(audit::AuditError::from)?;

    for id in journal::interrupted_runs(state, workspace) {
        eprintln!(
            "guard: warning: run {id} on this workspace was interrupted (guard died) and its changes are still in place\nhint: `guard recover -w {}` restores the workspace to where that run started",
            workspace.display()
        );
    }
    // When a rollback may happen on its own, record the tree's digest to prove it afterwards.
    let may_roll_back = policy.transaction.on_deny != policy::OnDeny::Errno
        || policy.transaction.on_failure == policy::OnFailure::Rollback;
    let digest_before = if may_roll_back {
        journal::tree_digest(workspace, &policy.transaction.exclude).ok()
    } else {
        None
    };
    // The journal: every change inside the workspace is recorded before it happens.
    let mut journal = Journal::create(
        &run_dir.path,
        workspace,
        &policy.transaction,
        policy.transaction.fsync,
    )?;
    let run_start = journal.checkpoint("run start", None)?;

    // 3. The command and its environment.
    let program = launch::resolve_program(&args.command[0], std::env::var_os("PATH").as_deref())?;
    let extra = [
        ("TMPDIR".to_string(), tmp.as_os_str().to_os_string()),
        ("GUARD_RUN".to_string(), OsString::from(&run_dir.id)),
        (
            "GUARD_WORKSPACE".to_string(),
            workspace.as_os_str().to_os_string(),
        ),
    ];
    let envp = launch::sanitize_env(std::env::vars_os(), &policy.env, &extra);
    let argv: Vec<CString> = args
        .command
        .iter()
        .map(|a| cstring(a.clone().into_vec()))
        .collect();

    // 4. The confinement, built in the parent.
    let sizes = sys::notify::notif_sizes().map_err(ExecError::NoNotify)?;
    let prepared = confine::landlock::prepare(&policy, args.landlock_abi)?;
    let filter = confine::seccomp::build(&confine::seccomp::FilterSpec::for_policy(&policy))?;
    let filter: Vec<libc::sock_filter> = filter.into_iter().map(libc::sock_filter::from).collect();

    let start_time = audit::Timestamp::now();
    let meta = RunMeta {
        v: 1,
        id: run_dir.id.clone(),
        workspace: workspace.to_path_buf(),
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        profile: policy.name.clone(),
        started: audit::Timestamp::now().to_string(),
        guard_pid: std::process::id(),
        state: "running".into(),
        status: None,
    };
    run_dir.write_meta(&meta)?;

    // 5. Signals and subreaper, then fork while single-threaded.
    let mut signals = Signals::block().map_err(|source| ExecError::Setup {
        what: "block signals",
        source,
    })?;
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| ExecError::Setup {
        what: "become a child subreaper",
        source: e.into(),
    })?;
    let spec = LaunchSpec {
        program: cstring(program.as_os_str().as_bytes().to_vec()),
        argv,
        envp,
        filter,
        landlock: prepared.ruleset,
        drop_caps: !args.keep_caps,
    };
    let mut spawned = launch::spawn(spec)?;

    // 6. Threads: audit writer, then the supervisor.
    let mut sinks = vec![run_dir.audit_log()];
    if let Some(extra) = &args.audit_log {
        sinks.push(extra.clone());
    }
    let writer =
        match AuditWriter::start_with(sinks, run_dir.id.clone(), audit::Limits::default(), otlp) {
            Ok(w) => w,
            Err(e) => {
                launch::kill_tree();
                return Err(e.into());
            }
        };
    let listener_fd = spawned.listener.take().expect("spawn returns the listener");
    let listener = sys::Listener::new(listener_fd, sizes);
    let mut enforced = prepared.report.enforced.clone();
    let mut degraded = prepared.report.degraded.clone();
    if policy.mode == policy::Mode::Enforce {
        enforced.push("seccomp-deny-list".to_string());
    }
    enforced.push("seccomp-notify".to_string());
    if args.no_sync_wake_up {
        degraded.push((
            "sync-wake-up".to_string(),
            "switched off by --no-sync-wake-up".to_string(),
        ));
    } else {
        match listener.set_sync_wake_up() {
            Ok(()) => enforced.push("sync-wake-up".to_string()),
            Err(e) => degraded.push((
                "sync-wake-up".to_string(),
                format!("the kernel refused it ({e}); needs Linux 6.6"),
            )),
        }
    }
    let inject = if args.no_addfd {
        degraded.push((
            "addfd".to_string(),
            "switched off by --no-addfd: judged write-opens are continued, not performed by guard"
                .to_string(),
        ));
        Inject::Continue
    } else {
        match listener.probe_addfd() {
            (true, true) => {
                enforced.push("emulation-addfd-send".to_string());
                Inject::AddFdSend
            }
            (true, false) => {
                enforced.push("emulation-addfd".to_string());
                degraded.push((
                    "addfd-send".to_string(),
                    "the kernel lacks SECCOMP_ADDFD_FLAG_SEND (Linux 5.14): injection and answer take two ioctls".to_string(),
                ));
                Inject::AddFd
            }
            _ => {
                degraded.push((
                    "addfd".to_string(),
                    "the kernel lacks SECCOMP_IOCTL_NOTIF_ADDFD (Linux 5.9): judged write-opens are continued".to_string(),
                ));
                Inject::Continue
            }
        }
    };
    enforced.push("emulation".to_string());

    let handle = writer.handle();
    handle.emit(Event::RunStart(audit::RunStart {
        profile: policy.name.clone(),
        profile_sources: policy.sources.iter().map(|s| s.as_str().into()).collect(),
        profile_digest: policy.digest.clone(),
        workspace: workspace.to_path_buf().into(),
        command: args.command.iter().map(|a| a.clone().into()).collect(),
        guard_version: env!("CARGO_PKG_VERSION").to_string(),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        landlock_abi: prepared.report.abi.map(u32::from),
        enforced,
        degraded: degraded
            .into_iter()
            .map(|(feature, reason)| audit::Degraded { feature, reason })
            .collect(),
        pid: std::process::id(),
        uid: nix::unistd::getuid().as_raw(),
    }));
    handle.emit(Event::Checkpoint(audit::Checkpoint {
        id: run_start.0.to_string(),
        reason: "run start".into(),
        pid: None,
    }));
    // The command's pid: the sandbox's init forked it (launch/init.rs).
    let command_pid = match spawned.command_pid() {
        Ok(pid) => pid,
        Err(source) => {
            launch::kill_tree();
            return Err(ExecError::Setup {
                what: "learn the command's pid from the sandbox's init",
                source,
            });
        }
    };
    let shared = Arc::new(Shared::default());
    let (stop_r, stop_w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| ExecError::Setup {
            what: "create the stop pipe",
            source: e.into(),
        })?;
    let supervisor = Supervisor::new(Setup {
        listener,
        policy: Arc::clone(&policy),
        audit: handle.clone(),
        shared: Arc::clone(&shared),
        stop: stop_r,
        inject,
        journal: Some(journal),
        root: command_pid as u32,
    })
    .spawn()
    .map_err(|source| ExecError::Setup {
        what: "start the supervisor thread",
        source,
    })?;

    // 7. Did the command start?
    let mut exec_error = None;
    if let Err(launch::ExecFailed(e)) = spawned.wait_exec() {
        eprintln!(
            "guard: cannot execute {}: {e}{}",
            program.display(),
            if e.raw_os_error() == Some(libc::EPERM) {
                "\nhint: the profile denies this exec; see `guard log --denied`"
            } else {
                ""
            }
        );
        exec_error = Some(e);
    }

    // 8. Wait for the command, forwarding signals, reaping orphans.
    let mut status = None;
    while status.is_none() {
        match signals.next(100) {
            Ok(Some(ev)) if ev.signo == libc::SIGCHLD => {}
            Ok(Some(ev)) => {
                if ev.from_process {
                    let _ = sys::process::pidfd_send_signal(
                        std::os::fd::AsFd::as_fd(&spawned.pidfd),
                        ev.signo,
                    );
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("reading signals failed: {e}"),
        }
        for r in launch::reap() {
            if r.pid == spawned.pid {
                status = Some(r);
            }
        }
    }
    let status = status.expect("loop ends only with a status");
    // 9. End what is left of the tree, stop the supervisor.
    launch::kill_tree();
    // The supervisor may already have ended (no process holds the filter any more).
    if !supervisor.is_finished() {
        let _ = nix::unistd::write(&stop_w, b"x");
    }
    let mut report = supervisor.join().unwrap_or_default();
    let policy_stop = shared.policy_stop.load(Ordering::SeqCst);
    let failed = policy_stop || exec_error.is_some() || status.status != 0;
    let roll_back = (policy_stop && policy.transaction.on_deny == policy::OnDeny::Kill)
        || (failed && policy.transaction.on_failure == policy::OnFailure::Rollback);
    let mut rollbacks = 0;
    let mut digest_after = None;
    if let Some(j) = report.journal.as_mut() {
        if roll_back {
            rollbacks += 1;
            let r = j.rollback(run_start, &mut super::progress::reporter("rolling back"));
            match r {
                Ok(r) => {
                    for p in &r.problems {
                        eprintln!("guard: rollback: {p}");
                    }
                    digest_after =
                        journal::tree_digest(workspace, &policy.transaction.exclude).ok();
                    if digest_before.is_some() && digest_after != digest_before {
                        eprintln!(
                            "guard: rollback: the workspace digest differs from the run's start"
                        );
                    }
                    eprintln!(
                        "guard: rolled the workspace back to the run's start ({} change(s) undone)",
                        r.entries_undone
                    );
                    handle.emit(Event::Rollback(audit::Rollback {
                        checkpoint: run_start.0.to_string(),
                        entries_undone: r.entries_undone,
                        digest_after: String::new(),
                    }));
                }
                Err(e) => {
                    eprintln!(
                        "guard: rollback failed: {e}\nhint: run `guard rollback {}` to retry",
                        run_dir.id
                    );
                    handle.emit(Event::Error(audit::ErrorEvent {
                        message: format!("rollback failed: {e}"),
                    }));
                }
            }
        } else if let Err(e) = j.seal() {
            tracing::warn!("cannot seal the journal: {e}");
        }
    }
    let files_changed = report
        .journal
        .as_ref()
        .and_then(|j| j.diff(run_start).ok())
        .map(|d| (d.added.len() + d.modified.len() + d.deleted.len() + d.metadata.len()) as u64);
    let code = if policy_stop {
        EXIT_POLICY_STOP
    } else {
        status.status
    };
    let outcome = if policy_stop {
        audit::Outcome::PolicyKill
    } else if exec_error.is_some() {
        audit::Outcome::Error
    } else if status.signal.is_some() {
        audit::Outcome::Signaled
    } else {
        audit::Outcome::Exited
    };
    if policy_stop {
        eprintln!("guard: the run was stopped by policy; see `guard log --denied`");
    }

    // 10. Audit end, summary, run metadata.
    let duration_ms = started.elapsed().as_millis() as u64;
    let stats = writer.finish(audit::RunEnd {
        status: code,
        signal: status.signal,
        outcome,
        counts: Default::default(),
        suppressed: 0,
        duration_ms,
        otlp_dropped: None,
    })?;
    let summary = audit::Summary {
        v: 1,
        run: run_dir.id.clone(),
        profile: policy.name.clone(),
        workspace: workspace.into(),
        command: args.command.iter().map(|a| a.clone().into()).collect(),
        status: code,
        outcome,
        started: start_time,
        ended: audit::Timestamp::now(),
        duration_ms,
        counts: stats.counts,
        suppressed: stats.suppressed,
        denied: stats.denied.clone(),
        checkpoints: stats.checkpoints,
        rollbacks: stats.rollbacks.max(rollbacks),
        files_changed,
        digest_before,
        digest_after,
        audit_chain_head: Some(stats.chain_head.clone()),
    };
    let _ = report;
    summary.write(&run_dir.summary())?;
    if let Some(path) = &args.summary {
        summary.write(path)?;
    }
    let keep = std::env::var("GUARD_KEEP_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KEEP_RUNS);
    if let Err(e) = journal::prune(state, keep) {
        tracing::warn!("cannot prune old journals: {e}");
    }
    let mut meta = meta;
    meta.state = "ended".into();
    meta.status = Some(code);
    run_dir.write_meta(&meta)?;
    run_dir.mark_inactive(state);
    Ok(code)
}
