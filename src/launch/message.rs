//! The launch channel: the close-on-exec `SOCK_SEQPACKET` pair between guard and the sandbox,
//! one datagram per message, and the typed setup stages a failure names.
//!
//! From the child and the sandbox's init: `L` + the listener's descriptor number in the child
//! (i32, little endian; guard takes it with pidfd_getfd, writes the command line to the file
//! the child shares with it and answers `A` + its length, u64 little endian) + what the child's
//! share of the Landlock rules left out as hidden (u32, little endian) + whether that share's
//! root was missing (one byte, 0 or 1); `E` + [`Stage`] +
//! errno (i32, little endian) when a setup step failed. Everything sent after the seccomp
//! filter is installed goes with send(2) without a destination, a call the filter never traps
//! (sendmsg is judged, and nobody answers before guard holds the listener). From the command, before it execs
//! (written by `sys::process::fork_exec`): `P` + its pid; `S` + errno when it could not be
//! fenced off from the init; `C` + errno when it could not be given back its CPU affinity;
//! `X` + errno when `execve` failed. End of stream after `P` means
//! `execve` worked (the socket is close-on-exec).

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::sys::socket::{send, MsgFlags};

use crate::confine::landlock::ShareGranted;
use crate::sys;

/// A step of the sandbox's setup, in the order the child and the init take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// `PR_SET_PDEATHSIG` in the child.
    ParentDeathSignal = 0,
    /// Clearing the signal mask inherited from guard.
    UnblockSignals = 1,
    /// Changing to the run's working directory.
    WorkingDirectory = 2,
    /// `PR_SET_NO_NEW_PRIVS`.
    NoNewPrivs = 3,
    /// `landlock_restrict_self` of the run's ruleset.
    Landlock = 4,
    /// Dropping every capability.
    DropCaps = 5,
    /// Closing inherited descriptors.
    CloseFds = 6,
    /// Installing the seccomp filter with its listener.
    Seccomp = 7,
    /// Sending the listener to guard.
    HandOver = 8,
    /// The init's own setup: subreaper, signals, parent-death signal.
    Init = 9,
    /// The init's own Landlock layer, which only scopes signals: the command's domain is nested
    /// in it, so the command cannot signal (or trace) the init.
    ProtectInit = 10,
    /// The init forking the command.
    ForkCommand = 11,
    /// Granting the share of the run's Landlock rules guard left to the child (one root
    /// `fs.hide` expands entry by entry).
    LandlockShare = 12,
    /// Reading the command line guard wrote for the init.
    CommandLine = 13,
    /// Giving the command back its CPU affinity (the init pins it to its own CPU to fork it).
    Affinity = 14,
}

impl Stage {
    const ALL: [Stage; 15] = [
        Stage::ParentDeathSignal,
        Stage::UnblockSignals,
        Stage::WorkingDirectory,
        Stage::NoNewPrivs,
        Stage::Landlock,
        Stage::DropCaps,
        Stage::CloseFds,
        Stage::Seccomp,
        Stage::HandOver,
        Stage::Init,
        Stage::ProtectInit,
        Stage::ForkCommand,
        Stage::LandlockShare,
        Stage::CommandLine,
        Stage::Affinity,
    ];

    fn from_byte(b: u8) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| *s as u8 == b)
    }

    /// What the stage does, for messages ("... failed").
    pub fn describe(self) -> &'static str {
        match self {
            Stage::ParentDeathSignal => "set the parent-death signal",
            Stage::UnblockSignals => "unblock signals",
            Stage::WorkingDirectory => "change to the working directory",
            Stage::NoNewPrivs => "set no_new_privs",
            Stage::Landlock => "enforce the Landlock ruleset",
            Stage::DropCaps => "drop capabilities",
            Stage::CloseFds => "close inherited file descriptors",
            Stage::Seccomp => "install the seccomp filter",
            Stage::HandOver => "hand over the seccomp listener",
            Stage::Init => "set up the sandbox's init",
            Stage::ProtectInit => "fence the command off from the sandbox's init",
            Stage::ForkCommand => "fork the command",
            Stage::LandlockShare => "grant the Landlock rules of an expanded root",
            Stage::CommandLine => "read the command line",
            Stage::Affinity => "give the command back its CPU affinity",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// One message received from the sandbox.
#[derive(Debug)]
pub(super) enum Message {
    /// `L`: the seccomp listener's descriptor number in the child, and what its share of the
    /// Landlock rules granted.
    Listener(Option<i32>, ShareGranted),
    /// `E`, or `S` from the command: a setup step failed.
    Failed { stage: Stage, source: io::Error },
    /// `P`: the command's pid, sent right before its `execve`.
    CommandPid(i32),
    /// `X`: `execve` failed.
    ExecFailed(io::Error),
    /// End of stream: every holder of the other end closed it (or exec'd).
    Closed,
    /// Anything else.
    Garbled,
}

fn le_i32(bytes: &[u8]) -> Option<i32> {
    Some(i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))
}

fn errno_of(bytes: &[u8]) -> io::Error {
    io::Error::from_raw_os_error(le_i32(bytes).unwrap_or(libc::EIO))
}

/// Receive one message (retrying on EINTR).
pub(super) fn receive(sock: BorrowedFd<'_>) -> io::Result<Message> {
    let mut buf = [0u8; 16];
    let (n, _fd) = sys::net::recv_with_fd(sock, &mut buf)?;
    let body = &buf[1..n.max(1)];
    Ok(match (n, buf[0]) {
        (0, _) => Message::Closed,
        (_, b'L') => Message::Listener(
            le_i32(body),
            ShareGranted {
                hidden: body.get(4..).and_then(le_i32).map_or(0, |n| n as u32),
                missing: body.get(8) == Some(&1),
            },
        ),
        (_, b'E') => match body.first().copied().and_then(Stage::from_byte) {
            Some(stage) => Message::Failed {
                stage,
                source: errno_of(&body[1..]),
            },
            None => Message::Garbled,
        },
        (_, b'S') => Message::Failed {
            stage: Stage::Landlock,
            source: errno_of(body),
        },
        (_, b'C') => Message::Failed {
            stage: Stage::Affinity,
            source: errno_of(body),
        },
        (_, b'P') => le_i32(body).map_or(Message::Garbled, Message::CommandPid),
        (_, b'X') => Message::ExecFailed(errno_of(body)),
        _ => Message::Garbled,
    })
}

/// Report that `stage` failed with `err` (best effort: the sender exits right after).
pub(super) fn send_failure(sock: BorrowedFd<'_>, stage: Stage, err: &io::Error) {
    let errno = err.raw_os_error().unwrap_or(libc::EIO);
    let mut msg = [b'E', stage as u8, 0, 0, 0, 0];
    msg[2..].copy_from_slice(&errno.to_le_bytes());
    let _ = send(sock.as_raw_fd(), &msg, MsgFlags::empty());
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use std::os::fd::{AsFd, OwnedFd};

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .expect("socketpair")
    }

    #[test]
    fn every_stage_survives_the_wire() {
        for stage in Stage::ALL {
            let (a, b) = pair();
            send_failure(
                a.as_fd(),
                stage,
                &io::Error::from_raw_os_error(libc::EACCES),
            );
            match receive(b.as_fd()).expect("receive") {
                Message::Failed { stage: got, source } => {
                    assert_eq!(got, stage);
                    assert_eq!(source.raw_os_error(), Some(libc::EACCES));
                }
                other => panic!("{stage:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_listener_carries_what_the_childs_share_granted() {
        let (a, b) = pair();
        let send = |bytes: &[u8]| {
            nix::sys::socket::send(a.as_raw_fd(), bytes, MsgFlags::empty()).expect("send");
        };
        send(&[b'L', 9, 0, 0, 0, 0x13, 0x01, 0, 0, 1]);
        send(&[b'L', 9, 0, 0, 0, 2, 0, 0, 0, 0]);
        let expect = |hidden, missing| ShareGranted { hidden, missing };
        for want in [expect(0x113, true), expect(2, false)] {
            match receive(b.as_fd()).expect("receive") {
                Message::Listener(Some(9), got) => assert_eq!(got, want),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn pid_exec_failure_and_end_of_stream_are_told_apart() {
        let (a, b) = pair();
        let send = |bytes: &[u8]| {
            nix::sys::socket::send(a.as_raw_fd(), bytes, MsgFlags::empty()).expect("send");
        };
        send(&[b'L', 7, 0, 0, 0]);
        send(&[b'P', 42, 0, 0, 0]);
        send(&[b'X', 2, 0, 0, 0]);
        send(&[b'E', 200, 1, 0, 0, 0]);
        assert!(matches!(
            receive(b.as_fd()),
            Ok(Message::Listener(
                Some(7),
                ShareGranted {
                    hidden: 0,
                    missing: false
                }
            ))
        ));
        assert!(matches!(receive(b.as_fd()), Ok(Message::CommandPid(42))));
        assert!(matches!(
            receive(b.as_fd()),
            Ok(Message::ExecFailed(e)) if e.raw_os_error() == Some(libc::ENOENT)
        ));
        assert!(matches!(receive(b.as_fd()), Ok(Message::Garbled)));
        drop(a);
        assert!(matches!(receive(b.as_fd()), Ok(Message::Closed)));
    }
}
