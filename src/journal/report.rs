//! What a run changed ([`Journal::diff`]) and what rolling it back would now overwrite
//! ([`Journal::conflicts`], from the seal in `seal.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::journal::{CheckpointId, Journal, JournalError};
use super::log::Op;
use super::seal::Prober;
use crate::audit::PathText;

/// Paths (relative to the workspace) changed since a checkpoint, each sorted by bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Entries that did not exist at the checkpoint.
    pub added: Vec<PathBuf>,
    /// Files whose content changed.
    pub modified: Vec<PathBuf>,
    /// Entries that existed at the checkpoint and are gone.
    pub deleted: Vec<PathBuf>,
    /// Only mode, owner or times changed.
    pub metadata: Vec<PathBuf>,
    /// The `exclude` patterns: changes there are not journaled, so not listed.
    pub excluded: Vec<String>,
}

/// A path whose state differs from what the run left: rolling back would lose that newer work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The path, relative to the workspace.
    pub path: PathBuf,
    /// What changed, for a human (`modified since the run left it`, ...).
    pub what: String,
}

impl Journal {
    /// Paths whose state differs from what the run left, that a rollback to the run's start
    /// would refuse to overwrite (see `seal.rs`).
    ///
    /// # Errors
    ///
    /// [`JournalError::NoSeal`] when the run left no seal, [`JournalError::Inspect`] when a
    /// workspace path cannot be examined.
    pub fn conflicts(&self) -> Result<Vec<Conflict>, JournalError> {
        let after = self
            .checkpoints()
            .first()
            .map(|(id, _, _)| self.checkpoint_seq(*id))
            .transpose()?
            .unwrap_or(0);
        let plan = self.live_changes_after(after);
        Ok(self.preflight(&plan)?.refuse)
    }

    /// What changed since checkpoint `from`, judged by the log and the tree as it is now.
    ///
    /// # Errors
    ///
    /// [`JournalError::NoCheckpoint`] when `from` is not in the journal,
    /// [`JournalError::Inspect`] when a workspace path cannot be examined.
    pub fn diff(&self, from: CheckpointId) -> Result<Diff, JournalError> {
        let after = self.checkpoint_seq(from)?;
        // path -> (existed before, content changed)
        let mut seen: BTreeMap<PathText, (bool, bool)> = BTreeMap::new();
        for e in self.live_changes_after(after) {
            let mut note = |path: &PathText, existed: bool, content: bool| {
                let slot = seen.entry(path.clone()).or_insert((existed, false));
                slot.1 |= content;
            };
            match &e.op {
                Op::Created { path, .. } | Op::Entered { path, .. } | Op::Dropped { path, .. } => {
                    note(path, false, true)
                }
                Op::Meta { path, .. } => note(path, true, false),
                Op::Deleted { path, .. }
                | Op::Rmdir { path, .. }
                | Op::Modified { path, .. }
                | Op::Unprotected { path, .. } => note(path, true, true),
                Op::Renamed {
                    from, to, replaced, ..
                } => {
                    note(from, true, true);
                    note(to, replaced.is_some(), true);
                }
                Op::Exchanged { from, to, .. } => {
                    note(from, true, true);
                    note(to, true, true);
                }
                Op::Checkpoint { .. }
                | Op::Begin { .. }
                | Op::RolledBack { .. }
                | Op::Undone { .. }
                | Op::Aborted { .. }
                | Op::Sealed { .. }
                | Op::Copied { .. } => {}
            }
        }
        let mut diff = Diff {
            excluded: self.header.exclude.clone(),
            ..Diff::default()
        };
        // The paths come sorted, so a directory's entries come together: the prober opens
        // each directory once for them, not once per path (every run's end computes this).
        let mut probe = Prober::new(self);
        for (path, (existed, content)) in seen {
            let exists = probe
                .stat(Path::new(path.as_os_str()))
                .map_err(|source| JournalError::Inspect {
                    path: self.workspace.join(path.as_os_str()),
                    source,
                })?
                .is_some();
            let list = match (existed, exists) {
                (true, false) => &mut diff.deleted,
                (false, true) => &mut diff.added,
                (true, true) if content => &mut diff.modified,
                (true, true) => &mut diff.metadata,
                (false, false) => continue,
            };
            list.push(PathBuf::from(path));
        }
        Ok(diff)
    }
}
