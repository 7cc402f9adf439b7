//! [`Run::builder`] and [`RunBuilder`]: what a run needs, set by the embedding program (or by
//! the CLI from its arguments). Nothing happens until [`RunBuilder::spawn`].

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use super::{Notice, Profiles, RunError, Running};
use crate::confine::features;

/// How many runs' journals are kept (newest first) unless [`RunBuilder::keep_runs`] says
/// otherwise.
pub const DEFAULT_KEEP_RUNS: usize = 20;

/// A handler for [`Notice`]s.
pub(super) type NoticeFn = Box<dyn FnMut(&Notice) + Send>;
/// A progress handler `(done, total)` for long rollbacks.
pub(super) type ProgressFn = Box<dyn FnMut(u64, u64) + Send>;

/// Where runs start: `Run::builder(profiles)` returns a [`RunBuilder`].
#[derive(Debug)]
pub struct Run;

impl Run {
    /// A run under `profiles` (a built-in name, a file path, a list of them layered in order,
    /// or a [`Profiles`] value). Set the workspace and the other options on the builder, then
    /// [`spawn`](RunBuilder::spawn) the command and [`wait`](Running::wait) for its
    /// [`Outcome`](super::Outcome).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let workspace = tempfile::tempdir()?;
    /// let state = tempfile::tempdir()?; // run records; outside every write root
    /// let running = guard::Run::builder("ci")
    ///     .workspace(workspace.path())
    ///     .state_dir(state.path())
    ///     .atomic(true)
    ///     .spawn(&["sh", "-c", "echo hello > greeting; touch /etc/guard-example"])?;
    /// let outcome = running.wait()?;
    /// // /etc is outside the write roots: the touch is refused, so the command failed,
    /// // and --atomic rolled the workspace back to where the run started.
    /// assert_ne!(outcome.status, 0);
    /// assert!(outcome.rollback.is_some());
    /// assert!(!workspace.path().join("greeting").exists());
    /// println!("{} calls allowed, {} denied", outcome.counts().allow, outcome.counts().deny);
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder(profiles: impl Into<Profiles>) -> RunBuilder {
        RunBuilder {
            profiles: profiles.into(),
            workspace: None,
            current_dir: None,
            state_dir: None,
            atomic: false,
            verify: false,
            audit_log: None,
            audit_otlp: None,
            summary: None,
            features: features::Options::default(),
            keep_caps: false,
            environment: None,
            keep_runs: Some(DEFAULT_KEEP_RUNS),
            forward_signals: false,
            subreaper: false,
            notices: None,
            progress: None,
            learning: false,
            config_files: false,
        }
    }
}

/// The options of one run. Every option has a default that suits an embedding program; the
/// two process-wide ones ([`forward_signals`](RunBuilder::forward_signals) and
/// [`subreaper`](RunBuilder::subreaper)) are off unless asked for.
///
/// One process-wide effect is not an option: a run's supervisor installs a handler that does
/// nothing for the first real-time signal the C library leaves free (`SIGRTMIN`), to wake its
/// receiving thread at the end of the run. A program that has its own handler for that
/// signal keeps it (the supervisor then polls instead, one system call more per judged call).
pub struct RunBuilder {
    pub(super) profiles: Profiles,
    pub(super) workspace: Option<PathBuf>,
    pub(super) current_dir: Option<PathBuf>,
    pub(super) state_dir: Option<PathBuf>,
    pub(super) atomic: bool,
    pub(super) verify: bool,
    pub(super) audit_log: Option<PathBuf>,
    pub(super) audit_otlp: Option<String>,
    pub(super) summary: Option<PathBuf>,
    pub(super) features: features::Options,
    pub(super) keep_caps: bool,
    pub(super) environment: Option<Vec<(OsString, OsString)>>,
    pub(super) keep_runs: Option<usize>,
    pub(super) forward_signals: bool,
    pub(super) subreaper: bool,
    pub(super) notices: Option<NoticeFn>,
    pub(super) progress: Option<ProgressFn>,
    pub(super) learning: bool,
    pub(super) config_files: bool,
}

impl RunBuilder {
    /// The workspace: writable and journaled (default: the current directory).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// The command's working directory (default: this process's).
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Where run records and journals live (default: `$GUARD_STATE_DIR`,
    /// `$XDG_STATE_HOME/guard` or `~/.local/state/guard`). It must lie outside every write
    /// root of the policy.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Roll the whole run back if the command fails or a call is denied (a denied call then
    /// ends the run).
    pub fn atomic(mut self, atomic: bool) -> Self {
        self.atomic = atomic;
        self
    }

    /// Digest the whole workspace (every name, type, mode and file's content) before the command
    /// starts, and again after a rollback during the run (`--atomic`, `on-deny = "rollback"`),
    /// and say when the two differ. Without it, a rollback checks each path it restored (type,
    /// mode, size, identity), as `guard rollback` does: the digest reads every file of the
    /// workspace twice, which on a large one costs more than the run. The digest at the start
    /// is recorded, so `guard rollback --verify` of this run compares with it later.
    pub fn verify(mut self, verify: bool) -> Self {
        self.verify = verify;
        self
    }

    /// Also write the audit log to `path` (it is always kept in the run directory).
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.audit_log = Some(path.into());
        self
    }

    /// Also send every audit event to the OpenTelemetry collector at `url` (OTLP/HTTP logs).
    /// Without it, the standard `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` and
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` variables of guard's own environment are used. The
    /// exporter never slows the command: what cannot be sent is counted in the log.
    pub fn audit_otlp(mut self, url: impl Into<String>) -> Self {
        self.audit_otlp = Some(url.into());
        self
    }

    /// Also write the run summary (JSON) to `path`.
    pub fn summary(mut self, path: impl Into<PathBuf>) -> Self {
        self.summary = Some(path.into());
        self
    }

    /// Use at most this Landlock ABI, to exercise the degraded paths of older kernels (0: no
    /// Landlock at all).
    pub fn max_landlock_abi(mut self, abi: u8) -> Self {
        self.features.max_landlock_abi = Some(abi);
        self
    }

    /// Use SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP when the kernel has it (default: true).
    pub fn sync_wake_up(mut self, on: bool) -> Self {
        self.features.sync_wake_up = on;
        self
    }

    /// Inject descriptors with SECCOMP_IOCTL_NOTIF_ADDFD when the kernel can (default: true).
    /// Without it judged write-opens are continued, not performed by guard (raceable).
    pub fn addfd(mut self, on: bool) -> Self {
        self.features.addfd = on;
        self
    }

    /// Keep the capabilities of a root caller (dropped by default).
    pub fn keep_caps(mut self, keep: bool) -> Self {
        self.keep_caps = keep;
        self
    }

    /// The environment the command's is filtered from (default: this process's). The profile
    /// still decides what is kept; `PATH` from here finds the program.
    pub fn environment<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.environment = Some(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// After the run, keep the journals of the newest `keep` runs and delete older ones
    /// (`None`: delete nothing). Default: [`DEFAULT_KEEP_RUNS`].
    pub fn keep_runs(mut self, keep: Option<usize>) -> Self {
        self.keep_runs = keep;
        self
    }

    /// Forward SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGWINCH that a process sends to this one
    /// on to the command while [`Running::wait`] waits (signals from the terminal already
    /// reach the command's process group). Process-wide: the signals are blocked in the
    /// calling thread and the threads the run starts, and every other thread of the process
    /// must block them too; `wait` restores the calling thread's mask when it runs on the
    /// thread that spawned. For programs that are nothing but the run (the CLI).
    pub fn forward_signals(mut self, on: bool) -> Self {
        self.forward_signals = on;
        self
    }

    /// Make this process a child subreaper for the run: if the sandbox's init dies before its
    /// tree (killed from outside; the command itself cannot signal it where Landlock scopes
    /// signals), the orphans come back here, and the end of the run kills every descendant of
    /// this process and reaps every child. Process-wide; for programs that are nothing but
    /// the run (the CLI). The previous setting is restored at the end.
    pub fn subreaper(mut self, on: bool) -> Self {
        self.subreaper = on;
        self
    }

    /// Observe the command for `guard learn` ([`learn`](super::learn)): the profiles are
    /// applied in observe mode (every judged call is allowed and recorded, no Landlock
    /// ruleset) with the seccomp deny list kept, and every open is trapped so that the reads,
    /// which Landlock would bound, are recorded too (op `read` in the audit log). Every open
    /// then pays a round trip to the supervisor. It protects nothing: use it on commands you
    /// trust.
    pub fn learning(mut self, on: bool) -> Self {
        self.learning = on;
        self
    }

    /// Also use the configuration files found without a flag, as `guard exec` does (default:
    /// false): the user's `$XDG_CONFIG_HOME/guard/config.toml` and the workspace's nearest
    /// `.guard.toml` once trusted, layered under the named profiles (`docs/profiles.md`). The
    /// command may not change either of them (rule `fs.guard-config`).
    pub fn config_files(mut self, on: bool) -> Self {
        self.config_files = on;
        self
    }

    /// Handle the run's [`Notice`]s (default: `tracing` warnings).
    pub fn notices(mut self, handler: impl FnMut(&Notice) + Send + 'static) -> Self {
        self.notices = Some(Box::new(handler));
        self
    }

    /// Report the progress `(done, total)` of a long automatic rollback.
    pub fn rollback_progress(mut self, handler: impl FnMut(u64, u64) + Send + 'static) -> Self {
        self.progress = Some(Box::new(handler));
        self
    }

    /// Start `argv` in the sandbox: resolve the profiles, open the journal, fork the confined
    /// child, start the supervisor, and wait until `execve` of the command worked or failed
    /// (a failure is a [`Notice::ExecFailed`] and the run goes on to its end). Any error
    /// means nothing of the command ran.
    ///
    /// The process must be single-threaded: the sandbox is set up in a fork of it (checked,
    /// [`LaunchError::Threads`](crate::launch::LaunchError::Threads)).
    ///
    /// # Errors
    ///
    /// Every [`RunError`] but [`RunError::Wait`]: the workspace, state or temporary directory
    /// cannot be used ([`RunError::Workspace`], [`RunError::State`], [`RunError::Tmp`],
    /// [`RunError::StateInsideWriteRoot`]); the profiles do not resolve ([`RunError::Policy`]);
    /// the program is not found ([`RunError::Command`]); the journal or the audit log cannot be
    /// opened; the kernel lacks what guard needs ([`RunError::NoNotify`],
    /// [`RunError::Confine`]); the sandbox cannot be started ([`RunError::Launch`],
    /// [`RunError::Setup`]).
    pub fn spawn<S: AsRef<OsStr>>(self, argv: &[S]) -> Result<Running, RunError> {
        let argv: Vec<OsString> = argv.iter().map(|a| a.as_ref().to_os_string()).collect();
        super::spawn::spawn(self, argv)
    }
}

impl std::fmt::Debug for RunBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBuilder")
            .field("profiles", &self.profiles)
            .field("workspace", &self.workspace)
            .field("state_dir", &self.state_dir)
            .field("atomic", &self.atomic)
            .field("verify", &self.verify)
            .field("features", &self.features)
            .field("forward_signals", &self.forward_signals)
            .field("subreaper", &self.subreaper)
            .field("learning", &self.learning)
            .finish_non_exhaustive()
    }
}
