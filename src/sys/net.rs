//! Socket calls: connect(2), bind(2), sendmsg(2) and sendmmsg(2) on raw socket addresses and
//! raw control messages, for the supervisor's emulated calls (the bytes were copied from the
//! caller once and are passed to the kernel as they are); and receiving a datagram with a
//! descriptor attached (`SCM_RIGHTS`), owned on arrival.

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

/// `addr` copied into an aligned `sockaddr_storage`, and its length.
fn storage(addr: &[u8]) -> io::Result<(libc::sockaddr_storage, libc::socklen_t)> {
    let max = std::mem::size_of::<libc::sockaddr_storage>();
    if addr.len() > max {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let len = libc::socklen_t::try_from(addr.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut storage: libc::sockaddr_storage = {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    };
    // SAFETY: `storage` has room for `addr.len()` bytes (checked above) and does not overlap
    // `addr`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            addr.len(),
        )
    };
    Ok((storage, len))
}

/// bind(2) with `addr` as the raw `struct sockaddr` bytes.
pub fn bind_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let (storage, len) = storage(addr)?;
    // SAFETY: `storage` holds `len` initialised bytes of a socket address; bind only reads.
    let rc = unsafe {
        libc::bind(
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

/// One message for [`sendmsg_raw`] and [`sendmmsg_raw`]: a destination (raw `struct sockaddr`
/// bytes) or none, the payload, and raw control messages (`struct cmsghdr`s, as the caller laid
/// them out; descriptors already translated to the sender's).
pub struct Message<'a> {
    pub name: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub control: &'a [u8],
}

/// The `msghdr` of `m`, pointing into `m`, `name` (its aligned copy) and `iov`.
fn msghdr(
    m: &Message<'_>,
    name: &mut Option<(libc::sockaddr_storage, libc::socklen_t)>,
    iov: &mut libc::iovec,
) -> io::Result<libc::msghdr> {
    *name = m.name.map(storage).transpose()?;
    *iov = libc::iovec {
        iov_base: m.payload.as_ptr() as *mut libc::c_void,
        iov_len: m.payload.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is a valid value (no name, no control).
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    if let Some((storage, len)) = name {
        h.msg_name = (storage as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = *len;
    }
    h.msg_iov = iov;
    h.msg_iovlen = 1;
    if !m.control.is_empty() {
        h.msg_control = m.control.as_ptr() as *mut libc::c_void;
        h.msg_controllen = m.control.len() as _;
    }
    Ok(h)
}

/// sendmsg(2) of one message; returns the bytes sent.
pub fn sendmsg_raw(sock: BorrowedFd<'_>, m: &Message<'_>, flags: i32) -> io::Result<usize> {
    let (mut name, mut iov) = (
        None,
        libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        },
    );
    let h = msghdr(m, &mut name, &mut iov)?;
    // SAFETY: `h` points to `name`, `iov` (to `m.payload`) and `m.control`, all alive and
    // unmoved for the call; sendmsg only reads them.
    let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &h, flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc as usize)
}

/// sendmmsg(2) of `msgs`; returns the bytes sent of each message sent (the kernel's
/// `msg_len`), as many as it sent.
pub fn sendmmsg_raw(
    sock: BorrowedFd<'_>,
    msgs: &[Message<'_>],
    flags: i32,
) -> io::Result<Vec<u32>> {
    let mut names: Vec<Option<(libc::sockaddr_storage, libc::socklen_t)>> =
        msgs.iter().map(|_| None).collect();
    let mut iovs: Vec<libc::iovec> = msgs
        .iter()
        .map(|_| libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        })
        .collect();
    let mut hdrs = Vec::with_capacity(msgs.len());
    for ((m, name), iov) in msgs.iter().zip(names.iter_mut()).zip(iovs.iter_mut()) {
        hdrs.push(libc::mmsghdr {
            msg_hdr: msghdr(m, name, iov)?,
            msg_len: 0,
        });
    }
    let vlen = libc::c_uint::try_from(hdrs.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: every header points into `names`, `iovs` and the messages, which are alive and no
    // longer moved (both vectors are fully built); the kernel writes only `msg_len` fields.
    let rc = unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), vlen, flags as _) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(hdrs.iter().take(rc as usize).map(|h| h.msg_len).collect())
}

/// getsockopt(2) of an integer option at SOL_SOCKET (SO_TYPE, SO_DOMAIN, SO_ERROR).
pub fn sockopt_int(sock: BorrowedFd<'_>, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live locals of the sizes the kernel is told about.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// getsockname(2) as raw `struct sockaddr` bytes.
pub fn sockname_raw(sock: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `storage` has room for `len` bytes, which the kernel fills and updates.
    let rc = unsafe {
        libc::getsockname(
            sock.as_raw_fd(),
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = (len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: the kernel initialised the first `n` bytes of `storage`.
    let bytes = unsafe {
        std::slice::from_raw_parts((&storage as *const libc::sockaddr_storage).cast::<u8>(), n)
    };
    Ok(bytes.to_vec())
}

/// listen(2).
pub fn listen(sock: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    let rc = unsafe { libc::listen(sock.as_raw_fd(), backlog) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// connect(2) with `addr` as the raw `struct sockaddr` bytes.
pub fn connect_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    // The kernel copies at most `len` bytes from `addr`; an unaligned `struct sockaddr` is fine
    // because it only reads bytes. Keep a local aligned copy anyway.
    let (storage, len) = storage(addr)?;
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
