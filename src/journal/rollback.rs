//! Rollback as an operation on the journal, all or nothing and itself undoable.
//!
//! 1. Plan: the entries to undo, newest first (a rollback: the run's live changes after the
//!    checkpoint; an undo: the steps of the newest operation in effect).
//! 2. Check (after the run, not during it): every path the plan writes, and each one's
//!    directory, against the seal; any difference that is the user's work refuses the whole
//!    rollback with the list (`--force` proceeds, keeping what it replaces in the journal).
//! 3. `begin`, then one journaled step per entry (`steps.rs`). A step that fails stops the
//!    rollback, and its steps are reverted (`undo.rs`): nothing changed. A crash leaves the
//!    `begin` open, and `guard recover` reverts it the same way.
//! 4. Verify each path the plan restored against what its oldest entry recorded (a stat each:
//!    no hashing, no walk of the workspace), end the operation with its marker, seal.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::ids::Copies;
use super::journal::{now, CheckpointId, Journal, JournalError};
use super::log::{Boundary, Entry, Op, OpKind};
use super::report::Conflict;
use super::steps::Apply;

/// How to roll back.
#[derive(Debug, Clone, Default)]
pub struct RollbackOptions {
    /// Go ahead over paths changed since the run left them; what is there is kept in the
    /// journal (`guard undo` brings it back).
    pub force: bool,
    /// Plan and check only: change nothing.
    pub dry_run: bool,
}

/// One change a rollback makes (or, in a dry run, would make).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// `remove`, `restore`, `recreate`, `move back`, `swap back`, `rewrite`, `reset metadata`
    /// or `cannot restore`.
    pub what: &'static str,
    /// The path the change is made to, relative to the workspace.
    pub path: PathBuf,
}

/// What a rollback did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollbackReport {
    /// How many journal entries were undone.
    pub entries_undone: u64,
    /// How many restored paths were checked afterwards and found as the journal recorded them.
    pub verified: u64,
    /// Entries that could not be restored (no pre-image) or verified, one line each; never
    /// silently skipped.
    pub problems: Vec<String>,
    /// Paths found changed since the run that the rollback replaced anyway (git's caches,
    /// excluded paths, everything under `force`); what was there is kept in the journal.
    pub replaced: Vec<Conflict>,
    /// A dry run: the changes it would make, and the paths that make it refuse.
    pub planned: Vec<Planned>,
    /// With `dry_run`: the paths changed since the run that make the rollback refuse (without
    /// `force`).
    pub conflicts: Vec<Conflict>,
}

impl Journal {
    /// Rolls back to checkpoint `to` during the run (on a denial, a failure, `--atomic`, or
    /// crash recovery): nothing newer than the run can be in the way, so nothing is refused;
    /// whatever stands where a step restores is kept in the journal.
    ///
    /// # Errors
    ///
    /// [`JournalError::NoCheckpoint`] when `to` is not in the journal,
    /// [`JournalError::Interrupted`] when an earlier operation was interrupted,
    /// [`JournalError::Aborted`] when a step fails (the rollback is reverted),
    /// [`JournalError::Append`] when the log cannot be written.
    pub fn rollback(
        &mut self,
        to: CheckpointId,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        let opts = RollbackOptions {
            force: true,
            dry_run: false,
        };
        self.rollback_to(to, &opts, false, progress)
    }

    /// Rolls back to checkpoint `to` after the run ended (`guard rollback`): refuses when a
    /// path it writes changed since the run left it (see the module doc).
    ///
    /// # Errors
    ///
    /// As [`Journal::rollback`]; also [`JournalError::Conflicts`] (nothing changed) when paths
    /// changed since the run left them and `force` is off, [`JournalError::NoSeal`] when that
    /// cannot be checked.
    pub fn rollback_with(
        &mut self,
        to: CheckpointId,
        opts: &RollbackOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        self.rollback_to(to, opts, true, progress)
    }

    fn rollback_to(
        &mut self,
        to: CheckpointId,
        opts: &RollbackOptions,
        check: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        self.refuse_if_interrupted()?;
        let after = self.checkpoint_seq(to)?;
        if !self.on_disk() {
            // No change yet (the first one makes the journal): nothing to roll back, and no
            // reason to make a journal to say so.
            return Ok(RollbackReport::default());
        }
        if !opts.dry_run {
            self.drop_unrecorded_objects();
        }
        let mut plan = self.live_changes_after(after);
        plan.reverse();
        let begin = Op::Begin {
            kind: OpKind::Rollback,
            to: Some(to.0),
            target: None,
        };
        let end = move |begin: u64| Op::RolledBack {
            to: to.0,
            after,
            upto: begin,
            begin: Some(begin),
        };
        self.operate(&plan, begin, &end, opts, check, progress)
    }

    /// Reverts the newest operation in effect (`guard undo`): a rollback, or an undo (which
    /// puts the rollback it reverted back in effect).
    ///
    /// # Errors
    ///
    /// [`JournalError::NothingToUndo`] when no rollback is in effect, [`JournalError::UndoBuried`]
    /// when the run changed the workspace after it, [`JournalError::Interrupted`],
    /// [`JournalError::Aborted`] and [`JournalError::Append`] as for [`Journal::rollback`].
    pub fn undo_last(
        &mut self,
        opts: &RollbackOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        self.refuse_if_interrupted()?;
        let h = self.history();
        let op = h
            .newest_in_effect()
            .filter(|o| o.begin != 0)
            .ok_or(JournalError::NothingToUndo)?;
        let end = op.end.unwrap_or_default();
        let later = self
            .entries
            .iter()
            .any(|e| e.seq > end && e.op.is_change() && !h.is_step(e.seq));
        if later {
            return Err(JournalError::UndoBuried);
        }
        let mut plan: Vec<Entry> = self
            .entries
            .iter()
            .filter(|e| op.holds(e.seq) && e.op.is_change())
            .cloned()
            .collect();
        plan.reverse();
        if !opts.dry_run {
            self.drop_unrecorded_objects();
        }
        let begin = Op::Begin {
            kind: OpKind::Undo,
            to: None,
            target: Some(end),
        };
        let finish = move |begin: u64| Op::Undone { target: end, begin };
        self.operate(&plan, begin, &finish, opts, true, progress)
    }

    fn refuse_if_interrupted(&self) -> Result<(), JournalError> {
        match self.history().open() {
            Some(_) => Err(JournalError::Interrupted {
                path: self.log_path().to_path_buf(),
            }),
            None => Ok(()),
        }
    }

    /// Reverts an operation a crash interrupted (its steps, newest first) and marks it
    /// aborted. Returns what could not be reverted, or `None` when nothing was open.
    ///
    /// # Errors
    ///
    /// [`JournalError::Append`] when the log cannot be written; steps that cannot be reverted are
    /// returned, not an error.
    pub fn revert_interrupted(&mut self) -> Result<Option<Vec<String>>, JournalError> {
        let Some(begin) = self.history().open().map(|o| o.begin) else {
            return Ok(None);
        };
        // Before the steps' reversal appends anything: an object a step made before its
        // entry is numbered from the next seq on only until then.
        self.drop_unrecorded_objects();
        let sealed = self.sealed_before(begin);
        let problems = self.revert_steps(begin)?;
        self.append(Op::Aborted { begin })?;
        self.after_operation();
        self.reseal(sealed);
        Ok(Some(problems))
    }

    fn after_operation(&mut self) {
        self.content_saved.clear();
        self.meta_saved.clear();
        self.made.clear();
        // Whatever exists now existed "before the next checkpoint" as far as a later rename
        // into an excluded path can tell.
        self.checkpoint_time = Some(now());
    }

    /// Steps 2-4 of the module doc.
    fn operate(
        &mut self,
        plan: &[Entry],
        begin: Op,
        end: &dyn Fn(u64) -> Op,
        opts: &RollbackOptions,
        check: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        let mut a = Apply::new(opts.force || !check, Copies::of(&self.entries));
        let mut report = RollbackReport::default();
        if check {
            match self.preflight(plan) {
                Ok(pre) => {
                    for c in &pre.tolerate {
                        a.replaced
                            .insert(c.path.clone(), tolerated(&c.path, &c.what));
                    }
                    if opts.force {
                        for c in &pre.refuse {
                            a.replaced
                                .insert(c.path.clone(), format!("{} (forced)", c.what));
                        }
                    } else {
                        report.conflicts = pre.refuse;
                    }
                }
                Err(JournalError::NoSeal { .. }) if opts.force => {}
                Err(e) => return Err(e),
            }
        }
        if opts.dry_run {
            report.planned = plan.iter().filter_map(planned).collect();
            report.replaced = a.replaced_list();
            return Ok(report);
        }
        if !report.conflicts.is_empty() {
            return Err(JournalError::Conflicts {
                conflicts: report.conflicts,
            });
        }
        if plan.is_empty() {
            return Ok(report);
        }
        let begin_seq = self.append(begin)?;
        let total = plan.len() as u64;
        for e in plan {
            if let Err(why) = self.undo_step(e, &mut a) {
                return Err(self.abort(begin_seq, e, why));
            }
            report.entries_undone += 1;
            progress(report.entries_undone, total);
            #[cfg(test)]
            if crash_point::hit(report.entries_undone) {
                return Ok(report);
            }
        }
        if let Err(why) = self.finish_dirs(&mut a) {
            let last = plan.last().cloned().expect("a non-empty plan");
            return Err(self.abort(begin_seq, &last, why));
        }
        // One stat per path: the seal the next operation checks against, and the
        // verification of this one.
        let seal = self.probe_seal();
        let shapes = match &seal {
            Ok(s) => s.shapes(),
            Err(_) => HashMap::new(),
        };
        self.verify(plan, &shapes, &mut report);
        drop(shapes);
        self.append(end(begin_seq))?;
        self.after_operation();
        if let Err(e) = seal.and_then(|s| self.save_seal(s)) {
            report
                .problems
                .push(format!("cannot seal the journal: {e}"));
        }
        report.problems.splice(0..0, a.problems.drain(..));
        report.replaced = a.replaced_list();
        Ok(report)
    }

    /// Reverts the steps of the operation that began at `begin` after a step failed on `e`.
    fn abort(&mut self, begin: u64, e: &Entry, why: String) -> JournalError {
        let at =
            e.op.paths()
                .first()
                .map_or_else(|| format!("entry {}", e.seq), |p| p.display());
        let sealed = self.sealed_before(begin);
        let reverted = match self.revert_steps(begin) {
            Ok(p) => p,
            Err(e) => vec![e.to_string()],
        };
        if let Err(err) = self.append(Op::Aborted { begin }) {
            tracing::error!("cannot mark the reverted rollback in the journal: {err}");
        }
        self.after_operation();
        self.reseal(sealed);
        JournalError::Aborted { at, why, reverted }
    }

    /// After a revert: the workspace is as it was when the operation began, which the seal
    /// described (`sealed`); seal it again, since a revert across filesystems renumbers inodes
    /// and the log moved on.
    fn reseal(&mut self, sealed: bool) {
        if sealed {
            if let Err(e) = self.write_seal() {
                tracing::warn!("cannot seal the journal again after a revert: {e}");
            }
        }
    }
}

fn tolerated(path: &Path, what: &str) -> String {
    if super::cache::is_cache(path) {
        format!(
            "{what}: git's cache, restored with the rest; the version found is kept in the journal"
        )
    } else {
        format!("{what}: an excluded path; what was there is kept in the journal")
    }
}

/// How a dry run describes undoing `e`.
fn planned(e: &Entry) -> Option<Planned> {
    let (what, path) = match &e.op {
        Op::Created { path, .. } => ("remove", path),
        Op::Entered { path, .. } => ("remove", path),
        Op::Deleted { path, .. } => ("restore", path),
        Op::Rmdir { path, .. } => ("recreate", path),
        Op::Renamed {
            to,
            boundary: Some(Boundary::ToLeft),
            ..
        } => ("leave (excluded, made by the run)", to),
        Op::Renamed { to, .. } => ("move back", to),
        Op::Exchanged { from, .. } => ("swap back", from),
        Op::Modified { path, .. } => ("rewrite", path),
        Op::Meta { path, .. } => ("reset metadata", path),
        Op::Unprotected { path, .. } => ("cannot restore", path),
        _ => return None,
    };
    Some(Planned {
        what,
        path: PathBuf::from(path.clone()),
    })
}

/// Tests stop a rollback after a given number of steps, as a crash would.
#[cfg(test)]
pub(crate) mod crash_point {
    use std::cell::Cell;

    thread_local! {
        static AFTER: Cell<u64> = const { Cell::new(0) };
    }

    pub fn set(steps: u64) {
        AFTER.with(|a| a.set(steps));
    }

    pub fn hit(done: u64) -> bool {
        AFTER.with(|a| a.get() != 0 && a.get() == done)
    }
}
