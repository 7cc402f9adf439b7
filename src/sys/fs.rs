//! File-system calls without a safe `nix` wrapper: the FICLONE reflink ioctl and statx(2) for a
//! file's birth time.

use std::ffi::CStr;
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

/// The birth time (`[seconds, nanoseconds]`) of `dir/name`, a final symlink not followed;
/// `None` when the filesystem does not record it.
pub fn birth_time(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<[i64; 2]>> {
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: `name` is NUL-terminated and `buf` is a writable statx buffer of the right size;
    // the kernel reads the name and writes at most one statx structure.
    let rc = unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BTIME,
            buf.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the buffer was zeroed (every field of statx is a plain integer, so all-zero is a
    // valid value) and statx succeeded, filling it.
    let stx = unsafe { buf.assume_init() };
    if stx.stx_mask & libc::STATX_BTIME == 0 {
        return Ok(None);
    }
    Ok(Some([
        stx.stx_btime.tv_sec,
        i64::from(stx.stx_btime.tv_nsec),
    ]))
}
