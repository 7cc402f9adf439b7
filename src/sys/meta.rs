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

/// Whether fchmodat2(2) (Linux 6.6) with the flags guard gives it is known to be missing: set
/// by the first ENOSYS or EINVAL, after which [`chmod_entry`] and [`chmod_object`] go through
/// `/proc/self/fd` at once.
static NO_FCHMODAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// fchmodat2 with `flags`, or `None` when the kernel lacks the call or those flags (the caller
/// then takes the older way).
fn try_fchmodat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    mode: u32,
    flags: u32,
) -> Option<io::Result<()>> {
    use std::sync::atomic::Ordering;
    if NO_FCHMODAT2.load(Ordering::Relaxed) {
        return None;
    }
    match fchmodat2(dir, path, mode, flags) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EINVAL)) => {
            NO_FCHMODAT2.store(true, Ordering::Relaxed);
            None
        }
        done => Some(done),
    }
}

/// chmod of the entry `name` of `dir` itself, not following it: one fchmodat2 with
/// AT_SYMLINK_NOFOLLOW (a symlink answers EOPNOTSUPP, as Linux cannot change a symlink's
/// mode). Before Linux 6.6, an O_PATH open of the entry and a chmod through its
/// `/proc/self/fd` link ([`chmod_via_proc`]), which is three calls and a walk of procfs.
pub fn chmod_entry(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    if let Some(done) = try_fchmodat2(dir, name, mode, libc::AT_SYMLINK_NOFOLLOW as u32) {
        return done;
    }
    let object = super::fs::openat(
        Some(dir),
        name,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    chmod_via_proc(std::os::fd::AsFd::as_fd(&object), mode)
}

/// chmod of the object behind `fd` (an O_PATH descriptor included): fchmodat2 with
/// AT_EMPTY_PATH, or before Linux 6.6 through its `/proc/self/fd` link.
pub fn chmod_object(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    if let Some(done) = try_fchmodat2(fd, c"", mode, libc::AT_EMPTY_PATH as u32) {
        return done;
    }
    chmod_via_proc(fd, mode)
}

/// chmod through this process's `/proc/self/fd` link to `fd`, which reaches the object itself
/// (O_PATH descriptors refuse fchmod): the way before fchmodat2.
pub fn chmod_via_proc(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let link = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `link` is NUL-terminated; the kernel only reads it.
    let rc = unsafe { libc::fchmodat(libc::AT_FDCWD, link.as_ptr(), mode as libc::mode_t, 0) };
    check(rc.into())
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

    /// chmod of an entry and of an O_PATH descriptor gives what the way through
    /// `/proc/self/fd` gives (the way kernels before 6.6 take): the mode set on a file, the
    /// entry itself and not a symlink's target, EOPNOTSUPP for a symlink, ENOENT for a
    /// missing name. Both ways are run here, whatever the kernel.
    #[test]
    fn chmod_of_an_entry_or_an_object_matches_the_way_through_proc() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), b"x").expect("write");
        std::os::unix::fs::symlink("f", dir.path().join("l")).expect("symlink");
        let d = std::fs::File::open(dir.path()).expect("open dir");
        let mode = |name: &str| {
            std::fs::symlink_metadata(dir.path().join(name))
                .expect("stat")
                .permissions()
                .mode()
                & 0o7777
        };
        let opath = |name: &CStr| {
            crate::sys::fs::openat(
                Some(d.as_fd()),
                name,
                nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )
            .expect("open O_PATH")
        };
        let err = |r: io::Result<()>| r.unwrap_err().raw_os_error();
        for (entry, object, want) in [(0o600, 0o640, 0o640), (0o755, 0o4711, 0o4711)] {
            chmod_entry(d.as_fd(), c"f", entry).expect("chmod entry");
            assert_eq!(mode("f"), entry);
            chmod_object(opath(c"f").as_fd(), object).expect("chmod object");
            assert_eq!(mode("f"), want);
            chmod_via_proc(opath(c"f").as_fd(), entry).expect("chmod via proc");
            assert_eq!(mode("f"), entry);
        }
        let link = mode("l");
        assert_eq!(
            err(chmod_entry(d.as_fd(), c"l", 0o600)),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(
            err(chmod_object(opath(c"l").as_fd(), 0o600)),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(
            err(chmod_via_proc(opath(c"l").as_fd(), 0o600)),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(mode("l"), link, "the symlink is untouched");
        assert_eq!(mode("f"), 0o755, "and so is its target");
        assert_eq!(
            err(chmod_entry(d.as_fd(), c"gone", 0o600)),
            Some(libc::ENOENT)
        );
    }
}
