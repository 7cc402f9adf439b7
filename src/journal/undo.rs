//! Rollback: undo every live entry after a checkpoint, newest first, then verify. Every undo
//! step looks at the current state before acting, so a rollback interrupted by a crash can
//! simply be run again; a finished one appends a `rolled-back` marker so its entries are never
//! undone twice.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{OFlag, RenameFlags};

use super::fsops::{self, stat_at};
use super::journal::{CheckpointId, Journal, JournalError};
use super::log::{Entry, FileId, Kind, Op, Stat};
use crate::audit::PathText;

/// What a rollback did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollbackReport {
    pub entries_undone: u64,
    pub verified: u64,
    /// Entries that could not be undone or verified, one line each; never silently skipped.
    pub problems: Vec<String>,
}

/// Inodes restored as copies in this rollback: original id -> (path, id of the copy).
type Links = HashMap<FileId, (PathText, FileId)>;

fn p(t: &PathText) -> &Path {
    Path::new(t.as_os_str())
}

fn show(t: &PathText) -> String {
    t.display()
}

impl Journal {
    fn parent(&self, rel: &PathText) -> io::Result<(OwnedFd, OsString)> {
        fsops::parent_of(self.ws(), p(rel))
    }

    /// Undoes every entry after checkpoint `to`, newest first, then verifies the restored
    /// paths. `progress(done, total)` is called after each entry.
    pub fn rollback(
        &mut self,
        to: CheckpointId,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<RollbackReport, JournalError> {
        self.rollback_some(to, u64::MAX, progress, true)
    }

    pub(crate) fn rollback_some(
        &mut self,
        to: CheckpointId,
        limit: u64,
        progress: &mut dyn FnMut(u64, u64),
        finish: bool,
    ) -> Result<RollbackReport, JournalError> {
        let after = self.checkpoint_seq(to)?;
        let entries = self.live_changes_after(after);
        let total = entries.len() as u64;
        let mut report = RollbackReport::default();
        let mut links = Links::default();
        for e in entries
            .iter()
            .rev()
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
        {
            match self.undo(e, &mut links) {
                Ok(()) => {}
                Err(problem) => report.problems.push(problem),
            }
            report.entries_undone += 1;
            progress(report.entries_undone, total);
        }
        if !finish {
            return Ok(report);
        }
        self.verify(&entries, &mut report);
        let upto = self.next_seq();
        self.append(Op::RolledBack {
            to: to.0,
            after,
            upto,
        })?;
        self.content_saved.clear();
        self.meta_saved.clear();
        Ok(report)
    }

    /// Undoes one entry if the state shows it is still in effect.
    fn undo(&self, e: &Entry, links: &mut Links) -> Result<(), String> {
        let fail = |what: &str, path: &PathText, err: io::Error| {
            format!("cannot {what} {}: {err}", show(path))
        };
        match &e.op {
            Op::Created { path } => {
                let Ok((dir, name)) = self.parent(path) else {
                    return Ok(()); // its directory is gone, so is it
                };
                let dir = dir.as_fd();
                match stat_at(dir, &name).map_err(|err| fail("inspect", path, err))? {
                    None => Ok(()),
                    Some(st) if st.kind == Kind::Dir => match fsops::unlink_at(dir, &name, true) {
                        Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => Err(format!(
                            "conflict: {} was created by the run but holds entries the journal \
                             did not record; left in place",
                            show(path)
                        )),
                        other => other.map_err(|err| fail("remove", path, err)),
                    },
                    Some(_) => {
                        fsops::unlink_at(dir, &name, false).map_err(|err| fail("remove", path, err))
                    }
                }
            }
            Op::Deleted { path, st, sha256 } => self
                .restore_object(e.seq, path, st, sha256.as_deref(), links)
                .map_err(|err| fail("restore", path, err)),
            Op::Rmdir { path, st } => self
                .recreate_dir(path, st)
                .map_err(|err| fail("recreate", path, err)),
            Op::Renamed {
                from,
                to,
                src,
                replaced,
            } => {
                let (fd, fname) = self.parent(from).map_err(|err| fail("open", from, err))?;
                let (td, tname) = self.parent(to).map_err(|err| fail("open", to, err))?;
                let at_to = stat_at(td.as_fd(), &tname).map_err(|err| fail("inspect", to, err))?;
                if at_to.as_ref().is_some_and(|s| s.id() == *src) {
                    fsops::rename_at(
                        td.as_fd(),
                        &tname,
                        fd.as_fd(),
                        &fname,
                        RenameFlags::RENAME_NOREPLACE,
                    )
                    .map_err(|err| fail("move back", to, err))?;
                }
                match replaced {
                    Some(r) if r.kind == Kind::Dir => self.recreate_dir(to, r),
                    Some(r) => self.restore_object(e.seq, to, r, None, links),
                    None => Ok(()),
                }
                .map_err(|err| fail("restore", to, err))
            }
            Op::Exchanged {
                from,
                to,
                from_id,
                to_id,
            } => {
                let (fd, fname) = self.parent(from).map_err(|err| fail("open", from, err))?;
                let (td, tname) = self.parent(to).map_err(|err| fail("open", to, err))?;
                let a = stat_at(fd.as_fd(), &fname).map_err(|err| fail("inspect", from, err))?;
                let b = stat_at(td.as_fd(), &tname).map_err(|err| fail("inspect", to, err))?;
                if a.is_some_and(|a| a.id() == *to_id) && b.is_some_and(|b| b.id() == *from_id) {
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
                .restore_content(e.seq, path, st)
                .map_err(|err| fail("restore the content of", path, err)),
            Op::Meta { path, st } => {
                let (dir, name) = self.parent(path).map_err(|err| fail("open", path, err))?;
                fsops::set_meta_at(dir.as_fd(), &name, st)
                    .map_err(|err| fail("restore the metadata of", path, err))
            }
            Op::Unprotected { path, size } => Err(format!(
                "{} was written without a pre-image ({size} bytes, above the size cap); not \
                 restored",
                show(path)
            )),
            Op::Checkpoint { .. } | Op::RolledBack { .. } | Op::Sealed { .. } => Ok(()),
        }
    }

    fn recreate_dir(&self, path: &PathText, st: &Stat) -> io::Result<()> {
        let (dir, name) = self.parent(path)?;
        if stat_at(dir.as_fd(), &name)?.is_some() {
            return Ok(());
        }
        fsops::mkdir_at(dir.as_fd(), &name, st.mode)?;
        fsops::set_meta_at(dir.as_fd(), &name, st)
    }

    /// Puts `store/<seq>` back at `path` when the object exists and the path does not.
    fn restore_object(
        &self,
        seq: u64,
        path: &PathText,
        st: &Stat,
        sha256: Option<&str>,
        links: &mut Links,
    ) -> io::Result<()> {
        let obj = Self::object_name(seq);
        let obj = OsStr::new(&obj);
        let store = self.store();
        let Some(object) = stat_at(store, obj)? else {
            return Ok(());
        };
        let (dir, name) = self.parent(path)?;
        let dir = dir.as_fd();
        if let Some(now) = stat_at(dir, &name)? {
            // A crash between putting a copy in place and removing the object looks like this.
            if same_entry(dir, &name, &now, store, obj)? {
                return fsops::unlink_at(store, obj, false);
            }
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "conflict: something else is there now",
            ));
        }
        // The object is a copy, and a name of the same inode may be back already: link to it,
        // so hard links stay hard links.
        if object.id() != st.id() {
            if let Some(alias) = self.alias_of(st, path, links) {
                let (adir, aname) = self.parent(&alias)?;
                nix::unistd::linkat(
                    Some(adir.as_raw_fd()),
                    aname.as_os_str(),
                    Some(dir.as_raw_fd()),
                    name.as_os_str(),
                    nix::fcntl::AtFlags::empty(),
                )?;
                return fsops::unlink_at(store, obj, false);
            }
        }
        match fsops::rename_at(store, obj, dir, &name, RenameFlags::RENAME_NOREPLACE) {
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
            Ok(()) if object.id() != st.id() => {
                links.insert(st.id(), (path.clone(), object.id()));
                return Ok(());
            }
            other => return other,
        }
        // Another filesystem: copy next to it, move into place, drop the object.
        let tmp = OsString::from(format!(".guard-restore-{seq}"));
        let _ = fsops::unlink_at(dir, &tmp, false);
        let hash = fsops::copy_entry(store, obj, dir, &tmp, st, false)?;
        if let (Some(want), Some(got)) = (sha256, hash.as_deref()) {
            if want != got {
                let _ = fsops::unlink_at(dir, &tmp, false);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the stored copy does not match its recorded hash",
                ));
            }
        }
        fsops::rename_at(dir, &tmp, dir, &name, RenameFlags::RENAME_NOREPLACE)?;
        if let Some(now) = stat_at(dir, &name)? {
            links.insert(st.id(), (path.clone(), now.id()));
        }
        fsops::unlink_at(store, obj, false)
    }

    /// A path that now holds the inode `st` described (the original, or the copy restored in
    /// its place earlier in this rollback), other than `path`.
    fn alias_of(&self, st: &Stat, path: &PathText, links: &Links) -> Option<PathText> {
        let holds = |cand: &PathText, id: FileId| {
            cand != path
                && self
                    .parent(cand)
                    .ok()
                    .and_then(|(d, n)| stat_at(d.as_fd(), &n).ok().flatten())
                    .is_some_and(|now| now.id() == id)
        };
        if let Some((cand, id)) = links.get(&st.id()) {
            if holds(cand, *id) {
                return Some(cand.clone());
            }
        }
        self.entries
            .iter()
            .filter(|e| inode(&e.op) == Some(st.id()))
            .flat_map(|e| e.op.paths())
            .find(|cand| holds(cand, st.id()))
            .cloned()
    }

    /// Writes the pre-image `store/<seq>` back into the file at `path` (same inode, so hard
    /// links see it too), or recreates the file when it is gone; then its metadata.
    fn restore_content(&self, seq: u64, path: &PathText, st: &Stat) -> io::Result<()> {
        let obj = Self::object_name(seq);
        let obj = OsStr::new(&obj);
        let store = self.store();
        let src = File::from(fsops::open_at(store, obj, OFlag::O_RDONLY, 0)?);
        let (dir, name) = self.parent(path)?;
        let dir = dir.as_fd();
        match stat_at(dir, &name)? {
            None => {
                let tmp = OsString::from(format!(".guard-restore-{seq}"));
                let _ = fsops::unlink_at(dir, &tmp, false);
                fsops::copy_entry(store, obj, dir, &tmp, st, false)?;
                fsops::rename_at(dir, &tmp, dir, &name, RenameFlags::RENAME_NOREPLACE)?;
            }
            Some(now) if now.kind == Kind::File => {
                let flags = OFlag::O_WRONLY | OFlag::O_TRUNC | OFlag::O_NONBLOCK;
                let dst = match fsops::open_at(dir, &name, flags, 0) {
                    Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                        let mut writable = now.clone();
                        writable.mode |= 0o200;
                        fsops::set_meta_at(dir, &name, &writable)?;
                        fsops::open_at(dir, &name, flags, 0)?
                    }
                    other => other?,
                };
                fsops::copy_content(&src, &File::from(dst))?;
            }
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "conflict: no longer a regular file",
                ))
            }
        }
        fsops::set_meta_at(dir, &name, st)
    }

    /// Checks each path whose final state an undone entry decides: no older undone entry
    /// touches it or one of its ancestors.
    fn verify(&self, entries: &[Entry], report: &mut RollbackReport) {
        for (i, e) in entries.iter().enumerate() {
            for path in e.op.paths() {
                // An older entry on the same path, an ancestor or (through a hard link) the
                // same inode had the last word.
                let decided_later = entries[..i].iter().any(|older| {
                    let same_inode = inode(&older.op).is_some() && inode(&older.op) == inode(&e.op);
                    same_inode || older.op.paths().iter().any(|o| p(path).starts_with(p(o)))
                });
                if decided_later {
                    continue;
                }
                match self.check(e, path) {
                    Ok(true) => report.verified += 1,
                    Ok(false) => {}
                    Err(why) => report
                        .problems
                        .push(format!("{} not as before: {why}", show(path))),
                }
            }
        }
    }

    /// Ok(true): verified; Ok(false): nothing to verify.
    fn check(&self, e: &Entry, path: &PathText) -> Result<bool, String> {
        let now = self
            .parent(path)
            .ok()
            .and_then(|(d, n)| stat_at(d.as_fd(), &n).ok().flatten().map(|s| (d, n, s)));
        let expect_absent = |now: &Option<(OwnedFd, OsString, Stat)>| match now {
            None => Ok(true),
            Some(_) => Err("still exists".to_string()),
        };
        match &e.op {
            Op::Created { .. } => expect_absent(&now),
            Op::Deleted { st, sha256, .. } => {
                let (d, n, s) = now.ok_or("missing")?;
                same_as(d.as_fd(), &n, &s, st, sha256.as_deref())
            }
            Op::Renamed { from, src, .. } if from == path => {
                let (_, _, s) = now.ok_or("missing")?;
                (s.id() == *src)
                    .then_some(true)
                    .ok_or_else(|| "another file".to_string())
            }
            Op::Renamed { replaced, .. } => match replaced {
                None => expect_absent(&now),
                Some(r) => {
                    let (d, n, s) = now.ok_or("missing")?;
                    same_as(d.as_fd(), &n, &s, r, None)
                }
            },
            Op::Exchanged {
                from,
                from_id,
                to_id,
                ..
            } => {
                let want = if from == path { from_id } else { to_id };
                let (_, _, s) = now.ok_or("missing")?;
                (s.id() == *want)
                    .then_some(true)
                    .ok_or_else(|| "another file".to_string())
            }
            Op::Rmdir { .. } => {
                let (_, _, s) = now.ok_or("missing")?;
                (s.kind == Kind::Dir)
                    .then_some(true)
                    .ok_or_else(|| "not a directory".to_string())
            }
            Op::Modified { st, .. } => {
                let (d, n, s) = now.ok_or("missing")?;
                let obj = Self::object_name(e.seq);
                let want = fsops::hash_at(self.store(), OsStr::new(&obj))
                    .map_err(|err| format!("cannot read the pre-image: {err}"))?;
                same_as(d.as_fd(), &n, &s, st, Some(&want))
            }
            Op::Meta { st, .. } => {
                let (_, _, s) = now.ok_or("missing")?;
                // Restoring a directory's children moves its mtime again: not compared.
                let mode_ok = s.kind == Kind::Symlink || s.mode == st.mode;
                let time_ok = s.kind == Kind::Dir || s.mtime == st.mtime;
                (mode_ok && time_ok && s.uid == st.uid && s.gid == st.gid)
                    .then_some(true)
                    .ok_or_else(|| "metadata differs".to_string())
            }
            _ => Ok(false),
        }
    }
}

/// The inode whose content or metadata an entry restores.
fn inode(op: &Op) -> Option<FileId> {
    match op {
        Op::Deleted { st, .. } | Op::Modified { st, .. } | Op::Meta { st, .. } => Some(st.id()),
        Op::Renamed { replaced, .. } => replaced.as_ref().map(Stat::id),
        _ => None,
    }
}

/// Whether the entry `dir/name` (stat `now`) matches the recorded `want` (and content hash).
fn same_as(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    now: &Stat,
    want: &Stat,
    sha256: Option<&str>,
) -> Result<bool, String> {
    if now.kind != want.kind {
        return Err("another type".into());
    }
    if now.kind == Kind::File {
        if now.size != want.size {
            return Err("another size".into());
        }
        if let Some(want) = sha256 {
            let got = fsops::hash_at(dir, name).map_err(|e| format!("cannot read: {e}"))?;
            if got != want {
                return Err("other content".into());
            }
        }
    }
    if now.kind != Kind::Symlink && now.mode != want.mode {
        return Err(format!("mode {:o}, was {:o}", now.mode, want.mode));
    }
    Ok(true)
}

/// Whether `dir/name` and the store object are the same entry (same kind, same content).
fn same_entry(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    now: &Stat,
    store: BorrowedFd<'_>,
    obj: &OsStr,
) -> io::Result<bool> {
    let Some(o) = stat_at(store, obj)? else {
        return Ok(false);
    };
    if o.kind != now.kind {
        return Ok(false);
    }
    Ok(match o.kind {
        Kind::File => fsops::hash_at(dir, name)? == fsops::hash_at(store, obj)?,
        Kind::Symlink => fsops::readlink_at(dir, name)? == fsops::readlink_at(store, obj)?,
        _ => true,
    })
}
