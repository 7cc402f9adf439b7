//! What undoes each entry: the journaled steps (`steps.rs`) one entry of the plan takes.
//!
//! A step first checks that the state is what the entry left. The entry's own call may have
//! been refused by the kernel (the hooks write before they call): then the state shows it never
//! happened, and there is nothing to undo. When the state is something else, the path is
//! either one the rollback may overwrite (git's caches, excluded paths, everything when forced
//! or during the run itself): what is there is moved into the store first (journaled, so it
//! is kept); or it is a conflict, and the whole rollback is reverted.

use std::os::fd::AsFd as _;
use std::path::PathBuf;

use nix::fcntl::RenameFlags;

use super::fsops;
use super::journal::Journal;
use super::log::{Boundary, Entry, FileId, Kind, Op, Stat};
use super::steps::{fail, p, Apply, Step, Unstash};
use crate::audit::PathText;

impl Journal {
    /// Puts `store/<obj>` back at `rel`; when something stands there, makes way first (if the
    /// rollback may replace it) and tries again.
    /// The entry's call may have failed (the kernel refused it): then the entry is still
    /// there, or its object was dropped, and there is nothing to undo.
    fn restore(&mut self, obj: u64, rel: &PathText, st: &Stat, seq: u64, a: &mut Apply) -> Step {
        match self.unstash(obj, rel, st, seq, a) {
            Err(Unstash::Missing) => Ok(()),
            Err(Unstash::Taken) => {
                let was = a.now_id(st.id(), seq - 1);
                let now = self.stat_rel(rel).map_err(fail("inspect", rel))?;
                if now.is_some_and(|n| n.id() == was) {
                    return Ok(());
                }
                self.clear_way(rel, a, "exists again")?;
                self.unstash(obj, rel, st, seq, a)
                    .map_err(Unstash::into_step)
            }
            other => other.map_err(Unstash::into_step),
        }
    }

    /// Makes the directory the entry at `seq` removed (an `rmdir`, or a rename over it) again
    /// at `path` with its metadata `st`, unless a directory stands there (what else stands
    /// there is moved out of the way first, if the rollback may, with `why` in the conflict
    /// otherwise). The directory there is a new inode: an older entry that names the removed
    /// one (a rename of it, undone later in this rollback) finds this one.
    fn remake_dir(
        &mut self,
        path: &PathText,
        st: &Stat,
        seq: u64,
        why: &str,
        a: &mut Apply,
    ) -> Step {
        let made = match self.stat_rel(path).map_err(fail("inspect", path))? {
            Some(now) if now.kind == Kind::Dir => now,
            other => {
                if other.is_some() {
                    self.clear_way(path, a, why)?;
                }
                self.make_dir(path, Some(st), a)?;
                self.stat_rel(path)
                    .map_err(fail("inspect", path))?
                    .ok_or_else(|| format!("{} vanished", path.display()))?
            }
        };
        a.copies.record(seq, made.id());
        // Written down too: a later rollback of the same run (this one restored a checkpoint,
        // that one an older one) reads the log, not this rollback's memory, to follow the
        // removed directory to this one.
        if made.id() != st.id() {
            self.append_step(Op::Copied {
                from: st.id(),
                to: made.id(),
                stored: seq,
            })?;
        }
        Ok(())
    }

    /// Undoes entry `e` (journaled), if the state shows it is still in effect.
    pub(crate) fn undo_step(&mut self, e: &Entry, a: &mut Apply) -> Step {
        match &e.op {
            Op::Created { path, id, obj } => {
                let Some(now) = self.stat_rel(path).map_err(fail("inspect", path))? else {
                    return Ok(()); // gone already (with its directory, maybe)
                };
                if let Some(id) = id {
                    if now.id() != a.now_id(*id, e.seq) {
                        return self.clear_way(path, a, "is not what the operation put there");
                    }
                    self.stash(path, *obj)?;
                    a.dirs_gone(path);
                    return Ok(());
                }
                if now.kind != Kind::Dir {
                    return self.stash(path, None);
                }
                let (dir, name) = self
                    .parent(path)
                    .map_err(fail("open the directory of", path))?;
                let children = fsops::list_dir(dir.as_fd(), &name).map_err(fail("list", path))?;
                if children.is_empty() {
                    self.forget_dirs();
                    self.append_step(Op::Rmdir {
                        path: path.clone(),
                        st: now,
                    })?;
                    fsops::unlink_at(dir.as_fd(), &name, true).map_err(fail("remove", path))?;
                    a.dirs_gone(path);
                    return Ok(());
                }
                let foreign = children
                    .iter()
                    .find(|c| !self.is_excluded(&p(path).join(c)));
                match foreign {
                    Some(c) if !self.overridable(path, a) => Err(format!(
                        "conflict: {} was made by the run but holds {}, which it did not make",
                        path.display(),
                        c.to_string_lossy()
                    )),
                    _ => {
                        a.replaced.insert(
                            PathBuf::from(path.clone()),
                            "made by the run, removed with what was put in it since (kept in \
                             the journal)"
                                .to_string(),
                        );
                        self.stash(path, None)?;
                        a.dirs_gone(path);
                        Ok(())
                    }
                }
            }
            Op::Deleted { path, st, .. } => self.restore(e.object(), path, st, e.seq, a),
            // Nothing was kept: the file's `created` entry, undone next, removes it anyway.
            Op::Dropped { .. } => Ok(()),
            Op::Rmdir { path, st } => {
                self.remake_dir(path, st, e.seq, "is no longer a directory", a)
            }
            Op::Renamed {
                from,
                to,
                src,
                replaced,
                boundary,
            } => {
                if *boundary != Some(Boundary::ToLeft) {
                    let at_to = self.stat_rel(to).map_err(fail("inspect", to))?;
                    let src = a.now_id(*src, e.seq);
                    if at_to.as_ref().is_some_and(|s| s.id() == src) {
                        self.make_parents(from, a)?;
                        self.clear_way(from, a, "was taken since the rename")?;
                        self.move_entry(to, from)?;
                        a.dirs_moved(to, from);
                    } else if self
                        .stat_rel(from)
                        .map_err(fail("inspect", from))?
                        .is_some_and(|s| s.id() == src)
                    {
                        // The rename never happened (the kernel refused it, or guard was
                        // killed between the entry and the call): what it would have replaced
                        // never left `to`, and is there now (everything newer is undone), for
                        // older entries that name it. Its object, a link to it or a copy,
                        // goes: after a refusal it is gone already, after a kill it would
                        // leave the file with a link too many.
                        if let (Some(r), Some(now)) = (replaced, at_to) {
                            a.copies.record(e.seq, now.id());
                            if r.kind != Kind::Dir {
                                self.clear_object(e.seq);
                            }
                        }
                        return Ok(());
                    } else if !self.overridable(to, a) {
                        return Err(format!(
                            "conflict: {} is not what the run renamed there",
                            to.display()
                        ));
                    }
                }
                match replaced {
                    Some(r) if r.kind == Kind::Dir => {
                        self.remake_dir(to, r, e.seq, "exists again", a)
                    }
                    Some(r) => self.restore(e.seq, to, r, e.seq, a),
                    None => Ok(()),
                }
            }
            Op::Exchanged {
                from,
                to,
                from_id,
                to_id,
                ..
            } => {
                let x = self.stat_rel(from).map_err(fail("inspect", from))?;
                let y = self.stat_rel(to).map_err(fail("inspect", to))?;
                let swapped = x
                    .as_ref()
                    .is_some_and(|x| x.id() == a.now_id(*to_id, e.seq))
                    && y.as_ref()
                        .is_some_and(|y| y.id() == a.now_id(*from_id, e.seq));
                let unswapped = x.is_some_and(|x| x.id() == a.now_id(*from_id, e.seq))
                    && y.is_some_and(|y| y.id() == a.now_id(*to_id, e.seq));
                if unswapped {
                    return Ok(()); // the exchange never happened
                }
                if !swapped {
                    return if self.overridable(from, a) && self.overridable(to, a) {
                        Ok(())
                    } else {
                        Err(format!(
                            "conflict: {} and {} are not what the run swapped",
                            from.display(),
                            to.display()
                        ))
                    };
                }
                self.forget_dirs();
                let (fd, fname) = self
                    .parent(from)
                    .map_err(fail("open the directory of", from))?;
                let (td, tname) = self.parent(to).map_err(fail("open the directory of", to))?;
                self.append_step(Op::Exchanged {
                    from: from.clone(),
                    to: to.clone(),
                    from_id: a.now_id(*to_id, e.seq),
                    to_id: a.now_id(*from_id, e.seq),
                    adopted: None,
                })?;
                fsops::rename_at(
                    fd.as_fd(),
                    &fname,
                    td.as_fd(),
                    &tname,
                    RenameFlags::RENAME_EXCHANGE,
                )
                .map_err(fail("swap back", from))?;
                a.dirs_swapped(from, to);
                Ok(())
            }
            Op::Entered { path, src } => {
                match self.stat_rel(path).map_err(fail("inspect", path))? {
                    None => Ok(()),
                    Some(now) if now.id() == a.now_id(*src, e.seq) => {
                        self.stash(path, None)?;
                        a.dirs_gone(path);
                        Ok(())
                    }
                    // What the rename would have replaced is still there: it never happened.
                    Some(now) if self.replaced_by(e, path) == Some(now.id()) => Ok(()),
                    Some(_) => self.clear_way(path, a, "is not what entered the workspace"),
                }
            }
            Op::Modified { path, st } => {
                match self.stat_rel(path).map_err(fail("inspect", path))? {
                    Some(now) if now.kind == Kind::File => self.rewrite(path, e.seq, st),
                    now => {
                        if now.is_some() {
                            self.clear_way(path, a, "is no longer a regular file")?;
                        }
                        // Gone: bring the pre-image back as the file.
                        self.restore_copy(e.seq, path, st)
                    }
                }
            }
            Op::Meta { path, st } => match self.stat_rel(path).map_err(fail("inspect", path))? {
                // A directory this rollback made gets its metadata once its entries are back:
                // this older entry has the last word on it.
                Some(_) if a.dirs.iter().any(|(d, _)| d == path) => {
                    for (d, s) in &mut a.dirs {
                        if d == path {
                            *s = st.clone();
                        }
                    }
                    Ok(())
                }
                Some(_) => self.set_meta(path, st),
                None if self.overridable(path, a) => Ok(()),
                None => Err(format!("conflict: {} is missing", path.display())),
            },
            Op::Unprotected { path, size, .. } => {
                a.problems.push(format!(
                    "{} was written without a pre-image ({size} bytes); not restored",
                    path.display()
                ));
                Ok(())
            }
            Op::Checkpoint { .. }
            | Op::Begin { .. }
            | Op::RolledBack { .. }
            | Op::Undone { .. }
            | Op::Aborted { .. }
            | Op::Sealed { .. }
            | Op::Copied { .. } => Ok(()),
        }
    }

    /// The inode entry `e` found at `path` and recorded just before it (the `deleted` or
    /// `rmdir` of what a rename into the workspace was to replace).
    fn replaced_by(&self, e: &Entry, path: &PathText) -> Option<FileId> {
        let prev = self.entries.iter().rev().find(|p| p.seq + 1 == e.seq)?;
        match &prev.op {
            Op::Deleted { path: p, st, .. } | Op::Rmdir { path: p, st } if p == path => {
                Some(st.id())
            }
            _ => None,
        }
    }
}
