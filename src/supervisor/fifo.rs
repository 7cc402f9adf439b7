//! Opens that wait: a FIFO opened for reading or writing alone, without O_NONBLOCK, blocks
//! in the kernel until a process opens the other end. guard performs judged opens itself, and
//! a supervisor thread that waited there (holding the journal's lock for a FIFO inside the
//! workspace) would hold up every other judged call, the other end's included: `mkfifo p;
//! (sleep 1; cat p) & echo x > p` never ended. A FIFO has no content to journal, so its open
//! changes nothing the journal records: it is done on a thread of its own, which answers the
//! caller when the kernel lets the open through.
//!
//! The FIFO is pinned (an O_PATH descriptor, looked up with the caller's credentials, so the
//! caller's search permission on the directory is checked) while the call is judged, and the
//! waiting thread opens that object through guard's own magic link: a name swapped after the
//! decision changes nothing. The open itself runs with the caller's credentials, so the
//! kernel checks the caller's permission on the FIFO.
//!
//! One difference remains: a caller killed while it waits leaves the thread waiting until the
//! other end opens; the FIFO then sees a writer (or reader) come and go at once, where bare
//! nothing would have opened it. The threads are counted, and beyond [`MAX_WAITERS`] opens
//! wait on the supervisor thread as before (bounded, at the cost of the deadlock above).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::emulate::{Inject, Outcome};
use super::target::{Kind, Target};
use crate::creds;
use crate::sys::{Listener, Notif};

/// FIFO opens now waiting on threads of their own.
static WAITERS: AtomicUsize = AtomicUsize::new(0);
const MAX_WAITERS: usize = 64;

/// Whether an open of `at` with `flags` may wait for the other end of a FIFO: read-only or
/// write-only, without O_NONBLOCK, of an existing entry that is neither a file, a directory
/// nor a symlink (a FIFO, or the caller's own pipe), named without a trailing slash. An entry
/// the walk saw as a device or a socket is not pinned to be looked at again (`/dev/null`,
/// `/dev/tty`: two switches of credentials, an open, a stat and a close per open): a FIFO
/// put in its place since then is opened on the worker's thread, as beyond [`MAX_WAITERS`].
fn may_wait(at: &Target, flags: i32) -> bool {
    let accmode = flags & libc::O_ACCMODE;
    flags & libc::O_NONBLOCK == 0
        && flags & libc::O_PATH == 0
        && (accmode == libc::O_RDONLY || accmode == libc::O_WRONLY)
        && !(flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0)
        && flags & libc::O_DIRECTORY == 0
        && matches!(at.kind, Some(Kind::Other | Kind::Magic))
        && at
            .seen
            .is_none_or(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
        && !at.slash
}

/// The FIFO `at` names, pinned with the caller's credentials; `None` when it is not a FIFO
/// (any more), or cannot be looked up: the ordinary open then gives the kernel's answer.
fn pin(at: &Target) -> Option<OwnedFd> {
    let pinned = match &at.pinned {
        Some(p) => p.try_clone().ok()?,
        None => creds::as_caller(|| {
            crate::sys::fs::openat(
                Some(at.parent.as_fd()),
                &*at.call_name(),
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(std::io::Error::from)
        })
        .ok()?,
    };
    let st = nix::sys::stat::fstat(pinned.as_raw_fd()).ok()?;
    (st.st_mode & libc::S_IFMT == libc::S_IFIFO).then_some(pinned)
}

/// Opens the FIFO `at` for the caller on a thread of its own when the open may wait, and
/// answers the caller from there (`Some(Outcome::Answered)`); `None` when the ordinary open
/// applies (not a FIFO, O_NONBLOCK, too many waiting already).
pub(super) fn open_aside(
    at: &Target,
    flags: i32,
    n: &Notif,
    listener: &Arc<Listener>,
    inject: Inject,
) -> Option<Outcome> {
    if !may_wait(at, flags) || inject == Inject::Continue {
        return None;
    }
    if WAITERS.load(Ordering::Relaxed) >= MAX_WAITERS {
        return None;
    }
    let pinned = pin(at)?;
    let cloexec = flags & libc::O_CLOEXEC != 0;
    // Through the magic link: no name to follow, nothing to create.
    let ours = (flags & !(libc::O_CREAT | libc::O_NOFOLLOW | libc::O_CLOEXEC)) | libc::O_CLOEXEC;
    let (listener, id, caller) = (Arc::clone(listener), n.id, creds::assume::current());
    WAITERS.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("guard-fifo".into())
        .spawn(move || {
            let open = || {
                creds::as_caller(|| {
                    crate::sys::fs::openat(
                        None,
                        format!("/proc/self/fd/{}", pinned.as_raw_fd()).as_str(),
                        OFlag::from_bits_retain(ours),
                        Mode::empty(),
                    )
                    .map_err(std::io::Error::from)
                })
            };
            let opened = match caller {
                Some(c) => creds::for_caller(c, open),
                None => open(),
            };
            answer(&listener, id, opened, cloexec, inject);
            WAITERS.fetch_sub(1, Ordering::Relaxed);
        });
    match spawned {
        Ok(_) => Some(Outcome::Answered),
        Err(_) => {
            WAITERS.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

/// Hands the opened descriptor to the caller (or the open's errno). A caller gone meanwhile
/// makes both fail: there is no one left to answer.
fn answer(
    listener: &Listener,
    id: u64,
    opened: std::io::Result<OwnedFd>,
    cloexec: bool,
    inject: Inject,
) {
    let errno = |e: &std::io::Error| -e.raw_os_error().unwrap_or(libc::EIO);
    let fd = match opened {
        Ok(fd) => fd,
        Err(e) => {
            let _ = listener.respond(id, 0, errno(&e), false);
            return;
        }
    };
    match inject {
        Inject::AddFdSend => {
            if let Err(e) = listener.addfd(id, fd.as_fd(), cloexec, true) {
                let _ = listener.respond(id, 0, errno(&e), false);
            }
        }
        Inject::AddFd => {
            let _ = match listener.addfd(id, fd.as_fd(), cloexec, false) {
                Ok(newfd) => listener.respond(id, i64::from(newfd), 0, false),
                Err(e) => listener.respond(id, 0, errno(&e), false),
            };
        }
        Inject::Continue => {}
    }
}
