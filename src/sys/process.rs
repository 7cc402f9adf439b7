//! Process-level calls without a safe `nix` wrapper: fork, pidfds, close_range, openat2 and the
//! Landlock ABI probe.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: callers pass the return value of a system call that created a new descriptor,
    // which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The result of [`fork`].
pub enum Forked {
    Parent { child: libc::pid_t },
    Child,
}

/// fork(2). The caller must be single-threaded (guard forks before it starts any thread), so
/// the child may allocate; it still keeps the work between fork and exec small.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: fork has no memory arguments; guard calls it before spawning threads, so the child
    // inherits no lock held by another thread.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        child => Ok(Forked::Parent { child }),
    }
}

/// pidfd_open(2) (Linux 5.3).
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    owned_fd(rc)
}

/// pidfd_getfd(2) (Linux 5.6): duplicate descriptor `fd` of the process behind `pidfd`.
pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments; returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    owned_fd(rc)
}

/// pidfd_send_signal(2) (Linux 5.1): signal the process behind `pidfd` (no pid reuse race).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: a null siginfo pointer is allowed and means "as kill(2) would".
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// close_range(2) (Linux 5.9): close every descriptor from `first` to `last` inclusive.
/// Async-signal-safe.
pub fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: closing descriptors the caller no longer needs; no memory arguments.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// openat2(2) (Linux 5.6) with `resolve` flags (RESOLVE_BENEATH, ...), read-only by default.
pub fn openat2(
    dir: BorrowedFd<'_>,
    path: &CStr,
    flags: u64,
    mode: u64,
    resolve: u64,
) -> io::Result<OwnedFd> {
    // SAFETY: open_how is plain old data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    // SAFETY: `path` is NUL-terminated and `how` is a valid open_how whose size we pass; the
    // kernel only reads both.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    owned_fd(rc)
}

/// The Landlock ABI version of the running kernel, `None` when Landlock is absent or disabled.
pub fn landlock_abi() -> Option<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the call only returns
    // the ABI version; nothing is read or written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(rc).ok().filter(|v| *v > 0)
}

/// `_exit(2)`: leave the forked child without running the parent's atexit handlers or
/// destructors.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user memory.
    unsafe { libc::_exit(code) }
}

/// Take ownership of a descriptor that a system call just created for us (received with
/// SCM_RIGHTS, or returned by `nix`'s openat, which hands out raw descriptors).
pub fn owned_received_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: callers pass a descriptor the kernel just created for this process and that
    // nothing else refers to, so wrapping it transfers sole ownership.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `AT_FDCWD` as a borrowed descriptor, for *at calls that should start at our own cwd (or
/// that take an absolute path, where the descriptor is ignored).
pub fn at_fdcwd() -> BorrowedFd<'static> {
    // SAFETY: AT_FDCWD is not a real descriptor but a value every *at system call accepts; it is
    // never closed and BorrowedFd only excludes -1.
    unsafe { BorrowedFd::borrow_raw(libc::AT_FDCWD) }
}

/// A pidfd for the thread group that thread `tid` belongs to: `pidfd_open` wants a thread
/// group leader (before Linux 6.9), and seccomp notifications carry thread ids.
pub fn pidfd_for_thread(tid: u32) -> io::Result<OwnedFd> {
    let tgid = std::fs::read_to_string(format!("/proc/{tid}/status"))?
        .lines()
        .find_map(|l| {
            l.strip_prefix("Tgid:")
                .and_then(|v| v.trim().parse::<libc::pid_t>().ok())
        })
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
    pidfd_open(tgid)
}

/// Put `sig` back to its default disposition (so raising it ends the process the way it ended
/// the command).
pub fn set_default_action(
    sig: nix::sys::signal::Signal,
    action: &nix::sys::signal::SigAction,
) -> nix::Result<()> {
    // SAFETY: the action is SIG_DFL, which installs no handler code, so no async-signal-safety
    // requirement applies.
    unsafe { nix::sys::signal::sigaction(sig, action) }.map(drop)
}
