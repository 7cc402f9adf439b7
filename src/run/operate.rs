//! Rollback and undo of a past run, as operations on its journal ([`History::operate`]): all
//! or nothing, refused with the list of conflicts unless forced, planned without changing
//! anything in a dry run, optionally verified by the workspace's tree digest, and recorded in
//! the run's audit log and `run.json` (`rolled-back`, or `ended` again after an undo).
//!
//! While an operation runs, `run.json` says `rolling-back` with this process's pid and the run
//! is marked active, so a crash leaves it for `guard recover`, which reverts it.

use std::io::Write as _;

use super::history::{History, HistoryError, RunRecord};
use super::outcome::RollbackOutcome;
use crate::audit;
use crate::journal::{
    self, CheckpointId, Journal, JournalError, RollbackOptions, RollbackReport, STATE_ROLLING_BACK,
};

/// What to do to a past run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Undo the run back to checkpoint `to` (`None`: the run's start).
    Rollback {
        /// The checkpoint (`guard log RUN` shows them).
        to: Option<u32>,
    },
    /// Revert the newest operation in effect (a rollback; or an undo, which redoes the
    /// rollback it reverted).
    Undo,
}

impl Operation {
    /// `rollback` or `undo`.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Rollback { .. } => "rollback",
            Operation::Undo => "undo",
        }
    }
}

/// How to carry an [`Operation`] out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OperationOptions {
    /// Go ahead over paths changed since the run left them; what is there is kept in the
    /// journal (an undo brings it back).
    pub force: bool,
    /// Plan and check only: change nothing.
    pub dry_run: bool,
    /// Afterwards, digest the whole workspace (names, types, modes, content) and compare it
    /// with the digest the run recorded at its start, when it recorded one.
    pub verify: bool,
}

/// What an operation did (or, in a dry run, would do).
#[derive(Debug, Clone)]
pub struct OperationReport {
    /// The operation, with the checkpoint a rollback went back to.
    pub operation: Operation,
    /// The checkpoint a rollback restored (`None` for an undo).
    pub checkpoint: Option<u32>,
    /// The journal's account: entries undone, verified, problems, what was replaced; in a dry
    /// run the plan and the conflicts.
    pub journal: RollbackReport,
    /// A dry run: nothing was changed.
    pub dry_run: bool,
    /// The workspace's digest afterwards (with `verify`).
    pub digest_after: Option<String>,
    /// The digest the run recorded at its start, when the operation restored the start and
    /// the run recorded one (with `verify`).
    pub digest_at_start: Option<String>,
}

impl OperationReport {
    /// With `verify`, after a rollback to the run's start: whether the workspace's digest is
    /// the one the run recorded at its start (`None`: nothing to compare).
    pub fn matches_start(&self) -> Option<bool> {
        match (&self.digest_after, &self.digest_at_start) {
            (Some(after), Some(start)) => Some(after == start),
            _ => None,
        }
    }

    /// Whether everything went as asked: no problem, no digest mismatch, and for a dry run no
    /// conflict.
    pub fn is_clean(&self) -> bool {
        self.journal.problems.is_empty()
            && self.matches_start() != Some(false)
            && (!self.dry_run || self.journal.conflicts.is_empty())
    }
}

impl History {
    /// Carry out `operation` on `run` after it ended (see the module documentation). A
    /// conflict is [`HistoryError::Conflicts`] and a failure half-way
    /// [`HistoryError::Aborted`]; both leave the workspace as it was. `progress` gets
    /// `(done, total)` during long operations.
    pub fn operate(
        &self,
        run: &RunRecord,
        operation: Operation,
        options: &OperationOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<OperationReport, HistoryError> {
        let dir = run.run_dir();
        let mut meta = dir.read_meta()?;
        if meta.state == "running" {
            return Err(HistoryError::StillRunning {
                run: run.id.clone(),
                pid: meta.guard_pid,
            });
        }
        if meta.state == STATE_ROLLING_BACK {
            return Err(HistoryError::OperationInterrupted {
                run: run.id.clone(),
                pid: meta.guard_pid,
            });
        }
        // A pruned run is told as such, not as a lock file that cannot be opened.
        run.require_journal()?;
        let _lock = journal::lock_journal(&dir.path).map_err(|e| run.journal_error(e))?;
        let mut j = run.journal()?;
        let checkpoint = match operation {
            Operation::Rollback { to } => Some(checkpoint(run, &j, to)?),
            Operation::Undo => None,
        };
        let opts = RollbackOptions {
            force: options.force,
            dry_run: options.dry_run,
        };
        let mut go = |j: &mut Journal| match checkpoint {
            Some(to) => j.rollback_with(to, &opts, progress),
            None => j.undo_last(&opts, progress),
        };
        let refused = |e: JournalError| match e {
            JournalError::Conflicts { conflicts } => HistoryError::Conflicts {
                run: run.id.clone(),
                operation: operation.name(),
                conflicts,
            },
            e @ JournalError::Aborted { .. } => HistoryError::Aborted {
                run: run.id.clone(),
                operation: operation.name(),
                source: e,
            },
            e => run.journal_error(e),
        };
        let mut report = OperationReport {
            operation,
            checkpoint: checkpoint.map(|c| c.0),
            journal: RollbackReport::default(),
            dry_run: options.dry_run,
            digest_after: None,
            digest_at_start: None,
        };
        if options.dry_run {
            report.journal = go(&mut j).map_err(refused)?;
            return Ok(report);
        }
        meta.state = STATE_ROLLING_BACK.to_string();
        meta.guard_pid = std::process::id();
        dir.write_meta(&meta)?;
        dir.mark_active(&self.state)?;
        let result = go(&mut j);
        meta.state = journal::settled_state(&j).to_string();
        dir.write_meta(&meta)?;
        dir.mark_inactive(&self.state);
        report.journal = result.map_err(refused)?;

        if options.verify {
            let digest =
                journal::tree_digest(j.workspace(), j.exclude_patterns()).map_err(|source| {
                    HistoryError::Digest {
                        path: j.workspace().to_path_buf(),
                        source,
                    }
                })?;
            if checkpoint.is_some() && checkpoint == run.start(&j).ok() {
                report.digest_at_start = recorded_start_digest(run);
            }
            report.digest_after = Some(digest);
        }
        let line = audit::encode(
            &audit::Event::Rollback(audit::Rollback {
                checkpoint: checkpoint.map_or_else(|| "undo".to_string(), |c| c.0.to_string()),
                entries_undone: report.journal.entries_undone,
                digest_after: report.digest_after.clone().unwrap_or_default(),
            }),
            &run.id,
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .open(run.audit_log())
        {
            let _ = writeln!(f, "{line}");
        }
        Ok(report)
    }

    /// Undo `run` after it ended: back to checkpoint `to`, or to its start. Refuses (with the
    /// list) when paths it would write changed after the run ended, unless `force`. The
    /// workspace's digest afterwards is in the outcome; the rollback is recorded in the run's
    /// audit log and `run.json` says `rolled-back`. [`History::operate`] has every option.
    pub fn rollback(
        &self,
        run: &RunRecord,
        to: Option<u32>,
        force: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackOutcome, HistoryError> {
        let options = OperationOptions {
            force,
            dry_run: false,
            verify: true,
        };
        let r = self.operate(run, Operation::Rollback { to }, &options, progress)?;
        Ok(RollbackOutcome {
            checkpoint: r.checkpoint.unwrap_or_default(),
            entries_undone: r.journal.entries_undone,
            verified: r.journal.verified,
            problems: r.journal.problems,
            digest_after: r.digest_after,
            error: None,
        })
    }

    /// Revert the newest rollback of `run` (or the newest undo, which puts the rollback it
    /// reverted back). [`History::operate`] has every option.
    pub fn undo(
        &self,
        run: &RunRecord,
        force: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<OperationReport, HistoryError> {
        let options = OperationOptions {
            force,
            ..OperationOptions::default()
        };
        self.operate(run, Operation::Undo, &options, progress)
    }
}

/// Checkpoint `to` of the run's journal, or its start.
fn checkpoint(run: &RunRecord, j: &Journal, to: Option<u32>) -> Result<CheckpointId, HistoryError> {
    match to {
        None => run.start(j),
        Some(n) if j.checkpoints().iter().any(|(c, _, _)| c.0 == n) => Ok(CheckpointId(n)),
        Some(n) => Err(HistoryError::NoCheckpoint {
            run: run.id.clone(),
            checkpoint: n,
        }),
    }
}

/// The tree digest the run recorded at its start (`--atomic` and rollback policies do).
fn recorded_start_digest(run: &RunRecord) -> Option<String> {
    let text = std::fs::read_to_string(run.summary()).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("digest_before")?.as_str().map(str::to_string)
}
