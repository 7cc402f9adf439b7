//! The resolve stage: a decoded [`Call`] and the [`Memory`] it points to, into a [`Resolved`]
//! call: its paths walked to pinned parent directories and final names ([`Target`]), an exec's
//! program and working directory, a connect's address; the operation the policy judges and
//! the action the supervisor will perform if allowed ([`Act`]).
//!
//! Errors come out in the order the kernel would meet them. A path that does not resolve
//! (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG) fails with that errno as the kernel's own answer
//! ([`FailureKind::Unresolved`](super::decode::FailureKind::Unresolved)); anything else that
//! cannot be read or makes no sense is refused
//! ([`FailureKind::Undecodable`](super::decode::FailureKind::Undecodable)).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::policy::git::GitFacts;
use crate::policy::{NetAddr, Op, Request};
use crate::sys::Notif;

use super::beneath;
use super::decode::{Args, Call, Failure, FailureKind, MetaWhat, OpenHow, PathArg};
use super::meta::{self, FdTarget, MetaOp};
use super::names;
use super::net::{self, Check, NetAct};
use super::read::Memory;
use super::sockaddr::{absolute_unix, decode_sockaddr};
use super::target::{self, Kind, Last, Target};
use super::txn;

/// The longest name the kernel gives a task (TASK_COMM_LEN less its NUL).
const TASK_COMM_MAX: usize = 15;

const O_WRITE_FLAGS: u64 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64;

/// What the supervisor does with an allowed call: perform it itself on the resolved targets
/// (so the object judged is the object changed, and the journal sees it first), or let the
/// kernel continue it (exec, which cannot be emulated).
#[derive(Debug)]
pub enum Act {
    Continue,
    Unlink(Target),
    Rmdir(Target),
    Rename {
        from: Target,
        to: Target,
        flags: u32,
    },
    Link {
        from: Target,
        to: Target,
    },
    Symlink {
        target: Vec<u8>,
        at: Target,
    },
    Mkdir {
        at: Target,
        mode: u32,
    },
    Mknod {
        at: Target,
        mode: u32,
        dev: u64,
    },
    Chmod {
        at: Target,
        mode: u32,
    },
    Chown {
        at: Target,
        uid: u32,
        gid: u32,
    },
    Truncate {
        at: Target,
        len: i64,
    },
    Open {
        at: Target,
        flags: i32,
        mode: u32,
    },
    /// Times or an extended attribute of a path's object.
    PathMeta {
        at: Target,
        op: MetaOp,
    },
    /// A metadata change through a descriptor, on guard's duplicate of it.
    FdMeta {
        on: FdTarget,
        op: MetaOp,
    },
    /// A rename over a repository's config: guard installs the `content` it read from `from`
    /// and judged (a new file of its own, so no descriptor the caller holds on `from` can
    /// change it afterwards), then removes `from`.
    InstallConfig {
        from: Target,
        to: Target,
        content: Vec<u8>,
    },
    /// Connect the caller's socket (a duplicate fetched with pidfd_getfd) to the address read
    /// once from its memory.
    Connect {
        sock: i32,
        addr: Vec<u8>,
    },
    /// A network call performed by the network stage (sends, bind, listen, a connect to a
    /// nameserver): see [`super::net`].
    Net(Box<NetAct>),
}

impl Act {
    /// Whether performing it may create an entry whose mode goes through the umask.
    pub fn creates_with_mode(&self) -> bool {
        match self {
            Act::Mkdir { .. } | Act::Mknod { .. } => true,
            Act::Open { flags, .. } => {
                flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
            }
            _ => false,
        }
    }

    /// An unlink or rmdir whose walk (with the caller's credentials) found no such name: the
    /// kernel answers ENOENT, and allowed, guard answers the same without acting (an entry
    /// made in between is as if made after this call).
    pub fn removes_nothing(&self) -> bool {
        matches!(self, Act::Unlink(t) | Act::Rmdir(t) if t.kind.is_none() && t.pinned.is_none())
    }

    /// Whether performing this can put a symlink where a directory or a file was on some
    /// path: an rmdir (a symlink may take the directory's name next), a new symlink, a hard
    /// link or a rename of anything but a regular file (a symlink's inode takes a name that
    /// way too; exchanging: anything but two). Program paths proved free of symlinks are
    /// proved again after one ([`target::program`]).
    pub fn may_bring_a_symlink(&self) -> bool {
        let file = |t: &Target| t.kind == Some(Kind::File);
        match self {
            Act::Rmdir(_) | Act::Symlink { .. } => true,
            Act::Link { from, .. } => !file(from),
            Act::Rename { from, to, flags } => {
                !file(from) || (flags & libc::RENAME_EXCHANGE != 0 && !file(to))
            }
            _ => false,
        }
    }

    /// The directory performing it removes, as the walk found it: an `rmdir`'s, or the one a
    /// rename replaces (RENAME_EXCHANGE removes nothing).
    pub fn removed_dir(&self) -> Option<&Target> {
        let dir = |t: &Target| t.kind == Some(Kind::Dir) && t.pinned.is_none();
        match self {
            Act::Rmdir(t) if dir(t) => Some(t),
            Act::Rename { to, flags, .. } if flags & libc::RENAME_EXCHANGE == 0 && dir(to) => {
                Some(to)
            }
            _ => None,
        }
    }
}

/// A resolved call: what the policy judges (everything a [`Request`] borrows) and what the
/// supervisor performs.
#[derive(Debug)]
pub struct Resolved {
    pub syscall: &'static str,
    pub op: Op,
    pub path: Option<PathBuf>,
    pub path2: Option<PathBuf>,
    /// The entry this call would create if it succeeds (used to know what the run made itself).
    pub creates: Option<PathBuf>,
    pub argv: Vec<OsString>,
    pub exe: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub addr: Option<NetAddr>,
    /// dns: the name the query asks for.
    pub name: Option<String>,
    /// More that a call with several destinations asks the policy (sendmmsg).
    pub more: Vec<Check>,
    /// exec: the program has no file reachable by path (see `Request::exe_anonymous`).
    pub exe_anonymous: bool,
    /// exec by a direct child of the run's root process: a new command starts.
    pub new_command: bool,
    /// exec: the caller's name, read with its parent (for its record: the exec changes it).
    pub comm: Option<Vec<u8>>,
    /// exec: the name the kernel gives the process once the exec is done: the last component
    /// of the path as given, cut to a task name's 15 bytes (not foretold for an exec through
    /// a descriptor, which the kernel names otherwise).
    pub comm_after: Option<Vec<u8>>,
    /// The call would leave a set-id file (see `Request::sets_id`).
    pub sets_id: bool,
    /// A descriptor's object with no name (see `Request::unnamed`).
    pub unnamed: bool,
    /// What the call does to git's own files (see `policy::git`).
    pub git: Vec<GitFacts>,
    /// Configs guard installs anew once the call is done (see `git::Reinstall`).
    pub reinstall: Vec<super::git::Reinstall>,
    /// exec: the new environment, read only for git (see `gitexec.rs`).
    pub envp: Option<super::decode::ArgvPtr>,
    pub act: Act,
}

impl Resolved {
    pub(super) fn new(syscall: &'static str, op: Op, act: Act) -> Self {
        Resolved {
            syscall,
            op,
            path: None,
            path2: None,
            creates: None,
            argv: Vec::new(),
            exe: None,
            cwd: None,
            addr: None,
            name: None,
            more: Vec::new(),
            exe_anonymous: false,
            new_command: false,
            comm: None,
            comm_after: None,
            sets_id: false,
            unnamed: false,
            git: Vec::new(),
            reinstall: Vec::new(),
            envp: None,
            act,
        }
    }

    /// The policy's view of this call; `fresh`: every target lies in what this run created.
    pub fn request(&self, fresh: bool) -> Request<'_> {
        Request {
            op: self.op,
            path: self.path.as_deref(),
            path2: self.path2.as_deref(),
            fresh,
            creates: self.creates.is_some(),
            argv: &self.argv,
            exe: self.exe.as_deref(),
            exe_anonymous: self.exe_anonymous,
            cwd: self.cwd.as_deref(),
            addr: self.addr.as_ref(),
            name: self.name.as_deref(),
            reopens_own_pipe: matches!(
                &self.act,
                Act::Open { at, .. } if at.kind == Some(Kind::Magic)
            ),
            sets_id: self.sets_id,
            git: &self.git,
            unnamed: self.unnamed,
            own_shared: false,
            nameless: matches!(
                &self.act,
                Act::Open { flags, .. } if flags & libc::O_TMPFILE == libc::O_TMPFILE
            ),
        }
    }

    /// The target paths of the call (none for exec and connect).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        [self.path.as_deref(), self.path2.as_deref()]
            .into_iter()
            .flatten()
    }
}

/// What the resolve stage found.
#[derive(Debug)]
pub enum Resolution {
    /// Judge it against the policy.
    Judge(Box<Resolved>),
    /// Nothing to judge: let it run.
    Pass,
    /// A read-only open: nothing to judge (Landlock bounds reads), let it run. Only openat2
    /// comes here, unless the run records reads (`guard learn` traps every open).
    Read(ReadOnly),
    /// Nothing to judge, but guard performs it (a send without a destination: on the
    /// duplicate of the caller's socket, see [`super::net`]); no decision is recorded.
    Carry(Box<NetAct>),
}

/// A read-only open, as passed: walked only when the run records reads.
#[derive(Debug)]
pub struct ReadOnly {
    pub syscall: &'static str,
    /// The directory a relative path starts from, as passed.
    pub dirfd: u64,
    /// The path (empty when it could not be read).
    pub raw: Vec<u8>,
    pub flags: u64,
}

/// A path argument's string, as read: empty for a NULL the call allows.
fn path_of(mem: &mut Memory, at: &PathArg) -> io::Result<Vec<u8>> {
    match at.path {
        Some(p) => mem.string(p),
        None => Ok(Vec::new()),
    }
}

/// Where a path argument that did not resolve points, for the record of the failed call: the
/// argument as the caller gave it (its `/proc/self` and `/dev/fd` meaning the caller's own),
/// made absolute from the caller's cwd or dirfd (the base the walk started from, which the
/// worker keeps), `.` and `..` taken lexically. Asked only when a call fails. `None` for an
/// empty argument (an fd's own object, or ENOENT) or when the base cannot be found (the
/// caller is gone).
fn tried(n: &Notif, at: &PathArg, raw: &[u8]) -> Option<PathBuf> {
    if raw.is_empty() {
        return None;
    }
    let raw = target::callers_proc(raw, n.pid);
    let path = Path::new(std::ffi::OsStr::from_bytes(&raw));
    if path.is_absolute() {
        return Some(target::lexical(path));
    }
    let (base, _) = super::base::base(n.pid, at.dirfd).ok()?;
    let base = target::dir_path(&base).ok()?;
    Some(target::lexical(&base.join(path)))
}

/// The path argument `at` of a call of `op` (by `syscall`), read and walked (`last`). A
/// failure is the call's, and names where the path pointed ([`tried`]).
fn walked(
    n: &Notif,
    mem: &mut Memory,
    at: &PathArg,
    last: Last,
    (syscall, op): (&'static str, Op),
) -> Result<Target, Failure> {
    let failed = |e: io::Error, path| {
        Failure::unresolved(syscall, &e, "cannot resolve the path").at(op, path)
    };
    let raw = path_of(mem, at).map_err(|e| failed(e, None))?;
    walk(n, at, &raw, last).map_err(|e| failed(e, tried(n, at, &raw)))
}

/// The name a mkdir, mknod or symlink makes, `at`: walked, and EEXIST when it is there
/// ([`exists_already`]).
fn new_entry(
    n: &Notif,
    mem: &mut Memory,
    at: &PathArg,
    syscall: &'static str,
) -> Result<Target, Failure> {
    let t = walked(n, mem, at, Last::Entry, (syscall, Op::Create))?;
    exists_already(&t, syscall)?;
    Ok(t)
}

/// Walk path argument `at` (its string already read) to a [`Target`].
fn walk(n: &Notif, at: &PathArg, raw: &[u8], last: Last) -> io::Result<Target> {
    target::target(n.pid, at.dirfd, raw, last)
}

/// The second path of a rename or link, `at` (its string `raw` as read with the first's),
/// walked after the first ([`second`]). `failed` makes the failure of the call, which then
/// names this path too ([`tried`]).
fn destination(
    n: &Notif,
    first: (&Target, &PathArg, &[u8], Last),
    at: &PathArg,
    raw: io::Result<Vec<u8>>,
    failed: impl Fn(io::Error) -> Failure,
) -> Result<Target, Failure> {
    let raw = raw.map_err(&failed)?;
    second(n, first, at, &raw).map_err(|e| failed(e).to(tried(n, at, &raw)))
}

/// The walk of the second path of a rename or link (its final name not followed), from the
/// directory the first path's walk ended in when both name entries of it from the same base
/// ([`target::sibling`]). `first_last`: how the first walk looked its last component up.
fn second(
    n: &Notif,
    (first, first_at, first_raw, first_last): (&Target, &PathArg, &[u8], Last),
    at: &PathArg,
    raw: &[u8],
) -> io::Result<Target> {
    let same_base = at.dirfd == first_at.dirfd || raw.first() == Some(&b'/');
    match same_base.then(|| target::sibling(first, first_raw, first_last, raw)) {
        Some(Some(found)) => found,
        _ => walk(n, at, raw, Last::Entry),
    }
}

/// How a call that follows a final symlink unless told not to looks the last component up.
fn lookup(follow: bool) -> Last {
    if follow {
        Last::Follow
    } else {
        Last::NoFollow
    }
}

/// What a metadata call acts on: a path, or the descriptor itself (no path argument, a NULL
/// path where the call allows one, or an empty path with AT_EMPTY_PATH). A value that lives
/// only until it is matched, a few lines below where it is made: boxing the larger variant
/// would cost an allocation per metadata call for nothing.
#[allow(clippy::large_enum_variant)]
enum On {
    Path(Target),
    Fd(FdTarget),
}

/// On failure, the error and where the path pointed ([`tried`]).
fn meta_on(
    n: &Notif,
    at: &PathArg,
    mem: &mut Memory,
    follow: bool,
) -> Result<On, (io::Error, Option<PathBuf>)> {
    let Some(p) = at.path else {
        return meta::fd_target(n.pid, at.dirfd, false)
            .map(On::Fd)
            .map_err(|e| (e, None));
    };
    let raw = mem.string(p).map_err(|e| (e, None))?;
    if raw.is_empty() && at.empty_path {
        return meta::fd_target(n.pid, at.dirfd, true)
            .map(On::Fd)
            .map_err(|e| (e, None));
    }
    walk(n, at, &raw, lookup(follow))
        .map(On::Path)
        .map_err(|e| (e, tried(n, at, &raw)))
}

impl Resolved {
    /// A metadata change through a descriptor, judged by the object it refers to.
    fn on_fd(name: &'static str, on: FdTarget, op: MetaOp) -> Self {
        let mut r = Resolved::new(name, Op::Chmod, Act::Continue);
        r.sets_id = op.sets_id(on.kind);
        r.unnamed = on.unnamed;
        r.path = (!on.unnamed).then(|| on.path.clone());
        r.act = Act::FdMeta { on, op };
        r
    }
}

/// Whether the program an exec names through a descriptor (`fd` + AT_EMPTY_PATH, or a
/// /proc/PID/fd path) is the very file found at `exe` on disk.
fn same_file_on_disk(n: &Notif, at: &PathArg, raw: &[u8], exe: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let object = if raw.is_empty() {
        std::fs::metadata(format!("/proc/{}/fd/{}", n.pid, at.dirfd as i32))
    } else {
        // The caller's /proc/self and /dev/fd, not guard's.
        let raw = target::callers_proc(raw, n.pid);
        std::fs::metadata(std::ffi::OsStr::from_bytes(&raw))
    };
    match (object, std::fs::metadata(exe)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// mkdir, mknod and symlink of a name that exists: the kernel answers EEXIST before it asks
/// anyone's permission (the name is looked up first), so guard gives the same answer, inside
/// the write roots or not (`mkdir -p` of an existing path outside them is no refusal).
fn exists_already(t: &Target, syscall: &'static str) -> Result<(), Failure> {
    match t.kind {
        Some(_) => {
            let e = io::Error::from_raw_os_error(libc::EEXIST);
            Err(Failure::unresolved(syscall, &e, "the name exists")
                .at(Op::Create, Some(t.path.clone())))
        }
        None => Ok(()),
    }
}

/// Resolve `call`, made by the caller of `n` in a run whose root process is `root`, with the
/// memory `mem` the read stage copied for it.
pub fn resolve(n: &Notif, call: &Call, mut mem: Memory, root: u32) -> Result<Resolution, Failure> {
    let name = call.syscall;
    let fail = |e: io::Error, what: &str| Failure::undecodable(name, &e, what);
    let unresolved = |e: io::Error, what: &str| Failure::unresolved(name, &e, what);
    let r = match call.args {
        Args::Unlink { at, rmdir } => {
            let t = walked(n, &mut mem, &at, Last::Entry, (name, Op::Delete))?;
            let p = t.path.clone();
            let mut r = Resolved::new(
                name,
                Op::Delete,
                if rmdir { Act::Rmdir(t) } else { Act::Unlink(t) },
            );
            r.path = Some(p);
            r
        }
        Args::Rename { from, to, flags } => {
            let (raw_a, raw_b) = (path_of(&mut mem, &from), path_of(&mut mem, &to));
            let raw_a = raw_a
                .map_err(|e| unresolved(e, "cannot resolve the source").at(Op::Rename, None))?;
            let a = walk(n, &from, &raw_a, Last::Entry).map_err(|e| {
                unresolved(e, "cannot resolve the source").at(Op::Rename, tried(n, &from, &raw_a))
            })?;
            let b = destination(n, (&a, &from, &raw_a, Last::Entry), &to, raw_b, |e| {
                unresolved(e, "cannot resolve the destination").at(Op::Rename, Some(a.path.clone()))
            })?;
            let (pa, pb, new) = (a.path.clone(), b.path.clone(), b.kind.is_none());
            let mut r = Resolved::new(
                name,
                Op::Rename,
                Act::Rename {
                    from: a,
                    to: b,
                    flags,
                },
            );
            r.creates = new.then(|| pb.clone());
            r.path = Some(pa);
            r.path2 = Some(pb);
            r
        }
        Args::Link {
            from,
            to,
            follow,
            empty_path,
        } => {
            let (raw_a, raw_b) = (path_of(&mut mem, &from), path_of(&mut mem, &to));
            let raw_a =
                raw_a.map_err(|e| unresolved(e, "cannot resolve the source").at(Op::Link, None))?;
            let a = if raw_a.is_empty() && empty_path {
                target::descriptor(n.pid, from.dirfd as i32)
            } else {
                walk(n, &from, &raw_a, lookup(follow))
            }
            .map_err(|e| {
                unresolved(e, "cannot resolve the source").at(Op::Link, tried(n, &from, &raw_a))
            })?;
            let b = destination(n, (&a, &from, &raw_a, lookup(follow)), &to, raw_b, |e| {
                unresolved(e, "cannot resolve the link name").at(Op::Link, Some(a.path.clone()))
            })?;
            let (pa, pb, new) = (a.path.clone(), b.path.clone(), b.kind.is_none());
            let mut r = Resolved::new(name, Op::Link, Act::Link { from: a, to: b });
            r.creates = new.then(|| pb.clone());
            r.path = Some(pa);
            r.path2 = Some(pb);
            r
        }
        Args::Symlink { target, at } => {
            let content = mem
                .string(target)
                .map_err(|e| unresolved(e, "cannot read the link target").at(Op::Create, None))?;
            let t = new_entry(n, &mut mem, &at, name)?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut r = Resolved::new(
                name,
                Op::Create,
                Act::Symlink {
                    target: content,
                    at: t,
                },
            );
            r.creates = new.then(|| p.clone());
            r.path = Some(p);
            r
        }
        Args::Mkdir { at, mode } => {
            let t = new_entry(n, &mut mem, &at, name)?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut r = Resolved::new(name, Op::Create, Act::Mkdir { at: t, mode });
            r.creates = new.then(|| p.clone());
            r.path = Some(p);
            r
        }
        Args::Mknod { at, mode, dev } => {
            let t = new_entry(n, &mut mem, &at, name)?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut r = Resolved::new(name, Op::Create, Act::Mknod { at: t, mode, dev });
            r.creates = new.then(|| p.clone());
            r.path = Some(p);
            r.sets_id = mode & (libc::S_ISUID | libc::S_ISGID) != 0;
            r
        }
        Args::Chmod { at, mode, follow } => {
            match meta_on(n, &at, &mut mem, follow)
                .map_err(|(e, p)| unresolved(e, "cannot resolve the path").at(Op::Chmod, p))?
            {
                On::Fd(on) => Resolved::on_fd(name, on, MetaOp::Chmod { mode }),
                On::Path(t) => {
                    let p = t.path.clone();
                    let sets_id = t.kind.is_some() && meta::sets_id_mode(mode, t.kind);
                    let mut r = Resolved::new(name, Op::Chmod, Act::Chmod { at: t, mode });
                    r.path = Some(p);
                    r.sets_id = sets_id;
                    r
                }
            }
        }
        Args::Chown {
            at,
            uid,
            gid,
            follow,
        } => {
            // The kernel clears set-user-id (and set-group-id with group execute) at every
            // chown of a non-directory, root's included: no chown leaves a set-id program.
            match meta_on(n, &at, &mut mem, follow)
                .map_err(|(e, p)| unresolved(e, "cannot resolve the path").at(Op::Chmod, p))?
            {
                On::Fd(on) => Resolved::on_fd(name, on, MetaOp::Chown { uid, gid }),
                On::Path(t) => {
                    let p = t.path.clone();
                    let mut r = Resolved::new(name, Op::Chmod, Act::Chown { at: t, uid, gid });
                    r.path = Some(p);
                    r
                }
            }
        }
        Args::Truncate { at, len } => {
            let t = walked(n, &mut mem, &at, Last::Follow, (name, Op::Write))?;
            let p = t.path.clone();
            let mut r = Resolved::new(name, Op::Write, Act::Truncate { at: t, len });
            r.path = Some(p);
            r
        }
        Args::Meta { at, follow, what } => {
            // The path is resolved first, as the kernel looks it up before copying the rest.
            let on = meta_on(n, &at, &mut mem, follow)
                .map_err(|(e, p)| unresolved(e, "cannot resolve the path").at(Op::Chmod, p))?;
            let on_path = match &on {
                On::Path(t) => Some(t.path.clone()),
                On::Fd(f) => (!f.unnamed).then(|| f.path.clone()),
            };
            let unread = |e, what: &str| unresolved(e, what).at(Op::Chmod, on_path.clone());
            let op = match what {
                MetaWhat::Times(t) => {
                    meta::read_times(&mut mem, t).map_err(|e| unread(e, "cannot read the times"))?
                }
                MetaWhat::SetXattr {
                    name: x,
                    value,
                    flags,
                } => MetaOp::SetXattr {
                    name: mem
                        .string(x)
                        .and_then(meta::xattr_name)
                        .map_err(|e| unread(e, "cannot read the attribute name"))?,
                    value: match value {
                        Some(v) => mem
                            .block(v)
                            .map_err(|e| unread(e, "cannot read the value"))?,
                        None => Vec::new(),
                    },
                    flags,
                },
                MetaWhat::SetXattrAt { name: x, args } => {
                    let xname = mem
                        .string(x)
                        .and_then(meta::xattr_name)
                        .map_err(|e| unread(e, "cannot read the attribute name"))?;
                    let args = mem
                        .block(args)
                        .map_err(|e| unread(e, "cannot read struct xattr_args"))?;
                    let (value, flags) = meta::xattr_args(n.pid, &args)
                        .map_err(|e| unread(e, "cannot read the value"))?;
                    MetaOp::SetXattr {
                        name: xname,
                        value,
                        flags,
                    }
                }
                MetaWhat::RemoveXattr { name: x } => MetaOp::RemoveXattr {
                    name: mem
                        .string(x)
                        .and_then(meta::xattr_name)
                        .map_err(|e| unread(e, "cannot read the attribute name"))?,
                },
            };
            match on {
                On::Fd(on) => Resolved::on_fd(name, on, op),
                On::Path(t) => {
                    let p = t.path.clone();
                    let sets_id = op.sets_id(t.kind);
                    let mut r = Resolved::new(name, Op::Chmod, Act::PathMeta { at: t, op });
                    r.path = Some(p);
                    r.sets_id = sets_id;
                    r
                }
            }
        }
        Args::Open { at, how } => {
            let (flags, mode, resolve_flags) = match how {
                OpenHow::Flags { flags, mode } => (flags, mode, 0),
                OpenHow::InMemory(b) => {
                    let how = mem
                        .block(b)
                        .map_err(|e| unresolved(e, "cannot read open_how").at(Op::Write, None))?;
                    let word = |k: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&how[k * 8..k * 8 + 8]);
                        u64::from_ne_bytes(w)
                    };
                    (word(0), word(1), word(2))
                }
            };
            // O_PATH ignores every other flag but O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC (an
            // O_PATH|O_CREAT open creates nothing): nothing is written.
            if flags & O_WRITE_FLAGS == 0 || flags & libc::O_PATH as u64 != 0 {
                return Ok(Resolution::Read(ReadOnly {
                    syscall: name,
                    dirfd: at.dirfd,
                    raw: path_of(&mut mem, &at).unwrap_or_default(),
                    flags,
                }));
            }
            let creat = flags & libc::O_CREAT as u64 != 0;
            let excl = flags & libc::O_EXCL as u64 != 0;
            // What the record of a failed open says it was: a create may make the name.
            let intended = if creat { Op::Create } else { Op::Write };
            let nofollow = flags & libc::O_NOFOLLOW as u64 != 0;
            let t = if resolve_flags != 0 {
                // The caller asked the kernel to restrict its lookup: the kernel does it.
                let raw = path_of(&mut mem, &at)
                    .map_err(|e| unresolved(e, "cannot read the path").at(intended, None))?;
                beneath::target(n.pid, at.dirfd, &raw, flags, resolve_flags).map_err(|e| {
                    let mut f = unresolved(e, "cannot resolve the path with its resolve flags")
                        .at(intended, tried(n, &at, &raw));
                    f.kind = FailureKind::Unresolved;
                    f
                })?
            } else {
                let last = lookup(!(nofollow || (creat && excl)));
                walked(n, &mut mem, &at, last, (name, intended))?
            };
            let op = if t.kind.is_none() && creat {
                Op::Create
            } else {
                Op::Write
            };
            let p = t.path.clone();
            let tmpfile = flags & libc::O_TMPFILE as u64 == libc::O_TMPFILE as u64;
            let sets_id =
                (op == Op::Create || tmpfile) && meta::sets_id_mode(mode as u32, Some(Kind::File));
            let mut r = Resolved::new(
                name,
                op,
                Act::Open {
                    at: t,
                    flags: flags as i32,
                    mode: mode as u32,
                },
            );
            if op == Op::Create {
                r.creates = Some(p.clone());
            }
            r.path = Some(p);
            r.sets_id = sets_id;
            r
        }
        Args::Exec {
            at,
            argv,
            envp,
            empty_path,
        } => {
            let raw = path_of(&mut mem, &at)
                .map_err(|e| unresolved(e, "cannot read the program path").at(Op::Exec, None))?;
            let exe = if raw.is_empty() && empty_path {
                target::caller_fd_path(n.pid, at.dirfd as i32).map_err(|e| {
                    unresolved(e, "cannot resolve the descriptor").at(Op::Exec, None)
                })?
            } else {
                target::program(n.pid, at.dirfd, &raw).map_err(|e| {
                    unresolved(e, "cannot resolve the program").at(Op::Exec, tried(n, &at, &raw))
                })?
            };
            let args = mem
                .argv(argv)
                .map_err(|e| unresolved(e, "cannot read argv").at(Op::Exec, Some(exe.clone())))?;
            // A program with no file behind it (memfd_create + fexecve, a deleted file reached
            // through /proc/PID/fd): Landlock's execute right does not cover those.
            let via_fd = (raw.is_empty() && empty_path)
                || raw.starts_with(b"/proc/")
                || raw.starts_with(b"/dev/fd/");
            let anonymous = via_fd && !same_file_on_disk(n, &at, &raw, &exe);
            let mut r = Resolved::new(name, Op::Exec, Act::Continue);
            r.argv = args.into_iter().map(OsString::from_vec).collect();
            r.exe = Some(exe);
            r.exe_anonymous = anonymous;
            if !via_fd {
                let last = raw.rsplit(|&b| b == b'/').next().unwrap_or_default();
                r.comm_after = Some(last[..last.len().min(TASK_COMM_MAX)].to_vec());
            }
            r.cwd = target::caller_cwd(n.pid).ok();
            if n.pid != root {
                if let Some((parent, comm)) = txn::stat_of(n.pid) {
                    r.new_command = parent == root;
                    r.comm = Some(comm);
                }
            }
            r.envp = Some(envp);
            r
        }
        // Handled before this stage (the supervisor notes the change and lets it through).
        Args::Credentials { .. } | Args::Cwd => return Ok(Resolution::Pass),
        Args::Connect { sock, addr } => {
            let raw = mem
                .block(addr)
                .map_err(|e| unresolved(e, "cannot read the address").at(Op::Connect, None))?;
            let decoded =
                decode_sockaddr(&raw, n.pid).map_err(|e| fail(e, "bad socket address"))?;
            let wire = absolute_unix(&raw, &decoded);
            // A connect to a nameserver goes to guard's DNS relay, which judges each query.
            let act = match &decoded {
                NetAddr::Inet(ns) if ns.port() == 53 => {
                    net::sock::dns_connect(n.pid, sock, *ns).map(|a| Act::Net(Box::new(a)))
                }
                _ => None,
            }
            .unwrap_or(Act::Connect { sock, addr: wire });
            let mut r = Resolved::new(name, Op::Connect, act);
            r.addr = Some(decoded);
            r
        }
        Args::SendTo { .. } | Args::SendMsg { .. } | Args::SendMmsg { .. } => {
            return net::send::resolve(n, call, mem);
        }
        Args::Bind { sock, addr } => {
            let raw = net::sock::bind_address(&mut mem, name, addr)?;
            return net::sock::resolve_bind(n, name, sock, raw);
        }
        Args::Listen { sock, backlog } => {
            return net::sock::resolve_listen(n, name, sock, backlog);
        }
    };
    if let Some(errno) = names::refused(&r.act) {
        // The kernel refuses it for its names alone (a trailing slash, `.`, `..`).
        let what = "refused by the kernel for its names".to_string();
        return Err(Failure::new(name, errno, what, FailureKind::Unresolved)
            .at(r.op, r.path)
            .to(r.path2));
    }
    let mut r = r;
    super::git::inspect(n, &mut r);
    Ok(Resolution::Judge(Box::new(r)))
}
