//! The write-ahead hooks the supervisor calls before each mutation inside the workspace. Each
//! appends its entry before the workspace changes; the destructive ones (delete, rmdir,
//! rename) also perform the call, so the old entry can be moved into the store first. When the
//! call fails, whatever the entry says cannot undo anything: undo checks the state first.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::fcntl::{OFlag, RenameFlags};

use super::fsops::{self, stat_at};
use super::journal::{Journal, JournalError, Saved, StoreMode};
use super::log::{Kind, Op, Stat};
use crate::audit::PathText;

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// A journal failure seen by a caller that expects an errno: logged, and EIO.
fn journal_failed(e: &JournalError) -> io::Error {
    tracing::error!("{e}");
    errno(libc::EIO)
}

impl Journal {
    fn covered_rel(&self, abs: &Path) -> Option<PathText> {
        let rel = self.rel(abs)?;
        (!self.is_excluded(rel)).then(|| PathText::from(rel))
    }

    /// Removes a leftover store object `seq` (a crash can leave one behind).
    fn clear_object(&self, seq: u64) {
        let _ = fsops::unlink_at(self.store(), OsStr::new(&Self::object_name(seq)), false);
    }

    /// Copies `dir/name` into `store/<seq>`; the content hash for a regular file.
    fn copy_to_store(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        st: &Stat,
        seq: u64,
    ) -> io::Result<Option<String>> {
        self.clear_object(seq);
        let obj = Self::object_name(seq);
        fsops::copy_entry(
            dir,
            name,
            self.store(),
            OsStr::new(&obj),
            st,
            self.header.fsync,
        )
    }

    /// Records and performs the removal of the non-directory `dir/name` into `store/<seq>`.
    fn stash_and_remove(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        path: PathText,
        st: Stat,
    ) -> io::Result<()> {
        let seq = self.next_seq();
        let obj = Self::object_name(seq);
        self.content_saved.remove(&st.id());
        self.meta_saved.remove(&st.id());
        if self.header.mode == StoreMode::Copy {
            let sha256 = self.copy_to_store(dir, name, &st, seq)?;
            let op = Op::Deleted { path, st, sha256 };
            if let Err(e) = self.append(op) {
                self.clear_object(seq);
                return Err(journal_failed(&e));
            }
            return fsops::unlink_at(dir, name, false).inspect_err(|_| self.clear_object(seq));
        }
        self.clear_object(seq);
        let op = Op::Deleted {
            path,
            st: st.clone(),
            sha256: None,
        };
        self.append(op).map_err(|e| journal_failed(&e))?;
        let store = self.store();
        match fsops::rename_at(
            dir,
            name,
            store,
            OsStr::new(&obj),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                // Same device number, other mount: copy instead.
                self.copy_to_store(dir, name, &st, seq)?;
                fsops::unlink_at(dir, name, false).inspect_err(|_| self.clear_object(seq))
            }
            other => other,
        }
    }

    /// unlink(2) of a non-directory, performed by the journal: the entry moves into the store.
    /// Returns the kernel's errno on failure (ENOENT, EISDIR, ...).
    pub fn delete_file(&mut self, dir: BorrowedFd<'_>, name: &OsStr, abs: &Path) -> io::Result<()> {
        let Some(path) = self.covered_rel(abs) else {
            return fsops::unlink_at(dir, name, false);
        };
        let st = stat_at(dir, name)?.ok_or_else(|| errno(libc::ENOENT))?;
        if st.kind == Kind::Dir {
            return Err(errno(libc::EISDIR));
        }
        self.stash_and_remove(dir, name, path, st)
    }

    /// rmdir(2), performed by the journal after recording the directory's metadata.
    pub fn remove_dir(&mut self, dir: BorrowedFd<'_>, name: &OsStr, abs: &Path) -> io::Result<()> {
        let Some(path) = self.covered_rel(abs) else {
            return fsops::unlink_at(dir, name, true);
        };
        let st = stat_at(dir, name)?.ok_or_else(|| errno(libc::ENOENT))?;
        if st.kind != Kind::Dir {
            return Err(errno(libc::ENOTDIR));
        }
        self.meta_saved.remove(&st.id());
        self.append(Op::Rmdir { path, st })
            .map_err(|e| journal_failed(&e))?;
        fsops::unlink_at(dir, name, true)
    }

    /// rename/renameat2 performed by the journal. `flags`: 0, RENAME_NOREPLACE or
    /// RENAME_EXCHANGE. A directory moving across the journal's boundary (into or out of the
    /// workspace, or an excluded subtree) fails with EXDEV, so `mv` falls back to copy + delete,
    /// which is journaled entry by entry.
    #[allow(clippy::too_many_arguments)]
    pub fn rename(
        &mut self,
        from_dir: BorrowedFd<'_>,
        from: &OsStr,
        from_abs: &Path,
        to_dir: BorrowedFd<'_>,
        to: &OsStr,
        to_abs: &Path,
        flags: u32,
    ) -> io::Result<()> {
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        if flags & !known != 0 || (exchange && noreplace) {
            return Err(errno(libc::EINVAL));
        }
        let kflags = RenameFlags::from_bits_truncate(flags);
        let from_path = self.covered_rel(from_abs);
        let to_path = self.covered_rel(to_abs);
        if from_path.is_none() && to_path.is_none() {
            return fsops::rename_at(from_dir, from, to_dir, to, kflags);
        }
        let src = stat_at(from_dir, from)?.ok_or_else(|| errno(libc::ENOENT))?;
        let dst = stat_at(to_dir, to)?;
        if exchange {
            let dst = dst.ok_or_else(|| errno(libc::ENOENT))?;
            let (Some(from_path), Some(to_path)) = (from_path, to_path) else {
                return Err(errno(libc::EXDEV));
            };
            let op = Op::Exchanged {
                from: from_path,
                to: to_path,
                from_id: src.id(),
                to_id: dst.id(),
            };
            self.append(op).map_err(|e| journal_failed(&e))?;
            return fsops::rename_at(from_dir, from, to_dir, to, kflags);
        }
        if let Some(d) = &dst {
            if noreplace {
                return Err(errno(libc::EEXIST));
            }
            if d.id() == src.id() {
                return Ok(()); // two names of one inode: the kernel does nothing
            }
            match (src.kind == Kind::Dir, d.kind == Kind::Dir) {
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (false, true) => return Err(errno(libc::EISDIR)),
                _ => {}
            }
        }
        let (Some(from_path), Some(to_path)) = (from_path.clone(), to_path.clone()) else {
            if src.kind == Kind::Dir {
                return Err(errno(libc::EXDEV));
            }
            return self.rename_across(from_dir, from, from_path, to_dir, to, to_path, src, dst);
        };
        let seq = self.next_seq();
        let obj = Self::object_name(seq);
        // A replaced non-directory is kept in the store: hard-linked there when the filesystem
        // allows (the rename then replaces it atomically), else copied.
        let stashed = match &dst {
            Some(d) if d.kind != Kind::Dir => {
                self.clear_object(seq);
                let linked = self.header.mode != StoreMode::Copy
                    && nix::unistd::linkat(
                        Some(std::os::fd::AsRawFd::as_raw_fd(&to_dir)),
                        to,
                        Some(std::os::fd::AsRawFd::as_raw_fd(&self.store())),
                        OsStr::new(&obj),
                        nix::fcntl::AtFlags::empty(),
                    )
                    .is_ok();
                if !linked {
                    self.copy_to_store(to_dir, to, d, seq)?;
                }
                true
            }
            _ => false,
        };
        let op = Op::Renamed {
            from: from_path,
            to: to_path,
            src: src.id(),
            replaced: dst.clone(),
        };
        if let Err(e) = self.append(op) {
            if stashed {
                self.clear_object(seq);
            }
            return Err(journal_failed(&e));
        }
        let result = fsops::rename_at(from_dir, from, to_dir, to, kflags);
        match (&result, &dst) {
            (Err(_), _) if stashed => self.clear_object(seq),
            (Ok(()), Some(d)) => {
                self.content_saved.remove(&d.id());
                self.meta_saved.remove(&d.id());
            }
            _ => {}
        }
        result
    }

    /// A non-directory renamed across the journal's boundary: leaving the workspace is a delete
    /// (a copy of it is kept), entering it is a create (over a replaced entry, kept).
    #[allow(clippy::too_many_arguments)]
    fn rename_across(
        &mut self,
        from_dir: BorrowedFd<'_>,
        from: &OsStr,
        from_path: Option<PathText>,
        to_dir: BorrowedFd<'_>,
        to: &OsStr,
        to_path: Option<PathText>,
        src: Stat,
        dst: Option<Stat>,
    ) -> io::Result<()> {
        let flags = RenameFlags::empty();
        if let Some(path) = from_path {
            let seq = self.next_seq();
            let sha256 = self.copy_to_store(from_dir, from, &src, seq)?;
            self.content_saved.remove(&src.id());
            let op = Op::Deleted {
                path,
                st: src,
                sha256,
            };
            if let Err(e) = self.append(op) {
                self.clear_object(seq);
                return Err(journal_failed(&e));
            }
            return fsops::rename_at(from_dir, from, to_dir, to, flags)
                .inspect_err(|_| self.clear_object(seq));
        }
        let Some(path) = to_path else {
            return fsops::rename_at(from_dir, from, to_dir, to, flags);
        };
        let mut restore = None;
        if let Some(d) = dst {
            let seq = self.next_seq();
            self.stash_and_remove(to_dir, to, path.clone(), d)?;
            restore = Some(seq);
        }
        self.append(Op::Created { path })
            .map_err(|e| journal_failed(&e))?;
        let result = fsops::rename_at(from_dir, from, to_dir, to, RenameFlags::RENAME_NOREPLACE);
        if let (Err(_), Some(seq)) = (&result, restore) {
            // Put the replaced entry back: the caller sees the failure and an unchanged tree.
            let obj = Self::object_name(seq);
            let _ = fsops::rename_at(
                self.store(),
                OsStr::new(&obj),
                to_dir,
                to,
                RenameFlags::RENAME_NOREPLACE,
            );
        }
        result
    }

    /// Records that `abs` is about to be created (file, directory, node, symlink or hard link).
    /// Fails with [`JournalError::Exists`] when something is already there: an undo would
    /// remove it.
    pub fn will_create(&mut self, abs: &Path) -> Result<(), JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(());
        };
        let inspect = |source| JournalError::Inspect {
            path: abs.to_path_buf(),
            source,
        };
        match fsops::parent_of(self.ws(), Path::new(path.as_os_str())) {
            Ok((dir, name)) => {
                if stat_at(std::os::fd::AsFd::as_fd(&dir), &name)
                    .map_err(inspect)?
                    .is_some()
                {
                    return Err(JournalError::Exists {
                        path: abs.to_path_buf(),
                    });
                }
            }
            // The parent is missing: the create will fail, and an entry for it is harmless.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(inspect(e)),
        }
        self.append(Op::Created { path })?;
        Ok(())
    }

    /// Before an open for writing or a truncate of an existing file: saves its content once
    /// per checkpoint per inode. The journal opens `dir/name` itself (O_RDONLY | O_NOFOLLOW |
    /// O_NONBLOCK), so the caller needs no readable descriptor.
    pub fn will_write(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
    ) -> Result<Saved, JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(Saved::AlreadySaved);
        };
        let save_err = |source| JournalError::Save {
            path: abs.to_path_buf(),
            source,
        };
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let file = File::from(fsops::open_at(dir, name, flags, 0).map_err(save_err)?);
        let st = Stat::from_meta(&file.metadata().map_err(save_err)?);
        if st.kind != Kind::File {
            return Ok(Saved::AlreadySaved);
        }
        if let Some(saved) = self.content_saved.get(&st.id()) {
            return Ok(match saved {
                Saved::Unprotected { size } => Saved::Unprotected { size: *size },
                _ => Saved::AlreadySaved,
            });
        }
        if st.size > self.header.max_preimage_bytes {
            let size = st.size;
            self.append(Op::Unprotected { path, size })?;
            self.content_saved
                .insert(st.id(), Saved::Unprotected { size });
            return Ok(Saved::Unprotected { size });
        }
        let seq = self.next_seq();
        self.clear_object(seq);
        let obj = Self::object_name(seq);
        let oflags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC;
        let copy = || -> io::Result<()> {
            let dst = File::from(fsops::open_at(
                self.store(),
                OsStr::new(&obj),
                oflags,
                0o600,
            )?);
            fsops::copy_content(&file, &dst)?;
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

    /// Before chmod/chown/utimes/setxattr: records the old mode, owner and times once per
    /// checkpoint per inode.
    pub fn will_change_meta(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
    ) -> Result<(), JournalError> {
        let Some(path) = self.covered_rel(abs) else {
            return Ok(());
        };
        let st = stat_at(dir, name)
            .and_then(|s| s.ok_or_else(|| errno(libc::ENOENT)))
            .map_err(|source| JournalError::Inspect {
                path: abs.to_path_buf(),
                source,
            })?;
        if self.meta_saved.contains(&st.id()) {
            return Ok(());
        }
        let id = st.id();
        self.append(Op::Meta { path, st })?;
        self.meta_saved.insert(id);
        Ok(())
    }
}
