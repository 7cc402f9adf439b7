//! File-system calls whose result `nix` hands out as a raw descriptor, or that have no safe
//! `nix` wrapper: `openat` returning an owned descriptor, the FICLONE reflink ioctl, statx(2)
//! for a file's birth time, a write lease as the test of whether a file is open elsewhere, and
//! landlock_add_rule(2) for a path whose type the caller already knows; and reading a caller's
//! files and directories without moving their access times.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::NixPath;

/// `name` as a C string for a system call: EINVAL for a name with a NUL in it, which the
/// kernel could not be given either.
pub fn cstr(name: &OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt as _;
    std::ffi::CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

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

/// Opens with `open(flags | O_NOATIME)` where `flags` read (not `O_PATH`, not write-only), so
/// that guard's own reads of the files and directories a command works on (pre-images, digests,
/// listings) leave their access times where the command's calls left them: a sandbox that moved
/// them would be seen by anything that looks (`find -atime`, a mail reader's "new mail", a
/// cleaner of old files). Opened again without it where the kernel refuses `O_NOATIME` (EPERM:
/// guard neither owns the file nor has CAP_FOWNER); that read moves the time as any read would.
pub fn open_unseen<T>(flags: OFlag, open: impl Fn(OFlag) -> io::Result<T>) -> io::Result<T> {
    if flags.contains(OFlag::O_PATH) || flags & OFlag::O_ACCMODE == OFlag::O_WRONLY {
        return open(flags);
    }
    match open(flags | OFlag::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(flags),
        other => other,
    }
}

/// [`openat`] through [`open_unseen`]: a read leaves the file's access time.
///
/// # Errors
///
/// The open's errno.
pub fn openat_unseen<P: ?Sized + NixPath>(
    dir: Option<BorrowedFd<'_>>,
    path: &P,
    flags: OFlag,
    mode: Mode,
) -> io::Result<OwnedFd> {
    open_unseen(flags, |f| Ok(openat(dir, path, f, mode)?))
}

/// The whole content of the file at `path`, as `std::fs::read`, leaving its access time
/// ([`open_unseen`]).
///
/// # Errors
///
/// The open's or the read's error.
pub fn read_unseen(path: impl AsRef<std::path::Path>) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let fd = openat_unseen(None, path.as_ref(), flags, Mode::empty())?;
    let mut out = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut out)?;
    Ok(out)
}

/// The entries of the directory `name` under `dir` (the current directory when `None`), but
/// `.` and `..`, with the type each is listed with (`None` where the file system gives none: a
/// hint that can be out of date, never a stat). The listing leaves the directory's access time
/// as it was ([`open_unseen`]); a final symlink is not followed.
///
/// # Errors
///
/// The open's or the listing's errno.
pub fn list_dir<P: ?Sized + NixPath>(
    dir: Option<BorrowedFd<'_>>,
    name: &P,
) -> io::Result<Vec<(std::ffi::OsString, Option<nix::dir::Type>)>> {
    use std::os::unix::ffi::OsStrExt as _;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat_unseen(dir, name, flags, Mode::empty())?;
    let mut d = nix::dir::Dir::from(fd)?;
    let mut out = Vec::new();
    for e in d.iter() {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push((OsStr::from_bytes(n).to_owned(), e.file_type()));
        }
    }
    Ok(out)
}

/// The names in the directory `name` under `dir` ([`list_dir`] without the types).
///
/// # Errors
///
/// As [`list_dir`].
pub fn list_names<P: ?Sized + NixPath>(
    dir: Option<BorrowedFd<'_>>,
    name: &P,
) -> io::Result<Vec<std::ffi::OsString>> {
    Ok(list_dir(dir, name)?.into_iter().map(|(n, _)| n).collect())
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
/// (F_SETLEASE, F_WRLCK) is granted only when it is not (EAGAIN otherwise). The descriptor
/// is consumed: closing it releases the lease (one system call fewer than releasing it
/// first). Descriptors opened with O_PATH do not count. Needs the file's owner or
/// CAP_LEASE, and a filesystem with leases; those errors come back as they are.
///
/// Should another process open the file in the instant the lease is held, its open waits for
/// the release, and the kernel signals the lease holder: SIGIO, which would end the process,
/// unless [`block_lease_signal`] blocked it for good; otherwise the lease is set to send
/// SIGURG instead (ignored unless handled), one system call more.
pub fn open_elsewhere(file: OwnedFd) -> io::Result<bool> {
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
    if !LEASE_SIGNAL_BLOCKED.load(Ordering::Relaxed) {
        fcntl(F_SETSIG, libc::SIGURG)?;
    }
    let granted = match fcntl(libc::F_SETLEASE, libc::F_WRLCK) {
        Ok(()) => Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => Ok(true),
        Err(e) => Err(e),
    };
    drop(file);
    granted
}

/// Set once SIGIO is blocked in every thread of this process ([`block_lease_signal`]).
static LEASE_SIGNAL_BLOCKED: AtomicBool = AtomicBool::new(false);

/// Blocks SIGIO, the signal a lease's holder gets when someone opens the file, in the calling
/// thread and so in every thread it starts later (threads inherit their creator's mask), for
/// the rest of the process's life: a lease broken while [`open_elsewhere`] holds it then
/// leaves SIGIO pending, never delivered, and [`open_elsewhere`] needs no F_SETSIG (one system
/// call fewer on each deletion kept by inode). Only done while the process has no other
/// thread, which might not block it: call it first thing in `main`. Returns whether it was
/// done. The commands guard starts get a clear mask (`launch`), and a fork's child has no
/// pending signal of its parent's.
pub fn block_lease_signal() -> io::Result<bool> {
    if !crate::sys::process::single_threaded()? {
        return Ok(false);
    }
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGIO);
    nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&set), None)?;
    LEASE_SIGNAL_BLOCKED.store(true, Ordering::Relaxed);
    Ok(true)
}

/// statx(2) of `dir/name`, a final symlink not followed, for the fields in `mask`, and the
/// birth time (`[seconds, nanoseconds]`) when the filesystem records it.
fn statx_entry(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    mask: u32,
) -> io::Result<(libc::statx, Option<[i64; 2]>)> {
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    // SAFETY: the name is NUL-terminated and `buf` is a writable statx buffer of the right
    // size; the kernel reads the name and writes at most one statx structure.
    let rc = name.with_nix_path(|c| unsafe {
        libc::statx(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            mask,
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
    Ok((stx, born))
}

/// statx(2) of `path` from `dir` (the current directory when `None`) with `flags`
/// (`AT_EMPTY_PATH` for `dir` itself; 0 follows a final symlink, a /proc magic link too),
/// for the fields in `mask`; `stx_mask` says which the kernel filled.
pub fn statx_at(
    dir: Option<BorrowedFd<'_>>,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    mask: u32,
) -> io::Result<libc::statx> {
    let mut buf = std::mem::MaybeUninit::<libc::statx>::zeroed();
    let dir = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `path` is NUL-terminated and `buf` is a writable statx buffer of the right size;
    // the kernel reads the path and writes at most one statx structure.
    let rc = unsafe { libc::statx(dir, path.as_ptr(), flags, mask, buf.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed (every field of statx is a plain integer) and filled by the kernel.
    Ok(unsafe { buf.assume_init() })
}

/// The file type bits (`S_IFMT`) and the birth time (`[seconds, nanoseconds]`, `None` when
/// the filesystem does not record it) of `dir/name`, a final symlink not followed, in one
/// statx.
pub fn type_and_birth(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<(libc::mode_t, Option<[i64; 2]>)> {
    let (stx, born) = statx_entry(dir, name, libc::STATX_TYPE | libc::STATX_BTIME)?;
    Ok((libc::mode_t::from(stx.stx_mode) & libc::S_IFMT, born))
}

/// readlinkat(2) of `dir/name` into a buffer on the stack: only the result is allocated
/// (nix's `readlinkat` allocates a PATH_MAX buffer and then shrinks it). A link too long for
/// the buffer is read again by nix's, which grows its own.
pub fn readlink_at(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let mut buf = [0u8; 4096];
    // SAFETY: `name` is NUL-terminated, and the kernel writes at most `buf.len()` bytes into
    // `buf`, which lives on this frame.
    let rc = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = rc as usize;
    if n < buf.len() {
        return Ok(std::ffi::OsString::from_vec(buf[..n].to_vec()));
    }
    nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name).map_err(io::Error::from)
}

thread_local! {
    /// Where this thread was before it first moved (see [`dir_path_staying_in`]).
    static HOME: Option<OwnedFd> = openat(
        None,
        ".",
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok();
    static HERE: std::cell::RefCell<Here> = const { std::cell::RefCell::new(Here::Home) };
}

/// Where a thread that moves into directories is.
enum Here {
    Home,
    /// In the directory this shared descriptor is, held (so that its number names that
    /// directory for as long as the thread stays).
    In(std::sync::Arc<OwnedFd>),
}

/// The path of the directory `dir` as the kernel's `getcwd` tells it: this thread moves into
/// it (`fchdir`) and asks. The same `d_path` as a `readlink` of `/proc/thread-self/fd/N`
/// without the walk through procfs: 0.75 against 1.74 µs here (a C loop of 200,000 of each,
/// with a move back each time). The thread stays in `dir` until it asks about another
/// directory or [`leave`]s: the next question about the same `dir` (by identity: the same
/// shared descriptor) is one `getcwd`, which reads the path the directory has *now*,
/// wherever it was moved since. While it stays, the thread holds the directory as `dir`
/// does (it keeps a clone): whoever removes it makes the thread leave first, for it to be
/// freed by its removal.
///
/// `None` where that cannot answer, and the caller reads the link instead: a thread that
/// shares its cwd with the rest of the process (only a thread with an fs context of its own
/// may move), a directory this thread's credentials may not search, one removed (`getcwd`
/// fails where the link says `(deleted)`; the thread then goes home) or outside this
/// thread's root, a path longer than the buffer.
pub fn dir_path_staying_in(dir: &std::sync::Arc<OwnedFd>) -> Option<std::ffi::OsString> {
    let there =
        HERE.with(|h| matches!(&*h.borrow(), Here::In(here) if std::sync::Arc::ptr_eq(here, dir)));
    if !there {
        move_into(dir.as_fd(), Here::In(std::sync::Arc::clone(dir)))?;
    }
    let path = cwd_path();
    if path.is_none() {
        leave();
    }
    path
}

/// Moves this thread home, letting go of the directory it stays in (nothing when it is home).
pub fn leave() {
    let was = HERE.with(|h| std::mem::replace(&mut *h.borrow_mut(), Here::Home));
    if matches!(was, Here::Home) {
        return;
    }
    if let Some(home) = HOME.with(|h| h.as_ref().map(|h| h.as_raw_fd())) {
        // SAFETY: `home` stays open for the thread's life. Should it fail, the thread stays
        // where it is: its fs context is its own, and nothing of it is relative to its cwd.
        unsafe { libc::fchdir(home) };
    }
}

/// Moves this thread into `dir` (`fchdir`), which is then `here`. `None` where the thread
/// shares its cwd with others, cannot find its way home, or the move fails (the thread is
/// then where it was).
fn move_into(dir: BorrowedFd<'_>, here: Here) -> Option<()> {
    if !crate::creds::assume::has_private_fs() {
        return None;
    }
    HOME.with(|h| h.as_ref().map(drop))?;
    // SAFETY: fchdir takes a descriptor, which `dir` keeps open for this call.
    if unsafe { libc::fchdir(dir.as_raw_fd()) } != 0 {
        return None;
    }
    HERE.with(|h| *h.borrow_mut() = here);
    Some(())
}

/// The path of this thread's working directory (`getcwd`), when the kernel can tell it.
fn cwd_path() -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    let mut buf = [0u8; 4096];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, on this frame. The raw
    // call: glibc's wrapper would allocate on ENAMETOOLONG.
    let rc = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    // The length with the NUL; a directory outside the root comes back as "(unreachable)/..".
    let n = usize::try_from(rc)
        .ok()
        .filter(|n| *n > 1 && buf[0] == b'/')?;
    Some(std::ffi::OsString::from_vec(buf[..n - 1].to_vec()))
}

/// What one statx of `dir/name` (a final symlink not followed) tells: its `stat` and its birth
/// time (`[seconds, nanoseconds]`, `None` when the filesystem does not record it).
pub fn stat_and_birth(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<(libc::stat, Option<[i64; 2]>)> {
    let (x, born) = statx_entry(dir, name, libc::STATX_BASIC_STATS | libc::STATX_BTIME)?;
    // SAFETY: `stat` is plain integers (and padding), for which all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::MaybeUninit::zeroed().assume_init() };
    st.st_dev = libc::makedev(x.stx_dev_major, x.stx_dev_minor) as _;
    st.st_ino = x.stx_ino as _;
    st.st_nlink = x.stx_nlink as _;
    st.st_mode = x.stx_mode as _;
    st.st_uid = x.stx_uid;
    st.st_gid = x.stx_gid;
    st.st_rdev = libc::makedev(x.stx_rdev_major, x.stx_rdev_minor) as _;
    st.st_size = x.stx_size as _;
    st.st_blksize = x.stx_blksize as _;
    st.st_blocks = x.stx_blocks as _;
    st.st_atime = x.stx_atime.tv_sec as _;
    st.st_atime_nsec = x.stx_atime.tv_nsec as _;
    st.st_mtime = x.stx_mtime.tv_sec as _;
    st.st_mtime_nsec = x.stx_mtime.tv_nsec as _;
    st.st_ctime = x.stx_ctime.tv_sec as _;
    st.st_ctime_nsec = x.stx_ctime.tv_nsec as _;
    Ok((st, born))
}

/// The birth time (`[seconds, nanoseconds]`) of `dir/name`, a final symlink not followed;
/// `None` when the filesystem does not record it.
pub fn birth_time(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<[i64; 2]>> {
    type_and_birth(dir, name).map(|(_, born)| born)
}

/// landlock_add_rule(2): grants `access` (LANDLOCK_ACCESS_FS_* bits) beneath `parent` in the
/// ruleset `ruleset`. The landlock crate's own `add_rule` asks `fstat` for the type of every
/// descriptor (a file takes only file rights); a caller that listed the directory knows it,
/// and passes rights that fit.
pub fn landlock_add_path_rule(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    access: u64,
) -> io::Result<()> {
    /// `struct landlock_path_beneath_attr`: packed, as the kernel declares it.
    #[repr(C, packed)]
    struct PathBeneathAttr {
        allowed_access: u64,
        parent_fd: i32,
    }
    const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a valid landlock_path_beneath_attr alive for the call; the descriptors
    // are borrowed, so open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_tells_whether_a_file_is_open_elsewhere() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").expect("write");
        let mine = || OwnedFd::from(std::fs::File::open(&p).expect("open"));
        let Ok(alone) = open_elsewhere(mine()) else {
            eprintln!("skipped: no leases on this filesystem");
            return;
        };
        assert!(!alone);
        // Closing the descriptor released the lease: this open does not wait for it.
        let other = std::fs::File::open(&p).expect("open again");
        assert!(open_elsewhere(mine()).expect("lease"));
        drop(other);
        assert!(!open_elsewhere(mine()).expect("lease"));
    }

    /// On a thread with an fs context of its own, the path read by moving into a directory is
    /// the link's, and stays the link's while the thread stays there: after the directory is
    /// moved, and after another directory's path was asked in between. What `getcwd` cannot
    /// tell (a removed directory) is left to the link, and the thread goes home, as it does
    /// when it leaves; elsewhere nothing moves.
    #[test]
    fn a_directory_path_read_by_moving_into_it_is_the_links() {
        use std::sync::Arc;
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("a b").join("c");
        std::fs::create_dir_all(&sub).expect("mkdir");
        let open =
            |p: &std::path::Path| Arc::new(OwnedFd::from(std::fs::File::open(p).expect("open")));
        let link = |fd: &OwnedFd| {
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("readlink")
        };
        let path = |fd: &Arc<OwnedFd>| dir_path_staying_in(fd).map(std::path::PathBuf::from);
        let (d, other) = (open(&sub), open(dir.path()));
        // Not a worker: the process's cwd is shared, nothing moves.
        assert_eq!(path(&d), None);
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS).expect("unshare");
                crate::creds::assume::mark_private_fs();
                let cwd = || std::env::current_dir().expect("cwd");
                let before = cwd();
                assert_eq!(path(&d), Some(link(&d)));
                assert_eq!(cwd(), sub, "it stays");
                // Moved while the thread is in it: the path it has now.
                let moved = dir.path().join("moved");
                std::fs::rename(dir.path().join("a b"), &moved).expect("rename");
                assert_eq!(path(&d), Some(moved.join("c")));
                assert_eq!(path(&other), Some(link(&other)));
                assert_eq!(path(&d), Some(link(&d)), "back in the first");
                leave();
                assert_eq!(cwd(), before, "home");
                assert_eq!(path(&d), Some(link(&d)));
                std::fs::remove_dir(moved.join("c")).expect("rmdir");
                assert!(link(&d).to_string_lossy().ends_with(" (deleted)"));
                assert_eq!(path(&d), None, "a removed directory");
                assert_eq!(cwd(), before, "home again");
                assert_eq!(path(&other), Some(link(&other)));
            })
            .join()
            .expect("thread");
        });
    }

    #[test]
    fn stat_and_birth_gives_what_fstatat_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), b"twelve bytes").expect("write");
        std::os::unix::fs::symlink("f", dir.path().join("l")).expect("symlink");
        let d = std::fs::File::open(dir.path()).expect("open dir");
        for name in ["f", "l", "."] {
            let (st, _) = stat_and_birth(d.as_fd(), OsStr::new(name)).expect("statx");
            let want = nix::sys::stat::fstatat(
                Some(d.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .expect("fstatat");
            let fields = |s: &libc::stat| {
                (
                    (
                        s.st_dev, s.st_ino, s.st_nlink, s.st_mode, s.st_uid, s.st_gid,
                    ),
                    (s.st_rdev, s.st_size, s.st_blksize, s.st_blocks),
                    (s.st_atime, s.st_atime_nsec, s.st_mtime, s.st_mtime_nsec),
                    (s.st_ctime, s.st_ctime_nsec),
                )
            };
            assert_eq!(fields(&st), fields(&want), "{name}");
        }
        let missing = stat_and_birth(d.as_fd(), OsStr::new("nothing")).map(drop);
        assert_eq!(
            missing.map_err(|e| e.raw_os_error()),
            Err(Some(libc::ENOENT))
        );
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
