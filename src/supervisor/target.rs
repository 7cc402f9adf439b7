//! Walking a path argument the way the kernel would walk it for the caller, to a pinned
//! parent directory and a final name ([`Target`]): relative paths start at the caller's cwd or
//! dirfd (through /proc/PID), symlinks in the directory part are followed, /proc magic links
//! there are refused, `/proc/self` and `/dev/fd` mean the caller, and the last component is
//! followed only when the system call follows it.
//!
//! This is what the supervisor judges *and* acts on: the parent descriptor pins the directory,
//! and only the final name is looked up again, inside it, when the call is performed. So a
//! thread that rewrites the path or swaps a directory for a symlink after the decision
//! changes nothing (DESIGN.md, "Enforcement").

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::base::{self, DirFd, Owner};
use crate::creds::Creds;
use crate::sys;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The caller's current directory, found as a call relative to it finds it: the directory
/// this worker keeps for it, or opens and keeps ([`base::base`]), whose path `getcwd` reads.
/// Found this way, it is remembered for the thread's next call: the first call of a program
/// the caller is about to start (an exec's record names its cwd) needs no lookup of its own.
pub fn caller_cwd(pid: u32) -> io::Result<PathBuf> {
    let (dir, _) = base::base(pid, libc::AT_FDCWD as u64)?;
    dir_path(&dir)
}

/// What descriptor `fd` of the caller refers to.
pub fn caller_fd_path(pid: u32, fd: i32) -> io::Result<PathBuf> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).map_err(|e| base::link_error(e, fd as u64))
}

/// Remove `.`, `..` and repeated separators without touching the filesystem.
pub fn lexical(path: &Path) -> PathBuf {
    crate::policy::normalize(path)
}

/// A path argument resolved to a directory descriptor and a final name, the way the kernel
/// would walk it for the caller: this is what the supervisor judges *and* acts on, so the
/// object judged is the object changed. The parent descriptor pins the directory; only the
/// final name is looked up again when the supervisor acts, inside that directory.
#[derive(Debug)]
pub struct Target {
    /// The directory the entry lives in (O_PATH; a base the worker keeps is shared).
    pub parent: DirFd,
    /// The final component (never contains `/`; `.` when the path names a directory itself).
    pub name: OsString,
    /// The absolute path of the entry: the parent's real path plus `name`.
    pub path: PathBuf,
    /// What is there now (not following a final symlink), if anything.
    pub kind: Option<Kind>,
    /// When the entry was born, as the walk found it (statx; `None` when nothing is there or
    /// the filesystem does not record it).
    pub born: Option<[i64; 2]>,
    /// The entry's stat, as the walk's statx found it (`None` when nothing is there, or the
    /// target was not found by a walk): the journal records a deleted file from it without
    /// a stat of its own.
    pub seen: Option<libc::stat>,
    /// The count of the transactional lock's turns noted before the walk began (`None` when
    /// no walk found the target by name): if nobody has held the lock since, `kind` and `seen`
    /// still tell what is there ([`super::TX_TURNS`]).
    pub looked: Option<u64>,
    /// The owner and mode of `parent`, as the walk's `statx` that found it read them (`None`
    /// when it did not): trusted under the same condition as `seen`.
    pub parent_owner: Option<Owner>,
    /// The object itself, where no name reaches it, pinned when it was judged: the caller's
    /// pipe ([`Kind::Magic`]), a file of the caller's that has no name left (deleted, or made
    /// with O_TMPFILE) reached through its descriptor. guard acts on it through this
    /// descriptor (`/proc/self/fd/N`), as the kernel follows the caller's magic link to the
    /// object; `parent` and `name` are then the caller's /proc fd directory and entry.
    pub pinned: Option<OwnedFd>,
    /// The path ended with a slash (or a symlink followed at its end pointed to one): the
    /// kernel then wants a directory there, and guard passes the slash on in
    /// [`Target::call_name`] so the kernel applies its own rules.
    pub slash: bool,
}

impl Target {
    /// The name to pass to the system call that performs the caller's call: the final name,
    /// with the caller's trailing slash.
    pub fn call_name(&self) -> std::borrow::Cow<'_, OsStr> {
        if !self.slash || self.name == "." || self.name == ".." {
            return std::borrow::Cow::Borrowed(&self.name);
        }
        let mut n = self.name.clone();
        n.push("/");
        std::borrow::Cow::Owned(n)
    }

    /// The final name is `.` or `..` (the kernel refuses to create, remove or rename those).
    pub fn is_dot(&self) -> bool {
        self.name == "." || self.name == ".."
    }
}

/// How the last component of a path is looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Last {
    /// Followed when it is a symlink (open, stat-like calls, chmod, exec, ...).
    Follow,
    /// Not followed, except that a trailing slash makes the kernel follow it (lchown,
    /// O_NOFOLLOW, linkat without AT_SYMLINK_FOLLOW).
    NoFollow,
    /// The entry itself, never followed (unlink, rmdir, rename, the name a create makes).
    Entry,
}

/// The type of an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A pipe of the caller's own, reached through its /proc/PID/fd (`/dev/stdout` when stdout
    /// is a pipe, rustc's jobserver): re-opening it is not a filesystem change.
    Magic,
    Other,
}

/// What `name` is in `parent`, when it was born and its stat (one statx), `None` when nothing
/// is there.
/// Looking it up needs search permission on `parent` (EACCES otherwise) and a name the
/// filesystem can hold (ENAMETOOLONG): errors the kernel gives the call itself, before
/// anything else.
fn kind_of(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<Found> {
    let (st, born) = match sys::fs::stat_and_birth(parent, name) {
        Ok(found) => found,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok((None, None, None)),
        Err(e) => return Err(e),
    };
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    };
    Ok((Some(kind), born, Some(st)))
}

/// What the walk found at the final name: its kind, birth time and stat (all `None` when
/// nothing is there).
type Found = (Option<Kind>, Option<[i64; 2]>, Option<libc::stat>);

/// The caller's view of "where relative paths start": its cwd, or one of its descriptors,
/// opened now (the walk asks [`base::base`], which keeps what it opens).
pub fn open_base(pid: u32, dirfd: u64, absolute: bool) -> io::Result<OwnedFd> {
    // Built on the stack: this runs on nearly every judged call.
    let mut buf = [0u8; 48];
    base::open(base::callers_link(pid, dirfd, absolute, &mut buf)?)
        .map_err(|e| base::link_error(e, dirfd))
}

fn cwd_fd() -> BorrowedFd<'static> {
    sys::process::at_fdcwd()
}

thread_local! {
    /// This thread's own /proc fd directory, opened on first use. Reading a link in it by
    /// name skips the walk of `/proc/self/fd` on every call: about a third of the cost of
    /// `readlink` here (480 against 750 ns), paid on nearly every judged call. Only the
    /// supervisor's threads read links here, and they never fork, so the directory is always
    /// their own process's.
    static OWN_FDS: Option<OwnedFd> = sys::fs::openat(
        None,
        "/proc/thread-self/fd",
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok();
}

/// The real path of a descriptor we hold.
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    let n = fd.as_raw_fd();
    OWN_FDS.with(|dir| match dir {
        Some(dir) => {
            let mut name = [0u8; 16];
            write!(&mut name[..], "{n}\0")
                .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
            let name = CStr::from_bytes_until_nul(&name)
                .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
            sys::fs::readlink_at(dir.as_fd(), name).map(PathBuf::from)
        }
        None => std::fs::read_link(format!("/proc/self/fd/{n}")),
    })
}

/// The real path of a directory we hold: as [`fd_path`], for a fraction of its cost on a
/// supervisor worker, which stays in the directory until it asks about another one or
/// leaves (see [`sys::fs::dir_path_staying_in`] and [`base::forget`]).
pub fn dir_path(dir: &DirFd) -> io::Result<PathBuf> {
    match sys::fs::dir_path_staying_in(dir.shared()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => fd_path(dir.as_fd()),
    }
}

/// The object behind descriptor `fd` of thread `pid` (linkat with AT_EMPTY_PATH): pinned, as
/// if reached through the caller's /proc/PID/fd/FD.
pub fn descriptor(pid: u32, fd: i32) -> io::Result<Target> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let dir = format!("/proc/{pid}/fd");
    let pinned = || {
        let parent = sys::fs::openat(
            None,
            dir.as_str(),
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        let name = std::ffi::OsString::from(fd.to_string());
        pinned_object(parent.into(), name, Path::new(&dir), false)
    };
    pinned().map_err(|e| base::link_error(e, fd as u64))
}

/// The object the caller's magic link `parent/name` (in its /proc fd directory `real`) leads
/// to, pinned with an O_PATH descriptor of guard's own.
fn pinned_object(parent: DirFd, name: OsString, real: &Path, slash: bool) -> io::Result<Target> {
    let pinned = sys::fs::openat(
        Some(parent.as_fd()),
        name.as_os_str(),
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let st = nix::sys::stat::fstat(pinned.as_raw_fd())?;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    };
    // Where it was: the caller's view of the descriptor (`/x/#1234 (deleted)`).
    let path = std::fs::read_link(real.join(&name))?;
    Ok(Target {
        parent,
        name,
        path,
        kind: Some(kind),
        born: None,
        seen: None,
        looked: None,
        parent_owner: None,
        pinned: Some(pinned),
        slash,
    })
}

/// Split `raw` into its directory part and final name, and whether trailing slashes followed
/// the name (they are dropped from it).
fn split(raw: &[u8]) -> (&[u8], &[u8], bool) {
    let mut end = raw.len();
    while end > 1 && raw[end - 1] == b'/' {
        end -= 1;
    }
    let slash = end < raw.len();
    let trimmed = &raw[..end];
    let (dir, name) = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(0) => (&b"/"[..], &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (&b"."[..], trimmed),
    };
    (dir, name, slash)
}

fn open_dir(base: BorrowedFd<'_>, dir: &[u8]) -> io::Result<OwnedFd> {
    let c = CString::new(dir).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // Symlinks in the directory part are followed as the kernel would; /proc magic links are
    // refused: they would name *guard's* descriptors, not the caller's.
    sys::process::openat2(
        base,
        &c,
        (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
        0,
        RESOLVE_NO_MAGICLINKS,
    )
}

/// [`open_dir`], for a directory part of one component through the worker's kept directories
/// ([`base::subdir`]). A symlink there is no kept directory: it is followed by the open, as
/// the kernel would follow it.
fn open_dir_kept(base: BorrowedFd<'_>, dir: &[u8]) -> io::Result<DirFd> {
    if dir.contains(&b'/') {
        return open_dir(base, dir).map(DirFd::from);
    }
    let c = CString::new(dir).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    base::subdir(base, &c, RESOLVE_NO_MAGICLINKS).map(|(dir, _)| dir)
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
/// openat2's RESOLVE_NO_SYMLINKS: no symlink anywhere in the path (ELOOP).
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// `/proc/N/fd` or `/proc/N/task/M/fd`.
fn is_fd_dir(p: &Path) -> bool {
    let s = p.as_os_str().as_bytes();
    s.starts_with(b"/proc/") && s.ends_with(b"/fd")
}

/// Whether `dir` lies in the /proc entry of a process other than the caller's.
fn is_other_process(dir: &Path, tid: u32) -> bool {
    let s = dir.as_os_str().as_bytes();
    let Some(rest) = s.strip_prefix(b"/proc/") else {
        return false;
    };
    let first = rest.split(|&b| b == b'/').next().unwrap_or_default();
    if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
        return false;
    }
    !is_callers_fd_dir(dir, tid)
}

/// Whether `dir` (`/proc/X/fd` or `/proc/X/task/Y/fd`) is a descriptor table of the caller's
/// own process: `X` is the trapping thread or its thread group.
fn is_callers_fd_dir(dir: &Path, tid: u32) -> bool {
    let s = dir.as_os_str().as_bytes();
    let Some(rest) = s.strip_prefix(b"/proc/") else {
        return false;
    };
    let owner = rest.split(|&b| b == b'/').next().unwrap_or_default();
    let Some(owner) = std::str::from_utf8(owner)
        .ok()
        .and_then(|o| o.parse::<u32>().ok())
    else {
        return false;
    };
    owner == tid || sys::process::tgid_of(tid).ok() == Some(owner)
}

/// `/proc/self` and `/proc/thread-self` mean the caller, not guard: rewrite them to the
/// caller's own /proc entry (`pid` is the id of the trapping thread, which /proc accepts too).
/// Programs use them more than one would think: glibc's fchmodat and rustc's jobserver client
/// go through `/proc/self/fd/N`.
pub fn callers_proc(raw: &[u8], pid: u32) -> Cow<'_, [u8]> {
    // /dev/fd and the standard streams are symlinks into /proc/self: guard would follow them
    // into its own descriptors.
    for (alias, fd) in [
        (&b"/dev/stdin"[..], "0"),
        (&b"/dev/stdout"[..], "1"),
        (&b"/dev/stderr"[..], "2"),
    ] {
        if raw == alias {
            return Cow::Owned(format!("/proc/{pid}/fd/{fd}").into_bytes());
        }
    }
    if let Some(rest) = raw.strip_prefix(&b"/dev/fd"[..]) {
        if rest.is_empty() || rest.first() == Some(&b'/') {
            let mut out = format!("/proc/{pid}/fd").into_bytes();
            out.extend_from_slice(rest);
            return Cow::Owned(out);
        }
    }
    for prefix in [&b"/proc/self"[..], &b"/proc/thread-self"[..]] {
        if let Some(rest) = raw.strip_prefix(prefix) {
            if rest.is_empty() || rest.first() == Some(&b'/') {
                let mut out = format!("/proc/{pid}").into_bytes();
                out.extend_from_slice(rest);
                return Cow::Owned(out);
            }
        }
    }
    Cow::Borrowed(raw)
}

/// Resolve `raw` for process `pid` relative to its `dirfd` (or cwd) into a [`Target`].
/// `last` says how the final component is looked up: a followed symlink is followed up to 40
/// hops, as the kernel does, and the target is what it points to (possibly not existing yet:
/// an open with O_CREAT creates it). A final `.` or `..` stays the final name (the kernel
/// refuses to remove, rename or create those), and the target's path is the directory it
/// names.
///
/// The walk runs with the caller's credentials (see `crate::creds`), so a directory the
/// caller may not search fails it with EACCES as the kernel would. Only the caller's own
/// /proc entries, which the kernel lets a process see whatever its credentials and guard's
/// worker would not be let into as the caller, are walked as guard (guard then applies its
/// own rules to them: no other process's entries, only the caller's pipes).
pub fn target(pid: u32, dirfd: u64, raw: &[u8], last: Last) -> io::Result<Target> {
    if raw.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    // Noted before anything of the path is looked at (see `Target::looked`).
    let looked = super::tx_turns();
    let noted = |t: io::Result<Target>| {
        t.map(|mut t| {
            if t.pinned.is_none() {
                t.looked = Some(looked);
            }
            t
        })
    };
    let absolute = raw.first() == Some(&b'/');
    let owned_raw = callers_proc(raw, pid);
    // An absolute path starts at the root whatever the dirfd: no base to open (the caller's
    // root is the system's, see `open_base`).
    let base = |absolute: bool| -> io::Result<Option<(DirFd, Option<Owner>)>> {
        match absolute {
            true => Ok(None),
            false => base::base(pid, dirfd).map(Some),
        }
    };
    let in_proc = |base: &Option<DirFd>| {
        owned_raw.starts_with(b"/proc/")
            || base.as_ref().is_some_and(|b| {
                dir_path(b).is_ok_and(|p| p.as_os_str().as_bytes().starts_with(b"/proc/"))
            })
    };
    let mut first = None;
    if let Some((here, owner)) = base(absolute)? {
        // A followed final symlink may lead anywhere: without the switch the name is looked
        // up as an entry, which for anything but a symlink is what following finds.
        let entry = if last == Last::Follow {
            Last::Entry
        } else {
            last
        };
        match walk_alike(here.clone(), owner, &owned_raw, entry, pid) {
            Ok(Ok(t)) if last == Last::Follow && t.kind == Some(Kind::Symlink) => {
                first = Some(here);
            }
            Ok(found) => return noted(found),
            Err(here) => first = Some(here),
        }
    }
    noted(
        match crate::creds::looking_up_as_caller(|| walk_from(first, owned_raw.clone(), last, pid))
        {
            Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                let base = base(absolute)?.map(|(b, _)| b);
                if in_proc(&base) {
                    walk_from(base, owned_raw.clone(), last, pid)
                } else {
                    Err(e)
                }
            }
            other => other,
        },
    )
}

/// The target of `raw`, the second path of a call that names two (a rename's destination, a
/// link's name), when it names an entry of the directory in which `first`, the walk of the
/// call's first path `first_raw` from the same base looking its last component up as
/// `first_last`, found its final name: the same directory part, neither path ending in a
/// slash, `.` or `..`, and the first not followed at its end (a followed symlink may have ended
/// in any directory, under the same name or another). That directory
/// is taken as found, as if the kernel's two lookups had run back to back, and only the name
/// is looked up in it: one `statx` where a walk costs an open, a read of the directory's path
/// and a `statx` (git links and renames each object and lock file within one directory, and
/// `sed -i` renames its temporary file over the one it edits). The caller may search that
/// directory: the first walk looked a name up in it on the caller's behalf. `None` when the
/// paths do not qualify; the second path is then walked on its own.
pub fn sibling(
    first: &Target,
    first_raw: &[u8],
    first_last: Last,
    raw: &[u8],
) -> Option<io::Result<Target>> {
    if first_last == Last::Follow || first.pinned.is_some() || first.looked.is_none() || first.slash
    {
        return None;
    }
    let (dir_a, name_a, slash_a) = split(first_raw);
    let (dir_b, name_b, slash_b) = split(raw);
    let plain = |n: &[u8]| !n.is_empty() && n != b"." && n != b"..";
    if slash_a
        || slash_b
        || dir_a != dir_b
        || !plain(name_a)
        || !plain(name_b)
        || name_a != first.name.as_bytes()
        || first_raw.starts_with(b"/proc")
    {
        return None;
    }
    let real = first.path.parent()?;
    let name = OsStr::from_bytes(name_b).to_os_string();
    Some(
        kind_of(first.parent.as_fd(), &name).map(|(kind, born, seen)| Target {
            parent: first.parent.clone(),
            path: real.join(&name),
            name,
            kind,
            born,
            seen,
            // Noted before the first walk began: the walk of both.
            looked: first.looked,
            parent_owner: first.parent_owner,
            pinned: None,
            slash: false,
        }),
    )
}

/// How many directories deep [`walk_alike`] goes before it leaves the walk to the caller's
/// credentials: each is one `statx` (a kept directory) or an open, where the switch costs two
/// `capset`s and the walk one `openat2` whatever the depth.
const ALIKE_DEPTH: usize = 4;

/// The walk of a relative `name` or `dir/name` (no symlink in `dir`, at most [`ALIKE_DEPTH`]
/// directories deep, the final name not followed) with guard's own credentials, when that
/// meets the same permission checks as the caller's: each directory searched (`base`, then
/// each one of `dir` in turn) is the caller's own with its owner's search bit set
/// ([`crate::creds::caller_owns_with`]), as read by the `statx` that found each directory for
/// this call ([`base`]): no system call of its own, where a switch costs two `capset`s.
/// `Err(base)` when that cannot be told: the caller's credentials are then taken on.
fn walk_alike(
    base: DirFd,
    owner: Option<Owner>,
    raw: &[u8],
    last: Last,
    pid: u32,
) -> Result<io::Result<Target>, DirFd> {
    // Owner and mode as this call's statx read them, when it did; an fstat otherwise.
    let owner_searches = |dir: &DirFd, owner: Option<Owner>| match owner {
        Some(o) => crate::creds::caller_owns_as(o.uid, o.mode, libc::S_IXUSR),
        None => crate::creds::caller_owns_with(dir.as_fd(), libc::S_IXUSR),
    };
    let (dir, name, slashed) = split(raw);
    if slashed || !owner_searches(&base, owner) {
        return Err(base);
    }
    // The directory the final name is in, with its owner and mode as read for this call.
    let with_owner = |found: io::Result<Target>, dir: &DirFd, owner: Option<Owner>| {
        found.map(|mut t| {
            if t.parent.as_raw_fd() == dir.as_raw_fd() {
                t.parent_owner = owner;
            }
            t
        })
    };
    if dir == b"." {
        let found = walk_from(Some(base.clone()), Cow::Borrowed(raw), last, pid);
        return Ok(with_owner(found, &base, owner));
    }
    // `a//b` and `a/./b` name what `a/b` does: each directory searched is still checked.
    // Counted first, then walked: no allocation for the list on the hot path.
    let parts = || {
        dir.split(|&b| b == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
    };
    if parts().count() > ALIKE_DEPTH {
        return Err(base);
    }
    let no_symlinks = RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    let mut here = base.clone();
    let mut here_owner = owner;
    for part in parts() {
        let Ok(c) = CString::new(part) else {
            return Err(base);
        };
        match base::subdir(here.as_fd(), &c, no_symlinks) {
            Ok((sub, owner)) if owner_searches(&sub, owner) => {
                here = sub;
                here_owner = owner;
            }
            Ok(_) => return Err(base),
            // A symlink (ELOOP) may lead anywhere: walked as the caller.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(base),
            // What the caller meets as well: it may search every directory before this one.
            Err(e) => return Ok(Err(e)),
        }
    }
    let found = walk_from(Some(here.clone()), Cow::Borrowed(name), last, pid);
    Ok(with_owner(found, &here, here_owner))
}

/// The program an exec of `raw` (relative to the caller's `dirfd`) runs, as [`target`]
/// following the last component finds it. A plain path (absolute, without `.`, `..` or
/// empty components, outside `/proc` and `/dev`, whose entries mean the caller's own
/// objects) with no symlink anywhere on it is that path itself: one `openat2` with
/// `RESOLVE_NO_SYMLINKS` proves it, instead of the walk's open of the parent, `statx` of the
/// name and `getcwd` of the parent (three system calls of an exec's dozen). When it fails (a
/// symlink on the way: ELOOP; a missing name; a directory the caller may not search), the
/// walk resolves the path, with the kernel's errors, in the same switch of credentials:
/// `/bin/sh` through a symlinked `/bin` costs one `openat2` more than the walk alone, not a
/// second switch. Nothing is pinned: an exec is let through, and the kernel looks the path
/// up again. As the walk keeps the final name as spelled, a directory on a case-folding
/// filesystem is named as spelled too. A proof is kept for a moment, for the same lookup
/// credentials, until guard performs a call that could put a symlink on the path
/// ([`PROVED_TTL`], [`programs_may_change`]).
pub fn program(pid: u32, dirfd: u64, raw: &[u8]) -> io::Result<PathBuf> {
    let plain = raw.strip_prefix(b"/").is_some_and(|rest| {
        !rest.is_empty()
            && !rest.starts_with(b"proc/")
            && !rest.starts_with(b"dev/")
            && rest
                .split(|&b| b == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b"..")
    });
    if !plain {
        return target(pid, dirfd, raw, Last::Follow).map(|t| t.path);
    }
    let caller = crate::creds::assume::current();
    let now = super::answer::received();
    if caller
        .as_ref()
        .is_some_and(|c| PROVED.with(|p| p.borrow().holds(raw, &c.creds, now)))
    {
        return Ok(PathBuf::from(OsStr::from_bytes(raw)));
    }
    // Read before the proof: a change performed meanwhile makes the proof stale at once.
    let epoch = PROGRAMS_EPOCH.load(Ordering::SeqCst);
    let c = CString::new(raw).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    // What `target` does for an absolute path outside /proc, once the proof fails.
    crate::creds::looking_up_as_caller(|| {
        match sys::process::openat2(cwd_fd(), &c, how, 0, RESOLVE_NO_SYMLINKS) {
            Ok(_) => {
                if let Some(caller) = &caller {
                    PROVED.with(|p| p.borrow_mut().note(raw, &caller.creds, epoch, now));
                }
                Ok(PathBuf::from(OsStr::from_bytes(raw)))
            }
            Err(_) => walk_from(None, Cow::Borrowed(raw), Last::Follow, pid).map(|t| t.path),
        }
    })
}

/// How long a program path proved plain ([`program`]) is taken without a proof of its own.
/// The proof only names what the kernel will run: an exec is let through and the kernel
/// looks the path up again, so the judgement of an exec's path is never a boundary
/// (Landlock's execute right is; docs/threat-model.md), and a sandboxed process racing it
/// could win against a fresh proof as well. Within the sandbox nothing turns a proved path
/// into one with a symlink without guard seeing it ([`programs_may_change`]); the limit
/// bounds what a change from outside the sandbox (a package upgrade moving `/bin`) goes
/// unseen for.
const PROVED_TTL: Duration = Duration::from_secs(1);
/// How many proved program paths a worker keeps (then it starts again).
const PROVED_MAX: usize = 64;

/// Bumped before guard performs a call that can put a symlink on a proved program path
/// ([`super::resolve::Act::may_bring_a_symlink`]): every proof made before it is stale.
static PROGRAMS_EPOCH: AtomicU64 = AtomicU64::new(0);

/// A call about to be performed can put a symlink on some path: program paths are proved
/// again from now on.
pub fn programs_may_change() {
    PROGRAMS_EPOCH.fetch_add(1, Ordering::SeqCst);
}

thread_local! {
    /// The program paths this worker proved plain for an exec (a shell loop runs the same
    /// few programs thousands of times): the `openat2`, its `close` and, for a root guard,
    /// the two `capset`s of the switch: an exec judged in 38-39 µs instead of 44-45 here
    /// (1,000 execs of `true` from a `bash` loop, 6 runs alternated).
    static PROVED: RefCell<Proved> = RefCell::default();
}

/// Program paths proved plain, each with the epoch and time of its proof and the
/// credentials it was made with (another caller may not search where this one could).
#[derive(Default)]
struct Proved(HashMap<Vec<u8>, Proof>);

struct Proof {
    epoch: u64,
    at: Instant,
    by: Arc<Creds>,
}

impl Proved {
    fn holds(&self, raw: &[u8], who: &Creds, now: Instant) -> bool {
        self.0.get(raw).is_some_and(|p| {
            p.epoch == PROGRAMS_EPOCH.load(Ordering::SeqCst)
                && now.saturating_duration_since(p.at) < PROVED_TTL
                && p.by.looks_up_as(who)
        })
    }

    fn note(&mut self, raw: &[u8], by: &Arc<Creds>, epoch: u64, at: Instant) {
        if self.0.len() >= PROVED_MAX {
            self.0.clear();
        }
        let proof = Proof {
            epoch,
            at,
            by: Arc::clone(by),
        };
        self.0.insert(raw.to_vec(), proof);
    }
}

/// The walk of [`target`] from `base`, with whatever credentials the thread has.
fn walk_from(
    mut base: Option<DirFd>,
    mut owned_raw: Cow<'_, [u8]>,
    last: Last,
    pid: u32,
) -> io::Result<Target> {
    let mut slash = false;
    // The path of the last directory asked for, with that directory held (so its descriptor's
    // number is not reused): a symlink followed in the same directory, `sh` to `dash`, needs
    // it up to three times.
    let mut known: Option<(DirFd, PathBuf)> = None;
    let mut path_of = |dir: &DirFd| -> io::Result<PathBuf> {
        if let Some((d, p)) = &known {
            if d.as_raw_fd() == dir.as_raw_fd() {
                return Ok(p.clone());
            }
        }
        let p = dir_path(dir)?;
        known = Some((dir.clone(), p.clone()));
        Ok(p)
    };
    for _ in 0..40 {
        let (dir, name, slashed) = split(&owned_raw);
        slash |= slashed;
        let follow = match last {
            Last::Follow => true,
            Last::NoFollow => slash,
            Last::Entry => false,
        };
        let here = base.take();
        let parent = if owned_raw.first() == Some(&b'/') {
            // Absolute: the directory part names its own start.
            open_dir(cwd_fd(), dir)?.into()
        } else {
            // Relative paths always come with a base: the caller's cwd or dirfd, or the
            // directory a relative symlink was found in.
            let here = here.ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            if dir == b"." {
                // A bare name: its directory is the base itself, already pinned (one open and
                // one close fewer per call). A base that is no directory fails the lookup of
                // the name below with ENOTDIR, as opening it with O_DIRECTORY would, and both
                // need search permission on it.
                here
            } else {
                open_dir_kept(here.as_fd(), dir)?
            }
        };
        let name = OsStr::from_bytes(if name.is_empty() { b"." } else { name }).to_os_string();
        let (kind, born, seen) = kind_of(parent.as_fd(), &name)?;
        if follow && kind == Some(Kind::Symlink) {
            if is_other_process(&path_of(&parent)?, pid) {
                // Another process's /proc/PID/fd/N or cwd: not the caller's to follow.
                return Err(io::Error::from_raw_os_error(libc::EACCES));
            }
            let link = nix::fcntl::readlinkat(Some(parent.as_raw_fd()), name.as_os_str())?;
            if !link.as_bytes().starts_with(b"/") && is_fd_dir(&path_of(&parent)?) {
                // pipe:[..], socket:[..], anon_inode:..: only reachable through the magic link,
                // and only the caller's own pipes may be re-opened (guard can open any
                // process's descriptors; the caller could not).
                let real = path_of(&parent)?;
                if !is_callers_fd_dir(&real, pid) {
                    return Err(io::Error::from_raw_os_error(libc::EACCES));
                }
                let pinned = sys::fs::openat(
                    Some(parent.as_fd()),
                    name.as_os_str(),
                    nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )?;
                let is_fifo = nix::sys::stat::fstat(pinned.as_raw_fd())
                    .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
                if !is_fifo {
                    return Err(io::Error::from_raw_os_error(libc::EACCES));
                }
                let path = real.join(&name);
                return Ok(Target {
                    parent,
                    name,
                    path,
                    kind: Some(Kind::Magic),
                    born: None,
                    seen: None,
                    looked: None,
                    parent_owner: None,
                    pinned: Some(pinned),
                    slash,
                });
            }
            if link.as_bytes().ends_with(b" (deleted)") && is_fd_dir(&path_of(&parent)?) {
                // A file of the caller's with no name left (deleted, or made with O_TMPFILE):
                // the kernel follows the descriptor to the object, not the name.
                let real = path_of(&parent)?;
                if !is_callers_fd_dir(&real, pid) {
                    return Err(io::Error::from_raw_os_error(libc::EACCES));
                }
                return pinned_object(parent, name, &real, slash);
            }
            owned_raw = Cow::Owned(callers_proc(link.as_bytes(), pid).into_owned());
            base = Some(parent);
            continue;
        }
        let real = path_of(&parent)?;
        // A thread's name needs no access to the process: opening one asks only the file's
        // mode (and the kernel lets only the thread group write it), as for the caller bare.
        let name_only =
            kind == Some(Kind::File) && crate::policy::is_thread_name(&real.join(&name));
        if is_other_process(&real, pid) && !name_only {
            // The caller could not look into another process's /proc entry (Landlock keeps
            // it from ptracing out of its domain); guard must not do it on its behalf.
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let path = match name.as_bytes() {
            b"." => real,
            b".." => real.parent().map_or(real.clone(), Path::to_path_buf),
            _ => real.join(&name),
        };
        return Ok(Target {
            parent,
            name,
            path,
            kind,
            born,
            seen,
            looked: None,
            parent_owner: None,
            pinned: None,
            slash,
        });
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn walk(raw: &[u8], follow: bool) -> io::Result<Target> {
        let last = if follow { Last::Follow } else { Last::Entry };
        target(std::process::id(), libc::AT_FDCWD as u64, raw, last)
    }

    /// A root caller without capabilities (a root guard's command) gets, from walks that skip
    /// the switch of credentials and from walks that cannot, what the kernel would give it:
    /// EACCES in a directory whose owner may not search it, in another user's directory, and
    /// behind a symlink to one; the walk's own result where it may search.
    #[test]
    fn a_walk_without_the_switch_fails_where_the_caller_would() {
        use std::os::unix::fs::PermissionsExt as _;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (a caller that differs from guard by capabilities)");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
        };
        for sub in ["open", "unsearchable", "theirs"] {
            std::fs::create_dir(d.join(sub)).expect("mkdir");
            std::fs::write(d.join(sub).join("f"), "x").expect("write");
        }
        std::fs::create_dir_all(d.join("open/deep/er/unsearchable/x")).expect("mkdir");
        std::fs::write(d.join("open/deep/er/f"), "x").expect("write");
        mode(&d.join("open/deep/er/unsearchable"), 0o600);
        std::os::unix::fs::symlink("../../../theirs", d.join("open/deep/er/lt")).expect("symlink");
        mode(&d.join("unsearchable"), 0o600);
        std::os::unix::fs::chown(d.join("theirs"), Some(65534), Some(65534)).expect("chown");
        mode(&d.join("theirs"), 0o700);
        std::os::unix::fs::symlink("theirs", d.join("link")).expect("symlink");
        let base = std::fs::File::open(d).expect("open the base");
        let fd = base.as_raw_fd() as u64;
        let caller = crate::creds::assume::caller_without_capabilities();
        let errno = |r: io::Result<Target>| match r {
            Ok(t) => format!("ok {}", t.path.display()),
            Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
        };
        let cases: Vec<(&str, String)> = vec![
            ("open/f", format!("ok {}", d.join("open/f").display())),
            // A missing final name is a target too (what a create makes).
            (
                "open/missing",
                format!("ok {}", d.join("open/missing").display()),
            ),
            ("unsearchable/f", format!("errno {}", libc::EACCES)),
            ("theirs/f", format!("errno {}", libc::EACCES)),
            ("link/f", format!("errno {}", libc::EACCES)),
            ("missing/f", format!("errno {}", libc::ENOENT)),
            // Several directories deep: each one on the way is checked.
            (
                "open/deep/er/f",
                format!("ok {}", d.join("open/deep/er/f").display()),
            ),
            (
                "open/./deep//er/f",
                format!("ok {}", d.join("open/deep/er/f").display()),
            ),
            (
                "open/deep/er/../er/f",
                format!("ok {}", d.join("open/deep/er/f").display()),
            ),
            (
                "open/deep/er/unsearchable/x/f",
                format!("errno {}", libc::EACCES),
            ),
            (
                "open/deep/er/unsearchable/f",
                format!("errno {}", libc::EACCES),
            ),
            ("open/deep/er/lt/f", format!("errno {}", libc::EACCES)),
            ("open/deep/missing/er/f", format!("errno {}", libc::ENOENT)),
            ("open/deep/er/f/x", format!("errno {}", libc::ENOTDIR)),
        ];
        let top = d.to_path_buf();
        std::thread::spawn(move || {
            let pid = std::process::id();
            for (raw, want) in cases {
                let got = crate::creds::for_caller(caller.clone(), || {
                    errno(target(pid, fd, raw.as_bytes(), Last::Entry))
                });
                assert_eq!(got, want, "{raw} as the caller");
                // The same path spelled absolute (walked as the caller from the root).
                let abs = format!("{}/{raw}", top.display());
                let got = crate::creds::for_caller(caller.clone(), || {
                    errno(target(pid, fd, abs.as_bytes(), Last::Entry))
                });
                assert_eq!(got, want, "{abs} as the caller");
                // As guard, with its capabilities, only a missing directory or a file on
                // the way fails.
                let as_guard = errno(target(pid, fd, raw.as_bytes(), Last::Entry));
                let fails = raw.contains("missing/") || raw.ends_with("f/x");
                assert_eq!(as_guard.starts_with("ok"), !fails, "{raw}");
            }
            drop(base);
        })
        .join()
        .expect("thread");
        mode(&d.join("unsearchable"), 0o700);
        mode(&d.join("open/deep/er/unsearchable"), 0o700);
    }

    #[test]
    fn relative_paths_start_at_the_callers_cwd() {
        let cwd = std::env::current_dir().expect("cwd");
        let t = walk(b"src/../Cargo.toml", false).expect("resolves");
        assert_eq!(
            t.path,
            std::fs::canonicalize(cwd.join("Cargo.toml")).expect("exists")
        );
        assert_eq!(t.name, "Cargo.toml");
        assert_eq!(t.kind, Some(Kind::File));
    }

    /// A second path in the directory the first one's walk ended in finds what its own walk
    /// would; any other is left to its own walk.
    #[test]
    fn a_sibling_of_the_first_path_is_found_in_its_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::fs::create_dir_all(base.join("d/e")).expect("mkdir");
        std::fs::write(base.join("d/there"), "x").expect("write");
        std::os::unix::fs::symlink("e", base.join("d/link")).expect("symlink");
        let path = |rel: &str| base.join(rel).into_os_string().into_vec();
        let first_raw = path("d/../d/a");
        let first = walk(&first_raw, false).expect("first");
        for name in ["d/../d/there", "d/../d/missing", "d/../d/link"] {
            let found = sibling(&first, &first_raw, Last::Entry, &path(name))
                .expect("qualifies")
                .expect("found");
            let walked = walk(&path(name), false).expect("walked");
            assert_eq!(found.path, walked.path, "{name}");
            assert_eq!(found.kind, walked.kind, "{name}");
            assert_eq!(
                found.looked, first.looked,
                "{name}: noted before the first walk"
            );
            assert_eq!(found.parent.as_raw_fd(), first.parent.as_raw_fd());
        }
        for other in ["d/a2", "d/../d/e/x", "d/../d/x/", "d/../d/..", "d/../d/."] {
            assert!(
                sibling(&first, &first_raw, Last::Entry, &path(other)).is_none(),
                "{other}"
            );
        }
        // A first path followed to a file of the same name in another directory, or ending in
        // a slash, qualifies nothing.
        std::fs::write(base.join("d/e/same"), "y").expect("write");
        std::os::unix::fs::symlink("e/same", base.join("d/same")).expect("symlink");
        let followed_raw = path("d/same");
        let followed = walk(&followed_raw, true).expect("followed");
        assert_eq!(followed.path, base.join("d/e/same"));
        assert!(sibling(&followed, &followed_raw, Last::Follow, &path("d/there")).is_none());
        let followed_raw = path("d/link");
        let followed = walk(&followed_raw, true).expect("followed");
        assert!(sibling(&followed, &followed_raw, Last::Follow, &path("d/there")).is_none());
        let slashed_raw = path("d/e/");
        let slashed = walk(&slashed_raw, false).expect("slashed");
        assert!(sibling(&slashed, &slashed_raw, Last::Entry, &path("d/there")).is_none());
    }

    #[test]
    fn a_final_symlink_is_followed_only_when_asked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::os::unix::fs::symlink(base.join("target"), base.join("link")).expect("symlink");
        let raw = base.join("link");
        let followed = walk(raw.as_os_str().as_bytes(), true).expect("resolves");
        assert_eq!(followed.path, base.join("target"));
        assert_eq!(
            followed.kind, None,
            "dangling: where the target would be created"
        );
        let not_followed = walk(raw.as_os_str().as_bytes(), false).expect("resolves");
        assert_eq!(not_followed.path, base.join("link"));
        assert_eq!(not_followed.kind, Some(Kind::Symlink));
    }

    #[test]
    fn paths_that_do_not_resolve_fail_as_the_kernel_fails_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::fs::write(base.join("file"), b"").expect("write");
        std::os::unix::fs::symlink("loop", base.join("loop")).expect("symlink");
        let errno = |raw: std::path::PathBuf, follow| {
            walk(raw.as_os_str().as_bytes(), follow)
                .expect_err("does not resolve")
                .raw_os_error()
        };
        assert_eq!(errno(base.join("missing/x"), false), Some(libc::ENOENT));
        assert_eq!(errno(base.join("file/x"), false), Some(libc::ENOTDIR));
        assert_eq!(errno(base.join("loop"), true), Some(libc::ELOOP));
        assert_eq!(
            walk(b"", false).expect_err("empty").raw_os_error(),
            Some(libc::ENOENT)
        );
    }

    #[test]
    fn a_bare_name_is_looked_up_in_the_dirfd_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::fs::write(base.join("file"), b"").expect("write");
        let me = std::process::id();
        let d = std::fs::File::open(&base).expect("open the directory");
        let f = std::fs::File::open(base.join("file")).expect("open the file");
        let t = target(me, d.as_raw_fd() as u64, b"file", Last::Entry).expect("resolves");
        assert_eq!((t.path, t.kind), (base.join("file"), Some(Kind::File)));
        let t = target(me, d.as_raw_fd() as u64, b"new", Last::Entry).expect("resolves");
        assert_eq!((t.path, t.kind), (base.join("new"), None));
        // The kernel: a relative path from a descriptor that is no directory is ENOTDIR.
        let e = target(me, f.as_raw_fd() as u64, b"x", Last::Entry).expect_err("no directory");
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR));
        // An absolute path ignores the dirfd, even one that is not open.
        let raw = base.join("file").into_os_string().into_vec();
        let t = target(me, 9999, &raw, Last::Entry).expect("resolves");
        assert_eq!(t.path, base.join("file"));
    }

    #[test]
    fn a_trailing_slash_is_kept_apart_from_the_name() {
        assert_eq!(split(b"a/b/"), (&b"a"[..], &b"b"[..], true));
        assert_eq!(split(b"a//"), (&b"."[..], &b"a"[..], true));
        assert_eq!(split(b"/"), (&b"/"[..], &b""[..], false));
        assert_eq!(split(b"d/.."), (&b"d"[..], &b".."[..], false));
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::fs::create_dir(base.join("d")).expect("mkdir");
        std::os::unix::fs::symlink("d", base.join("ld")).expect("symlink");
        let raw = |p: &str| base.join(p).into_os_string().into_vec();
        let last = |p: &str, l| target(std::process::id(), libc::AT_FDCWD as u64, &raw(p), l);
        // A slash makes a lookup follow the final symlink, never an entry's.
        let t = last("ld/", Last::NoFollow).expect("resolves");
        assert_eq!(
            (t.path.clone(), t.kind, t.slash),
            (base.join("d"), Some(Kind::Dir), true)
        );
        assert_eq!(&*t.call_name(), OsStr::new("d/"));
        let t = last("ld/", Last::Entry).expect("resolves");
        assert_eq!((t.kind, t.slash), (Some(Kind::Symlink), true));
        // `..` stays the name; the path is the directory it names.
        let t = last("d/..", Last::Entry).expect("resolves");
        assert_eq!(
            (t.name.as_os_str(), t.path.clone()),
            (OsStr::new(".."), base.clone())
        );
    }

    #[test]
    fn proc_self_means_the_caller() {
        let t = walk(b"/proc/self/exe", true).expect("resolves");
        assert_eq!(Some(t.path), std::env::current_exe().ok());
    }
}
