//! The child side of the launch (steps 8-15 of `docs/launch.md`): confine this process, hand
//! the seccomp listener to guard, and become the sandbox's init. A failed step is reported on
//! the launch channel as its [`Stage`] (see `message.rs`); the parent side reads the channel
//! with [`receive_listener`], [`go_ahead`], [`receive_command_pid`] and [`wait_exec`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt as _;

use nix::sched::CpuSet;
use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::socket::{recv, send, MsgFlags};

use super::message::{self, Message, Stage};
use super::{LaunchError, LaunchSpec, EXIT_GUARD_ERROR};
use crate::confine::landlock::ShareGranted;
use crate::sys;
use crate::sys::process::ExecImage;

fn fail(sock: BorrowedFd<'_>, stage: Stage, err: io::Error) -> ! {
    message::send_failure(sock, stage, &err);
    sys::process::exit_now(EXIT_GUARD_ERROR)
}

fn drop_capabilities() -> io::Result<()> {
    use caps::CapSet;
    let to_io = |e: caps::errors::CapsError| io::Error::other(e.to_string());
    let own = sys::creds::capget(0)?;
    if own.permitted == 0 && nix::unistd::geteuid().as_raw() != 0 {
        return Ok(());
    }
    // Dropped straight away (one prctl each, not a read and a drop): a capability the kernel
    // does not know is refused, and is not in the bounding set to begin with.
    for cap in caps::all() {
        if let Err(e) = caps::drop(None, CapSet::Bounding, cap) {
            if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
                return Err(to_io(e));
            }
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(to_io)?;
    // Effective, permitted and inheritable, emptied in one capset.
    sys::creds::capset(&sys::creds::CapSets::default())
}

/// Runs in the forked child; never returns. `elsewhere`: the affinity this process inherited
/// and the same without guard's CPU (`sys::process::elsewhere`).
pub(super) fn run(
    mut spec: LaunchSpec,
    command: OwnedFd,
    sock: OwnedFd,
    end: OwnedFd,
    parent_pid: u32,
    elsewhere: Option<(CpuSet, CpuSet)>,
) -> ! {
    let s = sock.as_raw_fd();
    // `sock` lives until exec or exit.
    let sockb = sock.as_fd();
    // 7a. Off guard's CPU until the command line is here (best effort: on failure both
    //     share one CPU, as without it).
    if let Some((_, others)) = &elsewhere {
        let _ = sys::process::set_affinity(others);
    }

    // 8. Die with guard; if guard is already gone, stop here.
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        fail(sockb, Stage::ParentDeathSignal, e.into());
    }
    if nix::unistd::getppid().as_raw() as u32 != parent_pid {
        sys::process::exit_now(EXIT_GUARD_ERROR);
    }
    // 8a. The share of the run's Landlock rules guard left to this process (the first root
    //     `fs.hide` expands entry by entry: `/etc`'s 150 entries for a root guard), granted
    //     to the same ruleset while guard grants the rest. Both are in before the command
    //     enforces it: the init forks the command only after guard's `A` below, which guard
    //     sends once its own share is in. Done here, before the capabilities go, with the
    //     reach guard decided what to hide with.
    let mut granted = ShareGranted {
        hidden: 0,
        missing: false,
    };
    if let (Some(share), Some(ruleset)) = (&spec.share, spec.landlock.as_mut()) {
        match share.grant(ruleset) {
            Ok(g) => granted = g,
            Err(e) => fail(sockb, Stage::LandlockShare, e.into_io()),
        }
    }
    // 9. The command gets a clean signal mask.
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        fail(sockb, Stage::UnblockSignals, e.into());
    }
    if let Some(dir) = &spec.cwd {
        if let Err(e) = nix::unistd::chdir(dir.as_c_str()) {
            fail(sockb, Stage::WorkingDirectory, e.into());
        }
    }
    // 10. no_new_privs: required for Landlock and seccomp without CAP_SYS_ADMIN, and it makes
    //     setuid binaries powerless.
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        fail(sockb, Stage::NoNewPrivs, e.into());
    }
    // 11. Landlock. Where the run scopes signals (ABI 6), this process, the sandbox's init
    //     to be, enforces a layer that only does that, and the command enforces the run's
    //     ruleset on itself before it execs (init.rs): its domain is nested in the init's, so
    //     nothing of the tree can signal or trace the init, and the run's rules are copied
    //     into one domain, not into the init's and again into the command's.
    let mut command_layer: Option<OwnedFd> = None;
    if let Some(ruleset) = spec.landlock.take() {
        if spec.protect_init {
            if let Err(e) = super::init::signal_scope().and_then(|scope| {
                scope
                    .restrict_self()
                    .map(drop)
                    .map_err(|e| io::Error::other(e.to_string()))
            }) {
                fail(sockb, Stage::ProtectInit, e);
            }
            command_layer = ruleset.into();
            if command_layer.is_none() {
                fail(
                    sockb,
                    Stage::Landlock,
                    io::Error::from_raw_os_error(libc::ENOSYS),
                );
            }
        } else if let Err(e) = ruleset.restrict_self() {
            fail(sockb, Stage::Landlock, io::Error::other(e.to_string()));
        }
    }
    // 12. Capabilities (root keeps its uid but not its powers).
    if spec.drop_caps {
        if let Err(e) = drop_capabilities() {
            fail(sockb, Stage::DropCaps, e);
        }
    }
    // 13. Close every inherited descriptor but stdio, the make jobserver's pipe, the launch
    //     socket, the command line's file and the command's Landlock layer.
    let [job_r, job_w] = sys::process::jobserver_at_start();
    let mut keep = [
        Some(s),
        Some(command.as_raw_fd()),
        Some(end.as_raw_fd()),
        command_layer.as_ref().map(AsRawFd::as_raw_fd),
        job_r,
        job_w,
    ];
    keep.sort_unstable();
    if let Err(e) = close_all_but(keep.iter().flatten().map(|&fd| fd as u32)) {
        fail(sockb, Stage::CloseFds, e);
    }
    // 14. The seccomp filter, last: from here on judged calls wait for the supervisor.
    let listener = match sys::notify::install_filter_with_listener(&spec.filter) {
        Ok(fd) => fd,
        Err(e) => fail(sockb, Stage::Seccomp, e),
    };
    // 15. The listener's number goes to guard with send() (a sendto without a destination,
    //     never trapped; sendmsg is judged now, and nobody answers yet). guard takes the
    //     descriptor with pidfd_getfd, writes the command line to `command` and says `A` with
    //     its length (recv is never trapped either); only then is it closed here.
    let mut msg = [b'L', 0, 0, 0, 0, 0, 0, 0, 0, 0];
    msg[1..5].copy_from_slice(&listener.as_raw_fd().to_le_bytes());
    msg[5..9].copy_from_slice(&granted.hidden.to_le_bytes());
    msg[9] = u8::from(granted.missing);
    if let Err(e) = send(s, &msg, MsgFlags::empty()) {
        fail(sockb, Stage::HandOver, e.into());
    }
    let mut ack = [0u8; 9];
    sys::process::spin_until_readable(sockb, super::HANDSHAKE_SPIN);
    let len = match recv(s, &mut ack, MsgFlags::empty()) {
        Ok(9) if ack[0] == b'A' => u64::from_le_bytes(ack[1..].try_into().expect("8 bytes")),
        Ok(_) => fail(
            sockb,
            Stage::HandOver,
            io::Error::from_raw_os_error(libc::EPIPE),
        ),
        Err(e) => fail(sockb, Stage::HandOver, e.into()),
    };
    // The command must never hold its own listener: it could answer its own notifications.
    drop(listener);
    let image = match read_command(command, len) {
        Ok(image) => image,
        Err(e) => fail(sockb, Stage::CommandLine, e),
    };
    // The init and the command keep the affinity guard was given.
    if let Some((inherited, _)) = &elsewhere {
        if let Err(e) = sys::process::set_affinity(inherited) {
            fail(sockb, Stage::Init, e);
        }
    }

    // 16. Stay as the sandbox's init and fork the command, which reports its pid and execs
    //     (launch/init.rs).
    super::init::run(&image, sock, end, command_layer, parent_pid)
}

/// The command line guard wrote to `command` (`len` bytes, [`ExecImage::encode`]).
fn read_command(command: OwnedFd, len: u64) -> io::Result<ExecImage> {
    let len = usize::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let mut bytes = vec![0u8; len];
    std::fs::File::from(command).read_exact_at(&mut bytes, 0)?;
    ExecImage::decode(&bytes).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Closes every descriptor from 3 up but `keep` (in ascending order; one below 3, which a
/// guard started with a closed stdio descriptor can be given, stays open anyway).
fn close_all_but(keep: impl Iterator<Item = u32>) -> io::Result<()> {
    let mut first = 3;
    for fd in keep.filter(|&fd| fd >= 3) {
        if fd > first {
            sys::process::close_range(first, fd - 1)?;
        }
        first = fd + 1;
    }
    sys::process::close_range(first, u32::MAX)
}

/// Parent side: wait for `L` (the listener's number in the child behind `pidfd`, and what
/// the child's share of the Landlock rules granted) or `E` (a failed setup step); take the
/// listener and acknowledge.
pub(super) fn receive_listener(
    sock: BorrowedFd<'_>,
    pidfd: BorrowedFd<'_>,
) -> Result<(OwnedFd, ShareGranted), LaunchError> {
    sys::process::spin_until_readable(sock, super::HANDSHAKE_SPIN);
    match message::receive(sock).map_err(LaunchError::Channel)? {
        Message::Listener(Some(n), granted) => {
            let fd = sys::process::pidfd_getfd(pidfd, n).map_err(LaunchError::Channel)?;
            Ok((fd, granted))
        }
        Message::Failed { stage, source } => Err(LaunchError::Child { stage, source }),
        _ => Err(LaunchError::ChildVanished),
    }
}

/// Parent side, after [`receive_listener`]: write `command` to `file` for the child and
/// acknowledge with `A` and its length; the child then forks the command.
pub(super) fn go_ahead(
    sock: BorrowedFd<'_>,
    file: &std::fs::File,
    command: &super::CommandLine,
) -> Result<(), LaunchError> {
    let bytes = ExecImage::encode(&command.program, &command.argv, &command.envp);
    file.write_all_at(&bytes, 0).map_err(LaunchError::Channel)?;
    let mut ack = [b'A', 0, 0, 0, 0, 0, 0, 0, 0];
    ack[1..].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    send(sock.as_raw_fd(), &ack, MsgFlags::empty()).map_err(|e| LaunchError::Channel(e.into()))?;
    Ok(())
}

/// Parent side: the command's pid (`P`), sent by the command itself before it execs, or the
/// step of the init's that failed.
pub(super) fn receive_command_pid(sock: BorrowedFd<'_>) -> Result<i32, LaunchError> {
    sys::process::spin_until_readable(sock, super::HANDSHAKE_SPIN);
    match message::receive(sock).map_err(LaunchError::Channel)? {
        Message::CommandPid(pid) => Ok(pid),
        Message::Failed { stage, source } => Err(LaunchError::Child { stage, source }),
        _ => Err(LaunchError::ChildVanished),
    }
}

/// Parent side: end of stream means `execve` succeeded; `X` carries its errno.
pub(super) fn wait_exec(sock: BorrowedFd<'_>) -> io::Result<()> {
    sys::process::spin_until_readable(sock, super::HANDSHAKE_SPIN);
    match message::receive(sock) {
        Ok(Message::ExecFailed(e)) => Err(e),
        // End of stream, or the channel broke after exec (ECONNRESET and friends): the exit
        // status tells the rest.
        _ => Ok(()),
    }
}
