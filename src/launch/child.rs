//! The child side of the launch (steps 3-10 of `docs/launch.md`) and the small protocol on the
//! close-on-exec socket that tells the parent how it went.
//!
//! Messages (one datagram each): `L` + the listener fd as SCM_RIGHTS; `E` + stage + errno when
//! a setup step failed; `X` + errno when `execve` failed. EOF after `L` means `execve` worked.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::signal::{sigprocmask, SigSet, SigmaskHow, Signal};
use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

use super::{LaunchError, LaunchSpec, EXIT_GUARD_ERROR};
use crate::sys;

const STAGES: [&str; 8] = [
    "set the parent-death signal",
    "unblock signals",
    "set no_new_privs",
    "enforce the Landlock ruleset",
    "drop capabilities",
    "close inherited file descriptors",
    "install the seccomp filter",
    "hand over the seccomp listener",
];

fn fail(sock: BorrowedFd<'_>, stage: u8, err: io::Error) -> ! {
    let errno = err.raw_os_error().unwrap_or(libc::EIO);
    let mut msg = [b'E', stage, 0, 0, 0, 0];
    msg[2..].copy_from_slice(&errno.to_le_bytes());
    let _ = sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(&msg)],
        &[],
        MsgFlags::empty(),
        None,
    );
    sys::process::exit_now(EXIT_GUARD_ERROR)
}

fn drop_capabilities() -> io::Result<()> {
    use caps::CapSet;
    let to_io = |e: caps::errors::CapsError| io::Error::other(e.to_string());
    let permitted = caps::read(None, CapSet::Permitted).map_err(to_io)?;
    if permitted.is_empty() && nix::unistd::geteuid().as_raw() != 0 {
        return Ok(());
    }
    for cap in caps::all() {
        if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
            caps::drop(None, CapSet::Bounding, cap).map_err(to_io)?;
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(to_io)?;
    caps::clear(None, CapSet::Inheritable).map_err(to_io)?;
    caps::clear(None, CapSet::Effective).map_err(to_io)?;
    caps::clear(None, CapSet::Permitted).map_err(to_io)?;
    Ok(())
}

/// Runs in the forked child; never returns.
pub(super) fn run(spec: LaunchSpec, sock: OwnedFd, parent_pid: u32) -> ! {
    let s = sock.as_raw_fd();
    // `sock` lives until exec or exit.
    let sockb = sock_borrow(&sock);

    // 3. Die with guard; if guard is already gone, stop here.
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        fail(sockb, 0, e.into());
    }
    if nix::unistd::getppid().as_raw() as u32 != parent_pid {
        sys::process::exit_now(EXIT_GUARD_ERROR);
    }
    // 4. The command gets a clean signal mask.
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        fail(sockb, 1, e.into());
    }
    // 5. no_new_privs: required for Landlock and seccomp without CAP_SYS_ADMIN, and it makes
    //    setuid binaries powerless.
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        fail(sockb, 2, e.into());
    }
    // 6. Landlock.
    if let Some(ruleset) = spec.landlock {
        if let Err(e) = ruleset.restrict_self() {
            fail(sockb, 3, io::Error::other(e.to_string()));
        }
    }
    // 7. Capabilities (root keeps its uid but not its powers).
    if spec.drop_caps {
        if let Err(e) = drop_capabilities() {
            fail(sockb, 4, e);
        }
    }
    // 8. Close every inherited descriptor but stdio and the launch socket.
    let s32 = s as u32;
    if s32 > 3 {
        if let Err(e) = sys::process::close_range(3, s32 - 1) {
            fail(sockb, 5, e);
        }
    }
    if let Err(e) = sys::process::close_range(s32 + 1, u32::MAX) {
        fail(sockb, 5, e);
    }
    // 9. The seccomp filter, last: from here on judged calls wait for the supervisor.
    let listener = match sys::notify::install_filter_with_listener(&spec.filter) {
        Ok(fd) => fd,
        Err(e) => fail(sockb, 6, e),
    };
    // sendmsg and close are never trapped, so the hand-over cannot wait on the supervisor.
    let fds = [listener.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    if let Err(e) = sendmsg::<()>(s, &[IoSlice::new(b"L")], &cmsg, MsgFlags::empty(), None) {
        fail(sockb, 7, e.into());
    }
    // The command must never hold its own listener: it could answer its own notifications.
    drop(listener);

    // 10. Stay as the sandbox's init and fork the command, which reports its pid and execs
    //     (launch/init.rs).
    super::init::run(&spec.program, &spec.argv, &spec.envp, sock, parent_pid)
}

fn sock_borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    fd.as_fd()
}

fn errno_of(bytes: &[u8]) -> io::Error {
    let mut b = [0u8; 4];
    if let Some(src) = bytes.get(..4) {
        b.copy_from_slice(src);
    }
    io::Error::from_raw_os_error(i32::from_le_bytes(b))
}

/// Parent side: wait for `L` (the listener) or `E` (a failed setup step).
pub(super) fn receive_listener(sock: BorrowedFd<'_>) -> Result<OwnedFd, LaunchError> {
    let mut buf = [0u8; 16];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let (bytes, fd) = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = loop {
            match recvmsg::<()>(
                sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC,
            ) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other,
            }
        }
        .map_err(|e| LaunchError::Channel(e.into()))?;
        let mut fd = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    for raw in fds {
                        // Ownership of a received descriptor passes to us; it is wrapped in
                        // an OwnedFd just below so it is closed on every path.
                        fd = Some(raw);
                    }
                }
            }
        }
        (msg.bytes, fd)
    };
    let fd = fd.map(sys::process::owned_received_fd);
    match (bytes, buf.first()) {
        (0, _) => Err(LaunchError::ChildVanished),
        (_, Some(b'L')) => fd.ok_or(LaunchError::ChildVanished),
        (_, Some(b'E')) => {
            let stage = STAGES.get(usize::from(buf[1])).copied().unwrap_or("setup");
            Err(LaunchError::Child {
                stage,
                source: errno_of(&buf[2..]),
            })
        }
        _ => Err(LaunchError::ChildVanished),
    }
}

/// Parent side: the command's pid (`P`), sent by the command itself before it execs.
pub(super) fn receive_command_pid(sock: BorrowedFd<'_>) -> io::Result<i32> {
    let mut buf = [0u8; 16];
    loop {
        match nix::unistd::read(sock.as_raw_fd(), &mut buf) {
            Ok(n) if n >= 5 && buf[0] == b'P' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&buf[1..5]);
                return Ok(i32::from_le_bytes(b));
            }
            Ok(_) => return Err(io::Error::from_raw_os_error(libc::EPROTO)),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Parent side: EOF means `execve` succeeded; `X` carries its errno.
pub(super) fn wait_exec(sock: BorrowedFd<'_>) -> io::Result<()> {
    let mut buf = [0u8; 16];
    loop {
        match nix::unistd::read(sock.as_raw_fd(), &mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) if buf[0] == b'X' => return Err(errno_of(&buf[1..])),
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            // ECONNRESET and friends: the child is gone after exec; treat as success and let
            // the exit status tell the rest.
            Err(_) => return Ok(()),
        }
    }
}
