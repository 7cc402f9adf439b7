//! Signals a run forwards to its command when the embedding program asks for it (the CLI
//! does): SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGWINCH, blocked in the threads of the process
//! and read from a signalfd.
//!
//! A signal the kernel generated for the terminal's foreground process group (Ctrl-C, window
//! resize) already reached the command directly, so only signals sent to guard by a process
//! (`kill`) are forwarded; otherwise the command would see Ctrl-C twice.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// One signal read from the signalfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalEvent {
    /// The signal number.
    pub signo: i32,
    /// True when a process sent it (kill, sigqueue), false when the kernel did (terminal).
    pub from_process: bool,
    /// The sender's pid (0 for the kernel).
    pub sender: u32,
}

/// The blocked signals and their signalfd.
pub struct Signals {
    fd: SignalFd,
    /// The calling thread's mask before [`Signals::block`].
    previous: SigSet,
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
    /// Block the forwarded signals in the calling thread (threads spawned later inherit the
    /// mask) and open the signalfd. Call before spawning threads and before forking.
    pub fn block() -> io::Result<Signals> {
        let mut set = SigSet::empty();
        for s in FORWARDED {
            set.add(s);
        }
        let mut previous = SigSet::empty();
        sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut previous))?;
        let fd = match SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&previous), None);
                return Err(e.into());
            }
        };
        Ok(Signals { fd, previous })
    }

    /// Put the calling thread's mask back as it was before [`Signals::block`] (call it on the
    /// thread that blocked). Signals still pending are then delivered.
    pub fn restore(self) -> io::Result<()> {
        sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.previous), None)?;
        Ok(())
    }

    /// The signalfd, readable when a signal is pending.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Read one pending signal, without blocking.
    pub fn read(&mut self) -> io::Result<Option<SignalEvent>> {
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
