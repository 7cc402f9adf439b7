//! What a path held at a checkpoint, as far as the journal kept it ([`Journal::pre_image`]):
//! the content `guard diff --patch` compares the workspace against. The oldest change after
//! the checkpoint that touched the path (or a directory above it) decides: a file saved before
//! its first write, an entry moved into the store when it was deleted or replaced (a deleted
//! directory keeps its whole tree there), nothing at all when the run created it.

use std::path::{Path, PathBuf};

use super::journal::{CheckpointId, Journal, JournalError};
use super::log::{Kind, Op};
use crate::audit::PathText;

/// A path's state at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreImage {
    /// Nothing changed it since: it is what the workspace holds now.
    Unchanged,
    /// It did not exist (the run created it, or moved it in).
    Absent,
    /// Its content is kept in the journal's store at this path (a file, or a directory whose
    /// tree is kept there as it was).
    Stored(PathBuf),
    /// It existed, but the journal kept no copy of its content, for this reason.
    NotKept(String),
}

impl Journal {
    /// The state of `rel` (relative to the workspace) at checkpoint `from` (see the module
    /// documentation).
    pub fn pre_image(&self, from: CheckpointId, rel: &Path) -> Result<PreImage, JournalError> {
        let after = self.checkpoint_seq(from)?;
        let store = self.dir.join("store");
        for e in self.live_changes_after(after) {
            let here = |p: &PathText| Path::new(p.as_os_str()) == rel;
            let above = |p: &PathText| rel.strip_prefix(p.as_os_str()).ok();
            let found = match &e.op {
                Op::Created { path, .. } | Op::Entered { path, .. } if above(path).is_some() => {
                    PreImage::Absent
                }
                Op::Modified { path, .. } if here(path) => {
                    PreImage::Stored(store.join(self.object_name(e.seq)))
                }
                Op::Deleted { path, st, .. } if above(path).is_some() => {
                    let object = store.join(self.object_name(e.object()));
                    match above(path) {
                        Some(rest) if rest.as_os_str().is_empty() => PreImage::Stored(object),
                        Some(rest) if st.kind == Kind::Dir => PreImage::Stored(object.join(rest)),
                        _ => PreImage::Absent,
                    }
                }
                Op::Rmdir { path, .. } | Op::Dropped { path, .. } if above(path).is_some() => {
                    PreImage::Absent
                }
                Op::Renamed { to, replaced, .. } if here(to) => match replaced {
                    Some(st) if st.kind != Kind::Dir => {
                        PreImage::Stored(store.join(self.object_name(e.seq)))
                    }
                    Some(_) => PreImage::Absent,
                    None => PreImage::Absent,
                },
                Op::Renamed { from, to, .. } | Op::Exchanged { from, to, .. }
                    if above(from).is_some() || above(to).is_some() =>
                {
                    let other = if above(from).is_some() { to } else { from };
                    PreImage::NotKept(format!(
                        "moved to {} by a rename (the journal keeps no copy)",
                        other.display()
                    ))
                }
                Op::Unprotected { path, .. } if here(path) => PreImage::NotKept(
                    "written above the pre-image size cap (the journal keeps no copy)".into(),
                ),
                _ => continue,
            };
            return Ok(found);
        }
        Ok(PreImage::Unchanged)
    }
}
