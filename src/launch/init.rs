//! The sandbox's init: the first process inside the sandbox stays behind as the command's
//! parent instead of exec'ing it. It is a child subreaper, so every orphan of the tree comes to
//! it, and its parent-death signal fires when guard dies: then it SIGKILLs every process of the
//! tree (it may, they share its Landlock domain) so nothing keeps writing through descriptors
//! it already holds. Otherwise it reaps, passes signals from guard on to the command, and ends
//! with the command's status (exit code, or the same signal).
//!
//! It makes no judged call: fork, wait, kill, signalfd and reads of /proc are never trapped.

use std::ffi::CString;
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::signal::{kill, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{sendmsg, MsgFlags};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::signals::FORWARDED;
use super::{EXIT_GUARD_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};
use crate::sys;

/// Fork the command and stay as its init. Never returns.
pub(super) fn run(
    program: &CString,
    argv: &[CString],
    envp: &[CString],
    sock: OwnedFd,
    guard: u32,
) -> ! {
    let s = sock.as_raw_fd();
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    set.add(Signal::SIGUSR1);
    for sig in FORWARDED {
        set.add(sig);
    }
    let setup = (|| -> io::Result<SignalFd> {
        nix::sys::prctl::set_child_subreaper(true)?;
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
        // From now on guard's death is a signal to handle, not this process's death.
        nix::sys::prctl::set_pdeathsig(Signal::SIGUSR1)?;
        Ok(SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC)?)
    })();
    let Ok(sfd) = setup else {
        sys::process::exit_now(EXIT_GUARD_ERROR);
    };
    if nix::unistd::getppid().as_raw() as u32 != guard {
        sys::process::exit_now(EXIT_GUARD_ERROR);
    }
    let command = match sys::process::fork() {
        Ok(sys::process::Forked::Child) => exec_command(program, argv, envp, s),
        Ok(sys::process::Forked::Parent { child }) => child,
        Err(_) => sys::process::exit_now(EXIT_GUARD_ERROR),
    };
    // Only the command reports to guard from here on (its pid, or why exec failed).
    drop(sock);
    let mut status: Option<WaitStatus> = None;
    loop {
        let info = match sfd.read_signal() {
            Ok(Some(info)) => info,
            Ok(None) | Err(_) => continue,
        };
        let sig = info.ssi_signo as i32;
        if sig == libc::SIGUSR1 || nix::unistd::getppid().as_raw() as u32 != guard {
            // guard is gone: nothing of the tree may run on unsupervised.
            kill_all();
            sys::process::exit_now(EXIT_GUARD_ERROR);
        }
        if sig == libc::SIGCHLD {
            loop {
                match waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
                    Ok(WaitStatus::StillAlive) | Err(_) => break,
                    Ok(st) => {
                        if st.pid().map(Pid::as_raw) == Some(command) {
                            status = Some(st);
                        }
                    }
                }
            }
            if let Some(st) = status {
                kill_all();
                finish(st);
            }
            continue;
        }
        // SIGINT and friends sent by guard (a process, not the terminal, which already
        // reached the command's process group): pass them on.
        if info.ssi_code <= 0 {
            let _ = kill(Pid::from_raw(command), Signal::try_from(sig).ok());
        }
    }
}

/// The command's side of the fork: report its pid, reset the signal setup, exec.
fn exec_command(program: &CString, argv: &[CString], envp: &[CString], s: i32) -> ! {
    let mut msg = [b'P', 0, 0, 0, 0];
    msg[1..].copy_from_slice(&(std::process::id() as i32).to_le_bytes());
    let _ = sendmsg::<()>(s, &[IoSlice::new(&msg)], &[], MsgFlags::empty(), None);
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // The socket is close-on-exec: guard reads EOF on success.
    let err = match nix::unistd::execve(program, argv, envp) {
        Err(e) => io::Error::from(e),
        Ok(never) => match never {},
    };
    let errno = err.raw_os_error().unwrap_or(libc::EIO);
    let mut msg = [b'X', 0, 0, 0, 0];
    msg[1..].copy_from_slice(&errno.to_le_bytes());
    let _ = sendmsg::<()>(s, &[IoSlice::new(&msg)], &[], MsgFlags::empty(), None);
    sys::process::exit_now(if errno == libc::ENOENT {
        EXIT_NOT_FOUND
    } else {
        EXIT_NOT_EXECUTABLE
    })
}

/// SIGKILL every descendant until none is left, reaping as they go.
fn kill_all() {
    let me = std::process::id() as i32;
    for _ in 0..1000 {
        let pids = super::tree::descendants(me);
        if pids.is_empty() {
            break;
        }
        for p in pids {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
        while let Ok(st) = waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            if st == WaitStatus::StillAlive {
                break;
            }
        }
    }
    while waitpid(None, Some(WaitPidFlag::__WALL)).is_ok() {}
}

/// End with the command's status: its exit code, or death by the same signal.
fn finish(st: WaitStatus) -> ! {
    match st {
        WaitStatus::Exited(_, code) => sys::process::exit_now(code),
        WaitStatus::Signaled(_, sig, _) => {
            let _ = raise_with_default_action(sig);
            sys::process::exit_now(128 + sig as i32)
        }
        _ => sys::process::exit_now(EXIT_GUARD_ERROR),
    }
}

fn raise_with_default_action(sig: Signal) -> nix::Result<()> {
    let mut one = SigSet::empty();
    one.add(sig);
    let default = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::SigDfl,
        nix::sys::signal::SaFlags::empty(),
        SigSet::empty(),
    );
    sys::process::set_default_action(sig, &default)?;
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None)?;
    nix::sys::signal::raise(sig)
}
