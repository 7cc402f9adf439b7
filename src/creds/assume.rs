//! Taking on a caller's credentials on one worker thread, around exactly the caller's call.
//!
//! The supervisor names the caller of the call a worker is handling with [`for_caller`]; the
//! code that performs the caller's own mutation (the supervisor's emulation, the journal's
//! hooks) runs it inside [`as_caller`]. Everything else (reading the caller's memory and its
//! /proc entry, the journal's store and log) keeps guard's credentials. Outside `for_caller`,
//! `as_caller` changes nothing: the journal's own rollback runs as guard.
//!
//! Only what differs from the thread's present credentials is switched, so the common cases
//! cost little: an unprivileged guard runs commands with its own credentials (nothing to
//! switch, only the umask of a create), a root guard that dropped the command's capabilities
//! switches the effective set alone (capset there and back), and a lookup that cannot come
//! out differently skips even that ([`caller_differs_in_capabilities_only`]).
//!
//! Order matters: the thread needs CAP_SETUID/CAP_SETGID to change its groups, fsgid and
//! fsuid, so the capabilities are lowered last and raised first. setfsuid away from 0 drops
//! the file-system capabilities by itself and back to 0 raises them from the permitted set.

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::{Arc, OnceLock};

use super::{Creds, CAP_FS_MASK};
use crate::sys::creds::{self as raw, CapSets};

/// The credentials of the caller a worker is acting for.
#[derive(Debug, Clone)]
pub struct Caller {
    pub creds: Arc<Creds>,
}

/// What a thread runs with now, as far as `as_caller` changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    fsuid: u32,
    fsgid: u32,
    groups: Arc<[u32]>,
    caps: CapSets,
    umask: u32,
}

/// guard's own credentials (every thread of guard has them outside `as_caller`), read once.
fn own() -> &'static io::Result<State> {
    static OWN: OnceLock<io::Result<State>> = OnceLock::new();
    OWN.get_or_init(|| {
        Ok(State {
            fsuid: raw::setfsuid(u32::MAX),
            fsgid: raw::setfsgid(u32::MAX),
            groups: raw::getgroups()?.into(),
            caps: raw::capget(0)?,
            umask: 0,
        })
    })
}

thread_local! {
    /// The caller this thread is handling a call for.
    static CALLER: RefCell<Option<Caller>> = const { RefCell::new(None) };
    /// The thread has an fs context of its own (`unshare(CLONE_FS)`) with umask 0, so
    /// setting its umask changes no other thread's.
    static PRIVATE_FS: Cell<bool> = const { Cell::new(false) };
    /// A directory whose owner and mode this call has already read, and no change can have
    /// touched since: its descriptor's number, owner and mode (see [`knowing_dir`]).
    static KNOWN_DIR: Cell<Option<(i32, u32, u32)>> = const { Cell::new(None) };
}

/// Runs `f` knowing the owner (`uid`) and `mode` of the directory open as `dir`, read a moment
/// ago where no change can have come since (the supervisor's walk, under its transactional
/// lock): [`caller_owns_with`] of that directory inside `f` takes them instead of an `fstat`.
/// The descriptor stays open for the whole of `f`, so its number names that directory alone.
pub fn knowing_dir<R>(
    dir: std::os::fd::BorrowedFd<'_>,
    uid: u32,
    mode: u32,
    f: impl FnOnce() -> R,
) -> R {
    struct Forget(Option<(i32, u32, u32)>);
    impl Drop for Forget {
        fn drop(&mut self) {
            KNOWN_DIR.with(|k| k.set(self.0));
        }
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
    let _forget = Forget(KNOWN_DIR.with(|k| k.replace(Some((fd, uid, mode)))));
    f()
}

/// Declares that the calling thread has its own fs context (after `unshare(CLONE_FS)`) and
/// umask 0: `as_caller` may then give it the caller's umask, and the modes passed to creating
/// calls are the caller's own (so the kernel applies the umask, or a default ACL instead).
/// On any other thread, `as_caller` leaves the umask alone.
pub fn mark_private_fs() {
    PRIVATE_FS.with(|p| p.set(true));
}

/// Whether this thread takes on the caller's umask (see [`mark_private_fs`]).
pub fn has_private_fs() -> bool {
    PRIVATE_FS.with(Cell::get)
}

/// Runs `f` with `caller` named as the caller of the call this thread handles: `as_caller`
/// inside it acts with the caller's credentials.
pub fn for_caller<R>(caller: Caller, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<Caller>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let previous = self.0.take();
            CALLER.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CALLER.with(|c| c.borrow_mut().replace(caller));
    let _reset = Reset(previous);
    f()
}

/// The caller named by [`for_caller`] on this thread, if any.
pub fn current() -> Option<Caller> {
    CALLER.with(|c| c.borrow().clone())
}

/// Runs `call`, the caller's own mutation, with the caller's credentials (fsuid, fsgid,
/// groups, effective capabilities, umask), and guard's own again afterwards. Outside
/// [`for_caller`] it just runs `call`. When the thread cannot take the credentials on, the
/// call is not made: EPERM.
pub fn as_caller<T>(call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    with_callers(call, Taking::Everything)
}

/// [`as_caller`] for a mutation that makes no new inode (unlink, rmdir, rename, link, a change
/// of metadata): the umask shapes only the modes of new entries, so it stays guard's (two
/// system calls fewer on each such call).
pub fn as_caller_creating_nothing<T>(call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    with_callers(call, Taking::AllButUmask)
}

/// [`as_caller`] for a lookup (a path walk, a stat, an O_PATH open): nothing is created, so
/// the umask, which only shapes the modes of new entries, stays guard's (two system calls
/// fewer on every judged call).
pub fn looking_up_as_caller<T>(call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    with_callers(call, Taking::AllButUmask)
}

/// The caller's file-system uid, when a lookup as the caller would differ from guard's only
/// by guard's extra capabilities: the caller's fsuid, fsgid and groups are guard's own, its
/// effective capabilities are not (a root guard's command, whose capabilities were dropped). A lookup that searches only directories
/// this uid owns and may search by their mode then meets the same checks as guard or as the
/// caller, and needs no switch of credentials ([`caller_owns_with`], `supervisor::target`);
/// so does a change of the entries of a directory it owns and may write and search
/// ([`changing_entries_of`]).
/// `None` outside [`for_caller`], when the ids differ, or when nothing differs (no switch to
/// spare).
pub fn caller_differs_in_capabilities_only() -> Option<u32> {
    let caller = current()?;
    let own = own().as_ref().ok()?;
    let c = &caller.creds;
    let same_ids = c.fsuid() == own.fsuid && c.fsgid() == own.fsgid && *c.groups == *own.groups;
    let fewer_caps = c.cap_effective & own.caps.permitted != own.caps.effective;
    (same_ids && fewer_caps).then(|| c.fsuid())
}

/// Whether the caller named by [`for_caller`] differs from guard by capabilities only
/// ([`caller_differs_in_capabilities_only`]) and owns `dir`, whose mode gives the owner every
/// bit of `owner_bits` (`S_IXUSR`, `S_IWUSR`). The owner of a directory gets exactly its
/// mode's owner bits, ACL or not, so a check of those rights on `dir` comes out the same with
/// guard's credentials as with the caller's. One `fstat`, none inside [`knowing_dir`] of `dir`.
pub fn caller_owns_with(dir: std::os::fd::BorrowedFd<'_>, owner_bits: u32) -> bool {
    caller_differs_in_capabilities_only().is_some_and(|fsuid| {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&dir);
        match KNOWN_DIR.with(Cell::get) {
            Some((known, uid, mode)) if known == fd => owns_with(fsuid, uid, mode, owner_bits),
            _ => nix::sys::stat::fstat(fd)
                .is_ok_and(|st| owns_with(fsuid, st.st_uid, st.st_mode, owner_bits)),
        }
    })
}

/// [`caller_owns_with`] for a directory whose owner and mode were just read (`uid`, `mode`):
/// no `fstat` of its own.
pub fn caller_owns_as(uid: u32, mode: u32, owner_bits: u32) -> bool {
    caller_differs_in_capabilities_only()
        .is_some_and(|fsuid| owns_with(fsuid, uid, mode, owner_bits))
}

fn owns_with(fsuid: u32, uid: u32, mode: u32, owner_bits: u32) -> bool {
    uid == fsuid && mode & owner_bits == owner_bits
}

/// [`as_caller_creating_nothing`] for the unlink of a non-directory in `dir`, or its rename
/// from `dir` into the journal's store: made with guard's own credentials when they meet the
/// same checks as the caller's. That is when the caller owns `dir` with the owner's write and
/// search bits ([`caller_owns_with`]): the kernel's other checks then pass or fail alike (the
/// sticky bit passes for a directory's owner; append-only and immutable flags refuse guard as
/// they refuse the caller), and the store belongs to guard's fsuid, the caller's too, with
/// every right for its owner. One `fstat` instead of two `capset`s.
pub fn changing_entries_of<T>(
    dir: std::os::fd::BorrowedFd<'_>,
    call: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    if caller_owns_with(dir, libc::S_IWUSR | libc::S_IXUSR) {
        call()
    } else {
        as_caller_creating_nothing(call)
    }
}

/// Whether an open with `flags` may go without the switch of the effective set: the caller
/// differs from guard by capabilities only ([`caller_differs_in_capabilities_only`]), and
/// `flags` make no unnamed file. Then guard may open an existing file with its own effective
/// set, provided the result passes [`caller_could_open`] and `flags` do not truncate (a
/// truncation cannot be taken back once made: see [`opens_existing_without_switch`]), and
/// create one where [`caller_could_create`] says the kernel's checks come out the same, with
/// O_EXCL (so O_TRUNC, which the kernel ignores for a file the open makes, changes nothing);
/// otherwise the file is opened as the caller, whose answer is the kernel's. The caller's
/// fsuid.
pub fn open_without_switch(flags: i32) -> Option<u32> {
    let fsuid = caller_differs_in_capabilities_only()?;
    let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
    (!tmpfile).then_some(fsuid)
}

/// Whether an open with `flags` that [`open_without_switch`] allows may open a file that
/// exists without the switch: not when it truncates, since guard proves the open after it is
/// made ([`caller_could_open`]) and a truncation cannot be taken back.
pub fn opens_existing_without_switch(flags: i32) -> bool {
    flags & libc::O_TRUNC == 0
}

/// Whether guard's create of a regular file with `mode` in `dir` meets the checks the
/// caller's would ([`open_without_switch`]): the caller owns `dir` with the owner's write and
/// search bits, and `mode` has no set-id bit (the kernel strips S_ISGID by the creator's
/// capabilities). One `fstat`.
pub fn caller_could_create(dir: std::os::fd::BorrowedFd<'_>, mode: u32) -> bool {
    mode & (libc::S_ISUID | libc::S_ISGID) == 0
        && caller_owns_with(dir, libc::S_IWUSR | libc::S_IXUSR)
}

/// Whether the caller (fsuid `fsuid`, differing from guard by capabilities only) could have
/// opened the file behind `st` with `flags` itself: a regular file it owns, whose mode gives
/// the owner the rights the access mode needs. The owner of a file gets exactly its mode's
/// owner bits, ACL or not, so the kernel's check of the caller comes out the same.
pub fn caller_could_open(st: &libc::stat, fsuid: u32, flags: i32) -> bool {
    // The kernel's ACC_MODE: access mode 3 (no O_RDONLY/O_WRONLY/O_RDWR, an ioctl-only open)
    // needs read and write permission, as O_RDWR does.
    let need = match flags & libc::O_ACCMODE {
        libc::O_RDONLY => libc::S_IRUSR,
        libc::O_WRONLY => libc::S_IWUSR,
        _ => libc::S_IWUSR | libc::S_IRUSR,
    };
    st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_uid == fsuid && st.st_mode & need == need
}

/// Runs `call` with the caller's umask alone ([`for_caller`]'s caller; guard's credentials
/// otherwise): for a create of a new entry of mode `mode` that [`caller_could_create`] lets
/// guard make. Where the caller's umask and guard's clear the same bits of `mode` (git makes
/// its objects 0444; any umask of the group and other write bits leaves that as it is), the
/// mode comes out the same either way, and so it does where a default ACL applies instead of
/// any umask: the umask is not switched then (two `umask` calls fewer).
pub fn with_callers_umask<T>(mode: u32, call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    if umask_changes_nothing(mode) {
        return call();
    }
    with_callers(call, Taking::UmaskOnly)
}

/// [`as_caller`] for a call that makes a new entry of mode `mode` (0 for one whose mode no
/// umask shapes: a symlink, an open that makes nothing): the caller's umask is taken on only
/// where it gives `mode` another value than guard's would ([`with_callers_umask`]).
pub fn as_caller_making<T>(mode: u32, call: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let taking = if umask_changes_nothing(mode) {
        Taking::AllButUmask
    } else {
        Taking::Everything
    };
    with_callers(call, taking)
}

/// Whether the caller's umask and guard's clear the same bits of `mode`: then a new entry
/// made with either has the same mode (and with a default ACL, neither applies).
fn umask_changes_nothing(mode: u32) -> bool {
    match (current(), own()) {
        (Some(caller), Ok(own)) => mode & (caller.creds.umask ^ own.umask) & 0o777 == 0,
        _ => false,
    }
}

/// A caller like the calling thread but without an effective capability: a root guard's
/// command as [`caller_differs_in_capabilities_only`] sees it. For the tests that run the
/// kernel's checks as such a caller.
#[cfg(test)]
pub(crate) fn caller_without_capabilities() -> Caller {
    let me = nix::unistd::gettid().as_raw() as u32;
    let mut creds = Creds::of_thread(me).expect("own creds");
    creds.cap_effective = 0;
    Caller {
        creds: Arc::new(creds),
    }
}

/// Which of the caller's credentials [`with_callers`] takes on.
#[derive(Clone, Copy)]
enum Taking {
    /// All of them.
    Everything,
    /// All but the umask (a call that makes no new inode).
    AllButUmask,
    /// The umask alone (a create guard may make with its own effective set).
    UmaskOnly,
}

fn with_callers<T>(call: impl FnOnce() -> io::Result<T>, taking: Taking) -> io::Result<T> {
    let Some(caller) = current() else {
        return call();
    };
    let own = match own() {
        Ok(own) => own,
        Err(e) => {
            tracing::error!("cannot read guard's own credentials: {e}");
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
    };
    let callers = wanted(own, &caller.creds);
    let want = match taking {
        Taking::Everything => callers,
        Taking::AllButUmask => State {
            umask: own.umask,
            ..callers
        },
        Taking::UmaskOnly => State {
            umask: callers.umask,
            ..own.clone()
        },
    };
    if let Err(e) = switch(own, &want) {
        tracing::error!("cannot take on the caller's credentials: {e}");
        restore(own, &want);
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    let result = call();
    restore(own, &want);
    result
}

/// The state a thread must be in to act for `c`: its ids and groups, its effective
/// capabilities as far as guard holds them (guard's permitted set stays, so it can come back).
fn wanted(own: &State, c: &Creds) -> State {
    State {
        fsuid: c.fsuid(),
        fsgid: c.fsgid(),
        groups: if *c.groups == *own.groups {
            Arc::clone(&own.groups)
        } else {
            Arc::clone(&c.groups)
        },
        caps: CapSets {
            effective: c.cap_effective & own.caps.permitted,
            ..own.caps
        },
        umask: if has_private_fs() { c.umask } else { own.umask },
    }
}

/// The effective set after setfsuid moved the fsuid from `from` to `to` (see the module doc).
fn after_fsuid(effective: u64, permitted: u64, from: u32, to: u32) -> u64 {
    match (from == 0, to == 0) {
        (true, false) => effective & !CAP_FS_MASK,
        (false, true) => effective | (permitted & CAP_FS_MASK),
        _ => effective,
    }
}

fn setfsuid(uid: u32) -> io::Result<()> {
    raw::setfsuid(uid);
    if raw::setfsuid(u32::MAX) != uid {
        return Err(io::Error::other(format!("setfsuid({uid}) did not take")));
    }
    Ok(())
}

fn setfsgid(gid: u32) -> io::Result<()> {
    raw::setfsgid(gid);
    if raw::setfsgid(u32::MAX) != gid {
        return Err(io::Error::other(format!("setfsgid({gid}) did not take")));
    }
    Ok(())
}

/// From guard's own credentials to `want`.
fn switch(own: &State, want: &State) -> io::Result<()> {
    if want.umask != own.umask {
        nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(want.umask));
    }
    if want.groups != own.groups {
        raw::setgroups(&want.groups)?;
    }
    if want.fsgid != own.fsgid {
        setfsgid(want.fsgid)?;
    }
    let mut effective = own.caps.effective;
    if want.fsuid != own.fsuid {
        setfsuid(want.fsuid)?;
        effective = after_fsuid(effective, own.caps.permitted, own.fsuid, want.fsuid);
    }
    if want.caps.effective != effective {
        raw::capset(&want.caps)?;
    }
    Ok(())
}

/// Back from (what `switch` made of) `want` to guard's own credentials. Every step is tried,
/// whatever failed before: a worker must not go on with someone else's credentials.
fn restore(own: &State, want: &State) {
    let mut problems = Vec::new();
    if want.caps.effective != own.caps.effective || want.fsuid != own.fsuid {
        if let Err(e) = raw::capset(&own.caps) {
            problems.push(format!("capset: {e}"));
        }
    }
    if want.fsuid != own.fsuid {
        if let Err(e) = setfsuid(own.fsuid) {
            problems.push(e.to_string());
        }
        let effective = after_fsuid(
            own.caps.effective,
            own.caps.permitted,
            want.fsuid,
            own.fsuid,
        );
        if effective != own.caps.effective {
            if let Err(e) = raw::capset(&own.caps) {
                problems.push(format!("capset: {e}"));
            }
        }
    }
    if want.fsgid != own.fsgid {
        if let Err(e) = setfsgid(own.fsgid) {
            problems.push(e.to_string());
        }
    }
    if want.groups != own.groups {
        if let Err(e) = raw::setgroups(&own.groups) {
            problems.push(format!("setgroups: {e}"));
        }
    }
    if want.umask != own.umask {
        nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(own.umask));
    }
    if !problems.is_empty() {
        // Nothing sane is left to do: the thread would go on judging with a caller's
        // credentials.
        tracing::error!(
            "cannot restore guard's credentials on a supervisor thread: {}",
            problems.join("; ")
        );
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds_like_ours() -> Creds {
        let me = nix::unistd::gettid().as_raw() as u32;
        Creds::of_thread(me).expect("own status")
    }

    #[test]
    fn outside_for_caller_nothing_changes() {
        let r = as_caller(|| Ok(raw::setfsuid(u32::MAX)));
        assert_eq!(r.expect("runs"), nix::unistd::geteuid().as_raw());
    }

    #[test]
    fn the_callers_umask_applies_inside_and_ours_after() {
        // A thread of its own, with its own fs context, as the supervisor's workers have.
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS).expect("unshare");
            nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            mark_private_fs();
            let mut c = creds_like_ours();
            c.umask = 0o077;
            let caller = Caller { creds: Arc::new(c) };
            let seen = for_caller(caller, || {
                as_caller(|| {
                    let m = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
                    nix::sys::stat::umask(m);
                    Ok(m.bits())
                })
            });
            assert_eq!(seen.expect("runs"), 0o077);
            let now = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            assert_eq!(now.bits(), 0);
        })
        .join()
        .expect("thread");
    }

    /// A root caller without capabilities (a root guard's command) meets, through
    /// `changing_entries_of`, the kernel's answer to its own unlink: it goes through in its
    /// own directory, fails with EACCES where the owner may not write and with EPERM in
    /// another user's sticky directory. guard, with its capabilities, passes all three.
    #[test]
    fn a_change_without_the_switch_fails_where_the_caller_would() {
        use std::os::fd::AsFd as _;
        use std::os::unix::fs::PermissionsExt as _;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root (a caller that differs from guard by capabilities)");
            return;
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = |name: &str, mode: u32, owner: Option<u32>| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).expect("mkdir");
            std::fs::write(d.join("f"), "x").expect("write");
            if let Some(uid) = owner {
                std::os::unix::fs::chown(&d, Some(uid), Some(uid)).expect("chown");
                std::os::unix::fs::chown(d.join("f"), Some(uid), Some(uid)).expect("chown");
            }
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).expect("chmod");
            d
        };
        let cases = [
            (dir("own", 0o755, None), 0),
            (dir("unwritable", 0o555, None), libc::EACCES),
            (dir("sticky", 0o1777, Some(65534)), libc::EPERM),
        ];
        let unlink = |d: &std::path::Path| -> i32 {
            let fd = std::fs::File::open(d).expect("open dir");
            let r = changing_entries_of(fd.as_fd(), || {
                nix::unistd::unlinkat(
                    Some(std::os::fd::AsRawFd::as_raw_fd(&fd)),
                    "f",
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .map_err(io::Error::from)
            });
            r.err().and_then(|e| e.raw_os_error()).unwrap_or(0)
        };
        std::thread::spawn(move || {
            let caller = caller_without_capabilities();
            for (d, errno) in &cases {
                let got = for_caller(caller.clone(), || unlink(d));
                assert_eq!(got, *errno, "{} as the caller", d.display());
                assert!(d.join("f").exists() == (*errno != 0), "{}", d.display());
                if *errno != 0 {
                    assert_eq!(unlink(d), 0, "{} as guard", d.display());
                }
            }
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn root_takes_on_another_fsuid_and_comes_back() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS).expect("unshare");
            nix::sys::stat::umask(nix::sys::stat::Mode::empty());
            let before = raw::capget(0).expect("capget");
            let mut c = creds_like_ours();
            c.uids = [65534; 4];
            c.gids = [65534; 4];
            c.groups = Arc::from(vec![65534]);
            c.cap_effective = 0;
            let caller = Caller { creds: Arc::new(c) };
            let inside = for_caller(caller, || {
                as_caller(|| {
                    Ok((
                        raw::setfsuid(u32::MAX),
                        raw::setfsgid(u32::MAX),
                        raw::getgroups()?,
                        raw::capget(0)?.effective,
                    ))
                })
            })
            .expect("runs");
            assert_eq!(inside, (65534, 65534, vec![65534], 0));
            assert_eq!(raw::setfsuid(u32::MAX), 0);
            assert_eq!(raw::capget(0).expect("capget"), before);
            // Only this thread changed: the process's other threads keep root's groups.
        })
        .join()
        .expect("thread");
        assert_ne!(raw::getgroups().expect("groups"), vec![65534]);
    }
}
