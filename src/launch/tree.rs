//! A run's process tree: the sandbox's init (the one child guard forks) and everything under
//! it. The init is a subreaper inside the sandbox, so the tree is exactly the init's
//! descendants; [`RunTree`] waits for the init through its pidfd and kills the tree without
//! touching any other process of the program that started the run.
//!
//! [`kill_tree`] is the process-wide variant for a program that is nothing but the run (the
//! CLI, which is also a child subreaper): every descendant of the process, and reaping every
//! child.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::sys;

/// The sandbox's init and its descendants. Cloneable: the supervisor holds one to end the run
/// on a `kill` verdict while the main thread waits.
#[derive(Debug, Clone)]
pub struct RunTree {
    inner: Arc<TreeInner>,
}

#[derive(Debug)]
struct TreeInner {
    init: libc::pid_t,
    pidfd: OwnedFd,
    /// The read end of the pipe the init tells the command's end through ([`tell_end`]).
    end: OwnedFd,
    /// Set once the init is reaped: its pid may then belong to another process, so nothing is
    /// signalled by pid any more. Held while killing, so the init cannot be reaped meanwhile.
    reaped: Mutex<bool>,
}

impl RunTree {
    pub(super) fn new(init: libc::pid_t, pidfd: OwnedFd, end: OwnedFd) -> RunTree {
        RunTree {
            inner: Arc::new(TreeInner {
                init,
                pidfd,
                end,
                reaped: Mutex::new(false),
            }),
        }
    }

    /// The init's pid.
    pub fn init_pid(&self) -> libc::pid_t {
        self.inner.init
    }

    /// The init's pidfd: readable once it has exited.
    pub fn pidfd(&self) -> BorrowedFd<'_> {
        self.inner.pidfd.as_fd()
    }

    /// Readable when the init has told how the command ended ([`RunTree::read_end`]), or
    /// has exited without telling.
    pub(crate) fn end_fd(&self) -> BorrowedFd<'_> {
        self.inner.end.as_fd()
    }

    /// How the command ended, as the init tells it once it has ended the rest of the tree and
    /// before it exits itself: the status the init's own exit then carries. `None` when the
    /// init exited without telling (killed, or guard's own failure): its exit status tells.
    /// The init is still to be reaped ([`RunTree::reap`]).
    pub(crate) fn read_end(&self) -> Option<Reaped> {
        let mut buf = [0u8; END_LEN];
        let n = nix::unistd::read(self.inner.end.as_raw_fd(), &mut buf).ok()?;
        decode_end(buf.get(..n)?, self.inner.init)
    }

    /// Send `sig` to the init (which passes SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGWINCH on
    /// to the command).
    pub fn signal(&self, sig: libc::c_int) -> io::Result<()> {
        sys::process::pidfd_send_signal(self.pidfd(), sig)
    }

    /// SIGKILL every process of the tree: the init's descendants first, until none is left
    /// running (the init reaps them), then the init. Does not wait for the init; its status
    /// comes from `Running::wait`. Nothing happens once the init is reaped.
    pub fn kill(&self) {
        let reaped = self
            .inner
            .reaped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *reaped {
            return;
        }
        // Until the init is reaped its pid is its own, alive or a zombie, so its children's
        // list is this run's.
        for _ in 0..200 {
            let pids: Vec<i32> = descendants(self.inner.init)
                .into_iter()
                .filter(|p| is_running(*p))
                .collect();
            if pids.is_empty() {
                break;
            }
            for p in pids {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = self.signal(libc::SIGKILL);
    }

    /// Block until the init has exited (its pidfd is readable), without reaping it.
    pub(crate) fn wait_exit(&self, timeout: PollTimeout) -> io::Result<bool> {
        let mut fds = [PollFd::new(self.pidfd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(n) => Ok(n > 0),
            Err(nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Reap the init through its pidfd (waiting for it to exit) and return its status. Only
    /// this run's child is waited for; no other child of the process is touched.
    pub(crate) fn reap(&self) -> io::Result<Reaped> {
        while !self.wait_exit(PollTimeout::NONE)? {}
        let mut reaped = self
            .inner
            .reaped
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let status = loop {
            match waitid(Id::PIDFd(self.pidfd()), WaitPidFlag::WEXITED) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other?,
            }
        };
        *reaped = true;
        Ok(Reaped::of(status).unwrap_or(Reaped {
            pid: self.inner.init,
            status: 128,
            signal: None,
        }))
    }
}

/// A process that exists and is not a zombie.
fn is_running(pid: i32) -> bool {
    crate::sys::process::read_proc_text(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// How the command ended, told by the sandbox's init to guard before the init exits with the
/// same status ([`tell_end`], [`RunTree::read_end`]): guard then ends the run while the init's
/// exit frees the init's copy of guard's memory, which it otherwise waited for (some 200 µs
/// of every run on this project's VM). One write of [`END_LEN`] bytes to a pipe, atomic: guard
/// reads all of it or, when the init died first, nothing. `E`, the status, the signal (0:
/// none), little-endian.
const END_LEN: usize = 9;

/// Tells guard, through `end`, how the command ended (`st`, as the init reaped it); nothing
/// for a status that is no end. Async-signal-safe: one `write`; a failure leaves guard to the
/// init's exit status.
pub(super) fn tell_end(end: BorrowedFd<'_>, st: WaitStatus) {
    if let Some(r) = Reaped::of(st) {
        let _ = nix::unistd::write(end, &encode_end(&r));
    }
}

fn encode_end(r: &Reaped) -> [u8; END_LEN] {
    let mut b = [0u8; END_LEN];
    b[0] = b'E';
    b[1..5].copy_from_slice(&r.status.to_le_bytes());
    b[5..9].copy_from_slice(&r.signal.unwrap_or(0).to_le_bytes());
    b
}

/// The end [`encode_end`] wrote, as the init `pid`'s.
fn decode_end(b: &[u8], pid: i32) -> Option<Reaped> {
    if b.len() != END_LEN || b[0] != b'E' {
        return None;
    }
    let status = i32::from_le_bytes(b[1..5].try_into().ok()?);
    let signal = i32::from_le_bytes(b[5..9].try_into().ok()?);
    Some(Reaped {
        pid,
        status,
        signal: (signal != 0).then_some(signal),
    })
}

/// One reaped process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaped {
    /// Its pid.
    pub pid: i32,
    /// Exit code, or 128 + signal number.
    pub status: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

impl Reaped {
    /// What `waitpid` told of an ended process, as guard passes it on (the exit code, or 128 +
    /// the signal); `None` for a status that is no end (stopped, continued).
    fn of(st: WaitStatus) -> Option<Reaped> {
        match st {
            WaitStatus::Exited(pid, code) => Some(Reaped {
                pid: pid.as_raw(),
                status: code,
                signal: None,
            }),
            WaitStatus::Signaled(pid, sig, _) => Some(Reaped {
                pid: pid.as_raw(),
                status: 128 + sig as i32,
                signal: Some(sig as i32),
            }),
            _ => None,
        }
    }
}

/// Reap every child of the process that has exited, without blocking.
fn reap() -> Vec<Reaped> {
    let mut out = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            Ok(WaitStatus::StillAlive) | Err(_) => break,
            Ok(st) => out.extend(Reaped::of(st)),
        }
    }
    out
}

/// Parent pid of every process, from /proc/PID/stat.
fn parent_map() -> HashMap<i32, i32> {
    let mut map = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return map;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = crate::sys::process::read_proc_text(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The comm field may contain spaces and parentheses: parse after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            map.insert(pid, ppid);
        }
    }
    map
}

/// The children of `pid` from /proc/PID/task/*/children (CONFIG_PROC_CHILDREN), or `None`
/// when the kernel does not offer that file.
fn children_of(pid: i32) -> Option<Vec<i32>> {
    // A thread that ends between the listing and the read of its file leaves no file, and
    // its children go to another thread, maybe one already read: list again. Only when that
    // keeps happening is the file taken for missing (and every process scanned instead).
    for _ in 0..3 {
        if let Some(kids) = children_once(pid) {
            return Some(kids);
        }
    }
    None
}

fn children_once(pid: i32) -> Option<Vec<i32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let text = crate::sys::process::read_proc_text(task.path().join("children")).ok()?;
        out.extend(
            text.split_whitespace()
                .filter_map(|s| s.parse::<i32>().ok()),
        );
    }
    Some(out)
}

/// Every descendant of `root`: walked down through the children files when the kernel has
/// them (a few reads), else found by scanning every process's parent.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        match children_of(p) {
            Some(kids) => {
                out.extend(&kids);
                stack.extend(kids);
            }
            // A process that exited meanwhile has no task directory: skip it, unless it is the
            // root, where the children files are missing altogether.
            None if p == root => return descendants_by_scan(root),
            None => {}
        }
    }
    out
}

fn descendants_by_scan(root: i32) -> Vec<i32> {
    let map = parent_map();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &ppid) in &map {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        if let Some(kids) = children.get(&p) {
            for &k in kids {
                out.push(k);
                stack.push(k);
            }
        }
    }
    out
}

/// SIGKILL every descendant of this process and reap every child, until none is left. Returns
/// the processes reaped on the way. Process-wide: only for a program that is nothing but the
/// run and a child subreaper (the CLI), where orphans of a tree whose init died come back.
pub fn kill_tree() -> Vec<Reaped> {
    let me = std::process::id() as i32;
    let mut reaped = reap();
    // A child subreaper with no child has no descendant (every orphan below comes back to
    // it): the usual end of a run, whose init is reaped already, reads nothing in /proc.
    if waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL))
        == Err(nix::errno::Errno::ECHILD)
    {
        return reaped;
    }
    for _ in 0..1000 {
        let pids = descendants(me);
        for &pid in &pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        reaped.extend(reap());
        if pids.is_empty() {
            // Nothing visible is left; make sure no child remains unreaped.
            match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                Err(nix::errno::Errno::ECHILD) => break,
                Ok(WaitStatus::StillAlive) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                _ => reaped.extend(reap()),
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_reads_back_as_it_was_sent_and_nothing_else_reads_as_one() {
        let pid = Pid::from_raw(42);
        for st in [
            WaitStatus::Exited(pid, 0),
            WaitStatus::Exited(pid, 7),
            WaitStatus::Exited(pid, 255),
            WaitStatus::Signaled(pid, Signal::SIGTERM, false),
        ] {
            let r = Reaped::of(st).expect("an end");
            assert_eq!(decode_end(&encode_end(&r), 42), Some(r));
        }
        let killed = Reaped::of(WaitStatus::Signaled(pid, Signal::SIGKILL, false)).unwrap();
        assert_eq!((killed.status, killed.signal), (137, Some(9)));
        assert_eq!(Reaped::of(WaitStatus::Stopped(pid, Signal::SIGSTOP)), None);
        let three = encode_end(&Reaped::of(WaitStatus::Exited(pid, 3)).unwrap());
        assert_eq!(decode_end(&three[..8], 42), None);
        assert_eq!(decode_end(b"", 42), None);
        let mut other = three;
        other[0] = b'X';
        assert_eq!(decode_end(&other, 42), None);
    }
}
