//! File-system calls without a safe `nix` wrapper: the FICLONE reflink ioctl.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// ioctl(FICLONE): make `dst` share `src`'s extents (a copy-on-write clone of the whole file).
/// Fails with EOPNOTSUPP / EINVAL / EXDEV when the filesystem cannot clone these two files; the
/// caller then copies.
pub fn ficlone(dst: BorrowedFd<'_>, src: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: FICLONE takes the source descriptor as its integer argument; no memory is read or
    // written through pointers, and both descriptors are borrowed for the call's duration.
    let rc = unsafe { libc::ioctl(dst.as_raw_fd(), libc::FICLONE, src.as_raw_fd()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
