//! What a run changed ([`Journal::diff`]) and what rolling it back would now overwrite
//! ([`Journal::seal`], [`Journal::conflicts`]).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::fsops::{self, stat_at};
use super::journal::{CheckpointId, Journal, JournalError};
use super::log::{Kind, Op};
use crate::audit::PathText;

/// Files up to this size get a content hash in the seal.
const SEAL_HASH_MAX: u64 = 1 << 20;

/// Paths (relative to the workspace) changed since a checkpoint, each sorted by bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<PathBuf>,
    pub modified: Vec<PathBuf>,
    pub deleted: Vec<PathBuf>,
    /// Only mode, owner or times changed.
    pub metadata: Vec<PathBuf>,
    /// The `exclude` patterns: changes there are not journaled, so not listed.
    pub excluded: Vec<String>,
}

/// A path whose state differs from what the run left: rolling back would lose that newer work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub path: PathBuf,
    pub what: String,
}

/// A light fingerprint of one path when the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Print {
    kind: Kind,
    size: u64,
    mtime: [i64; 2],
    ino: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct SealFile {
    paths: Vec<(PathText, Option<Print>)>,
}

impl Journal {
    fn print(&self, rel: &PathText) -> io::Result<Option<Print>> {
        let (dir, name) = match fsops::parent_of(self.ws(), Path::new(rel.as_os_str())) {
            Ok(x) => x,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let Some(st) = stat_at(dir.as_fd(), &name)? else {
            return Ok(None);
        };
        let sha256 = if st.kind == Kind::File && st.size <= SEAL_HASH_MAX {
            Some(fsops::hash_at(dir.as_fd(), &name)?)
        } else {
            None
        };
        Ok(Some(Print {
            kind: st.kind,
            size: st.size,
            mtime: st.mtime,
            ino: st.ino,
            sha256,
        }))
    }

    fn exists(&self, rel: &PathText) -> io::Result<bool> {
        match fsops::parent_of(self.ws(), Path::new(rel.as_os_str())) {
            Ok((dir, name)) => Ok(stat_at(dir.as_fd(), &name)?.is_some()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every path a live entry touched, once, sorted.
    fn touched(&self, after: u64) -> Vec<PathText> {
        let mut paths: Vec<PathText> = self
            .live_changes_after(after)
            .iter()
            .flat_map(|e| e.op.paths().into_iter().cloned().collect::<Vec<_>>())
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    fn seal_path(&self) -> PathBuf {
        self.dir.join("seal.json")
    }

    /// Records a fingerprint (type, size, mtime, inode, and a content hash up to 1 MiB) of every
    /// path the run touched, for [`Journal::conflicts`]. Call it when the run ends.
    pub fn seal(&mut self) -> Result<(), JournalError> {
        let path = self.seal_path();
        let inspect = |source| JournalError::Inspect {
            path: self.workspace.clone(),
            source,
        };
        let mut paths = Vec::new();
        for rel in self.touched(0) {
            let print = self.print(&rel).map_err(inspect)?;
            paths.push((rel, print));
        }
        let n = paths.len() as u64;
        let text = serde_json::to_vec(&SealFile { paths }).map_err(io::Error::other);
        let tmp = self.dir.join(".seal.json.tmp");
        text.and_then(|t| std::fs::write(&tmp, t))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|source| JournalError::Create {
                path: path.clone(),
                source,
            })?;
        self.append(Op::Sealed { paths: n })?;
        Ok(())
    }

    /// Paths whose state differs from what the run left when it was sealed.
    pub fn conflicts(&self) -> Result<Vec<Conflict>, JournalError> {
        let path = self.seal_path();
        let seal: SealFile = std::fs::read(&path)
            .and_then(|b| serde_json::from_slice(&b).map_err(io::Error::other))
            .map_err(|source| JournalError::Read {
                path: path.clone(),
                source,
            })?;
        let mut out = Vec::new();
        for (rel, then) in seal.paths {
            let now = self.print(&rel).map_err(|source| JournalError::Inspect {
                path: self.workspace.join(rel.as_os_str()),
                source,
            })?;
            let what = match (&then, &now) {
                (None, None) => continue,
                (Some(_), None) => "deleted after the run",
                (None, Some(_)) => "created after the run",
                (Some(a), Some(b)) if a.kind != b.kind => "replaced by another type after the run",
                (Some(a), Some(b)) if a == b => continue,
                (Some(a), Some(b)) if a.sha256.is_some() && a.sha256 == b.sha256 => continue,
                _ => "changed after the run",
            };
            out.push(Conflict {
                path: PathBuf::from(rel),
                what: what.to_string(),
            });
        }
        Ok(out)
    }

    /// What changed since checkpoint `from`, judged by the log and the tree as it is now.
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
                Op::Created { path } => note(path, false, true),
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
                Op::Checkpoint { .. } | Op::RolledBack { .. } | Op::Sealed { .. } => {}
            }
        }
        let mut diff = Diff {
            excluded: self.header.exclude.clone(),
            ..Diff::default()
        };
        for (path, (existed, content)) in seen {
            let exists = self.exists(&path).map_err(|source| JournalError::Inspect {
                path: self.workspace.join(path.as_os_str()),
                source,
            })?;
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
