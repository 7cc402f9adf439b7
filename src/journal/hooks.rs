//! The write-ahead hooks the supervisor calls before each mutation inside the workspace. Each
//! appends its entry before the workspace changes; the destructive ones (delete, rmdir, rename
//! in `rename.rs`) also perform the call, after keeping what it destroys. When the call fails,
//! whatever the entry says cannot undo anything: undo checks the state first.
//!
//! Each hook does two kinds of work. The journal's bookkeeping (stat, keep a pre-image in the
//! store, append to the log) is guard's own and is done with guard's credentials. The one call
//! that performs the caller's own mutation goes through
//! [`as_caller`](crate::creds::as_caller), which takes on the caller's credentials (fsuid,
//! fsgid, groups, capabilities, umask), so the kernel judges exactly that call as it would have
//! judged the caller's.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::path::Path;

use super::copy;
use super::fsops;
use super::journal::{Journal, JournalError, Saved};
use super::keep::Way;
use super::log::{FileId, Kind, Op, Stat};
use crate::audit::PathText;

pub(crate) fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// A journal failure seen by a caller that expects an errno: logged, and EIO.
pub(crate) fn journal_failed(e: &JournalError) -> io::Error {
    tracing::error!("{e}");
    errno(libc::EIO)
}

// The caller's own mutation, the one call of a hook that is not the journal's bookkeeping,
// runs with the caller's credentials when the supervisor named a caller (see `crate::creds`),
// as guard otherwise (a rollback). None of the journal's hooks makes a new inode (unlink,
// rmdir, rename: creations are the supervisor's), so the caller's umask is not switched.
pub(crate) use crate::creds::as_caller_creating_nothing;

/// What the caller of a hook saw at the name a moment ago (the supervisor's walk). `Absent`
/// and `Found` are current: no change to the workspace's names can have come since (no other
/// worker has held the journal's lock since the walk looked), so the hook decides on them
/// instead of looking again. `Seen` may be stale, and `Not` tells nothing: the hook looks
/// itself.
#[derive(Clone, Copy)]
pub enum Looked<'a> {
    /// Nothing known.
    Not,
    /// Nothing was there, and still is not.
    Absent,
    /// This is there (not following a final symlink).
    Found(&'a libc::stat),
    /// This was there, but a change may have come since: a deletion trusts it only for a file
    /// it proves to be that very inode ([`Journal::delete_seen_file`]).
    Seen(&'a libc::stat),
}

impl Looked<'_> {
    /// Whether what was seen is still what is there.
    pub fn is_current(self) -> bool {
        matches!(self, Looked::Absent | Looked::Found(_))
    }

    /// What is at `name` in `dir`: what was seen, if current, or a stat taken now.
    pub(super) fn or_stat(
        self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
    ) -> io::Result<Option<libc::stat>> {
        match self {
            Looked::Not | Looked::Seen(_) => fsops::raw_stat_at(dir, name),
            Looked::Absent => Ok(None),
            Looked::Found(st) => Ok(Some(*st)),
        }
    }
}

impl Journal {
    pub(crate) fn covered_rel(&self, abs: &Path) -> Option<PathText> {
        let rel = self.rel(abs)?;
        (!self.is_excluded(rel)).then(|| PathText::from(rel))
    }

    /// Removes store object `seq`, made for an entry that was not logged (or whose call
    /// failed). Should that fail, the next object made under this seq looks first.
    pub(crate) fn clear_object(&self, seq: u64) {
        let name = self.object_name(seq);
        if self
            .store()
            .and_then(|store| copy::remove_tree(store, OsStr::new(&name)))
            .is_err()
        {
            self.maybe_leftovers.set(true);
        }
    }

    /// Removes the store objects no entry can name, those numbered from the next entry's seq
    /// on, when the store may hold leftovers (a journal opened again). An object is made
    /// before the entry that names it (keep.rs: the entry must never name a missing object),
    /// so guard killed between the two leaves one: for a file the caller was about to replace,
    /// a hard link to it, which the rollback would leave as a second link of the restored
    /// file (and a later write through one name would change the other).
    pub(crate) fn drop_unrecorded_objects(&self) {
        if !self.maybe_leftovers.get() {
            return;
        }
        let Ok(store) = self.store() else {
            return;
        };
        let from = self.next_seq();
        // The numbered entries of one of the store's directories (`.`: its root).
        let numbered = |dir: &OsStr| -> Vec<(u64, std::ffi::OsString)> {
            fsops::list_dir(store, dir)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|name| Some((name.to_str()?.parse::<u64>().ok()?, name)))
                .collect()
        };
        // The objects' names as `object_name` makes them: `seq`, or `bucket/seq` with
        // `bucket = seq / size`, so only the buckets from `from / size` on can hold one.
        let mut unrecorded = Vec::new();
        match self.header.bucket {
            0 => unrecorded.extend(
                numbered(OsStr::new("."))
                    .into_iter()
                    .filter(|(seq, _)| *seq >= from)
                    .map(|(_, name)| name),
            ),
            size => {
                for (b, bname) in numbered(OsStr::new(".")) {
                    if b < from / size {
                        continue;
                    }
                    for (seq, name) in numbered(&bname) {
                        if seq >= from {
                            unrecorded.push(Path::new(&bname).join(name).into_os_string());
                        }
                    }
                }
            }
        }
        for name in unrecorded {
            if let Err(e) = copy::remove_tree(store, &name) {
                tracing::warn!("cannot remove a leftover of the store, {name:?}: {e}");
            }
        }
    }

    /// Before making store object `seq`: makes its directory of the store (its bucket) when
    /// it may not exist yet, and removes a leftover of that name, if the store may hold one
    /// (see `maybe_leftovers`: a crash can leave one behind).
    pub(crate) fn make_room(&self, seq: u64) -> io::Result<()> {
        let bucket = seq.checked_div(self.header.bucket);
        if let Some(b) = bucket.filter(|_| bucket != self.bucket_made.get()) {
            let dir = b.to_string();
            let dir = OsStr::new(&dir);
            let store = self.store()?;
            match fsops::mkdir_at(store, dir, super::keep::STORE_MODE) {
                // Callers rename what they delete into it with their own credentials
                // (keep.rs): the mode must not be cut by guard's umask.
                Ok(()) => fsops::chmod_at(store, dir, super::keep::STORE_MODE)?,
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
            self.bucket_made.set(bucket);
        }
        if self.maybe_leftovers.get() {
            let name = self.object_name(seq);
            let _ = self
                .store()
                .and_then(|store| copy::remove_tree(store, OsStr::new(&name)));
        }
        Ok(())
    }

    /// Copies `dir/name` of any kind (a directory with its tree) to `store/<seq>`.
    pub(crate) fn keep_tree(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        st: &Stat,
        seq: u64,
    ) -> io::Result<Option<String>> {
        self.make_room(seq)?;
        if st.kind != Kind::Dir {
            let obj = self.object_name(seq);
            return copy::copy_entry(dir, name, self.store()?, OsStr::new(&obj), st, false, true);
        }
        let obj = self.object_name(seq);
        copy::copy_tree(
            dir,
            name,
            self.store()?,
            OsStr::new(&obj),
            self.header.fsync,
        )?;
        Ok(None)
    }

    /// unlink(2) of a non-directory, performed by the journal after keeping the entry in the
    /// store. Returns the kernel's errno on failure (ENOENT, EISDIR, ...).
    ///
    /// # Errors
    ///
    /// The kernel's error for the unlink, or for keeping the entry in the store, as the caller
    /// should see it.
    pub fn delete_file(&mut self, dir: BorrowedFd<'_>, name: &OsStr, abs: &Path) -> io::Result<()> {
        self.delete_seen_file(dir, name, abs, Looked::Not)
    }

    /// [`Journal::delete_file`] of an entry whose stat the caller took a moment before
    /// (`looked`: the supervisor's walk, before the journal's lock): one stat fewer in the
    /// usual case, a file the run did not make, kept by inode. A stat that may be stale
    /// ([`Looked::Seen`]) is trusted only once the file guard opens to check for other openers
    /// proves to be that very inode; anything else (another inode, a file the run made, a
    /// directory, a file kept by a copy) is decided on a stat taken now, under the lock, so
    /// that a name another judged call swapped in meanwhile is kept as what it is. A current
    /// stat ([`Looked::Found`]) also drops a file the run made without a stat of its own.
    ///
    /// # Errors
    ///
    /// As [`Journal::delete_file`].
    pub fn delete_seen_file(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> io::Result<()> {
        let Some(path) = self.covered_rel(abs) else {
            return crate::creds::changing_entries_of(dir, || fsops::unlink_at(dir, name, false));
        };
        let (seen, current) = match looked {
            Looked::Found(st) => (Some(st), true),
            Looked::Seen(st) => (Some(st), false),
            Looked::Not | Looked::Absent => (None, false),
        };
        let mut seen = seen
            .filter(|st| {
                let id = FileId {
                    dev: st.st_dev,
                    ino: st.st_ino,
                };
                st.st_mode & libc::S_IFMT == libc::S_IFREG && (current || !self.made.contains(&id))
            })
            .copied();
        let (raw, st, way) = loop {
            let (raw, walked) = match seen.take() {
                Some(st) => (st, true),
                None => (
                    fsops::raw_stat_at(dir, name)?.ok_or_else(|| errno(libc::ENOENT))?,
                    false,
                ),
            };
            let st = Stat::from_nix(&raw);
            if walked && !self.made.contains(&st.id()) {
                match self.way(dir, name, &st, Some(&raw), true) {
                    Way::Stale => continue,
                    way => break (raw, st, Some(way)),
                }
            }
            break (raw, st, None);
        };
        if st.kind == Kind::Dir {
            return Err(errno(libc::EISDIR));
        }
        self.content_saved.remove(&st.id());
        self.meta_saved.remove(&st.id());
        if self.made.contains(&st.id()) {
            // Made since the checkpoint: a rollback removes it anyway (see `Op::Dropped`).
            let last = raw.st_nlink <= 1;
            self.append(Op::Dropped {
                path,
                st: st.clone(),
            })
            .map_err(|e| journal_failed(&e))?;
            crate::creds::changing_entries_of(dir, || fsops::unlink_at(dir, name, false))?;
            if last {
                // The inode is gone, and its number may be given to anything.
                self.made.remove(&st.id());
            }
            return Ok(());
        }
        let seq = self.next_seq();
        let record = |j: &mut Journal, sha256: Option<String>| {
            let op = Op::Deleted {
                path,
                st: st.clone(),
                sha256,
                obj: None,
            };
            j.append(op).map(|_| ()).map_err(|e| journal_failed(&e))
        };
        self.delete_keeping(dir, name, abs, (&st, &raw), seq, way, record)
    }

    /// rmdir(2), performed by the journal after recording the directory's metadata.
    ///
    /// # Errors
    ///
    /// The kernel's error for the rmdir as the caller should see it (ENOTDIR, ENOTEMPTY, ...),
    /// or an error when the directory's metadata cannot be read or recorded.
    pub fn remove_dir(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> io::Result<()> {
        let Some(path) = self.covered_rel(abs) else {
            return as_caller_creating_nothing(|| fsops::unlink_at(dir, name, true));
        };
        let st = looked
            .or_stat(dir, name)?
            .map(|st| Stat::from_nix(&st))
            .ok_or_else(|| errno(libc::ENOENT))?;
        if st.kind != Kind::Dir {
            return Err(errno(libc::ENOTDIR));
        }
        self.meta_saved.remove(&st.id());
        self.append(Op::Rmdir { path, st })
            .map_err(|e| journal_failed(&e))?;
        as_caller_creating_nothing(|| fsops::unlink_at(dir, name, true))
    }

    /// Records that `abs` is about to be created (file, directory, node, symlink or hard link).
    /// Fails with [`JournalError::Exists`] when something is already there: an undo would
    /// remove it.
    ///
    /// # Errors
    ///
    /// [`JournalError::Exists`] as above, [`JournalError::Inspect`] when the path cannot be
    /// examined, [`JournalError::Append`] when the entry cannot be logged.
    pub fn will_create(&mut self, abs: &Path) -> Result<(), JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(());
        };
        match fsops::parent_of(self.ws(), Path::new(path.as_os_str())) {
            Ok((dir, name)) => self.will_create_named(path, dir.as_fd(), &name, abs, Looked::Not),
            // The parent is missing: the create will fail, and an entry for it is harmless.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                self.record_created(path)
            }
            Err(source) => Err(JournalError::Inspect {
                path: abs.to_path_buf(),
                source,
            }),
        }
    }

    /// [`Journal::will_create`] of `abs`, which is `name` in the open directory `dir` (the
    /// directory the create is made in: no lookup of it by path).
    ///
    /// # Errors
    ///
    /// As for [`Journal::will_create`].
    pub fn will_create_in(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> Result<(), JournalError> {
        match self.covered_rel(abs) {
            Some(path) => self.will_create_named(path, dir, name, abs, looked),
            None => Ok(()),
        }
    }

    fn will_create_named(
        &mut self,
        path: PathText,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> Result<(), JournalError> {
        let taken = looked
            .or_stat(dir, name)
            .map_err(|source| JournalError::Inspect {
                path: abs.to_path_buf(),
                source,
            })?;
        if taken.is_some() {
            return Err(JournalError::Exists {
                path: abs.to_path_buf(),
            });
        }
        self.record_created(path)
    }

    /// Appends that `path` is about to be created (by a call guard performs).
    fn record_created(&mut self, path: PathText) -> Result<(), JournalError> {
        self.append(Op::Created {
            path,
            id: None,
            obj: None,
        })
        .map(|_| ())
    }

    /// After guard created the file `abs` itself (an exclusive create, so the inode `file` is
    /// new) under a name [`Journal::will_create`] recorded: until the next checkpoint, or a
    /// rename of it, its writes, metadata changes and deletion keep nothing, as a rollback to
    /// the checkpoint removes it anyway.
    pub(crate) fn made_file(&mut self, abs: &Path, file: BorrowedFd<'_>) {
        if self.covered_rel(abs).is_none() {
            return;
        }
        if let Ok(st) = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&file)) {
            self.made.insert(Stat::from_nix(&st).id());
        }
    }

    /// Before an open for writing or a truncate of an existing file: saves its content once
    /// per checkpoint per inode (none for a file made since the checkpoint). The journal reads `dir/name` itself with its own privileges
    /// (see `copy.rs` for files guard may only write), so the caller needs no readable
    /// descriptor. Holes stay holes in the pre-image, and the size cap applies to the data a
    /// copy holds (a sparse file's allocated size). A file already saved, or made since the
    /// checkpoint, is known from what `looked` saw without touching the disk.
    ///
    /// # Errors
    ///
    /// [`JournalError::Save`] when the pre-image cannot be taken, [`JournalError::Inspect`] when
    /// the file cannot be examined, [`JournalError::Append`] when the entry cannot be logged.
    pub fn will_write(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> Result<Saved, JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(Saved::AlreadySaved);
        };
        let save_err = |source| JournalError::Save {
            path: abs.to_path_buf(),
            source,
        };
        let Some(raw) = looked.or_stat(dir, name).map_err(save_err)? else {
            return Ok(Saved::AlreadySaved); // nothing there: the open creates it or fails
        };
        let st = Stat::from_nix(&raw);
        // What a copy costs: a sparse file's holes are not copied.
        let allocated = u64::try_from(raw.st_blocks)
            .unwrap_or(u64::MAX)
            .saturating_mul(512);
        if st.kind != Kind::File || self.made.contains(&st.id()) {
            return Ok(Saved::AlreadySaved);
        }
        if let Some(saved) = self.content_saved.get(&st.id()) {
            return Ok(match saved {
                Saved::Unprotected { size } => Saved::Unprotected { size: *size },
                _ => Saved::AlreadySaved,
            });
        }
        if st.size.min(allocated) > self.header.max_preimage_bytes {
            return self.unprotected(path, &st, None);
        }
        let file = match copy::open_readable(dir, name) {
            // Another user's file that guard may write but not read (an unprivileged guard):
            // no pre-image can be taken, and the write is not refused for it.
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                return self.unprotected(path, &st, Some("unreadable by guard"));
            }
            other => other.map_err(save_err)?,
        };
        let st = Stat::from_meta(&file.metadata().map_err(save_err)?);
        if st.kind != Kind::File {
            return Ok(Saved::AlreadySaved);
        }
        let seq = self.next_seq();
        self.make_room(seq).map_err(save_err)?;
        let obj = self.object_name(seq);
        let copy = || -> io::Result<()> {
            let flags = nix::fcntl::OFlag::O_WRONLY
                | nix::fcntl::OFlag::O_CREAT
                | nix::fcntl::OFlag::O_EXCL;
            let dst = std::fs::File::from(fsops::open_at(
                self.store()?,
                OsStr::new(&obj),
                flags,
                0o600,
            )?);
            copy::copy_content(&file, &dst)?;
            if self.header.fsync {
                dst.sync_all()?;
            }
            Ok(())
        };
        copy().map_err(save_err)?;
        let id = st.id();
        if let Err(e) = self.append(Op::Modified { path, st }) {
            self.clear_object(seq);
            return Err(e);
        }
        self.content_saved.insert(id, Saved::Saved);
        Ok(Saved::Saved)
    }

    /// Records a write without a pre-image (above the size cap, or unreadable).
    fn unprotected(
        &mut self,
        path: PathText,
        st: &Stat,
        reason: Option<&str>,
    ) -> Result<Saved, JournalError> {
        let size = st.size;
        if let Some(r) = reason {
            tracing::warn!("{}: {r}: written without a pre-image", path.display());
        }
        self.append(Op::Unprotected {
            path,
            size,
            reason: reason.map(str::to_string),
        })?;
        self.content_saved
            .insert(st.id(), Saved::Unprotected { size });
        Ok(Saved::Unprotected { size })
    }

    /// Before chmod/chown/utimes/setxattr: records the old mode, owner and times once per
    /// checkpoint per inode.
    ///
    /// # Errors
    ///
    /// [`JournalError::Inspect`] when the entry cannot be examined, [`JournalError::Append`] when
    /// the entry cannot be logged.
    pub fn will_change_meta(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        looked: Looked<'_>,
    ) -> Result<(), JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(());
        };
        let st = looked
            .or_stat(dir, name)
            .map(|s| s.map(|raw| Stat::from_nix(&raw)))
            .and_then(|s| s.ok_or_else(|| errno(libc::ENOENT)))
            .map_err(|source| JournalError::Inspect {
                path: abs.to_path_buf(),
                source,
            })?;
        if self.meta_saved.contains(&st.id()) || self.made.contains(&st.id()) {
            return Ok(());
        }
        let id = st.id();
        self.append(Op::Meta { path, st })?;
        self.meta_saved.insert(id);
        Ok(())
    }

    /// Before a metadata change through a descriptor (fchmod, fchown, fsetxattr, futimens):
    /// records the old mode, owner and times of the object `fd` refers to, found at `abs`,
    /// once per checkpoint per inode.
    pub fn will_change_meta_of(
        &mut self,
        fd: BorrowedFd<'_>,
        abs: &Path,
    ) -> Result<(), JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(());
        };
        let st = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd))
            .map(|st| Stat::from_nix(&st))
            .map_err(|e| JournalError::Inspect {
                path: abs.to_path_buf(),
                source: e.into(),
            })?;
        if self.meta_saved.contains(&st.id()) || self.made.contains(&st.id()) {
            return Ok(());
        }
        let id = st.id();
        self.append(Op::Meta { path, st })?;
        self.meta_saved.insert(id);
        Ok(())
    }
}
