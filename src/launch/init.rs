//! The sandbox's init: the first process inside the sandbox stays behind as the command's
//! parent instead of exec'ing it. It is a child subreaper, so every orphan of the tree comes to
//! it, and its parent-death signal fires when guard dies: then it SIGKILLs every process of the
//! tree (it may: they run in its Landlock domain or in one nested in it) so nothing keeps
//! writing through descriptors it already holds. Otherwise it reaps, passes signals from guard
//! on to the command, and ends with the command's status (exit code, or the same signal).
//!
//! When the run enforces Landlock signal scoping (ABI 6), the init's own domain only scopes
//! signals and the command enforces the run's ruleset on itself before it execs, in a domain
//! nested in the init's: nothing of the tree can signal (or trace) the init, so the command
//! cannot end the init and leave its own tree without a reaper. (The run's rules, hundreds
//! where `fs.hide` expands `/etc`, are so copied into one domain, not into two.)
//!
//! It makes no judged call: fork, wait, kill, signalfd, the Landlock calls and reads of /proc
//! are never trapped.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use landlock::{CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreated, Scope};
use nix::sys::signal::{kill, sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::message::{self, Stage};
use super::signals::FORWARDED;
use super::{EXIT_GUARD_ERROR, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND};
use crate::sys;
use crate::sys::process::ExecImage;

/// A ruleset that only scopes signals: the init's own layer, which the command's domain (the
/// run's ruleset) is nested in, so that the command cannot signal out of it to the init.
pub(super) fn signal_scope() -> io::Result<RulesetCreated> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::Signal)
        .and_then(|r| r.create())
        .map_err(io::Error::other)
}

/// Fork the command and stay as its init. Never returns. `command_layer` is the run's
/// Landlock ruleset when the command enforces it on itself (see the module documentation).
pub(super) fn run(
    image: &ExecImage,
    sock: OwnedFd,
    end: OwnedFd,
    command_layer: Option<OwnedFd>,
    guard: u32,
) -> ! {
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
    let sfd = match setup {
        Ok(sfd) => sfd,
        Err(e) => {
            message::send_failure(sock.as_fd(), Stage::Init, &e);
            sys::process::exit_now(EXIT_GUARD_ERROR);
        }
    };
    if nix::unistd::getppid().as_raw() as u32 != guard {
        sys::process::exit_now(EXIT_GUARD_ERROR);
    }
    // The command starts on this CPU, which is free the moment this process waits for it
    // (vfork). Left to the scheduler, a new process goes to the least loaded CPU, at this
    // point often guard's, busy starting the supervisor: the command waited there some 85 µs
    // while this CPU idled. It gets back the affinity it would have had before it execs.
    let pinned = sys::process::pin_to_this_cpu();
    let forked = sys::process::fork_exec(
        image,
        &sys::process::ExecSetup {
            report: sock.as_fd(),
            landlock: command_layer.as_ref().map(AsFd::as_fd),
            pdeathsig: libc::SIGKILL,
            exit_setup: EXIT_GUARD_ERROR,
            exit_not_found: EXIT_NOT_FOUND,
            exit_not_executable: EXIT_NOT_EXECUTABLE,
            affinity: pinned.as_ref(),
        },
    );
    if let Some(mask) = &pinned {
        let _ = sys::process::set_affinity(mask);
    }
    let command = match forked {
        Ok(pid) => pid,
        Err(e) => {
            message::send_failure(sock.as_fd(), Stage::ForkCommand, &e);
            sys::process::exit_now(EXIT_GUARD_ERROR);
        }
    };
    // Only the command reports to guard from here on (its pid, or why exec failed).
    drop(sock);
    drop(command_layer);
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
                finish(st, end.as_fd());
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

/// SIGKILL every descendant until none is left, reaping as they go.
fn kill_all() {
    // Every orphan of the tree comes to this subreaper, so a process left anywhere below has
    // a child of this one above it: with no child at all (the common end, a command that left
    // nothing behind), there is nothing to look for in /proc.
    if waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL))
        == Err(nix::errno::Errno::ECHILD)
    {
        return;
    }
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

/// End with the command's status: its exit code, or death by the same signal. The tree is
/// gone by now; guard is told first (`end`, see `tree::tell_end`), so that it ends the run while
/// this process's exit frees its copy of guard's memory (some 200 µs here).
fn finish(st: WaitStatus, end: BorrowedFd<'_>) -> ! {
    super::tree::tell_end(end, st);
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
    // SIGKILL and SIGSTOP have no disposition to reset (EINVAL); they end the init anyway.
    if !matches!(sig, Signal::SIGKILL | Signal::SIGSTOP) {
        sys::process::reset_signal_to_default(sig)?;
    }
    sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&one), None)?;
    nix::sys::signal::raise(sig)
}
