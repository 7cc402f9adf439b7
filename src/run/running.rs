//! [`Running`]: a started run. The command runs under its supervisor while the embedding
//! program holds this handle; [`Running::wait`] waits for the sandbox's init through its pidfd
//! (never for any other child of the process), forwards signals if asked to, and ends the run
//! into an [`Outcome`](super::Outcome). Dropping a `Running` without waiting kills the run's
//! tree and ends the run all the same.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::builder::{NoticeFn, ProgressFn};
use super::{finish, Outcome, RunError};
use crate::audit::{self, AuditHandle, AuditWriter};
use crate::journal::{CheckpointId, RunDir, RunMeta};
use crate::launch::{Reaped, RunTree, Signals, EXIT_GUARD_ERROR};
use crate::policy::Policy;
use crate::supervisor::Shared;

/// The process-wide settings a run was asked to make (signal forwarding, subreaper), undone
/// when the run ends.
pub(super) struct ProcessState {
    signals: Option<(Signals, ThreadId)>,
    /// The subreaper flag before the run, when the run set it.
    subreaper_before: Option<bool>,
}

impl ProcessState {
    /// Block the forwarded signals and become a child subreaper, as asked.
    pub(super) fn enter(forward_signals: bool, subreaper: bool) -> Result<ProcessState, RunError> {
        let mut state = ProcessState {
            signals: None,
            subreaper_before: None,
        };
        if forward_signals {
            let signals = Signals::block().map_err(|source| RunError::Setup {
                what: "block signals",
                source,
            })?;
            state.signals = Some((signals, std::thread::current().id()));
        }
        if subreaper {
            let before = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
            nix::sys::prctl::set_child_subreaper(true).map_err(|e| RunError::Setup {
                what: "become a child subreaper",
                source: e.into(),
            })?;
            state.subreaper_before = Some(before);
        }
        Ok(state)
    }

    /// True when this process is a child subreaper for the run.
    pub(super) fn subreaper(&self) -> bool {
        self.subreaper_before.is_some()
    }

    /// Undo what [`ProcessState::enter`] did.
    pub(super) fn leave(&mut self) {
        if let Some((signals, thread)) = self.signals.take() {
            // A mask is per thread: only the thread that blocked can restore its own.
            if thread == std::thread::current().id() {
                if let Err(e) = signals.restore() {
                    tracing::warn!("cannot restore the signal mask: {e}");
                }
            }
        }
        if self.subreaper_before.take() == Some(false) {
            let _ = nix::sys::prctl::set_child_subreaper(false);
        }
    }
}

impl Drop for ProcessState {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Everything a started run holds until it ends.
pub(super) struct Active {
    pub workspace: PathBuf,
    pub state: PathBuf,
    pub run_dir: RunDir,
    pub tmp: PathBuf,
    /// What guard made in `tmp` itself (see `home::tool_variables`).
    pub tmp_files: Vec<PathBuf>,
    pub argv: Vec<OsString>,
    pub policy: Arc<Policy>,
    pub tree: RunTree,
    pub command_pid: i32,
    pub process: ProcessState,
    /// Taken when the audit log is finished.
    pub writer: Option<AuditWriter>,
    pub handle: AuditHandle,
    /// Taken when the supervisor is stopped.
    pub supervisor: Option<crate::supervisor::Running>,
    pub shared: Arc<Shared>,
    /// Written to when the supervisor should stop.
    pub stop: OwnedFd,
    pub exec_failed: bool,
    pub run_start: CheckpointId,
    pub digest_before: Option<String>,
    /// Digest the workspace after a rollback during the run ([`RunBuilder::verify`]).
    pub verify: bool,
    pub started: Instant,
    pub start_time: audit::Timestamp,
    pub meta: RunMeta,
    pub summary_path: Option<PathBuf>,
    /// The pruning of older journals, begun after the fork; joined at the end.
    pub pruning: super::prune::Pruning,
    pub notices: Option<NoticeFn>,
    pub progress: Option<ProgressFn>,
}

/// A started run: the command runs in the sandbox, judged by the supervisor.
pub struct Running {
    active: Option<Active>,
}

impl Running {
    pub(super) fn new(active: Active) -> Running {
        Running {
            active: Some(active),
        }
    }

    fn active(&self) -> &Active {
        self.active
            .as_ref()
            .expect("a Running holds its run until wait or drop")
    }

    /// The command's pid (the sandbox's init forked it; see [`Running::init_pid`]).
    pub fn pid(&self) -> i32 {
        self.active().command_pid
    }

    /// The pid of the sandbox's init: the one child this process started for the run.
    pub fn init_pid(&self) -> i32 {
        self.active().tree.init_pid()
    }

    /// The run's id (its directory under the state directory).
    pub fn run_id(&self) -> &str {
        &self.active().run_dir.id
    }

    /// The workspace, canonical.
    pub fn workspace(&self) -> &Path {
        &self.active().workspace
    }

    /// The run's audit log in its run directory (written while the run goes).
    pub fn audit_log(&self) -> PathBuf {
        self.active().run_dir.audit_log()
    }

    /// True when `execve` of the command failed (a [`Notice::ExecFailed`](super::Notice)
    /// said why).
    pub fn exec_failed(&self) -> bool {
        self.active().exec_failed
    }

    /// A handle on the run's process tree, to signal or kill it from another thread.
    pub fn tree(&self) -> RunTree {
        self.active().tree.clone()
    }

    /// SIGKILL every process of the run (and nothing else); [`Running::wait`] then returns
    /// its outcome.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A child of this program's own, started before the run.
    /// let mut mine = std::process::Command::new("sleep").arg("30").spawn()?;
    /// let workspace = tempfile::tempdir()?;
    /// let state = tempfile::tempdir()?;
    /// let running = guard::Run::builder("strict")
    ///     .workspace(workspace.path())
    ///     .state_dir(state.path())
    ///     .spawn(&["sleep", "30"])?;
    /// running.kill();
    /// let outcome = running.wait()?;
    /// assert_eq!(outcome.signal, Some(9));
    /// // Only the run's own tree was killed, and only its init reaped: this program's own
    /// // child runs on.
    /// assert!(mine.try_wait()?.is_none());
    /// mine.kill()?;
    /// mine.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kill(&self) {
        self.active().tree.kill();
    }

    /// Wait for the command to end, then end the run: stop the supervisor, roll back if the
    /// policy says so, finish the audit log, write the summary and the run's record.
    ///
    /// # Errors
    ///
    /// [`RunError::Wait`] when the sandbox's init cannot be waited for (its tree is killed);
    /// [`RunError::Audit`] when the audit log or the summary cannot be finished;
    /// [`RunError::State`] when the run's record cannot be written. The command has ended in
    /// every case.
    pub fn wait(mut self) -> Result<Outcome, RunError> {
        let mut a = self
            .active
            .take()
            .expect("a Running holds its run until wait or drop");
        match wait_for_init(&mut a) {
            Ok((status, reaped)) => {
                // When the init told how the command ended, the run ends while the init exits,
                // and the init is reaped after.
                let tree = a.tree.clone();
                let outcome = finish::finish(a, status, reaped);
                if !reaped {
                    if let Err(e) = tree.reap() {
                        tracing::warn!("cannot reap the sandbox's init: {e}");
                    }
                }
                outcome
            }
            Err(e) => {
                // Not knowing how the command ended, end it now and record the run anyway.
                a.tree.kill();
                let status = a.tree.reap().unwrap_or(Reaped {
                    pid: a.tree.init_pid(),
                    status: EXIT_GUARD_ERROR,
                    signal: None,
                });
                let _ = finish::finish(a, status, true);
                Err(e)
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(a) = self.active.take() {
            a.tree.kill();
            if let Ok(status) = a.tree.reap() {
                let _ = finish::finish(a, status, true);
            }
        }
    }
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Running");
        if let Some(a) = &self.active {
            d.field("run_id", &a.run_dir.id)
                .field("pid", &a.command_pid)
                .field("init_pid", &a.tree.init_pid());
        }
        d.finish_non_exhaustive()
    }
}

/// Wait until the init has told how the command ended (its tree gone, the init about to exit
/// with that status: returned with `false`, the init still to be reaped) or has exited (then
/// reaped: `true`), forwarding signals sent by processes when asked to.
fn wait_for_init(a: &mut Active) -> Result<(Reaped, bool), RunError> {
    let wait_err = |pid, source| RunError::Wait { pid, source };
    let init = a.tree.init_pid();
    // The end pipe, until it has said all it will (the init's message, or nothing when the
    // init exits without one).
    let mut told = true;
    loop {
        let mut fds = vec![PollFd::new(a.tree.pidfd(), PollFlags::POLLIN)];
        if told {
            fds.push(PollFd::new(a.tree.end_fd(), PollFlags::POLLIN));
        }
        let signals_at = fds.len();
        if let Some((signals, _)) = a.process.signals.as_ref() {
            fds.push(PollFd::new(signals.fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(wait_err(init, e.into())),
        }
        let ready = |i: usize| fds.get(i).and_then(|f| f.any()).unwrap_or(false);
        let (exited, end_ready, signalled) = (ready(0), told && ready(1), ready(signals_at));
        drop(fds);
        if signalled {
            if let Some((signals, _)) = a.process.signals.as_mut() {
                while let Some(ev) = signals.read().map_err(|e| wait_err(init, e))? {
                    // The init passes them on to the command.
                    if ev.from_process {
                        let _ = a.tree.signal(ev.signo);
                    }
                }
            }
        }
        if end_ready {
            match a.tree.read_end() {
                Some(status) => return Ok((status, false)),
                None => told = false,
            }
        }
        if exited {
            return a
                .tree
                .reap()
                .map(|status| (status, true))
                .map_err(|e| wait_err(init, e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send<T: Send>() {}

    #[test]
    fn a_running_run_and_its_outcome_can_move_to_another_thread() {
        send::<Running>();
        send::<Outcome>();
        send::<RunError>();
        send::<RunTree>();
    }
}
