//! File-system calls whose result `nix` hands out as a raw descriptor, or that have no safe
//! `nix` wrapper: `openat` returning an owned descriptor, the FICLONE reflink ioctl, statx(2)
//! for a file's birth time, and a write lease as the test of whether a file is open elsewhere.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::NixPath;

/// openat(2): open `path` relative to `dir` (the current directory when `None`, as `AT_FDCWD`;
/// ignored for an absolute path) and own the new descriptor. The errno comes back exactly as
/// the kernel reported it. Add `O_CLOEXEC` to `flags` unless the descriptor is meant to be
/// inherited.
pub fn openat<P: ?Sized + NixPath>(
    dir: Option<BorrowedFd<'_>>,
    path: &P,
    flags: OFlag,
    mode: Mode,
) -> nix::Result<OwnedFd> {
    let fd = nix::fcntl::openat(dir.map(|d| d.as_raw_fd()), path, flags, mode)?;
    // SAFETY: openat just returned this descriptor; it is new and nothing else refers to it,
    // so the OwnedFd is its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

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

/// Whether the regular file `file` (open read-only, by this descriptor alone as far as the
/// caller knows) is open through any other open file description, anywhere: a write lease
/// (F_SETLEASE, F_WRLCK) is granted only when it is not (EAGAIN otherwise), and is released
/// at once. Descriptors opened with O_PATH do not count. Needs the file's owner or
/// CAP_LEASE, and a filesystem with leases; those errors come back as they are.
///
/// Should another process open the file in the instant the lease is held, its open waits for
/// the release, and the kernel signals the lease holder: with SIGURG (ignored unless handled),
/// not the default SIGIO, which would end the process.
pub fn open_elsewhere(file: BorrowedFd<'_>) -> io::Result<bool> {
    let fcntl = |cmd: libc::c_int, arg: libc::c_int| {
        // SAFETY: F_SETSIG and F_SETLEASE take an integer argument; no memory is involved.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, arg) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // F_SETSIG (include/uapi/asm-generic/fcntl.h), which the libc crate does not name.
    const F_SETSIG: libc::c_int = 10;
    fcntl(F_SETSIG, libc::SIGURG)?;
    match fcntl(libc::F_SETLEASE, libc::F_WRLCK) {
        Ok(()) => {
            fcntl(libc::F_SETLEASE, libc::F_UNLCK)?;
            Ok(false)
        }
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The file type bits (`S_IFMT`) and the birth time (`[seconds, nanoseconds]`, `None` when
/// the filesystem does not record it) of `dir/name`, a final symlink not followed, in one
/// statx.
pub fn type_and_birth(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<(libc::mode_t, Option<[i64; 2]>)> {
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the name is NUL-terminated and `buf` is a writable statx buffer of the right
    // size; the kernel reads the name and writes at most one statx structure.
    let rc = name.with_nix_path(|c| unsafe {
        libc::statx(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_TYPE | libc::STATX_BTIME,
            buf.as_mut_ptr(),
        )
    })?;
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the buffer was zeroed (every field of statx is a plain integer, so all-zero is a
    // valid value) and statx succeeded, filling it.
    let stx = unsafe { buf.assume_init() };
    let born = (stx.stx_mask & libc::STATX_BTIME != 0)
        .then(|| [stx.stx_btime.tv_sec, i64::from(stx.stx_btime.tv_nsec)]);
    Ok((libc::mode_t::from(stx.stx_mode) & libc::S_IFMT, born))
}

/// The birth time (`[seconds, nanoseconds]`) of `dir/name`, a final symlink not followed;
/// `None` when the filesystem does not record it.
pub fn birth_time(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<[i64; 2]>> {
    type_and_birth(dir, name).map(|(_, born)| born)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_lease_tells_whether_a_file_is_open_elsewhere() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").expect("write");
        let mine = std::fs::File::open(&p).expect("open");
        let Ok(alone) = open_elsewhere(mine.as_fd()) else {
            eprintln!("skipped: no leases on this filesystem");
            return;
        };
        assert!(!alone);
        let other = std::fs::File::open(&p).expect("open again");
        assert!(open_elsewhere(mine.as_fd()).expect("lease"));
        drop(other);
        assert!(!open_elsewhere(mine.as_fd()).expect("lease"));
    }

    #[test]
    fn openat_owns_the_descriptor_and_keeps_the_errno() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), b"x").expect("write");
        let d = std::fs::File::open(dir.path()).expect("open dir");
        let f = openat(
            Some(d.as_fd()),
            "f",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .expect("openat");
        assert!(nix::sys::stat::fstat(f.as_raw_fd()).is_ok());
        let missing = openat(Some(d.as_fd()), "nope", OFlag::O_RDONLY, Mode::empty());
        assert_eq!(missing.err(), Some(nix::errno::Errno::ENOENT));
        let abs = dir.path().join("f");
        assert!(openat(
            None,
            abs.as_path(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty()
        )
        .is_ok());
    }
}
