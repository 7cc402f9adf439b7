//! The rename hook: rename(2) and renameat2(2) performed by the journal, wherever the two names
//! lie. Every rename the kernel would do is done (never EXDEV for the journal's sake), and
//! journaled so that nothing it moves out of sight is lost:
//!
//! - inside what is journaled: one `renamed` entry; a replaced non-directory is kept in the
//!   store by a hard link (the rename then replaces it atomically);
//! - from an excluded path into the journaled tree: one `renamed` entry; the undo moves the
//!   entry back to the excluded path;
//! - from the journaled tree into an excluded path: one `renamed` entry, nothing copied. When
//!   everything moved was created since the last checkpoint (its birth time says so), any
//!   rollback that undoes the rename also undoes those creations, and the undo leaves the
//!   excluded side alone (cargo's "create a temporary directory, rename it to `target`");
//!   otherwise the excluded path is adopted: journaled from then on, so the undo can move it
//!   back exactly as it was moved;
//! - a file out of the workspace (into the private tmp): a delete as far as the workspace can
//!   tell; a copy (a reflink where possible) goes to the store first;
//! - a file into the workspace from outside: an `entered` entry; the undo moves it into the
//!   store (it is never deleted);
//! - a *directory* into or out of the workspace itself fails with EXDEV, as across
//!   filesystems, and `mv` copies and removes entry by entry: `protect` and the judge of git
//!   configs see entries by their path, and a tree moved out (where no protect glob reaches),
//!   changed there and moved back would carry a protected entry past them (a repository's
//!   `.git/config`). The journal could record it (`record_leaving` copies trees), the policy
//!   cannot judge it yet;
//! - RENAME_EXCHANGE across any of these boundaries: the same rules, applied to both sides.

use std::ffi::OsStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::Path;

use nix::fcntl::RenameFlags;

use super::fsops;
use super::hooks::{as_caller_creating_nothing, errno, journal_failed, Looked};
use super::journal::{Journal, JournalError};
use super::log::{Boundary, Kind, Op, Stat};
use crate::audit::PathText;

/// Where a path lies for the journal.
#[derive(Debug, Clone)]
enum Side {
    Covered(PathText),
    Excluded(PathText),
    Outside,
}

/// One end of a rename.
pub struct End<'a> {
    pub dir: BorrowedFd<'a>,
    pub name: &'a OsStr,
    pub abs: &'a Path,
}

impl Journal {
    fn side(&self, abs: &Path) -> Side {
        match self.rel(abs) {
            None => Side::Outside,
            Some(rel) if self.is_excluded(rel) => Side::Excluded(PathText::from(rel)),
            Some(rel) => Side::Covered(PathText::from(rel)),
        }
    }

    /// rename/renameat2 performed by the journal. `flags`: 0, or RENAME_NOREPLACE,
    /// RENAME_EXCHANGE, RENAME_WHITEOUT as the kernel takes them. `looks`: what the walks
    /// that found the two names saw (source first), if anything; a look still current spares
    /// the journal its own `fstatat` of that name.
    ///
    /// # Errors
    ///
    /// The kernel's error for the rename (or for keeping what it replaces), as the caller should
    /// see it.
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
        looks: [Looked<'_>; 2],
    ) -> io::Result<()> {
        let a = End {
            dir: from_dir,
            name: from,
            abs: from_abs,
        };
        let b = End {
            dir: to_dir,
            name: to,
            abs: to_abs,
        };
        self.rename_ends(&a, &b, flags, looks)
    }

    fn rename_ends(
        &mut self,
        a: &End<'_>,
        b: &End<'_>,
        flags: u32,
        [from_look, to_look]: [Looked<'_>; 2],
    ) -> io::Result<()> {
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE | libc::RENAME_WHITEOUT;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        let whiteout = flags & libc::RENAME_WHITEOUT != 0;
        if flags & !known != 0 || (exchange && (noreplace || whiteout)) {
            return Err(errno(libc::EINVAL));
        }
        let kflags = RenameFlags::from_bits_retain(flags);
        let call = || {
            as_caller_creating_nothing(|| fsops::rename_at(a.dir, a.name, b.dir, b.name, kflags))
        };
        let (fs, ts) = (self.side(a.abs), self.side(b.abs));
        if !matches!(fs, Side::Covered(_)) && !matches!(ts, Side::Covered(_)) {
            return call();
        }
        let src = from_look
            .or_stat(a.dir, a.name)?
            .map(|st| Stat::from_nix(&st))
            .ok_or_else(|| errno(libc::ENOENT))?;
        let dst_raw = to_look.or_stat(b.dir, b.name)?;
        let dst = dst_raw.as_ref().map(Stat::from_nix);
        // The undo of a rename needs the inode back where the rename left it: a file made
        // since the checkpoint is kept like any other from now on.
        self.made.remove(&src.id());
        if let Some(d) = &dst {
            self.made.remove(&d.id());
        }
        // A directory crossing the workspace's own edge: see the module doc.
        let crosses = matches!(fs, Side::Outside) || matches!(ts, Side::Outside);
        let dir_moves = src.kind == Kind::Dir
            || (exchange && dst.as_ref().is_some_and(|d| d.kind == Kind::Dir));
        if crosses && dir_moves {
            return Err(errno(libc::EXDEV));
        }
        if exchange {
            let dst = dst.ok_or_else(|| errno(libc::ENOENT))?;
            self.exchange(a, b, fs, ts, &src, &dst)?;
            return call();
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
        let seq = self.next_seq();
        let result = match (fs, ts) {
            (Side::Covered(f), Side::Covered(t)) => {
                self.record_rename(
                    b,
                    f,
                    t,
                    &src,
                    dst.as_ref().map(|d| (d, dst_raw.as_ref())),
                    None,
                    whiteout,
                )?;
                call()
            }
            (Side::Excluded(f), Side::Covered(t)) => {
                let boundary = Some(Boundary::FromExcluded);
                self.record_rename(
                    b,
                    f,
                    t,
                    &src,
                    dst.as_ref().map(|d| (d, dst_raw.as_ref())),
                    boundary,
                    whiteout,
                )?;
                call()
            }
            (Side::Covered(f), Side::Excluded(t)) => {
                let fresh = self.made_since_checkpoint(a.dir, a.name, Path::new(f.as_os_str()));
                let boundary = if fresh {
                    Boundary::ToLeft
                } else {
                    Boundary::ToAdopted
                };
                let tp = Path::new(t.as_os_str()).to_path_buf();
                self.record_rename(b, f, t, &src, None, Some(boundary), whiteout)?;
                let r = call();
                if r.is_ok() && boundary == Boundary::ToAdopted {
                    self.adopt(&tp);
                }
                r
            }
            (Side::Covered(f), Side::Outside) => {
                self.record_leaving(a, f.clone(), &src)?;
                if whiteout {
                    let op = Op::Created {
                        path: f,
                        id: None,
                        obj: None,
                    };
                    self.append(op).map_err(|e| journal_failed(&e))?;
                }
                call()
            }
            (Side::Outside, Side::Covered(t)) => {
                self.record_entering(b, t, &src, dst.as_ref())?;
                call()
            }
            _ => return call(),
        };
        if result.is_err() {
            self.clear_object(seq);
        }
        result
    }

    /// Appends a `renamed` entry (and, for RENAME_WHITEOUT, the whiteout left at `from`),
    /// keeping a replaced non-directory at `to` (covered) in the store.
    #[allow(clippy::too_many_arguments)]
    fn record_rename(
        &mut self,
        b: &End<'_>,
        from: PathText,
        to: PathText,
        src: &Stat,
        dst: Option<(&Stat, Option<&libc::stat>)>,
        boundary: Option<Boundary>,
        whiteout: bool,
    ) -> io::Result<()> {
        let seq = self.next_seq();
        if let Some(d) = dst.filter(|(d, _)| d.kind != Kind::Dir) {
            self.keep(b.dir, b.name, d, seq)
                .map_err(|source| save_failed(b.abs, source))?;
        }
        let op = Op::Renamed {
            from: from.clone(),
            to,
            src: src.id(),
            replaced: dst.map(|(d, _)| d.clone()),
            boundary,
        };
        if let Err(e) = self.append(op) {
            self.clear_object(seq);
            return Err(journal_failed(&e));
        }
        if whiteout && boundary != Some(Boundary::FromExcluded) {
            let op = Op::Created {
                path: from,
                id: None,
                obj: None,
            };
            self.append(op).map_err(|e| journal_failed(&e))?;
        }
        if let Some((d, _)) = dst {
            self.content_saved.remove(&d.id());
            self.meta_saved.remove(&d.id());
        }
        Ok(())
    }

    /// `a` (journaled) leaves the workspace: a delete, with a copy of it (its whole tree for a
    /// directory) kept in the store.
    fn record_leaving(&mut self, a: &End<'_>, path: PathText, src: &Stat) -> io::Result<()> {
        let seq = self.next_seq();
        let sha256 = self
            .keep_tree(a.dir, a.name, src, seq)
            .map_err(|source| save_failed(a.abs, source))?;
        self.content_saved.remove(&src.id());
        self.meta_saved.remove(&src.id());
        let op = Op::Deleted {
            path,
            st: src.clone(),
            sha256,
            obj: None,
        };
        if let Err(e) = self.append(op) {
            self.clear_object(seq);
            return Err(journal_failed(&e));
        }
        Ok(())
    }

    /// Something from outside enters at `b` (journaled): what `b` held is kept, then an
    /// `entered` entry.
    fn record_entering(
        &mut self,
        b: &End<'_>,
        path: PathText,
        src: &Stat,
        dst: Option<&Stat>,
    ) -> io::Result<()> {
        match dst {
            Some(d) if d.kind == Kind::Dir => {
                // The kernel replaces only an empty directory: its metadata is all there is.
                let op = Op::Rmdir {
                    path: path.clone(),
                    st: d.clone(),
                };
                self.append(op).map_err(|e| journal_failed(&e))?;
            }
            Some(d) => {
                let seq = self.next_seq();
                let sha256 = self
                    .keep(b.dir, b.name, (d, None), seq)
                    .map_err(|source| save_failed(b.abs, source))?;
                self.content_saved.remove(&d.id());
                self.meta_saved.remove(&d.id());
                let op = Op::Deleted {
                    path: path.clone(),
                    st: d.clone(),
                    sha256,
                    obj: None,
                };
                if let Err(e) = self.append(op) {
                    self.clear_object(seq);
                    return Err(journal_failed(&e));
                }
            }
            None => {}
        }
        self.append(Op::Entered {
            path,
            src: src.id(),
        })
        .map(|_| ())
        .map_err(|e| journal_failed(&e))
    }

    /// RENAME_EXCHANGE with at least one side journaled.
    fn exchange(
        &mut self,
        a: &End<'_>,
        b: &End<'_>,
        fs: Side,
        ts: Side,
        src: &Stat,
        dst: &Stat,
    ) -> io::Result<()> {
        let (from, to, adopted) = match (fs, ts) {
            (Side::Covered(f), Side::Covered(t)) => (f, t, None),
            (Side::Covered(f), Side::Excluded(t)) => (f, t.clone(), Some(t)),
            (Side::Excluded(f), Side::Covered(t)) => (f.clone(), t, Some(f)),
            (Side::Covered(f), Side::Outside) => {
                self.record_leaving(a, f.clone(), src)?;
                return self
                    .append(Op::Entered {
                        path: f,
                        src: dst.id(),
                    })
                    .map(|_| ())
                    .map_err(|e| journal_failed(&e));
            }
            (Side::Outside, Side::Covered(t)) => {
                self.record_leaving(b, t.clone(), dst)?;
                return self
                    .append(Op::Entered {
                        path: t,
                        src: src.id(),
                    })
                    .map(|_| ())
                    .map_err(|e| journal_failed(&e));
            }
            _ => return Ok(()),
        };
        let adopt = adopted
            .as_ref()
            .map(|p| Path::new(p.as_os_str()).to_path_buf());
        let op = Op::Exchanged {
            from,
            to,
            from_id: src.id(),
            to_id: dst.id(),
            adopted,
        };
        self.append(op).map_err(|e| journal_failed(&e))?;
        if let Some(p) = adopt {
            self.adopt(&p);
        }
        Ok(())
    }
}

fn save_failed(abs: &Path, source: io::Error) -> io::Error {
    journal_failed(&JournalError::Save {
        path: abs.to_path_buf(),
        source,
    })
}
