//! Operations on past runs, as library calls: list them, find one, show what one changed,
//! roll one back (or undo the rollback) after it ended, recover runs whose guard died, prune
//! old journals. [`History`] is bound to one state directory; every `guard` subcommand on past
//! runs (`runs`, `diff`, `rollback`, `undo`, `recover`, `prune`, and the run lookup of `log`
//! and `report`) is a printer over it. Rollback and undo live in `operate.rs`, the content
//! diff of `guard diff --patch` in `patch.rs`.

use std::path::{Path, PathBuf};

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
    /// No run is recorded (or none that started).
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
    /// The run changed nothing in its workspace, so it never made a journal.
    #[error(
        "run {run} changed nothing in its workspace: there is no journal and nothing to roll back"
    )]
    NothingChanged {
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
    /// The journal had nothing to do (no rollback to undo), or declined (the run changed the
    /// workspace after that rollback): nothing failed and nothing changed.
    #[error("run {run}: {why}{}", declined_hint(why, run))]
    Declined {
        /// The run's id.
        run: String,
        /// What the journal said.
        why: JournalError,
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
    /// A rollback or undo of the run was interrupted, or runs now in another guard process.
    #[error("a rollback of run {run} was interrupted (or still runs as pid {pid})\nhint: `guard recover` reverts an interrupted one")]
    OperationInterrupted {
        /// The run.
        run: String,
        /// The guard process that started the operation.
        pid: u32,
    },
    /// The workspace could not be digested after an operation.
    #[error("cannot digest the workspace {}", path.display())]
    Digest {
        /// The workspace.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Recovering interrupted runs failed; it can be run again.
    #[error("recovery failed\nhint: it can be run again")]
    Recover(#[source] JournalError),
    /// Deleting old journals failed.
    #[error("prune failed")]
    Prune(#[source] JournalError),
    /// Paths the operation would write changed after the run (or the last operation) left
    /// them: going ahead would lose that work. Nothing was changed.
    #[error("refusing the {operation} of run {run}: {} path(s) changed since the run left them, and the {operation} would lose that work:{}\nhint: `--force` goes ahead and keeps what it replaces in the journal (`guard undo` brings it back)", conflicts.len(), list(conflicts))]
    Conflicts {
        /// The run's id.
        run: String,
        /// `rollback` or `undo`.
        operation: &'static str,
        /// What changed.
        conflicts: Vec<Conflict>,
    },
    /// The operation failed half-way and was reverted: the workspace is as it was before.
    #[error("the {operation} of run {run} failed")]
    Aborted {
        /// The run.
        run: String,
        /// `rollback` or `undo`.
        operation: &'static str,
        /// What stopped it, and what the revert could not undo.
        #[source]
        source: JournalError,
    },
}

fn list(conflicts: &[Conflict]) -> String {
    let mut s = String::new();
    for c in conflicts.iter().take(20) {
        let path = crate::audit::escape_for_terminal(c.path.as_os_str().as_encoded_bytes());
        s.push_str(&format!("\n  {path}: {}", c.what));
    }
    if conflicts.len() > 20 {
        s.push_str(&format!("\n  ... and {} more", conflicts.len() - 20));
    }
    s
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

    /// Its directory, as the journal module names runs.
    pub fn run_dir(&self) -> RunDir {
        RunDir {
            id: self.id.clone(),
            path: self.dir.clone(),
        }
    }

    /// Its audit log (`audit.jsonl`).
    pub fn audit_log(&self) -> PathBuf {
        self.run_dir().audit_log()
    }

    /// Its summary (`summary.json`).
    pub fn summary(&self) -> PathBuf {
        self.run_dir().summary()
    }

    /// The workspace it ran on, as its metadata records it.
    pub fn workspace(&self) -> Option<&Path> {
        self.meta.as_ref().map(|m| m.workspace.as_path())
    }

    /// [`HistoryError::NoJournal`] unless the run still has a journal, or
    /// [`HistoryError::NothingChanged`] when it never had one.
    pub(super) fn require_journal(&self) -> Result<(), HistoryError> {
        if self.dir.join("journal").is_dir() {
            return Ok(());
        }
        // A journal is made at the run's first change: its summary tells a run that made none
        // from one whose journal was pruned.
        let unchanged = std::fs::read(self.summary())
            .ok()
            .and_then(|b| serde_json::from_slice::<crate::audit::Summary>(&b).ok())
            .is_some_and(|s| s.files_changed == Some(0));
        let run = self.id.clone();
        Err(if unchanged {
            HistoryError::NothingChanged { run }
        } else {
            HistoryError::NoJournal { run }
        })
    }

    pub(super) fn journal(&self) -> Result<Journal, HistoryError> {
        self.require_journal()?;
        Journal::open(&self.dir).map_err(|source| self.journal_error(source))
    }

    pub(super) fn journal_error(&self, source: JournalError) -> HistoryError {
        let run = self.id.clone();
        match source {
            // Not a failure of the journal: said as it is, not as "the journal failed".
            JournalError::NothingToUndo | JournalError::UndoBuried => {
                HistoryError::Declined { run, why: source }
            }
            source => HistoryError::Journal { run, source },
        }
    }

    /// The journal's first checkpoint: the run's start.
    pub(super) fn start(&self, j: &Journal) -> Result<CheckpointId, HistoryError> {
        j.checkpoints()
            .first()
            .map(|(id, _, _)| *id)
            .ok_or_else(|| HistoryError::NoCheckpoint {
                run: self.id.clone(),
                checkpoint: 0,
            })
    }
}

/// What to do next after [`HistoryError::Declined`].
fn declined_hint(why: &JournalError, run: &str) -> String {
    match why {
        JournalError::NothingToUndo => format!(
            "\nhint: `guard log {run}` lists its rollbacks and undos; `guard rollback {run}` rolls it back"
        ),
        _ => String::new(),
    }
}

/// The runs recorded in one state directory.
#[derive(Debug, Clone)]
pub struct History {
    pub(super) state: PathBuf,
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

    /// Every recorded run, newest first (those that failed to start included).
    pub fn runs(&self) -> Vec<RunRecord> {
        journal::list_runs(&self.state)
            .into_iter()
            .map(RunRecord::of)
            .collect()
    }

    /// The run with this id or unique id prefix; when `id` is `None`, the newest run that
    /// started (one that failed to start is never the default).
    ///
    /// # Errors
    ///
    /// [`HistoryError::NoRuns`] when no run is recorded, [`HistoryError::NoSuchRun`] when no
    /// run has that id, [`HistoryError::Ambiguous`] when the prefix matches several.
    pub fn find(&self, id: Option<&str>) -> Result<RunRecord, HistoryError> {
        let Some(id) = id else {
            return journal::default_run(&self.state)
                .map(RunRecord::of)
                .ok_or_else(|| HistoryError::NoRuns {
                    state: self.state.clone(),
                });
        };
        let mut found: Vec<RunDir> = journal::list_runs(&self.state)
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
        let j = match run.journal() {
            Err(HistoryError::NothingChanged { .. }) => return Ok(Diff::default()),
            j => j?,
        };
        let start = run.start(&j)?;
        j.diff(start).map_err(|e| run.journal_error(e))
    }

    /// Restore the workspaces of runs whose guard died (only those on `workspace`, when
    /// given); an interrupted rollback or undo is reverted.
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
