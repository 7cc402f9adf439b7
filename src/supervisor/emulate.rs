//! Performing an allowed call for the caller. The supervisor acts on the [`Target`]s it judged
//! (a pinned parent directory and a final name), so a thread that rewrites the path argument
//! after the decision changes nothing: the kernel never looks at the caller's memory again.
//! New files are injected into the caller with SECCOMP_IOCTL_NOTIF_ADDFD.
//!
//! Results and errnos are the kernel's own, since the same system call runs, only from guard:
//! the caller's umask is applied to new entries, its O_CLOEXEC to injected descriptors, and a
//! final symlink was already followed (or not) during resolution exactly as the call would.
//! Connect and the metadata calls through a descriptor run on a duplicate of the caller's
//! descriptor ([`super::meta`]). Only exec is continued.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

use super::resolve::Act;
use super::target::{Kind, Target};
use crate::creds;
use crate::journal::{Journal, JournalError, Looked, Saved};
use crate::policy::Oversize;
use crate::sys::{Listener, Notif};

/// How opens are handed to the caller, decided once per run from the kernel's features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    /// ADDFD with ADDFD_FLAG_SEND: inject and answer in one ioctl (Linux 5.14).
    AddFdSend,
    /// ADDFD, then SEND with the new descriptor number (Linux 5.9).
    AddFd,
    /// No ADDFD: write-opens are continued after they were judged (raceable; reported).
    Continue,
}

/// What happened to the call.
#[derive(Debug)]
pub enum Outcome {
    /// Performed; the caller gets this return value.
    Done(i64),
    /// Performed and failed with this errno (the caller gets it).
    Failed(i32),
    /// The caller was (or will be) answered elsewhere: a descriptor injected with
    /// ADDFD_FLAG_SEND, or a connect finishing on a worker thread.
    Answered,
    /// Let the kernel carry it out.
    Continue,
}

/// Prepare the supervisor thread: its own fs context (so the umask it takes on from each
/// caller touches no other thread of guard), with umask 0 outside the caller's calls.
pub fn init_thread() -> io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
    nix::sys::stat::umask(Mode::empty());
    creds::assume::mark_private_fs();
    Ok(())
}

/// Performs `call`, the caller's own mutation making the new entry `at` (mkdir with
/// `Some(mode)`, symlink with `None`), with the caller's credentials (see `crate::creds`): the
/// kernel judges it as it would have judged the caller. It is made with guard's own effective
/// set where the caller could make it ([`creds::caller_could_create`]: one `fstat` instead of
/// two `capset`s), with the caller's umask where that shapes the mode
/// ([`creds::with_callers_umask`]); a failure there (the name is taken, the directory changed
/// meanwhile) is made again as the caller, whose answer is the kernel's.
fn making_as_caller(at: &Target, mode: Option<u32>, call: impl Fn() -> nix::Result<()>) -> Outcome {
    let unswitched = || {
        creds::caller_could_create(at.parent.as_fd(), mode.unwrap_or(0))
            && match mode {
                Some(mode) => {
                    creds::with_callers_umask(mode, || call().map_err(io::Error::from)).is_ok()
                }
                None => call().is_ok(),
            }
    };
    if unswitched() {
        return Outcome::Done(0);
    }
    io_done(creds::as_caller_making(mode.unwrap_or(0), || {
        call().map_err(io::Error::from)
    }))
}

/// [`creds::as_caller`] for a call that makes no new inode: the caller's umask plays no part.
fn as_caller_creating_nothing(call: impl FnOnce() -> nix::Result<()>) -> Outcome {
    io_done(creds::as_caller_creating_nothing(|| {
        call().map_err(io::Error::from)
    }))
}

fn raw(t: &Target) -> Option<i32> {
    Some(t.parent.as_raw_fd())
}

/// Open the entry itself (no following) as O_PATH, for the calls that act through
/// /proc/self/fd (chmod needs a path to follow the magic link; O_PATH descriptors refuse fchmod).
fn open_path(t: &Target) -> nix::Result<OwnedFd> {
    crate::sys::fs::openat(
        Some(t.parent.as_fd()),
        t.name.as_os_str(),
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn io_done(r: io::Result<()>) -> Outcome {
    match r {
        Ok(()) => Outcome::Done(0),
        Err(e) => Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// A journal that could not record a change: the change must not happen (it could not be
/// undone). An entry that appeared meanwhile is what the kernel would report as EEXIST.
fn journal_refused(e: &JournalError) -> Outcome {
    if matches!(e, JournalError::Exists { .. }) {
        return Outcome::Failed(libc::EEXIST);
    }
    tracing::warn!("the journal cannot record a change, refusing it: {e}");
    Outcome::Failed(libc::EIO)
}

/// Perform `act` for the caller of notification `n`, recording it in `journal` first when the
/// target lies in the journaled workspace (the journal's hooks decide that).
///
/// A write to a file above the pre-image size cap is refused (EFBIG) under
/// `oversize = "deny"`; otherwise it goes ahead unprotected and `note` says so for the audit log.
///
/// `journal` comes with the count of the transactional lock's turns when the lock that guards
/// it was taken (see [`looked`]).
pub fn perform(
    act: &Act,
    n: &Notif,
    listener: &Arc<Listener>,
    inject: Inject,
    journal: Option<(&mut Journal, u64)>,
    oversize: Oversize,
    note: &mut Option<String>,
) -> Outcome {
    if let Some(seen) = act.removed_dir().and_then(|t| t.seen.as_ref()) {
        super::base::forget(seen);
    }
    if act.may_bring_a_symlink() {
        super::target::programs_may_change();
    }
    let Some((j, since)) = journal else {
        return perform_plain(act, n, listener, inject);
    };
    // The directory the call changes entries of, as the walk read it, when nothing can have
    // changed it since: the checks of its owner (`creds::caller_owns_with`) need no `fstat`.
    let changed_in = match act {
        Act::Unlink(t) | Act::Rmdir(t) | Act::Link { to: t, .. } => Some(t),
        Act::Symlink { at, .. }
        | Act::Mkdir { at, .. }
        | Act::Mknod { at, .. }
        | Act::Open { at, .. } => Some(at),
        _ => None,
    };
    if let Some((t, owner)) = changed_in
        .filter(|t| looked(t, since).is_current())
        .and_then(|t| Some((t, t.parent_owner?)))
    {
        return creds::knowing_dir(t.parent.as_fd(), owner.uid, owner.mode, || {
            perform_journaled(act, n, listener, inject, j, since, oversize, note)
        });
    }
    perform_journaled(act, n, listener, inject, j, since, oversize, note)
}

/// [`perform`] of a call without a journal that changes a shared directory (see
/// [`super::shared`]): an open there is checked, or its new file noted, on the descriptor
/// guard opened, before the caller gets it.
pub fn perform_shared(
    act: &Act,
    n: &Notif,
    listener: &Arc<Listener>,
    inject: Inject,
    made: &super::shared::Made,
) -> Outcome {
    if !matches!(act, Act::Open { .. } | Act::Rename { .. }) {
        return perform(act, n, listener, inject, None, Oversize::Deny, &mut None);
    }
    if let Some(seen) = act.removed_dir().and_then(|t| t.seen.as_ref()) {
        super::base::forget(seen);
    }
    if act.may_bring_a_symlink() {
        super::target::programs_may_change();
    }
    match act {
        Act::Open { at, flags, mode } => {
            open(at, *flags, *mode, n, listener, inject, None, Some(made))
        }
        // A rename to a name that was free when judged replaces nothing that appeared since
        // (another process's file): it fails with EEXIST instead.
        Act::Rename { from, to, flags }
            if to.kind.is_none() && to.pinned.is_none() && flags & libc::RENAME_EXCHANGE == 0 =>
        {
            as_caller_creating_nothing(|| {
                nix::fcntl::renameat2(
                    raw(from),
                    &*from.call_name(),
                    raw(to),
                    &*to.call_name(),
                    RenameFlags::from_bits_retain(flags | libc::RENAME_NOREPLACE),
                )
            })
        }
        _ => perform_plain(act, n, listener, inject),
    }
}

/// [`perform`] with a journal.
#[allow(clippy::too_many_arguments)]
fn perform_journaled(
    act: &Act,
    n: &Notif,
    listener: &Arc<Listener>,
    inject: Inject,
    j: &mut Journal,
    since: u64,
    oversize: Oversize,
    note: &mut Option<String>,
) -> Outcome {
    let mut saved = |j: &mut Journal, at: &Target| -> Result<bool, JournalError> {
        match j.will_write(at.parent.as_fd(), &at.name, &at.path, looked(at, since))? {
            Saved::Unprotected { size } => {
                *note = Some(format!(
                    "{} bytes, above the pre-image size cap: {}",
                    size,
                    if oversize == Oversize::Deny {
                        "refused"
                    } else {
                        "written without a saved copy"
                    }
                ));
                Ok(oversize == Oversize::Record)
            }
            Saved::Saved | Saved::AlreadySaved => Ok(true),
        }
    };
    let before = match act {
        Act::Unlink(t) | Act::Rmdir(t) if act.removes_nothing() && j.covers(&t.path) => {
            // The walk found no such name in a journaled directory: the journal's own look
            // would answer ENOENT too, with nothing to record (one stat fewer per call; an
            // entry made in between is as if made after this call).
            return Outcome::Failed(libc::ENOENT);
        }
        Act::Unlink(t) => {
            return io_done(j.delete_seen_file(
                t.parent.as_fd(),
                &t.name,
                &t.path,
                looked(t, since),
            ));
        }
        Act::Rmdir(t) => {
            return io_done(j.remove_dir(t.parent.as_fd(), &t.name, &t.path, looked(t, since)))
        }
        Act::Rename { from, to, flags } => {
            return io_done(j.rename(
                from.parent.as_fd(),
                &from.name,
                &from.path,
                to.parent.as_fd(),
                &to.name,
                &to.path,
                *flags,
                [looked(from, since), looked(to, since)],
            ))
        }
        Act::Link { to: at, .. }
        | Act::Symlink { at, .. }
        | Act::Mkdir { at, .. }
        | Act::Mknod { at, .. } => {
            j.will_create_in(at.parent.as_fd(), &at.name, &at.path, looked(at, since))
        }
        Act::Chmod { at, .. } | Act::Chown { at, .. } | Act::PathMeta { at, .. } => {
            if at.kind.is_none() {
                // Nothing there: the call fails as the kernel would, with nothing to record.
                return Outcome::Failed(libc::ENOENT);
            }
            if at.pinned.is_some() {
                // An object no name reaches: nothing in the tree changes.
                Ok(())
            } else {
                j.will_change_meta(at.parent.as_fd(), &at.name, &at.path, looked(at, since))
            }
        }
        Act::FdMeta { on, .. } if !on.unnamed => j.will_change_meta_of(on.fd.as_fd(), &on.path),
        Act::FdMeta { .. } => Ok(()),
        Act::InstallConfig { from, to, content } => {
            return io_done(super::git::install::install(Some(j), from, to, content))
        }
        Act::Truncate { at, .. } => match saved(j, at) {
            Ok(true) => Ok(()),
            Ok(false) => return Outcome::Failed(libc::EFBIG),
            Err(e) => Err(e),
        },
        Act::Open { at, flags, mode } if flags & libc::O_CREAT != 0 && at.kind.is_none() => {
            match j.will_create_in(at.parent.as_fd(), &at.name, &at.path, looked(at, since)) {
                Ok(()) => return open(at, *flags, *mode, n, listener, inject, Some(j), None),
                // Made since the walk, by a change that took the lock first: the caller's
                // open, without O_EXCL, opens it as it is now, its content kept first.
                Err(JournalError::Exists { .. }) if flags & libc::O_EXCL == 0 => match saved(j, at)
                {
                    Ok(true) => Ok(()),
                    Ok(false) => return Outcome::Failed(libc::EFBIG),
                    Err(e) => Err(e),
                },
                Err(e) => return journal_refused(&e),
            }
        }
        Act::Open { at, .. } => {
            if at.kind == Some(Kind::File) {
                match saved(j, at) {
                    Ok(true) => Ok(()),
                    Ok(false) => return Outcome::Failed(libc::EFBIG),
                    Err(e) => Err(e),
                }
            } else {
                Ok(())
            }
        }
        Act::Continue | Act::Connect { .. } | Act::Net(_) => Ok(()),
    };
    match before {
        Ok(()) => perform_plain(act, n, listener, inject),
        Err(e) => journal_refused(&e),
    }
}

/// What the journal may take from the walk that found `at`, under the transactional lock
/// taken at turn `since`: what the walk saw, current when nobody has held the lock since it
/// looked (every judged change to a workspace name is made under that lock; see
/// `supervisor::TX_TURNS`), else as possibly stale. One stat fewer for a create, a write-open,
/// a metadata change and the deletion of a file the run made.
pub(super) fn looked(at: &Target, since: u64) -> Looked<'_> {
    let current = at.looked == Some(since);
    match (at.kind, &at.seen) {
        (None, _) if current => Looked::Absent,
        (Some(_), Some(st)) if current => Looked::Found(st),
        (_, Some(st)) => Looked::Seen(st),
        _ => Looked::Not,
    }
}

/// Perform `act` without a journal, with the caller's credentials. Modes go to the kernel as
/// the caller gave them: the worker has the caller's umask (or a default ACL applies instead).
fn perform_plain(act: &Act, n: &Notif, listener: &Arc<Listener>, inject: Inject) -> Outcome {
    match act {
        Act::Continue => Outcome::Continue,
        Act::PathMeta { at, op } => io_done(creds::as_caller_creating_nothing(|| {
            super::meta::perform_at(at, op)
        })),
        Act::FdMeta { on, op } => io_done(creds::as_caller_creating_nothing(|| {
            super::meta::perform_fd(on, op)
        })),
        Act::InstallConfig { from, to, content } => io_done(creds::as_caller(|| {
            super::git::install::install(None, from, to, content)
        })),
        Act::Unlink(t) => as_caller_creating_nothing(|| {
            nix::unistd::unlinkat(raw(t), &*t.call_name(), UnlinkatFlags::NoRemoveDir)
        }),
        Act::Rmdir(t) => as_caller_creating_nothing(|| {
            nix::unistd::unlinkat(raw(t), &*t.call_name(), UnlinkatFlags::RemoveDir)
        }),
        Act::Rename { from, to, flags } => as_caller_creating_nothing(|| {
            nix::fcntl::renameat2(
                raw(from),
                &*from.call_name(),
                raw(to),
                &*to.call_name(),
                RenameFlags::from_bits_retain(*flags),
            )
        }),
        Act::Link { from, to } => as_caller_creating_nothing(|| match &from.pinned {
            // An object with no name (deleted, O_TMPFILE): through guard's own magic link.
            Some(pinned) => nix::unistd::linkat(
                None,
                std::ffi::OsStr::new(&format!("/proc/self/fd/{}", pinned.as_raw_fd())),
                raw(to),
                &*to.call_name(),
                AtFlags::AT_SYMLINK_FOLLOW,
            ),
            None => nix::unistd::linkat(
                raw(from),
                &*from.call_name(),
                raw(to),
                &*to.call_name(),
                AtFlags::empty(),
            ),
        }),
        Act::Symlink { target, at } => making_as_caller(at, None, || {
            nix::unistd::symlinkat(
                std::ffi::OsStr::from_bytes(target),
                raw(at),
                &*at.call_name(),
            )
        }),
        Act::Mkdir { at, mode } => making_as_caller(at, Some(*mode), || {
            nix::sys::stat::mkdirat(
                raw(at),
                &*at.call_name(),
                Mode::from_bits_truncate(mode & 0o7777),
            )
        }),
        Act::Mknod { at, mode, dev } => {
            let kind = SFlag::from_bits_truncate(mode & libc::S_IFMT);
            io_done(creds::as_caller_making(mode & 0o7777, || {
                nix::sys::stat::mknodat(
                    raw(at),
                    &*at.call_name(),
                    kind,
                    Mode::from_bits_truncate(mode & 0o7777),
                    *dev,
                )
                .map_err(io::Error::from)
            }))
        }
        Act::Chmod { at, mode } => {
            if at.kind == Some(Kind::Symlink) {
                // Linux cannot change a symlink's mode.
                return Outcome::Failed(libc::EOPNOTSUPP);
            }
            let mode = mode & 0o7777;
            io_done(creds::as_caller_creating_nothing(|| match &at.pinned {
                Some(pinned) => crate::sys::meta::chmod_object(pinned.as_fd(), mode),
                None => crate::sys::meta::chmod_entry(
                    at.parent.as_fd(),
                    &crate::sys::fs::cstr(&at.name)?,
                    mode,
                ),
            }))
        }
        Act::Chown { at, uid, gid } => {
            io_done(creds::as_caller_creating_nothing(|| match &at.pinned {
                // The object itself: the descriptor with AT_EMPTY_PATH (an O_PATH one too).
                Some(pinned) => {
                    crate::sys::meta::fchownat(pinned.as_fd(), c"", *uid, *gid, libc::AT_EMPTY_PATH)
                }
                None => crate::sys::meta::fchownat(
                    at.parent.as_fd(),
                    &crate::sys::fs::cstr(&at.call_name())?,
                    *uid,
                    *gid,
                    libc::AT_SYMLINK_NOFOLLOW,
                ),
            }))
        }
        Act::Truncate { at, len } => truncate(at, *len, n),
        Act::Open { at, flags, mode } => open(at, *flags, *mode, n, listener, inject, None, None),
        Act::Connect { sock, addr } => connect(*sock, addr, n, listener),
        // Performed by the network stage before it comes here (`supervisor::net`).
        Act::Net(_) => Outcome::Failed(libc::ENOSYS),
    }
}

/// truncate(2) for the caller, with its credentials: the kernel's checks in the kernel's
/// order (a directory is EISDIR and any other non-regular file EINVAL before permissions),
/// then the open for writing that checks them. The caller's file-size limit (RLIMIT_FSIZE) is
/// its process's, not guard's: growing a file past it fails with EFBIG and sends the caller
/// SIGXFSZ, as the kernel does.
fn truncate(at: &Target, len: i64, n: &Notif) -> Outcome {
    // guard's own credentials read it (the caller's may not be enough to look at itself).
    let limit = crate::sys::creds::fsize_limit(n.pid).unwrap_or(u64::MAX);
    let mut too_big = false;
    let outcome = as_caller_creating_nothing(|| {
        let pinned = open_path(at)?;
        let st = nix::sys::stat::fstat(pinned.as_raw_fd())?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => return Err(nix::errno::Errno::EISDIR),
            libc::S_IFREG => {}
            _ => return Err(nix::errno::Errno::EINVAL),
        }
        if len < 0 {
            return Err(nix::errno::Errno::EINVAL);
        }
        let fd = crate::sys::fs::openat(
            None,
            format!("/proc/self/fd/{}", pinned.as_raw_fd()).as_str(),
            OFlag::O_WRONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
            Mode::empty(),
        )?;
        if len > st.st_size && len as u64 > limit {
            too_big = true;
            return Err(nix::errno::Errno::EFBIG);
        }
        nix::unistd::ftruncate(fd.as_fd(), len)
    });
    if too_big {
        let tgid = creds::assume::current().map_or(n.pid, |c| c.creds.tgid);
        let _ = crate::sys::creds::tgkill(tgid, n.pid, libc::SIGXFSZ);
    }
    outcome
}

/// Connects now in flight on worker threads; beyond the cap, connects run on the supervisor
/// thread itself (slower for everyone, but bounded).
static CONNECT_WORKERS: AtomicUsize = AtomicUsize::new(0);
const MAX_CONNECT_WORKERS: usize = 64;

/// connect(2) for the caller: on a duplicate of its own socket (pidfd_getfd), to the address
/// copied once from its memory. A blocking connect can take long (an unresponsive host), so it
/// runs on a worker thread that answers the notification itself.
fn connect(sock: i32, addr: &[u8], n: &Notif, listener: &Arc<Listener>) -> Outcome {
    let fd = match crate::sys::process::pidfd_for_caller(n.pid)
        .and_then(|p| crate::sys::process::pidfd_getfd(p.as_fd(), sock))
    {
        Ok(fd) => fd,
        // The descriptor is not open in the caller (or the caller is gone): what connect says
        // for a bad descriptor.
        Err(_) => return Outcome::Failed(libc::EBADF),
    };
    let nonblocking = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
        .is_ok_and(|fl| fl & libc::O_NONBLOCK != 0);
    // With the caller's credentials: a unix socket's path is checked for write permission.
    if nonblocking || CONNECT_WORKERS.load(Ordering::Relaxed) >= MAX_CONNECT_WORKERS {
        return io_done(creds::as_caller(|| {
            crate::sys::net::connect_raw(fd.as_fd(), addr)
        }));
    }
    let (listener, id, addr) = (Arc::clone(listener), n.id, addr.to_vec());
    let caller = creds::assume::current();
    CONNECT_WORKERS.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("guard-connect".into())
        .spawn(move || {
            let connect = || creds::as_caller(|| crate::sys::net::connect_raw(fd.as_fd(), &addr));
            let r = match caller {
                Some(c) => creds::for_caller(c, connect),
                None => connect(),
            };
            let error = r
                .err()
                .map(|e| -e.raw_os_error().unwrap_or(libc::EIO))
                .unwrap_or(0);
            let _ = listener.respond(id, 0, error, false);
            CONNECT_WORKERS.fetch_sub(1, Ordering::Relaxed);
        });
    match spawned {
        Ok(_) => Outcome::Answered,
        Err(_) => {
            CONNECT_WORKERS.fetch_sub(1, Ordering::Relaxed);
            Outcome::Failed(libc::EAGAIN)
        }
    }
}

///
/// `creating`: the journal that recorded this open's name as about to be created. guard then
/// creates it exclusively (as the kernel would, opening the file instead if one appeared
/// meanwhile), and tells the journal the inode it made (see [`Journal::made_file`]).
///
/// `shared`: the target lies in a shared directory. A new file is made exclusively there too,
/// and noted as the run's; a file found is handed over only if the run made it (EACCES
/// otherwise: the name changed hands since it was judged).
#[allow(clippy::too_many_arguments)]
fn open(
    at: &Target,
    flags: i32,
    mode: u32,
    n: &Notif,
    listener: &Arc<Listener>,
    inject: Inject,
    creating: Option<&mut Journal>,
    shared: Option<&super::shared::Made>,
) -> Outcome {
    if inject == Inject::Continue {
        return Outcome::Continue;
    }
    if let Some(outcome) = super::fifo::open_aside(at, flags, n, listener, inject) {
        return outcome;
    }
    let cloexec = flags & libc::O_CLOEXEC != 0;
    // The final component was already resolved: never follow a symlink swapped in since.
    let mut ours = (flags & !libc::O_CLOEXEC) | libc::O_CLOEXEC;
    if !matches!(at.kind, Some(Kind::Symlink | Kind::Magic)) && at.pinned.is_none() {
        ours |= libc::O_NOFOLLOW;
    }
    let creates = flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE;
    // The caller's mode as it gave it: the worker has the caller's umask.
    let mode = if creates { mode & 0o7777 } else { 0 };
    let open_as = |flags: i32| match &at.pinned {
        // Re-open the pipe pinned when the call was judged, through our own descriptor.
        Some(pinned) => crate::sys::fs::openat(
            None,
            format!("/proc/self/fd/{}", pinned.as_raw_fd()).as_str(),
            OFlag::from_bits_retain(flags),
            Mode::empty(),
        ),
        None => crate::sys::fs::openat(
            Some(at.parent.as_fd()),
            &*at.call_name(),
            OFlag::from_bits_retain(flags),
            Mode::from_bits_truncate(mode),
        ),
    };
    // Whether this open made the file: only an exclusive create proves it.
    let exclusive = (creating.is_some() || shared.is_some())
        && at.pinned.is_none()
        && flags & libc::O_CREAT != 0;
    // A root guard's command differs from guard by capabilities only: where the kernel's
    // checks of its open come out the same for guard, guard opens the file without switching
    // its effective set (two `capset`s) and proves it after (`creds::open_without_switch`):
    // a file it finds must be one the caller could open, a file it makes is made with O_EXCL
    // in a directory where the caller could make it. Anything else, an error included, is
    // opened again as the caller, whose answer is the kernel's. The walk said whether the
    // name was there; that is tried first.
    let unswitched = || {
        if !matches!(at.kind, None | Some(Kind::File)) || at.pinned.is_some() {
            return None;
        }
        let fsuid = creds::open_without_switch(flags)?;
        let creates = flags & libc::O_CREAT != 0;
        // A truncating open of a file that is there is made as the caller (see creds).
        let may_open_existing = creds::opens_existing_without_switch(flags);
        let existing = || {
            if !may_open_existing {
                return None;
            }
            let fd = open_as(ours & !libc::O_CREAT).ok()?;
            let st = nix::sys::stat::fstat(fd.as_raw_fd()).ok()?;
            creds::caller_could_open(&st, fsuid, flags).then_some((fd, false))
        };
        let create = || {
            if !creds::caller_could_create(at.parent.as_fd(), mode) {
                return Err(None);
            }
            match creds::with_callers_umask(mode, || {
                open_as(ours | libc::O_EXCL).map_err(io::Error::from)
            }) {
                Ok(fd) => Ok((fd, true)),
                // There after all: opened as it is, unless the caller asked for a new file.
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & libc::O_EXCL == 0 => {
                    Err(Some(()))
                }
                Err(_) => Err(None),
            }
        };
        if at.kind.is_some() && flags & libc::O_EXCL == 0 {
            // There at the walk, to be truncated: opened as the caller, without first trying
            // a create that the name's being there would most likely fail.
            if !may_open_existing {
                return None;
            }
            // Gone since the walk (ENOENT): created, as the caller's O_CREAT would.
            return existing().or_else(|| creates.then(create).and_then(Result::ok));
        }
        if !creates {
            return existing();
        }
        match create() {
            Ok(made) => Some(made),
            Err(Some(())) => existing(),
            Err(None) => None,
        }
    };
    let opened = match unswitched() {
        Some(opened) => Ok(opened),
        None => creds::as_caller_making(mode, || {
            if !exclusive || flags & libc::O_EXCL != 0 {
                return open_as(ours)
                    .map(|fd| (fd, exclusive))
                    .map_err(io::Error::from);
            }
            match open_as(ours | libc::O_EXCL) {
                // A file appeared since the walk: the caller's open (without O_EXCL) opens it.
                Err(nix::errno::Errno::EEXIST) => open_as(ours).map(|fd| (fd, false)),
                other => other.map(|fd| (fd, true)),
            }
            .map_err(io::Error::from)
        }),
    };
    let (fd, made) = match opened {
        Ok(opened) => opened,
        Err(e) => return Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    if let Some(shared) = shared {
        let Ok(st) = nix::sys::stat::fstat(fd.as_raw_fd()) else {
            return Outcome::Failed(libc::EACCES);
        };
        // O_TMPFILE always makes a new file.
        if made || flags & libc::O_TMPFILE == libc::O_TMPFILE {
            shared.note(&st);
        } else if !shared.contains(&st) {
            return Outcome::Failed(libc::EACCES);
        }
    }
    let wake = match inject {
        Inject::AddFdSend | Inject::AddFd => super::warm::before_injection(),
        Inject::Continue => None,
    };
    let outcome = match inject {
        Inject::AddFdSend => match listener.addfd(n.id, fd.as_fd(), cloexec, true) {
            Ok(_) => {
                super::answer::answered(std::time::Instant::now());
                Outcome::Answered
            }
            Err(e) => Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
        },
        Inject::AddFd => match listener.addfd(n.id, fd.as_fd(), cloexec, false) {
            Ok(newfd) => Outcome::Done(i64::from(newfd)),
            Err(e) => Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
        },
        Inject::Continue => Outcome::Continue,
    };
    super::warm::after_injection(wake);
    // After the answer, off the caller's path; the journal's lock is still held, so no other
    // call on this file is judged before it is known as made.
    if let (true, Some(j)) = (made, creating) {
        j.made_file(&at.path, fd.as_fd());
    }
    outcome
}
