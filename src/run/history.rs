//! Operations on past runs, as library calls: list them, show what one changed, roll one back
//! after it ended, recover runs whose guard died, prune old journals. Thin wrappers over
//! `journal/`, bound to one state directory ([`History`]).

use std::path::{Path, PathBuf};

use super::outcome::RollbackOutcome;
use crate::audit;
use crate::journal::{
    self, CheckpointId, Conflict, Diff, Journal, JournalError, PruneReport, Recovered, RunDir,
    RunMeta, StateError,
};

/// Why an operation on a past run failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The state directory cannot be found or read.
    #[error(transparent)]
    State(#[from] StateError),
    /// No run is recorded.
    #[error("no runs recorded in {}", state.display())]
    NoRuns {
        /// The state directory.
        state: PathBuf,
    },
    /// No run has this id (or id prefix).
    #[error("no run {id} in {}\nhint: `guard runs` lists them", state.display())]
    NoSuchRun {
        /// The id asked for.
        id: String,
        /// The state directory.
        state: PathBuf,
    },
    /// The prefix matches several runs.
    #[error("{id} matches {count} runs\nhint: give more of the id")]
    Ambiguous {
        /// The prefix as given.
        id: String,
        /// How many runs it matches.
        count: usize,
    },
    /// The run has no journal.
    #[error("run {run} has no journal (pruned, or a run that was not transactional)")]
    NoJournal {
        /// The run's id.
        run: String,
    },
    /// The journal could not be read or applied.
    #[error("the journal of run {run} failed")]
    Journal {
        /// The run's id.
        run: String,
        /// What the journal reported.
        #[source]
        source: JournalError,
    },
    /// The run has no such checkpoint.
    #[error("run {run} has no checkpoint {checkpoint}\nhint: `guard log {run}` shows its checkpoint events")]
    NoCheckpoint {
        /// The run's id.
        run: String,
        /// The checkpoint asked for (0: the journal has none at all).
        checkpoint: u32,
    },
    /// The run is still running.
    #[error(
        "run {run} is still running (guard pid {pid})\nhint: if guard crashed, run `guard recover`"
    )]
    StillRunning {
        /// The run's id.
        run: String,
        /// Its guard's pid.
        pid: u32,
    },
    /// Recovering interrupted runs failed; it can be run again.
    #[error("recovery failed\nhint: it can be run again")]
    Recover(#[source] JournalError),
    /// Deleting old journals failed.
    #[error("prune failed")]
    Prune(#[source] JournalError),
    /// Files the run touched changed after it ended; rolling back would lose that work.
    #[error("refusing to roll back run {run}: {} path(s) changed since it ended, and rolling back would lose that work\nhint: roll back with force to lose them", conflicts.len())]
    Conflicts {
        /// The run's id.
        run: String,
        /// What changed.
        conflicts: Vec<Conflict>,
    },
}

/// One recorded run.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// The run id (the name of its directory).
    pub id: String,
    /// The run directory: `run.json`, `audit.jsonl`, `summary.json`, `journal/`.
    pub dir: PathBuf,
    /// Its `run.json`, when readable.
    pub meta: Option<RunMeta>,
}

impl RunRecord {
    fn of(dir: RunDir) -> RunRecord {
        RunRecord {
            meta: dir.read_meta().ok(),
            id: dir.id,
            dir: dir.path,
        }
    }

    fn journal(&self) -> Result<Journal, HistoryError> {
        if !self.dir.join("journal").is_dir() {
            return Err(HistoryError::NoJournal {
                run: self.id.clone(),
            });
        }
        Journal::open(&self.dir).map_err(|source| self.journal_error(source))
    }

    fn journal_error(&self, source: JournalError) -> HistoryError {
        HistoryError::Journal {
            run: self.id.clone(),
            source,
        }
    }
}

/// The runs recorded in one state directory.
#[derive(Debug, Clone)]
pub struct History {
    state: PathBuf,
}

impl History {
    /// The default state directory (`$GUARD_STATE_DIR`, `$XDG_STATE_HOME/guard`,
    /// `~/.local/state/guard`).
    ///
    /// # Errors
    ///
    /// [`HistoryError::State`] when none of those variables is set.
    pub fn open() -> Result<History, HistoryError> {
        Ok(History::at(journal::state_dir()?))
    }

    /// The runs recorded in `state`.
    pub fn at(state: impl Into<PathBuf>) -> History {
        History {
            state: state.into(),
        }
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// Every recorded run, newest first.
    pub fn runs(&self) -> Vec<RunRecord> {
        journal::list_runs(&self.state)
            .into_iter()
            .map(RunRecord::of)
            .collect()
    }

    /// The run with this id or unique id prefix; the newest run when `id` is `None`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::NoRuns`] when no run is recorded, [`HistoryError::NoSuchRun`] when no
    /// run has that id, [`HistoryError::Ambiguous`] when the prefix matches several.
    pub fn find(&self, id: Option<&str>) -> Result<RunRecord, HistoryError> {
        let runs = journal::list_runs(&self.state);
        let Some(id) = id else {
            return runs.into_iter().next().map(RunRecord::of).ok_or_else(|| {
                HistoryError::NoRuns {
                    state: self.state.clone(),
                }
            });
        };
        let mut found: Vec<RunDir> = runs
            .into_iter()
            .filter(|r| r.id == id || r.id.starts_with(id))
            .collect();
        match found.len() {
            1 => Ok(RunRecord::of(found.remove(0))),
            0 => Err(HistoryError::NoSuchRun {
                id: id.to_string(),
                state: self.state.clone(),
            }),
            count => Err(HistoryError::Ambiguous {
                id: id.to_string(),
                count,
            }),
        }
    }

    /// What `run` changed in its workspace since it started, from its journal.
    ///
    /// # Errors
    ///
    /// [`HistoryError::NoJournal`] when the run has no journal, [`HistoryError::NoCheckpoint`]
    /// when the journal has no checkpoint, [`HistoryError::Journal`] when it cannot be read.
    pub fn diff(&self, run: &RunRecord) -> Result<Diff, HistoryError> {
        let j = run.journal()?;
        let first = first_checkpoint(run, &j)?;
        j.diff(first).map_err(|e| run.journal_error(e))
    }

    /// Undo `run` after it ended: back to checkpoint `to`, or to its start. Refuses (with the
    /// list) when files the run touched changed after it ended, unless `force`. The rollback
    /// is recorded in the run's audit log and `run.json` says `rolled-back`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::StillRunning`] when the run has not ended, [`HistoryError::NoJournal`],
    /// [`HistoryError::NoCheckpoint`] when `to` (or the start) is not in its journal,
    /// [`HistoryError::Conflicts`] when files changed since the run (without `force`; nothing
    /// was changed), [`HistoryError::Journal`] when the rollback itself fails (see
    /// [`JournalError::Aborted`]), [`HistoryError::State`] when `run.json` cannot be read or
    /// written.
    pub fn rollback(
        &self,
        run: &RunRecord,
        to: Option<u32>,
        force: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackOutcome, HistoryError> {
        let dir = RunDir {
            id: run.id.clone(),
            path: run.dir.clone(),
        };
        let mut meta = dir.read_meta()?;
        if meta.state == "running" {
            return Err(HistoryError::StillRunning {
                run: run.id.clone(),
                pid: meta.guard_pid,
            });
        }
        let mut j = run.journal()?;
        let to = match to {
            Some(n) if j.checkpoints().iter().any(|(c, _, _)| c.0 == n) => CheckpointId(n),
            Some(n) => {
                return Err(HistoryError::NoCheckpoint {
                    run: run.id.clone(),
                    checkpoint: n,
                })
            }
            None => first_checkpoint(run, &j)?,
        };
        if !force {
            let conflicts = j.conflicts().map_err(|e| run.journal_error(e))?;
            if !conflicts.is_empty() {
                return Err(HistoryError::Conflicts {
                    run: run.id.clone(),
                    conflicts,
                });
            }
        }
        let report = j.rollback(to, progress).map_err(|e| run.journal_error(e))?;
        let digest = journal::tree_digest(j.workspace(), &[]).ok();
        let line = audit::encode(
            &audit::Event::Rollback(audit::Rollback {
                checkpoint: to.0.to_string(),
                entries_undone: report.entries_undone,
                digest_after: digest.clone().unwrap_or_default(),
            }),
            &run.id,
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.audit_log())
        {
            use std::io::Write as _;
            let _ = writeln!(f, "{line}");
        }
        meta.state = "rolled-back".into();
        dir.write_meta(&meta)?;
        Ok(RollbackOutcome {
            checkpoint: to.0,
            entries_undone: report.entries_undone,
            verified: report.verified,
            problems: report.problems,
            digest_after: digest,
            error: None,
        })
    }

    /// Restore the workspaces of runs whose guard died (only those on `workspace`, when
    /// given).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Recover`] when a run cannot be recovered (recovery can be run again).
    pub fn recover(&self, workspace: Option<&Path>) -> Result<Vec<Recovered>, HistoryError> {
        let ws = workspace.map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.to_path_buf()));
        journal::recover(&self.state, ws.as_deref()).map_err(HistoryError::Recover)
    }

    /// Delete the journals of all but the newest `keep` runs (their audit logs and summaries
    /// stay; running and interrupted runs are never touched).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Prune`] when a journal cannot be removed.
    pub fn prune(&self, keep: usize) -> Result<PruneReport, HistoryError> {
        journal::prune(&self.state, keep).map_err(HistoryError::Prune)
    }
}

fn first_checkpoint(run: &RunRecord, j: &Journal) -> Result<CheckpointId, HistoryError> {
    j.checkpoints()
        .first()
        .map(|(id, _, _)| *id)
        .ok_or_else(|| HistoryError::NoCheckpoint {
            run: run.id.clone(),
            checkpoint: 0,
        })
}
