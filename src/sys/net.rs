//! Socket calls: connect(2) on a raw socket address, for the supervisor's emulated connect (the
//! address bytes were copied from the caller once and are passed to the kernel as they are);
//! and receiving a datagram with a descriptor attached (`SCM_RIGHTS`), owned on arrival.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

/// recvmsg(2) of one datagram into `buf`, with room for one descriptor sent with `SCM_RIGHTS`
/// (received close-on-exec). Returns the bytes received (0 at end of stream) and the
/// descriptor, owned; any further descriptors in the message are closed. Retries on EINTR.
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = loop {
        match recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other?,
        }
    };
    let mut fd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel installed this descriptor in our table while receiving the
                // message; nothing else refers to it, so the OwnedFd becomes its only owner (an
                // extra one is dropped, and so closed, when the next one replaces it).
                fd = Some(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
    }
    Ok((msg.bytes, fd))
}

/// connect(2) with `addr` as the raw `struct sockaddr` bytes.
pub fn connect_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // The kernel copies at most `len` bytes from `addr`; an unaligned `struct sockaddr` is fine
    // because it only reads bytes. Keep a local aligned copy anyway.
    let mut storage: libc::sockaddr_storage = {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    };
    let n = addr
        .len()
        .min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `storage` has room for `n` bytes and does not overlap `addr`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            n,
        )
    };
    // SAFETY: `storage` holds `len` initialised bytes of a socket address; connect only reads.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr>(),
            len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
