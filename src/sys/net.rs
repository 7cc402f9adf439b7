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

/// A call that takes a socket and a `struct sockaddr` (bind, connect).
type AddrCall =
    unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int;

/// `call` on `sock` with `addr`, the raw `struct sockaddr` bytes, copied into aligned storage
/// (the kernel only reads bytes, but the copy keeps the pointer's type honest).
fn with_addr(sock: BorrowedFd<'_>, addr: &[u8], call: AddrCall) -> io::Result<()> {
    let (storage, len) = storage(addr)?;
    // SAFETY: `storage` holds `len` initialised bytes of a socket address; bind and connect
    // only read it.
    let rc = unsafe {
        call(
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

/// bind(2) with `addr` as the raw `struct sockaddr` bytes.
pub fn bind_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    with_addr(sock, addr, libc::bind)
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
    sockopt_int_at(sock, libc::SOL_SOCKET, opt)
}

/// getsockopt(2) of an integer option at `level` (IPPROTO_IP's IP_FREEBIND, ...).
pub fn sockopt_int_at(
    sock: BorrowedFd<'_>,
    level: libc::c_int,
    opt: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live locals of the sizes the kernel is told about.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
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

/// `SKF_NET_OFF`: classic BPF loads relative to the network header of the packet.
const SKF_NET_OFF: u32 = 0xfff0_0000;

/// A classic BPF socket filter that keeps only packets from a loopback source: IPv4
/// `127.0.0.0/8`, IPv6 `::1`. Everything else (from any other address) is dropped before the
/// socket sees it: a SYN to a listener, a datagram to a UDP socket. Jump offsets count from
/// the next instruction.
pub fn loopback_only() -> [libc::sock_filter; 17] {
    const LD_B: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const LD_W: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const RSH: u16 = (libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K) as u16;
    const AND: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    [
        /* 0 */ op(LD_B, 0, 0, SKF_NET_OFF), // version and header length
        /* 1 */ op(RSH, 0, 0, 4),
        /* 2 */ op(JEQ, 0, 3, 4), // IPv4: 3, else 6
        /* 3 */ op(LD_W, 0, 0, SKF_NET_OFF + 12), // source address
        /* 4 */ op(AND, 0, 0, 0xff00_0000),
        /* 5 */ op(JEQ, 10, 9, 0x7f00_0000), // 127/8: keep, else drop
        /* 6 */ op(JEQ, 0, 8, 6), // IPv6: 7, else drop
        /* 7 */ op(LD_W, 0, 0, SKF_NET_OFF + 8), // source address, word by word
        /* 8 */ op(JEQ, 0, 6, 0),
        /* 9 */ op(LD_W, 0, 0, SKF_NET_OFF + 12),
        /* 10 */ op(JEQ, 0, 4, 0),
        /* 11 */ op(LD_W, 0, 0, SKF_NET_OFF + 16),
        /* 12 */ op(JEQ, 0, 2, 0),
        /* 13 */ op(LD_W, 0, 0, SKF_NET_OFF + 20),
        /* 14 */ op(JEQ, 1, 0, 1), // ::1: keep, else drop
        /* 15 */ op(RET, 0, 0, 0), // drop
        /* 16 */ op(RET, 0, 0, u32::MAX), // keep
    ]
}

/// Let only loopback peers reach `sock`: attach [`loopback_only`] and lock it
/// (`SO_LOCK_FILTER`: the program cannot detach or replace it).
pub fn fence_to_loopback(sock: BorrowedFd<'_>) -> io::Result<()> {
    let mut prog = loopback_only();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: `fprog` points to `prog`, alive for the call; the kernel copies the program.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LOCK_FILTER,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
    with_addr(sock, addr, libc::connect)
}
