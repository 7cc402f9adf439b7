//! Whether a tree about to be renamed into an excluded path was made entirely since the last
//! checkpoint (`rename.rs` then leaves it there on undo instead of adopting the excluded path).
//! Two witnesses, either suffices per entry: a birth time (statx) after the checkpoint, or, for
//! a name with a single link, the log showing it was created since. File times are coarse
//! (a tick of a few milliseconds), so a file made just after the checkpoint may carry an
//! earlier time; a hard link to an older file is not new however it was named. Anything
//! unknown counts as old, which is the safe side: an adopted path is journaled.

use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::path::Path;

use super::fsops;
use super::journal::Journal;
use super::log::{Kind, Op};
use crate::audit::PathText;

/// At most this many entries are looked at to show a tree was made since the checkpoint.
const LIMIT: usize = 1000;

impl Journal {
    /// Whether `dir/name`, at workspace path `rel`, and everything under it was made since
    /// the last checkpoint (see the module doc).
    pub(crate) fn made_since_checkpoint(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        rel: &Path,
    ) -> bool {
        let mut limit = LIMIT;
        self.fresh_tree(dir, name, rel, &mut limit)
    }

    /// Whether `dir/name` (at workspace path `rel`) and everything under it was created since
    /// the last checkpoint: born after it (statx birth time), or, for a name with one link,
    /// created since it by the log (file times are coarse: a file made a few milliseconds
    /// after the checkpoint may carry an earlier time). Anything unknown, and trees of more
    /// than `limit` entries, count as not.
    fn fresh_tree(&self, dir: BorrowedFd<'_>, name: &OsStr, rel: &Path, limit: &mut usize) -> bool {
        let Some(at) = self.checkpoint_time else {
            return false;
        };
        if *limit == 0 {
            return false;
        }
        *limit -= 1;
        let Ok(Some(st)) = fsops::raw_stat_at(dir, name) else {
            return false;
        };
        let born = crate::sys::fs::birth_time(dir, name)
            .ok()
            .flatten()
            .is_some_and(|b| b > at);
        let is_dir = Kind::of_mode(st.st_mode) == Kind::Dir;
        if !born && !((is_dir || st.st_nlink == 1) && self.created_since_checkpoint(rel)) {
            return false;
        }
        if !is_dir {
            return true;
        }
        let (Ok(names), Ok(sub)) = (
            fsops::list_dir(dir, name),
            fsops::open_at(
                dir,
                name,
                nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
                0,
            ),
        ) else {
            return false;
        };
        names
            .iter()
            .all(|n| self.fresh_tree(std::os::fd::AsFd::as_fd(&sub), n, &rel.join(n), limit))
    }

    /// Whether the log shows the entry now at `rel` was created since the last checkpoint:
    /// following renames back to a `created` entry of its own.
    fn created_since_checkpoint(&self, rel: &Path) -> bool {
        let mut cur = rel.to_path_buf();
        for e in self.entries.iter().rev() {
            let moved = |from: &PathText, to: &PathText, cur: &Path| {
                cur.strip_prefix(Path::new(to.as_os_str()))
                    .ok()
                    .map(|rest| Path::new(from.as_os_str()).join(rest))
            };
            fn rest(p: &PathText) -> &Path {
                Path::new(p.as_os_str())
            }
            match &e.op {
                Op::Created { path, .. } if rest(path) == cur => return true,
                Op::Renamed { from, to, .. } => {
                    if let Some(back) = moved(from, to, &cur) {
                        cur = back;
                    }
                }
                Op::Exchanged { from, to, .. } => {
                    if let Some(back) = moved(from, to, &cur) {
                        cur = back;
                    } else if let Some(back) = moved(to, from, &cur) {
                        cur = back;
                    }
                }
                Op::Modified { .. } | Op::Meta { .. } | Op::Unprotected { .. } => {}
                op if op.paths().iter().any(|p| cur.starts_with(rest(p))) => return false,
                op if !op.is_change() => return false, // a checkpoint or an operation
                _ => {}
            }
        }
        false
    }
}
