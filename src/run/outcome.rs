//! What a run reports: [`Notice`]s while it goes (an interrupted earlier run, a command that
//! could not be executed, the automatic rollback), and its [`Outcome`] at the end.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::audit;
use crate::supervisor::Explanations;

/// Something a run tells its user while it goes. The CLI prints each one as `guard: {notice}`;
/// a program that sets no handler gets them as `tracing` warnings.
#[derive(Debug)]
#[non_exhaustive]
pub enum Notice {
    /// An earlier run on this workspace was interrupted (its guard died) and its changes are
    /// still in place; [`recover`](super::History::recover) restores the workspace.
    InterruptedRun {
        /// The interrupted run's id.
        run: String,
        /// The workspace it left changed.
        workspace: PathBuf,
    },
    /// `execve` of the command failed in the sandbox (EPERM: the profile denies this exec).
    /// The run still ends normally, with the status 126 or 127 the command's side exits with.
    ExecFailed {
        /// The program, as resolved on `PATH`.
        program: PathBuf,
        /// The errno of `execve`.
        error: io::Error,
        /// Why, when guard can tell (the program lies outside the profile's read roots).
        hint: Option<String>,
    },
    /// An entry the automatic rollback could not undo or verify (it went on with the rest).
    RollbackProblem(String),
    /// After the automatic rollback the workspace's digest differs from the run's start.
    DigestDiffers,
    /// The workspace was rolled back to the run's start.
    RolledBack {
        /// Changes undone.
        entries_undone: u64,
    },
    /// The automatic rollback failed; it can be run again.
    RollbackFailed {
        /// The id of the run whose rollback failed.
        run: String,
        /// Why it failed.
        error: String,
    },
    /// Policy stopped the run (a `kill` rule, or `on-deny = "kill"`).
    PolicyStop,
    /// A workspace configuration file was found but not used: its user has not trusted it
    /// (or it changed since).
    UntrustedConfig {
        /// The configuration file that was left out.
        path: PathBuf,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::InterruptedRun { run, workspace } => write!(
                f,
                "warning: run {run} on this workspace was interrupted (guard died) and its changes are still in place\nhint: `guard recover -w {}` restores the workspace to where that run started",
                workspace.display()
            ),
            Notice::ExecFailed {
                program,
                error,
                hint,
            } => {
                write!(f, "cannot execute {}: {error}", program.display())?;
                if let Some(hint) = hint {
                    write!(f, "\nhint: {hint}")?;
                } else if error.raw_os_error() == Some(libc::EPERM) {
                    f.write_str("\nhint: the profile denies this exec; see `guard log --denied`")?;
                }
                Ok(())
            }
            Notice::RollbackProblem(p) => write!(f, "rollback: {p}"),
            Notice::DigestDiffers => {
                f.write_str("rollback: the workspace digest differs from the run's start")
            }
            Notice::RolledBack { entries_undone } => write!(
                f,
                "rolled the workspace back to the run's start ({entries_undone} change(s) undone)"
            ),
            Notice::RollbackFailed { run, error } => write!(
                f,
                "rollback failed: {error}\nhint: run `guard rollback {run}` to retry"
            ),
            Notice::PolicyStop => {
                f.write_str("the run was stopped by policy; see `guard log --denied`")
            }
            Notice::UntrustedConfig { path } => write!(
                f,
                "warning: not using {}: it is not trusted (new, or changed since it was trusted)\nhint: read it, then `guard profile trust {}` to use it from now on",
                path.display(),
                path.display()
            ),
        }
    }
}

/// A rollback of a run: the automatic one at its end (`on-failure = "rollback"`,
/// `on-deny = "kill"`, `--atomic`), or one asked for after it ended
/// ([`History::rollback`](super::History::rollback)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackOutcome {
    /// The checkpoint the workspace was restored to (the run's start for an automatic one).
    pub checkpoint: u32,
    /// Changes undone.
    pub entries_undone: u64,
    /// Restored entries checked against what the journal recorded.
    pub verified: u64,
    /// Entries that could not be undone or verified, one line each.
    pub problems: Vec<String>,
    /// The workspace's digest after the rollback.
    pub digest_after: Option<String>,
    /// Why the rollback failed, if it did (it can be run again).
    pub error: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The run's id (its directory under the state directory).
    pub run_id: String,
    /// The run's directory: `run.json`, `audit.jsonl`, `summary.json`, `journal/`.
    pub run_dir: PathBuf,
    /// The run's audit log (JSONL, `docs/audit-format.md`), in the run directory.
    pub audit_log: PathBuf,
    /// The command's status: its exit code, or 128 + N when signal N ended it.
    pub status: i32,
    /// The signal that ended the command, if one did.
    pub signal: Option<i32>,
    /// Exited, signalled, stopped by policy, or not executed at all.
    pub kind: audit::Outcome,
    /// The automatic rollback, when one happened.
    pub rollback: Option<RollbackOutcome>,
    /// The run summary, as written to `summary.json`: counts per verdict, the first denied
    /// calls, checkpoints, rollbacks, files changed, tree digests.
    pub summary: audit::Summary,
    /// The run's refusals per rule, and how many the refused processes were told about on
    /// their stderr.
    pub explanations: Explanations,
}

impl Outcome {
    /// The status guard exits with: the command's, or
    /// [`EXIT_POLICY_STOP`](crate::launch::EXIT_POLICY_STOP) (120) when policy stopped the run.
    pub fn exit_code(&self) -> i32 {
        self.summary.status
    }

    /// True when policy stopped the run.
    pub fn policy_stop(&self) -> bool {
        self.kind == audit::Outcome::PolicyKill
    }

    /// Decisions per verdict (suppressed ones included).
    pub fn counts(&self) -> audit::Counts {
        self.summary.counts
    }

    /// One line about the run's refusals for its user, or `None` when nothing was refused:
    /// how many (the number `guard log --denied` lists), by which rules, how many the refused
    /// processes were told about, and where to read them all.
    pub fn refusals_line(&self) -> Option<String> {
        let refused = self.counts().refused();
        if refused == 0 {
            return None;
        }
        let mut by_rule: Vec<(&String, &u64)> = self.explanations.by_rule.iter().collect();
        by_rule.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let rules: Vec<String> = by_rule.iter().map(|(r, n)| format!("{n} {r}")).collect();
        let calls = if refused == 1 { "call" } else { "calls" };
        let mut line = format!("{refused} {calls} refused");
        if !rules.is_empty() {
            line.push_str(&format!(" ({})", rules.join(", ")));
        }
        let e = &self.explanations;
        if e.written > 0 || e.not_written() > 0 {
            line.push_str(&format!(
                "; {} explained on the refused process's stderr",
                e.written
            ));
            if e.not_written() > 0 {
                line.push_str(&format!(", {} not", e.not_written()));
            }
        }
        line.push_str(&format!("; see `guard log --denied {}`", self.run_id));
        Some(line)
    }
}
