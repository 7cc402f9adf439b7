//! Shared directories (`fs.shared`, `/dev/shm` in `base`): places every process of the machine
//! writes in, where a program under guard may make new entries (a POSIX semaphore, a shared
//! memory object) and change the entries it made, but no other. Landlock grants nothing there:
//! guard performs every change, so the judgement here is the boundary.
//!
//! What the run made is kept by identity (device and inode), not by name: a name can come to
//! stand for another process's file (removed and made again outside), an inode cannot, and a
//! rename or a hard link keeps it. An identity is noted when guard makes the entry, before the
//! caller learns the call succeeded (so the caller's next call finds it), and forgotten when
//! the run removes the entry's last name (a filesystem may then give the number to a new file).
//! An open is checked again on the descriptor guard opened, before the caller gets it: a name
//! that changed hands since the walk gives EACCES, never another process's file.

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::Mutex;

use super::lock;
use super::meta::FdTarget;
use super::resolve::{Act, Resolved};
use super::target::{Kind, Target};
use crate::policy::Policy;

/// A file's identity: its device and inode.
type Id = (u64, u64);

fn id_of(st: &libc::stat) -> Id {
    (st.st_dev, st.st_ino)
}

/// The entries the run made in shared directories.
#[derive(Default)]
pub(super) struct Made(Mutex<HashSet<Id>>);

impl Made {
    /// Whether every target of `r` that lies in a shared directory of `policy`, and is there
    /// already, is an entry the run made (`Request::own_shared`). A target whose identity
    /// cannot be read counts as not.
    pub(super) fn owns(&self, policy: &Policy, r: &Resolved) -> bool {
        let made = lock(&self.0);
        let own = |id: Option<Option<Id>>| match id {
            None => false,
            Some(None) => true,
            Some(Some(id)) => made.contains(&id),
        };
        let on = |t: &Target| !in_shared(policy, &t.path) || own(identity(t));
        match &r.act {
            // Named by the path of the descriptor's object.
            Act::FdMeta { on: fd, .. } => {
                !r.paths().any(|p| in_shared(policy, p)) || own(fd_identity(fd).map(Some))
            }
            act => targets(act).all(on),
        }
    }

    /// Whether `st`, the object of a descriptor guard opened, is one the run made.
    pub(super) fn contains(&self, st: &libc::stat) -> bool {
        lock(&self.0).contains(&id_of(st))
    }

    /// Notes `st`, an object guard just made in a shared directory.
    pub(super) fn note(&self, st: &libc::stat) {
        lock(&self.0).insert(id_of(st));
    }

    /// What performing `r` will do to the run's entries in shared directories, read before it
    /// is performed: see [`Made::settle`].
    pub(super) fn before<'a>(policy: &Policy, r: &'a Resolved) -> Settle<'a> {
        let mut settle = Settle::default();
        let shared = |t: &Target| t.pinned.is_none() && in_shared(policy, &t.path);
        // The last name of an object going away (a directory has only one).
        let last = |t: &Target| {
            identity(t).flatten().filter(|_| {
                t.kind == Some(Kind::Dir) || t.seen.as_ref().is_none_or(|st| st.st_nlink <= 1)
            })
        };
        match &r.act {
            Act::Unlink(t) | Act::Rmdir(t) if shared(t) => settle.gone = last(t),
            Act::Rename { to, flags, .. } if shared(to) => {
                if flags & libc::RENAME_EXCHANGE == 0 {
                    settle.gone = last(to);
                }
                settle.made = Some(to);
            }
            Act::Link { to: at, .. }
            | Act::Symlink { at, .. }
            | Act::Mkdir { at, .. }
            | Act::Mknod { at, .. }
                if shared(at) =>
            {
                settle.made = Some(at);
            }
            _ => {}
        }
        settle
    }

    /// After `r` succeeded: forget what it removed, note what it made (before the caller is
    /// answered; an open notes its file itself, before the descriptor is injected).
    pub(super) fn settle(&self, settle: Settle<'_>) {
        let mut made = lock(&self.0);
        if let Some(id) = settle.gone {
            made.remove(&id);
        }
        if let Some(t) = settle.made {
            if let Ok(Some(st)) = stat_at(t) {
                made.insert(id_of(&st));
            }
        }
    }
}

/// See [`Made::before`].
#[derive(Default)]
pub(super) struct Settle<'a> {
    /// The identity of an object whose last name the call removes.
    gone: Option<Id>,
    /// Where the call makes an entry.
    made: Option<&'a Target>,
}

/// Whether `path` lies beneath a shared directory of `policy` (the directory itself is not
/// shared: it is the machine's).
pub(super) fn in_shared(policy: &Policy, path: &Path) -> bool {
    policy
        .fs
        .shared
        .iter()
        .any(|root| path != root && path.starts_with(root))
}

/// Every target the call names.
fn targets(act: &Act) -> impl Iterator<Item = &Target> {
    let (a, b) = match act {
        Act::Unlink(t) | Act::Rmdir(t) => (Some(t), None),
        Act::Rename { from, to, .. }
        | Act::Link { from, to }
        | Act::InstallConfig { from, to, .. } => (Some(from), Some(to)),
        Act::Symlink { at, .. }
        | Act::Mkdir { at, .. }
        | Act::Mknod { at, .. }
        | Act::Chmod { at, .. }
        | Act::Chown { at, .. }
        | Act::Truncate { at, .. }
        | Act::Open { at, .. }
        | Act::PathMeta { at, .. } => (Some(at), None),
        Act::Continue | Act::FdMeta { .. } | Act::Connect { .. } | Act::Net(_) => (None, None),
    };
    a.into_iter().chain(b)
}

/// What is at `t` now: `Some(None)` when nothing is, `None` when it cannot be told.
fn identity(t: &Target) -> Option<Option<Id>> {
    if let Some(pinned) = &t.pinned {
        return nix::sys::stat::fstat(pinned.as_raw_fd())
            .ok()
            .map(|st| Some(id_of(&st)));
    }
    if t.kind.is_none() {
        return Some(None);
    }
    if let Some(st) = &t.seen {
        return Some(Some(id_of(st)));
    }
    match stat_at(t) {
        Ok(st) => Some(st.as_ref().map(id_of)),
        Err(_) => None,
    }
}

fn fd_identity(fd: &FdTarget) -> Option<Id> {
    nix::sys::stat::fstat(fd.fd.as_raw_fd())
        .ok()
        .map(|st| id_of(&st))
}

/// fstatat(AT_SYMLINK_NOFOLLOW) of `t`'s name in its directory; `None` when nothing is there.
fn stat_at(t: &Target) -> nix::Result<Option<libc::stat>> {
    let flags = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
    match nix::sys::stat::fstatat(
        Some(t.parent.as_fd().as_raw_fd()),
        t.name.as_os_str(),
        flags,
    ) {
        Ok(st) => Ok(Some(st)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}
