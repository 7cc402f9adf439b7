//! How the journal keeps a non-directory that a call deletes or replaces, so that what the
//! caller (and everyone else) can see is the kernel's own result.
//!
//! Keeping the inode itself in the store (a rename, a hard link) is O(1), but it gives the
//! inode one more link than it would have bare. That shows only where someone can still reach
//! the inode: through another hard link (`st_nlink` > 1), or through an open file description
//! (`fstat` of a deleted but open file says 0 links bare). So:
//!
//! - a regular file that has no other link and is open nowhere else (a write lease tells,
//!   see `sys::fs::open_elsewhere`) is kept by inode: a delete *is* the caller's own rename of
//!   the file into the store, made with the caller's credentials (the kernel checks exactly
//!   what it checks for unlink: write and search on the directory, the sticky bit, immutable
//!   and append-only flags, and a refused call changes nothing); a replaced file is hard-linked
//!   into the store by guard before the caller's rename replaces it atomically;
//! - anything else is copied into the store (a reflink where the filesystem can), and the
//!   caller's own unlink or rename then runs: nodes and symlinks cost nothing to copy, and a
//!   file someone can still reach keeps exactly the kernel's link count.
//!
//! The store directory is writable by every user (mode 0733) for that rename; it lies in the
//! run's private 0700 directory, so no one else reaches it by path, and Landlock keeps the
//! sandbox out of the state directory. What differs from bare is listed in
//! docs/design-notes.md ("The journal's store and what a program can see").

use std::ffi::OsStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::fcntl::{OFlag, RenameFlags};

use super::copy;
use super::fsops;
use super::hooks::journal_failed;
use super::journal::{Journal, JournalError, StoreMode};
use super::log::{Kind, Stat};

/// The mode of the store directory (see the module doc).
pub(crate) const STORE_MODE: u32 = 0o733;

/// How an entry reaches the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// By inode: the caller's rename (delete) or guard's hard link (replace).
    Inode,
    /// By a copy of it.
    Copy,
    /// Not decided: the stat it was asked about, taken earlier, is not proved to be the
    /// entry's now. Ask again with a stat taken now.
    Stale,
}

impl Journal {
    /// Which way `dir/name` (a non-directory, `st`) reaches the store (see the module doc).
    /// `raw` is the entry's stat when the caller has just taken it (one stat fewer).
    /// `earlier`: `raw` was taken before the journal's lock (the supervisor's walk), so it
    /// may describe an entry another call has replaced since: the answer is then
    /// [`Way::Stale`] unless the file opened here proves to be that inode, kept by inode.
    pub(crate) fn way(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        st: &Stat,
        raw: Option<&libc::stat>,
        earlier: bool,
    ) -> Way {
        let unproved = |way: Way| if earlier { Way::Stale } else { way };
        if self.header.mode == StoreMode::Copy || st.kind != Kind::File {
            return unproved(Way::Copy);
        }
        let raw = match raw {
            Some(raw) => *raw,
            None => match fsops::raw_stat_at(dir, name) {
                Ok(Some(raw)) => raw,
                _ => return Way::Copy,
            },
        };
        if raw.st_nlink > 1 {
            return unproved(Way::Copy);
        }
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
        let Ok(file) = fsops::open_at(dir, name, flags, 0) else {
            // guard cannot open it (another user's file under an unprivileged guard): nothing
            // tells whether it is open elsewhere, and a copy could not be read either.
            return unproved(Way::Inode);
        };
        let same = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&file))
            .is_ok_and(|f| f.st_ino == raw.st_ino && f.st_dev == raw.st_dev);
        if earlier && !same {
            return Way::Stale;
        }
        match crate::sys::fs::open_elsewhere(file) {
            Ok(false) if same => Way::Inode,
            // Open elsewhere: kept by a copy, made from a stat taken now.
            Ok(_) if earlier => Way::Stale,
            Ok(_) => Way::Copy,
            // No leases here (or not allowed): cannot tell; a copy of a large file would cost
            // more than the link count is worth.
            Err(_) if st.size > self.header.max_preimage_bytes => unproved(Way::Inode),
            Err(_) => unproved(Way::Copy),
        }
    }

    /// unlink(2) of the non-directory `dir/name` (`abs`; `st`, and the raw stat it was made
    /// from) for the caller, keeping it as `store/<seq>`; `record` appends the journal's entry
    /// (given the content hash of a copy) before anything changes. Returns the kernel's answer to the caller's call, or EIO when
    /// the journal could not keep the entry (then nothing changed).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn delete_keeping(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        abs: &Path,
        (st, raw): (&Stat, &libc::stat),
        seq: u64,
        way: Option<Way>,
        record: impl FnOnce(&mut Journal, Option<String>) -> io::Result<()>,
    ) -> io::Result<()> {
        self.make_room(seq)
            .map_err(|source| save_failed(abs, source))?;
        let obj = self.object_name(seq);
        let obj = OsStr::new(&obj);
        let way = way.unwrap_or_else(|| self.way(dir, name, st, Some(raw), false));
        if way == Way::Inode {
            record(self, None)?;
            let moved = crate::creds::changing_entries_of(dir, || {
                fsops::rename_at(dir, name, self.store()?, obj, RenameFlags::empty())
            });
            match moved {
                // Another mount of the same filesystem: the rename cannot reach the store.
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
                other => return other,
            }
            self.copy_out(dir, name, obj, st)
                .map_err(|source| save_failed(abs, source))?;
        } else {
            let sha256 = self
                .copy_out(dir, name, obj, st)
                .map_err(|source| save_failed(abs, source))?;
            if let Err(e) = record(self, sha256) {
                self.clear_object(seq);
                return Err(e);
            }
        }
        crate::creds::changing_entries_of(dir, || fsops::unlink_at(dir, name, false))
            .inspect_err(|_| self.clear_object(seq))
    }

    /// Keeps the non-directory `dir/name` (`st`, made from the stat `raw` when the caller has
    /// it at hand: no stat of its own then), about to be replaced by the caller's own call, as
    /// `store/<seq>`. Returns the content hash of a copy.
    pub(crate) fn keep(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        (st, raw): (&Stat, Option<&libc::stat>),
        seq: u64,
    ) -> io::Result<Option<String>> {
        self.make_room(seq)?;
        let obj = self.object_name(seq);
        let obj = OsStr::new(&obj);
        if self.way(dir, name, st, raw, false) == Way::Inode
            && fsops::link_at(dir, name, self.store()?, obj).is_ok()
        {
            return Ok(None);
        }
        self.copy_out(dir, name, obj, st)
    }

    /// Copies `dir/name` to `store/<obj>` (guard's own work, with guard's credentials).
    pub(crate) fn copy_out(
        &self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        obj: &OsStr,
        st: &Stat,
    ) -> io::Result<Option<String>> {
        copy::copy_entry(dir, name, self.store()?, obj, st, self.header.fsync, true)
    }
}

fn save_failed(abs: &Path, source: io::Error) -> io::Error {
    journal_failed(&JournalError::Save {
        path: abs.to_path_buf(),
        source,
    })
}
