//! Where a caller's relative path starts (its cwd, or the directory behind a dirfd), kept by
//! each worker between calls.
//!
//! Opening the caller's `/proc/PID/cwd` on every judged call costs an open, an `fstat` (the
//! owner check of `target::walk_alike`) and a close. Most calls of a run start from the same
//! few directories, so each worker keeps the directories it opened, by identity: the mount
//! and the inode. A call then asks only `statx` of the caller's magic link, which follows it
//! *now* to the caller's directory and tells its mount, inode, owner and mode; the directory
//! kept under that identity is the same directory, reached through the same mount, so a walk
//! from it meets what a walk from a fresh open would. The identity cannot name another
//! directory later: the kept descriptor holds the inode and the mount, so neither number can
//! be given to anything else while it is kept. A directory renamed or moved since is still
//! the caller's directory (its path is read again from the descriptor on every call), and a
//! caller that changed directory since gets another identity.
//!
//! The same holds for the directory part of a `dir/name` path, looked up in the base with one
//! `statx` that does not follow a symlink ([`subdir`]).
//!
//! What cannot be proved the same is opened as before: a link that is no directory, a kernel
//! without the mount in `statx` (before 5.8), a link that changed between the `statx` and the
//! open of a miss.
//!
//! A thread's working directory changes only by its own chdir or fchdir, or by another
//! thread's that shares it (threads of a process, `CLONE_FS`): chroot, unshare and setns are
//! refused in the sandbox, and exec keeps it. Both calls are trapped and let through, so each
//! worker also remembers, per thread, the directory the `statx` of its `cwd` found (a
//! [`Cwd`]), and the next call of that thread relative to its cwd takes it without the
//! `statx` (2.2 µs here, the largest single part of such a call). A remembered directory
//! holds while no chdir has come since ([`EPOCH`], bumped by each), and none is on its way:
//! guard lets a chdir through and cannot see it finish, so from its notification until it is
//! seen done ([`settle`]: the thread's next call; [`epoch`]: the thread's directory seen to
//! change, or the thread gone, looked at once a millisecond at most) every call looks its
//! directory up as before. A remembered directory is taken for at most [`CWD_TTL`], well
//! within the time a reused thread id would need (the whole pid space to wrap), and without
//! its owner and mode (read again by `fstat` if the walk needs them: they may change from
//! outside the sandbox). Wherever a remembered directory were wrong, guard would judge and
//! act on the same directory, never on one it did not judge.

use std::ffi::CStr;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::sys;

/// How many directories a worker keeps (most recently used first).
const KEPT: usize = 8;

/// A directory descriptor a [`super::target::Target`] holds: opened by the walk, or a base a
/// worker keeps (shared: dropping it closes nothing while the worker keeps it).
#[derive(Debug, Clone)]
pub struct DirFd(Arc<OwnedFd>);

impl From<OwnedFd> for DirFd {
    fn from(fd: OwnedFd) -> Self {
        DirFd(Arc::new(fd))
    }
}

impl AsFd for DirFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl DirFd {
    /// The descriptor, shared: its identity names the directory while it is held.
    pub fn shared(&self) -> &Arc<OwnedFd> {
        &self.0
    }
}

impl AsRawFd for DirFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The owner and mode of a base, as the `statx` of the caller's link found them for this
/// call: what `creds::caller_owns` checks without an `fstat` of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    pub mode: u32,
}

/// A directory's identity: mount id, device and inode.
type Identity = (u64, u32, u32, u64);

const MASK: u32 = libc::STATX_TYPE | libc::STATX_MODE | libc::STATX_UID | libc::STATX_INO;

/// How many threads' working directories a worker remembers.
const CWDS: usize = 16;

/// How long a remembered working directory is taken without looking (see the module doc).
pub const CWD_TTL: Duration = Duration::from_millis(100);

/// A thread's working directory, as a worker found it.
struct Cwd {
    tid: u32,
    /// [`EPOCH`] when it was looked up.
    epoch: u64,
    at: Instant,
    id: Identity,
    fd: DirFd,
}

/// The directories one worker keeps, most recently used first, and the working directories
/// of the threads it served last.
#[derive(Default)]
struct Kept {
    dirs: Vec<(Identity, DirFd)>,
    cwds: Vec<Cwd>,
}

/// Bumped by every chdir guard lets through, and again when it is seen done.
static EPOCH: AtomicU64 = AtomicU64::new(0);

/// A chdir let through and not yet seen done: the thread, and the identity of its directory
/// before (`None`: not found).
struct Unsettled {
    tid: u32,
    before: Option<Identity>,
}

/// The chdirs on their way, and when [`epoch`] last looked at their threads.
struct Pending {
    list: Vec<Unsettled>,
    looked: Option<Instant>,
}

static UNSETTLED: Mutex<Pending> = Mutex::new(Pending {
    list: Vec::new(),
    looked: None,
});
/// How many chdirs are on their way, read without the lock on every call.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// How often [`epoch`] looks whether a chdir on its way is done. A chdir that fails, or
/// that stays where it was (`cd .`), changes nothing to see: until its thread's next call,
/// every call relative to a cwd would pay a second `statx` otherwise.
const LOOK_EVERY: Duration = Duration::from_millis(1);

thread_local! {
    /// This worker's kept directories: its own, but reachable by [`forget`] from any worker
    /// (through [`WORKERS`]), which takes the lock only when a directory is removed.
    static BASES: Arc<Mutex<Kept>> = {
        let kept = Arc::new(Mutex::new(Kept::default()));
        let mut all = lock(&WORKERS);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&kept));
        kept
    };
}

/// Every worker's kept directories, for [`forget`].
static WORKERS: Mutex<Vec<Weak<Mutex<Kept>>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The caller's base for a relative path: its cwd (`dirfd` is AT_FDCWD) or the directory
/// behind its descriptor `dirfd`, with the owner and mode found now when the base is a
/// directory a worker keeps or has just kept. Errors are those of opening the caller's link,
/// as the call's answer ([`link_error`]).
pub fn base(pid: u32, dirfd: u64) -> io::Result<(DirFd, Option<Owner>)> {
    base_of(pid, dirfd).map_err(|e| link_error(e, dirfd))
}

/// An error of opening or reading the caller's /proc link for `dirfd` (its `cwd`, or `fd/N`),
/// made the call's answer. No link for a descriptor (ENOENT) is the kernel's EBADF: the caller
/// has no such descriptor (or is gone, and the answer reaches nobody). A link guard may not
/// open (EACCES: a caller that is not dumpable keeps a guard without CAP_SYS_PTRACE out) is
/// guard's own failure, EPERM, not the EACCES of a lookup made as the caller, which is the
/// kernel's answer (`Failure::unresolved`). Other errors pass as they are.
pub fn link_error(e: io::Error, dirfd: u64) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) if !is_at_fdcwd(dirfd) => io::Error::from_raw_os_error(libc::EBADF),
        Some(libc::EACCES) => io::Error::from_raw_os_error(libc::EPERM),
        _ => e,
    }
}

fn base_of(pid: u32, dirfd: u64) -> io::Result<(DirFd, Option<Owner>)> {
    // Read before the lookup: a chdir noted meanwhile makes what it finds stale at once.
    let epoch = if is_at_fdcwd(dirfd) { epoch() } else { None };
    if let Some(e) = epoch {
        if let Some(fd) = BASES.with(|b| lock(b).cwd(pid, e)) {
            return Ok((fd, None));
        }
    }
    let mut buf = [0u8; 48];
    let link = callers_link(pid, dirfd, false, &mut buf)?;
    let Ok(now) = sys::fs::statx_at(None, link, 0, MASK | libc::STATX_MNT_ID) else {
        return open(link).map(|fd| (fd.into(), None));
    };
    let Some(id) = identity(&now) else {
        return open(link).map(|fd| (fd.into(), None));
    };
    let owner = owner(&now);
    let found = |fd: DirFd| {
        if let Some(e) = epoch {
            BASES.with(|b| lock(b).remember_cwd(pid, e, id, fd.clone()));
        }
        fd
    };
    if let Some(kept) = BASES.with(|b| take(&mut lock(b).dirs, id)) {
        return Ok((found(kept), Some(owner)));
    }
    let fd = DirFd::from(open(link)?);
    // The caller may have changed directory between the statx and the open: keep and use the
    // owner only of what is proved to be the directory the statx saw.
    match opened_identity(&fd) {
        Some((opened, _)) if opened == id => {
            BASES.with(|b| keep(&mut lock(b).dirs, id, fd.clone()));
            Ok((found(fd), Some(owner)))
        }
        _ => Ok((fd, None)),
    }
}

impl Kept {
    /// Thread `tid`'s working directory as remembered at `epoch`, when still to be taken.
    fn cwd(&mut self, tid: u32, epoch: u64) -> Option<DirFd> {
        let at = self.cwds.iter().position(|c| c.tid == tid)?;
        let c = &self.cwds[at];
        if c.epoch != epoch || super::answer::received().duration_since(c.at) >= CWD_TTL {
            self.cwds.remove(at);
            return None;
        }
        Some(c.fd.clone())
    }

    fn remember_cwd(&mut self, tid: u32, epoch: u64, id: Identity, fd: DirFd) {
        self.cwds.retain(|c| c.tid != tid);
        self.cwds.insert(
            0,
            Cwd {
                tid,
                epoch,
                // No later than the statx that found it, which the call made after.
                at: super::answer::received(),
                id,
                fd,
            },
        );
        self.cwds.truncate(CWDS);
    }
}

/// The epoch remembered working directories must have been found in to be taken, or `None`
/// while a chdir is on its way. A chdir seen done (the thread's directory changed, or the
/// thread gone) is settled here, at the cost of one `statx` of its `cwd`.
fn epoch() -> Option<u64> {
    let e = EPOCH.load(Ordering::SeqCst);
    if PENDING.load(Ordering::SeqCst) == 0 {
        return Some(e);
    }
    let mut pending = lock(&UNSETTLED);
    if pending.looked.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
        return None;
    }
    pending.looked = Some(Instant::now());
    // Still where it was: the chdir may be on its way yet. Gone: nothing of it is.
    let e =
        pending.settle_where(|u| cwd_identity(u.tid).is_none_or(|now| Some(now) != u.before))?;
    pending.list.is_empty().then_some(e)
}

/// The identity of thread `tid`'s working directory now, when it can be told.
fn cwd_identity(tid: u32) -> Option<Identity> {
    let mut buf = [0u8; 48];
    let link = callers_link(tid, libc::AT_FDCWD as u64, false, &mut buf).ok()?;
    identity(&sys::fs::statx_at(None, link, 0, MASK | libc::STATX_MNT_ID).ok()?)
}

impl Pending {
    /// Drops the chdirs `done` says are done; when there were any, every remembered working
    /// directory is stale from now on: the new epoch.
    fn settle_where(&mut self, mut done: impl FnMut(&Unsettled) -> bool) -> Option<u64> {
        let before = self.list.len();
        self.list.retain(|u| !done(u));
        if self.list.len() == before {
            return None;
        }
        PENDING.store(self.list.len(), Ordering::SeqCst);
        Some(EPOCH.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// Thread `tid` is about to be let through chdir or fchdir: every remembered working
/// directory is stale, and none is remembered until the call is seen done.
pub fn cwd_changing(tid: u32) {
    let before = cwd_identity(tid);
    let mut pending = lock(&UNSETTLED);
    pending.list.push(Unsettled { tid, before });
    // Its thread is looked at on the next lookup, however recent the last look.
    pending.looked = None;
    PENDING.store(pending.list.len(), Ordering::SeqCst);
    EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// Thread `tid` makes a call: a chdir of its that guard let through is done.
pub fn settle(tid: u32) {
    if PENDING.load(Ordering::SeqCst) != 0 {
        lock(&UNSETTLED).settle_where(|u| u.tid == tid);
    }
}

/// The directory `dir` (one component, no slash) in `base`, with its owner and mode when they
/// were read for this call. A directory a worker keeps is found by one `statx` that does not
/// follow a final symlink and tells, now, which directory `dir` names; any other is opened
/// with `resolve` (openat2's flags: a symlink there is followed, or refused, as they say) and
/// kept. Errors are the open's.
pub fn subdir(
    base: BorrowedFd<'_>,
    dir: &CStr,
    resolve: u64,
) -> io::Result<(DirFd, Option<Owner>)> {
    let now = sys::fs::statx_at(
        Some(base),
        dir,
        libc::AT_SYMLINK_NOFOLLOW,
        MASK | libc::STATX_MNT_ID,
    );
    if let Some(id) = now.as_ref().ok().and_then(identity) {
        if let Some(kept) = BASES.with(|b| take(&mut lock(b).dirs, id)) {
            return Ok((kept, now.ok().as_ref().map(owner)));
        }
    }
    let how = (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    let fd = DirFd::from(sys::process::openat2(base, dir, how, 0, resolve)?);
    let opened = opened_identity(&fd);
    if let Some((id, _)) = opened {
        BASES.with(|b| keep(&mut lock(b).dirs, id, fd.clone()));
    }
    Ok((fd, opened.map(|(_, owner)| owner)))
}

/// The identity, owner and mode of a directory just opened (one `statx`).
fn opened_identity(fd: &DirFd) -> Option<(Identity, Owner)> {
    let st = sys::fs::statx_at(
        Some(fd.as_fd()),
        c"",
        libc::AT_EMPTY_PATH,
        MASK | libc::STATX_MNT_ID,
    )
    .ok()?;
    Some((identity(&st)?, owner(&st)))
}

/// The caller's link to its base, NUL-terminated in `buf`: `/` when the path is absolute (the
/// caller's root: chroot is on the deny list, so it is the system root), its cwd for
/// AT_FDCWD, its descriptor otherwise.
pub fn callers_link(pid: u32, dirfd: u64, absolute: bool, buf: &mut [u8; 48]) -> io::Result<&CStr> {
    let mut w = &mut buf[..];
    let written = if absolute {
        w.write_all(b"/\0")
    } else if is_at_fdcwd(dirfd) {
        write!(w, "/proc/{pid}/cwd\0")
    } else {
        let fd = dirfd as i32;
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        write!(w, "/proc/{pid}/fd/{fd}\0")
    };
    written.map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    CStr::from_bytes_until_nul(buf).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `AT_FDCWD` as it appears in a 64-bit argument register (sign-extended or not).
fn is_at_fdcwd(dirfd: u64) -> bool {
    dirfd as i32 == libc::AT_FDCWD
}

/// Opens the caller's link (O_PATH): following it leads to the caller's directory.
pub fn open(link: &CStr) -> io::Result<OwnedFd> {
    let at = sys::process::at_fdcwd();
    sys::process::openat2(at, link, (libc::O_PATH | libc::O_CLOEXEC) as u64, 0, 0)
}

/// A directory's identity, when the kernel told its mount.
fn identity(st: &libc::statx) -> Option<Identity> {
    let is_dir = u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFDIR;
    let told = st.stx_mask & (libc::STATX_MNT_ID | libc::STATX_INO)
        == libc::STATX_MNT_ID | libc::STATX_INO;
    (is_dir && told).then_some((
        st.stx_mnt_id,
        st.stx_dev_major,
        st.stx_dev_minor,
        st.stx_ino,
    ))
}

fn owner(st: &libc::statx) -> Owner {
    Owner {
        uid: st.stx_uid,
        mode: u32::from(st.stx_mode),
    }
}

/// Lets go of every kept directory that is the inode `st` describes, in every worker, before
/// guard removes it (an `rmdir`, a rename over it). A kept descriptor holds the directory's
/// last reference past its removal: the kernel would free it, and tell an inotify watcher
/// `IN_DELETE_SELF`, only when the worker dropped it, calls later and on that call's time (on
/// ext4 with `discard` and no journal, a synchronous discard of its block), or never while
/// that worker had no call (the one that kept it need not be the one that removes it). Let
/// go first, the removal frees it as it does bare, on the call that removes it. A worker in
/// the middle of a call through it holds it until that call ends, as a concurrent call would
/// bare.
///
/// The same for the directory this worker stays in after reading a path
/// ([`sys::fs::dir_path_staying_in`]): it goes home. The removal's own walk has already moved
/// it into the parent (it read the parent's path); leaving here keeps that true whatever the
/// walk read last. Another worker stays in a directory only while it is alone (the receiving
/// worker, with no standby started: see `receive::after_call`) or in the middle of a call, so
/// no other worker holds one past its call.
pub fn forget(st: &libc::stat) {
    sys::fs::leave();
    let (major, minor) = (libc::major(st.st_dev), libc::minor(st.st_dev));
    let workers: Vec<_> = lock(&WORKERS).iter().filter_map(Weak::upgrade).collect();
    let other = |(_, ma, mi, ino): &Identity| (*ma, *mi, *ino) != (major, minor, st.st_ino);
    for kept in workers {
        let mut kept = lock(&kept);
        kept.dirs.retain(|(id, _)| other(id));
        kept.cwds.retain(|c| other(&c.id));
    }
}

/// The kept directory `id`, moved to the front.
fn take(kept: &mut Vec<(Identity, DirFd)>, id: Identity) -> Option<DirFd> {
    let at = kept.iter().position(|(k, _)| *k == id)?;
    let entry = kept.remove(at);
    let fd = entry.1.clone();
    kept.insert(0, entry);
    Some(fd)
}

/// Keeps `fd` as `id` in front, dropping the least recently used past [`KEPT`].
fn keep(kept: &mut Vec<(Identity, DirFd)>, id: Identity, fd: DirFd) {
    kept.retain(|(k, _)| *k != id);
    kept.insert(0, (id, fd));
    kept.truncate(KEPT);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_base(dirfd: u64) -> (DirFd, Option<Owner>) {
        base(std::process::id(), dirfd).expect("base")
    }

    fn ino(fd: &DirFd) -> u64 {
        nix::sys::stat::fstat(fd.as_raw_fd()).expect("fstat").st_ino
    }

    #[test]
    fn a_directory_is_kept_and_found_again_by_identity() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = std::fs::File::open(dir.path()).expect("open");
        let dirfd = d.as_raw_fd() as u64;
        let (first, owner) = own_base(dirfd);
        let (again, _) = own_base(dirfd);
        assert_eq!(first.as_raw_fd(), again.as_raw_fd(), "the kept descriptor");
        let meta = std::fs::metadata(dir.path()).expect("metadata");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            owner,
            Some(Owner {
                uid: meta.uid(),
                mode: meta.mode()
            })
        );

        // Another directory behind the same descriptor number: another identity.
        drop(d);
        let other = tempfile::tempdir().expect("tempdir");
        let o = std::fs::File::open(other.path()).expect("open");
        let (next, _) = own_base(o.as_raw_fd() as u64);
        assert_eq!(ino(&next), std::fs::metadata(other.path()).unwrap().ino());
        assert_ne!(ino(&next), ino(&first));
    }

    /// A directory one worker keeps is let go when another worker removes it: the removal of
    /// a directory whose `d/f` one worker met frees it, whichever worker removes it.
    #[test]
    fn a_directory_kept_by_one_worker_is_let_go_when_another_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        let (kept_tx, kept_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            use std::os::unix::fs::MetadataExt;
            let d = std::fs::File::open(&path).expect("open");
            let (fd, _) = own_base(d.as_raw_fd() as u64);
            drop((d, fd));
            let held = |p: &std::path::Path| {
                let ino = std::fs::metadata(p).expect("metadata").ino();
                BASES.with(|b| lock(b).dirs.iter().any(|(_, fd)| self::ino(fd) == ino))
            };
            kept_tx.send(held(&path)).unwrap();
            go_rx.recv().unwrap();
            held(&path)
        });
        assert!(kept_rx.recv().unwrap(), "the worker keeps the directory");
        let st = nix::sys::stat::stat(dir.path()).expect("stat");
        forget(&st);
        go_tx.send(()).unwrap();
        assert!(!worker.join().unwrap(), "let go in the worker that kept it");
    }

    /// A thread's working directory is remembered (taken without its owner, which a lookup
    /// reads) until a chdir is noted; while one is on its way (noted, the thread still where
    /// it was) every call looks it up; once the thread makes a call, or its directory is seen
    /// changed (a real process's `cd`), it is remembered again.
    #[test]
    fn a_working_directory_is_remembered_until_a_chdir_is_noted() {
        let me = std::process::id();
        let cwd = libc::AT_FDCWD as u64;
        let looked_up = || own_base(cwd).1.is_some();
        let (first, _) = own_base(cwd);
        assert_eq!(
            ino(&first),
            std::fs::metadata(".")
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .expect("cwd")
        );
        assert!(!looked_up(), "remembered");
        cwd_changing(me);
        assert!(looked_up(), "a chdir on its way");
        assert!(
            looked_up(),
            "still on its way: the thread has not moved, nor called"
        );
        settle(me);
        assert!(looked_up(), "stale after the chdir");
        assert!(!looked_up(), "remembered again");

        // A chdir seen done without its thread's next call: another process's, moved by a
        // word on its stdin, looked at again once its directory changed.
        use std::io::Write as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "read x; cd \"$0\" && read y"])
            .arg(dir.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = sh.id();
        let its = || base(pid, cwd).expect("its base");
        assert!(its().1.is_some(), "looked up");
        assert!(its().1.is_none(), "remembered");
        cwd_changing(pid);
        assert!(its().1.is_some(), "a chdir on its way");
        let mut stdin = sh.stdin.take().expect("stdin");
        writeln!(stdin, "go").expect("write");
        let moved = || {
            std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
                == std::fs::canonicalize(dir.path()).ok()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !moved() {
            assert!(Instant::now() < deadline, "sh never moved");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(LOOK_EVERY);
        let (now, _) = its();
        assert_eq!(
            ino(&now),
            std::fs::metadata(dir.path())
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .expect("dir")
        );
        assert!(its().1.is_none(), "settled: remembered again");
        writeln!(stdin, "end").expect("write");
        sh.wait().expect("wait");
    }

    #[test]
    fn the_owner_is_read_now_not_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let d = std::fs::File::open(dir.path()).expect("open");
        let dirfd = d.as_raw_fd() as u64;
        let (_, before) = own_base(dirfd);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
        let (_, after) = own_base(dirfd);
        assert_eq!(before.map(|o| o.mode & 0o777), Some(0o700));
        assert_eq!(after.map(|o| o.mode & 0o777), Some(0o500));
    }

    #[test]
    fn a_file_behind_the_descriptor_is_opened_not_kept() {
        let file = tempfile::NamedTempFile::new().expect("file");
        let (fd, owner) = own_base(file.as_file().as_raw_fd() as u64);
        assert_eq!(owner, None);
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).expect("fstat");
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFREG);
    }

    #[test]
    fn a_descriptor_the_caller_does_not_have_fails_with_the_kernels_ebadf() {
        // /proc has no link for it (ENOENT); the kernel answers the call EBADF.
        let err = base(std::process::id(), 987_654).expect_err("no such descriptor");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        let err = base(std::process::id(), (-5i64) as u64).expect_err("negative");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    /// A directory part is found kept only while its name still leads to the kept directory:
    /// not once the name is another directory, nor once it is a symlink (even to the kept
    /// directory itself, which the open then follows).
    #[test]
    fn a_kept_subdirectory_is_found_only_under_a_name_that_still_leads_to_it() {
        const NO_SYMLINKS: u64 = 0x04;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let top = std::fs::File::open(dir.path()).expect("open");
        let at = |name: &CStr, resolve: u64| subdir(top.as_fd(), name, resolve);
        let (sub, owner) = at(c"sub", 0).expect("opened and kept");
        assert_eq!(owner.map(|o| o.uid), Some(nix::unistd::geteuid().as_raw()));
        let (found, owner) = at(c"sub", 0).expect("kept");
        assert_eq!(found.as_raw_fd(), sub.as_raw_fd());
        assert_eq!(owner.map(|o| o.uid), Some(nix::unistd::geteuid().as_raw()));

        std::fs::rename(dir.path().join("sub"), dir.path().join("moved")).unwrap();
        let err = at(c"sub", 0).expect_err("nothing there");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let (moved, _) = at(c"moved", 0).expect("kept");
        assert_eq!(moved.as_raw_fd(), sub.as_raw_fd(), "the same directory");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let (other, _) = at(c"sub", 0).expect("opened");
        assert_ne!(other.as_raw_fd(), sub.as_raw_fd(), "another directory");
        drop(other);
        std::fs::remove_dir(dir.path().join("sub")).unwrap();
        std::os::unix::fs::symlink("moved", dir.path().join("sub")).unwrap();
        let err = at(c"sub", NO_SYMLINKS).expect_err("refused by the open");
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "a symlink");
        let (through, _) = at(c"sub", 0).expect("followed by the open");
        assert_ne!(through.as_raw_fd(), sub.as_raw_fd(), "a symlink");
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let dirs: Vec<_> = (0..KEPT + 2)
            .map(|_| tempfile::tempdir().unwrap())
            .collect();
        let files: Vec<_> = dirs
            .iter()
            .map(|d| std::fs::File::open(d.path()).unwrap())
            .collect();
        for f in &files {
            own_base(f.as_raw_fd() as u64);
        }
        BASES.with(|b| assert_eq!(lock(b).dirs.len(), KEPT));
        let newest = nix::sys::stat::fstat(files.last().unwrap().as_raw_fd())
            .unwrap()
            .st_ino;
        BASES.with(|b| assert_eq!(ino(&lock(b).dirs[0].1), newest));
    }
}
