//! openat2(2)'s resolve flags (RESOLVE_BENEATH, RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS,
//! RESOLVE_NO_MAGICLINKS, RESOLVE_NO_XDEV, RESOLVE_CACHED), honoured by the kernel itself: the
//! caller asked the kernel to restrict its own lookup, so guard lets the kernel do that lookup,
//! with the caller's credentials, from the caller's own directory, and then acts on exactly
//! the object the kernel found.
//!
//! - The object exists: the kernel's O_PATH open of it is pinned, and the open guard performs
//!   re-opens that descriptor; guard's own walk of its real path gives the parent and name the
//!   journal and the policy need, and must find the same inode (else EAGAIN, what the kernel
//!   answers when a rename races its lookup).
//! - It does not, and the call creates it: the kernel resolves the parent directory with the
//!   same flags, and guard creates the name there.
//! - The kernel refuses the lookup (EXDEV for an escape, ELOOP for a symlink, EAGAIN for
//!   RESOLVE_CACHED): that is the caller's answer.
//!
//! Not done (docs/design-notes.md): a create through a dangling final symlink fails with
//! ELOOP under guard, where the kernel would create the symlink's target if the flags allow.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::target::{self, Kind, Last, Target};
use crate::sys;

/// The caller's directory its relative (and, under RESOLVE_IN_ROOT, absolute) paths start
/// from: its cwd or descriptor `dirfd`, opened through its /proc entry.
fn callers_dir(pid: u32, dirfd: u64) -> io::Result<OwnedFd> {
    target::open_base(pid, dirfd, false)
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// The target of an openat2 of `raw` from `dirfd` by `pid` with open `flags` and `resolve`
/// flags (see the module doc). Runs with the caller's credentials where it looks up.
pub fn target(pid: u32, dirfd: u64, raw: &[u8], flags: u64, resolve: u64) -> io::Result<Target> {
    if raw.is_empty() {
        return Err(errno(libc::ENOENT));
    }
    let base = callers_dir(pid, dirfd)?;
    let path = CString::new(target::callers_proc(raw, pid)).map_err(|_| errno(libc::EINVAL))?;
    let creat = flags & libc::O_CREAT as u64 != 0;
    let excl = flags & libc::O_EXCL as u64 != 0;
    let mut how = libc::O_PATH as u64 | libc::O_CLOEXEC as u64;
    how |= flags & (libc::O_NOFOLLOW | libc::O_DIRECTORY) as u64;
    if creat && excl {
        how |= libc::O_NOFOLLOW as u64;
    }
    let found = crate::creds::looking_up_as_caller(|| {
        sys::process::openat2(base.as_fd(), &path, how, 0, resolve)
    });
    match found {
        Ok(object) => {
            if creat && excl {
                return Err(errno(libc::EEXIST));
            }
            existing(pid, object)
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && creat => {
            to_create(base.as_fd(), path.as_bytes(), resolve)
        }
        Err(e) => Err(e),
    }
}

/// An object the kernel found: its real path walked by guard to the same inode, pinned.
fn existing(pid: u32, object: OwnedFd) -> io::Result<Target> {
    let real = target::fd_path(object.as_fd())?;
    let mut t = target::target(
        pid,
        libc::AT_FDCWD as u64,
        real.as_os_str().as_bytes(),
        Last::Entry,
    )?;
    let st = nix::sys::stat::fstat(object.as_raw_fd())?;
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        // Reached with O_NOFOLLOW: a symlink cannot be opened for writing.
        return Err(errno(libc::ELOOP));
    }
    let there = nix::sys::stat::fstatat(
        Some(t.parent.as_raw_fd()),
        t.name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    );
    if !there.is_ok_and(|s| s.st_ino == st.st_ino && s.st_dev == st.st_dev) {
        // Renamed while it was looked up.
        return Err(errno(libc::EAGAIN));
    }
    t.pinned = Some(object);
    Ok(t)
}

/// A name to create: its parent resolved by the kernel with the caller's flags.
fn to_create(base: std::os::fd::BorrowedFd<'_>, path: &[u8], resolve: u64) -> io::Result<Target> {
    let mut end = path.len();
    while end > 1 && path[end - 1] == b'/' {
        end -= 1;
    }
    let slash = end < path.len();
    let trimmed = &path[..end];
    let (dir, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => (b"/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (b".", trimmed),
    };
    let cdir = CString::new(dir).map_err(|_| errno(libc::EINVAL))?;
    let how = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    let parent =
        crate::creds::looking_up_as_caller(|| sys::process::openat2(base, &cdir, how, 0, resolve))?;
    let name = OsStr::from_bytes(name).to_os_string();
    let kind = match nix::sys::stat::fstatat(
        Some(parent.as_raw_fd()),
        name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
            // A dangling symlink (a live one would have been found): not followed here.
            return Err(errno(libc::ELOOP));
        }
        Ok(_) => return Err(errno(libc::EAGAIN)), // appeared meanwhile
        Err(nix::errno::Errno::ENOENT) => None::<Kind>,
        Err(e) => return Err(e.into()),
    };
    let parent = super::base::DirFd::from(parent);
    let path = target::dir_path(&parent)?.join(&name);
    Ok(Target {
        parent,
        name,
        path,
        kind,
        born: None,
        seen: None,
        looked: None,
        parent_owner: None,
        pinned: None,
        slash,
    })
}
