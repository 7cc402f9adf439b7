//! Reverting the steps of an operation that did not finish: a rollback that failed half-way,
//! or one that a crash interrupted (`guard recover`). Each step is undone newest first, only
//! when the state shows it is in effect, so a revert interrupted in its turn can simply be run
//! again; nothing here is journaled (the steps being reverted are the journal).

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd as _;

use nix::fcntl::{OFlag, RenameFlags};

use super::copy;
use super::fsops::{self, stat_at};
use super::ids::Copies;
use super::journal::{Journal, JournalError, StoreMode};
use super::log::{Entry, FileId, Kind, Op, Stat};
use crate::audit::PathText;

fn fail(what: &str, path: &PathText, err: io::Error) -> String {
    format!("cannot {what} {}: {err}", path.display())
}

impl Journal {
    /// The directory of `rel`, opened afresh (a revert moves directories back).
    fn fresh_parent(
        &self,
        rel: &PathText,
    ) -> io::Result<(std::os::fd::OwnedFd, std::ffi::OsString)> {
        fsops::parent_of(self.ws(), std::path::Path::new(rel.as_os_str()))
    }

    /// Reverts one step if the state shows it is in effect. `copies` maps inodes put back as
    /// copies (across filesystems) to the copy's id.
    pub(crate) fn revert_step(
        &self,
        e: &Entry,
        copies: &mut Copies,
        copied: &mut Vec<(u64, FileId, FileId)>,
    ) -> Result<(), String> {
        let now_id = |id: FileId, copies: &Copies| copies.now(id, e.seq);
        match &e.op {
            Op::Created { path, id, obj } => {
                let Ok((dir, name)) = self.fresh_parent(path) else {
                    return Ok(()); // its directory is gone, so is it
                };
                let dir = dir.as_fd();
                let Some(now) = stat_at(dir, &name).map_err(|err| fail("inspect", path, err))?
                else {
                    return Ok(());
                };
                if id.is_some_and(|id| now_id(id, copies) != now.id()) {
                    return Ok(()); // not what the step put there
                }
                match (id, obj) {
                    (Some(_), Some(o)) => {
                        let target = self.object_name(*o);
                        if (self.store())
                            .and_then(|store| stat_at(store, OsStr::new(&target)))
                            .map_err(|err| fail("inspect the store for", path, err))?
                            .is_some()
                        {
                            // A copy whose object was not dropped yet.
                            return copy::remove_tree(dir, &name)
                                .map_err(|err| fail("remove", path, err));
                        }
                        self.move_into_store(dir, &name, OsStr::new(&target))
                            .map_err(|err| fail("put back", path, err))
                    }
                    // A copy or a link whose original is still kept.
                    (Some(_), None) => {
                        copy::remove_tree(dir, &name).map_err(|err| fail("remove", path, err))
                    }
                    (None, _) if now.kind == Kind::Dir => {
                        match fsops::unlink_at(dir, &name, true) {
                            Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => {
                                Err(format!(
                                    "{} holds entries the journal did not record; left in place",
                                    path.display()
                                ))
                            }
                            other => other.map_err(|err| fail("remove", path, err)),
                        }
                    }
                    (None, _) => {
                        copy::remove_tree(dir, &name).map_err(|err| fail("remove", path, err))
                    }
                }
            }
            Op::Deleted { path, st, .. } => {
                let copy = self
                    .put_back(e.object(), path, st)
                    .map_err(|err| fail("restore", path, err))?;
                if let Some(new) = copy {
                    copies.record(e.seq, new);
                    copied.push((e.seq, copies.now(st.id(), e.seq - 1), new));
                }
                Ok(())
            }
            Op::Rmdir { path, st } => self
                .recreate_dir(path, st)
                .map_err(|err| fail("recreate", path, err)),
            Op::Renamed { from, to, src, .. } => {
                let (fd, fname) = self
                    .fresh_parent(from)
                    .map_err(|err| fail("open", from, err))?;
                let (td, tname) = self.fresh_parent(to).map_err(|err| fail("open", to, err))?;
                let at_to = stat_at(td.as_fd(), &tname).map_err(|err| fail("inspect", to, err))?;
                if at_to.is_some_and(|s| s.id() == now_id(*src, copies)) {
                    fsops::rename_at(
                        td.as_fd(),
                        &tname,
                        fd.as_fd(),
                        &fname,
                        RenameFlags::RENAME_NOREPLACE,
                    )
                    .map_err(|err| fail("move back", to, err))?;
                }
                Ok(())
            }
            Op::Exchanged {
                from,
                to,
                from_id,
                to_id,
                ..
            } => {
                let (fd, fname) = self
                    .fresh_parent(from)
                    .map_err(|err| fail("open", from, err))?;
                let (td, tname) = self.fresh_parent(to).map_err(|err| fail("open", to, err))?;
                let a = stat_at(fd.as_fd(), &fname).map_err(|err| fail("inspect", from, err))?;
                let b = stat_at(td.as_fd(), &tname).map_err(|err| fail("inspect", to, err))?;
                let (f, t) = (now_id(*from_id, copies), now_id(*to_id, copies));
                if a.is_some_and(|a| a.id() == t) && b.is_some_and(|b| b.id() == f) {
                    fsops::rename_at(
                        fd.as_fd(),
                        &fname,
                        td.as_fd(),
                        &tname,
                        RenameFlags::RENAME_EXCHANGE,
                    )
                    .map_err(|err| fail("swap back", from, err))?;
                }
                Ok(())
            }
            Op::Modified { path, st } => self
                .write_back(e.seq, path, st)
                .map_err(|err| fail("restore the content of", path, err)),
            Op::Meta { path, st } => {
                let (dir, name) = self
                    .fresh_parent(path)
                    .map_err(|err| fail("open", path, err))?;
                if stat_at(dir.as_fd(), &name)
                    .map_err(|err| fail("inspect", path, err))?
                    .is_none()
                {
                    return Ok(());
                }
                fsops::set_meta_at(dir.as_fd(), &name, st)
                    .map_err(|err| fail("restore the metadata of", path, err))
            }
            // Not written as steps.
            // Never a step of an operation; nothing to put back either way.
            Op::Entered { .. } | Op::Unprotected { .. } | Op::Dropped { .. } => Ok(()),
            Op::Checkpoint { .. }
            | Op::Begin { .. }
            | Op::RolledBack { .. }
            | Op::Undone { .. }
            | Op::Aborted { .. }
            | Op::Sealed { .. }
            | Op::Copied { .. } => Ok(()),
        }
    }

    fn recreate_dir(&self, path: &PathText, st: &Stat) -> io::Result<()> {
        let (dir, name) = self.fresh_parent(path)?;
        if stat_at(dir.as_fd(), &name)?.is_some() {
            return Ok(());
        }
        fsops::mkdir_at(dir.as_fd(), &name, 0o700)?;
        fsops::set_meta_at(dir.as_fd(), &name, st)
    }

    /// Puts `store/<obj>` back at `path` when the object exists and the path does not.
    /// Returns the new inode's id when it was put back as a copy.
    fn put_back(&self, obj: u64, path: &PathText, st: &Stat) -> io::Result<Option<FileId>> {
        let obj = self.object_name(obj);
        let obj = OsStr::new(&obj);
        let store = self.store()?;
        let Some(object) = stat_at(store, obj)? else {
            return Ok(None);
        };
        let (dir, name) = self.fresh_parent(path)?;
        let dir = dir.as_fd();
        if let Some(now) = stat_at(dir, &name)? {
            if now.id() == st.id() || self.header.mode == StoreMode::Copy {
                // The move into the store never happened (only its copy was made).
                return copy::remove_tree(store, obj).map(|()| None);
            }
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "something else is there now",
            ));
        }
        if self.header.mode != StoreMode::Copy {
            match fsops::rename_at(store, obj, dir, &name, RenameFlags::RENAME_NOREPLACE) {
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
                other => return other.map(|()| (object.id() != st.id()).then_some(object.id())),
            }
        }
        copy::copy_tree(store, obj, dir, &name, false)?;
        copy::remove_tree(store, obj)?;
        Ok(stat_at(dir, &name)?.map(|s| s.id()))
    }

    /// Writes the content `store/<seq>` back into the file at `path`, then its metadata.
    fn write_back(&self, seq: u64, path: &PathText, st: &Stat) -> io::Result<()> {
        let obj = self.object_name(seq);
        let obj = OsStr::new(&obj);
        let Ok(src) = fsops::open_at(self.store()?, obj, OFlag::O_RDONLY, 0) else {
            return Ok(()); // the pre-image was never saved: the step never happened
        };
        let (dir, name) = self.fresh_parent(path)?;
        let dir = dir.as_fd();
        match stat_at(dir, &name)? {
            Some(now) if now.kind == Kind::File => {
                let dst = copy::open_writable(dir, &name)?;
                copy::copy_content(&std::fs::File::from(src), &dst)?;
                fsops::set_meta_at(dir, &name, st)
            }
            _ => Ok(()),
        }
    }

    /// Reverts every step after `begin`, newest first; returns what could not be reverted.
    /// Inodes put back as copies are recorded (`copied`), so later entries naming them still
    /// find them.
    pub(crate) fn revert_steps(&mut self, begin: u64) -> Result<Vec<String>, JournalError> {
        let steps: Vec<Entry> = self
            .entries
            .iter()
            .filter(|e| e.seq > begin && e.op.is_change())
            .cloned()
            .collect();
        self.forget_dirs();
        let mut copies = Copies::of(&self.entries);
        let mut copied = Vec::new();
        let problems = steps
            .iter()
            .rev()
            .filter_map(|e| self.revert_step(e, &mut copies, &mut copied).err())
            .collect();
        for (stored, from, to) in copied {
            self.append(Op::Copied { from, to, stored })?;
        }
        Ok(problems)
    }
}
