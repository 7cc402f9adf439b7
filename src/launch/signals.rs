//! Signals the main thread handles: SIGCHLD (reap), and SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGWINCH
//! (forward to the command). They are blocked in every thread and read from a signalfd.
//!
//! A signal the kernel generated for the terminal's foreground process group (Ctrl-C, window
//! resize) already reached the command directly, so only signals sent to guard by a process
//! (`kill`) are forwarded; otherwise the command would see Ctrl-C twice.

use std::io;
use std::os::fd::AsFd;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// One signal read from the signalfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalEvent {
    pub signo: i32,
    /// True when a process sent it (kill, sigqueue), false when the kernel did (terminal).
    pub from_process: bool,
    pub sender: u32,
}

pub struct Signals {
    fd: SignalFd,
}

/// The signals guard forwards to the command when a process sends them to guard.
pub const FORWARDED: [Signal; 5] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGWINCH,
];

impl Signals {
    /// Block the handled signals in the calling thread (threads spawned later inherit the mask)
    /// and open the signalfd. Call before spawning threads and before forking.
    pub fn block() -> io::Result<Signals> {
        let mut set = SigSet::empty();
        set.add(Signal::SIGCHLD);
        for s in FORWARDED {
            set.add(s);
        }
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)?;
        Ok(Signals { fd })
    }

    /// Wait up to `timeout_ms` for a signal.
    pub fn next(&mut self, timeout_ms: u16) -> io::Result<Option<SignalEvent>> {
        if let Some(ev) = self.read()? {
            return Ok(Some(ev));
        }
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(timeout_ms)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        self.read()
    }

    fn read(&mut self) -> io::Result<Option<SignalEvent>> {
        match self.fd.read_signal() {
            Ok(Some(info)) => Ok(Some(SignalEvent {
                signo: info.ssi_signo as i32,
                // SI_USER (0) and SI_QUEUE/SI_TKILL (negative) come from processes; SI_KERNEL
                // (0x80) from the kernel, e.g. the terminal.
                from_process: info.ssi_code <= 0,
                sender: info.ssi_pid,
            })),
            Ok(None) => Ok(None),
            Err(nix::errno::Errno::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}
