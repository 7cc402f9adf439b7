//! Metadata system calls the supervisor performs for a caller and `nix` does not wrap: the
//! extended attribute calls (path, descriptor and `*at` forms), `fchmodat2`, and `utimensat`
//! with a NULL path (the descriptor itself). Each returns the kernel's errno unchanged.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct xattr_args` of setxattrat(2) (Linux 6.13).
#[repr(C)]
struct XattrArgs {
    value: u64,
    size: u32,
    flags: u32,
}

/// fsetxattr(2) on `fd`.
pub fn fsetxattr(fd: BorrowedFd<'_>, name: &CStr, value: &[u8], flags: i32) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and `value` is a live buffer of `value.len()` bytes; the
    // kernel only reads both.
    let rc = unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    check(rc.into())
}

/// fremovexattr(2) on `fd`.
pub fn fremovexattr(fd: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated; the kernel only reads it.
    let rc = unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) };
    check(rc.into())
}

/// setxattr(2) on `path` (following a final symlink, a /proc magic link included).
pub fn setxattr(path: &CStr, name: &CStr, value: &[u8], flags: i32) -> io::Result<()> {
    // SAFETY: both strings are NUL-terminated, `value` is a live buffer of its length; the
    // kernel only reads them.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    check(rc.into())
}

/// removexattr(2) on `path` (following a final symlink).
pub fn removexattr(path: &CStr, name: &CStr) -> io::Result<()> {
    // SAFETY: both strings are NUL-terminated; the kernel only reads them.
    let rc = unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) };
    check(rc.into())
}

/// setxattrat(2) (Linux 6.13): `dir`/`path` with `at_flags` (AT_SYMLINK_NOFOLLOW,
/// AT_EMPTY_PATH). ENOSYS on older kernels.
pub fn setxattrat(
    dir: BorrowedFd<'_>,
    path: &CStr,
    at_flags: u32,
    name: &CStr,
    value: &[u8],
    flags: u32,
) -> io::Result<()> {
    let args = XattrArgs {
        value: value.as_ptr() as u64,
        size: u32::try_from(value.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
        flags,
    };
    // SAFETY: the strings are NUL-terminated, `args` is a live `struct xattr_args` whose value
    // pointer refers to `value` (alive for the call) and whose size is passed alongside; the
    // kernel only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::c_long::from(syscalls::Sysno::setxattrat.id()),
            dir.as_raw_fd(),
            path.as_ptr(),
            at_flags,
            name.as_ptr(),
            &args as *const XattrArgs,
            std::mem::size_of::<XattrArgs>(),
        )
    };
    check(rc)
}

/// removexattrat(2) (Linux 6.13).
pub fn removexattrat(
    dir: BorrowedFd<'_>,
    path: &CStr,
    at_flags: u32,
    name: &CStr,
) -> io::Result<()> {
    // SAFETY: the strings are NUL-terminated; the kernel only reads them.
    let rc = unsafe {
        libc::syscall(
            libc::c_long::from(syscalls::Sysno::removexattrat.id()),
            dir.as_raw_fd(),
            path.as_ptr(),
            at_flags,
            name.as_ptr(),
        )
    };
    check(rc)
}

/// fchmodat2(2) (Linux 6.6): `dir`/`path` with `flags` (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH).
pub fn fchmodat2(dir: BorrowedFd<'_>, path: &CStr, mode: u32, flags: u32) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; plain integer arguments otherwise.
    let rc = unsafe {
        libc::syscall(
            // libc names it on x86_64 only; the number comes from the one table.
            syscalls::Sysno::fchmodat2.id() as libc::c_long,
            dir.as_raw_fd(),
            path.as_ptr(),
            mode,
            flags,
        )
    };
    check(rc)
}

/// utimensat(2): `dir`/`path` (`None`: the descriptor itself, as futimens), `times` (`None`:
/// both now), `flags` (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH).
pub fn utimensat(
    dir: BorrowedFd<'_>,
    path: Option<&CStr>,
    times: Option<&[libc::timespec; 2]>,
    flags: i32,
) -> io::Result<()> {
    let path = path.map_or(std::ptr::null(), CStr::as_ptr);
    let times = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: `path` is NULL or NUL-terminated, `times` NULL or two live timespecs; the kernel
    // only reads them. (The raw call: glibc's wrapper refuses a NULL path.)
    let rc = unsafe { libc::syscall(libc::SYS_utimensat, dir.as_raw_fd(), path, times, flags) };
    check(rc)
}

/// fchownat(2), with `path` possibly empty (with AT_EMPTY_PATH: the descriptor itself).
pub fn fchownat(
    dir: BorrowedFd<'_>,
    path: &CStr,
    uid: u32,
    gid: u32,
    flags: i32,
) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; plain integer arguments otherwise.
    let rc = unsafe { libc::fchownat(dir.as_raw_fd(), path.as_ptr(), uid, gid, flags) };
    check(rc.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn descriptor_calls_act_on_the_descriptor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").expect("write");
        let f = std::fs::File::open(&path).expect("open");
        let t = [libc::timespec {
            tv_sec: 1_000_000,
            tv_nsec: 0,
        }; 2];
        utimensat(f.as_fd(), None, Some(&t), 0).expect("futimens");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).expect("stat").mtime(), 1_000_000);
        let name = c"user.guard-test";
        match fsetxattr(f.as_fd(), name, b"v", 0) {
            Ok(()) => fremovexattr(f.as_fd(), name).expect("remove"),
            // tmpfs before 6.6 and some filesystems have no user xattrs.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EOPNOTSUPP)),
        }
        let empty = c"";
        let e = fchownat(f.as_fd(), empty, u32::MAX, u32::MAX, 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "no AT_EMPTY_PATH");
        fchownat(f.as_fd(), empty, u32::MAX, u32::MAX, libc::AT_EMPTY_PATH).expect("no-op chown");
    }
}
