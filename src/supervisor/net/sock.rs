//! bind, listen, and connects to a nameserver.
//!
//! A bind of an inet address is judged and performed on the duplicate of the socket; a unix
//! or netlink bind is continued (see the table in [`super`]). listen is judged by the address
//! the socket is bound to, or by the wildcard address when it is not bound yet (listen then
//! binds it there), and performed on the duplicate, so a descriptor swapped in meanwhile is
//! never the one that listens.
//!
//! A UDP or TCP connect to port 53 is connected to guard's DNS relay instead of the nameserver
//! (the relay forwards each query it judges there), so whatever the program writes on that
//! socket, with any system call, is a query guard reads.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use crate::policy::{NetAddr, Op};
use crate::sys::net::{connect_raw, sockname_raw, sockopt_int};
use crate::sys::Notif;

use super::super::decode::Failure;
use super::super::emulate::Outcome;
use super::super::read::Memory;
use super::super::resolve::{Act, Resolution, Resolved};
use super::super::sockaddr::decode_sockaddr;
use super::relay::{Client, Relay};
use super::send::duplicate;
use super::{NetAct, NetState};

/// A connect to a nameserver, to be made to the relay.
#[derive(Debug)]
pub struct ConnectDns {
    sock: OwnedFd,
    upstream: SocketAddr,
    stream: bool,
    domain: i32,
}

/// The raw `struct sockaddr` bytes of `sa` for a socket of `domain` (an IPv4 address becomes
/// IPv4-mapped for an AF_INET6 socket).
pub fn sockaddr_bytes(sa: SocketAddr, domain: i32) -> Vec<u8> {
    let v6 = |ip: Ipv6Addr, port: u16| {
        let mut b = vec![0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[8..24].copy_from_slice(&ip.octets());
        b
    };
    match (sa.ip(), domain) {
        (IpAddr::V4(ip), libc::AF_INET6) => v6(ip.to_ipv6_mapped(), sa.port()),
        (IpAddr::V4(ip), _) => {
            let mut b = vec![0u8; 16];
            b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b[2..4].copy_from_slice(&sa.port().to_be_bytes());
            b[4..8].copy_from_slice(&ip.octets());
            b
        }
        (IpAddr::V6(ip), _) => v6(ip, sa.port()),
    }
}

/// Resolve bind(`sock`, `raw`) by the caller of `n`.
pub fn resolve_bind(
    n: &Notif,
    syscall: &'static str,
    sock: i32,
    raw: Vec<u8>,
) -> Result<Resolution, Failure> {
    let addr = decode_sockaddr(&raw, n.pid)
        .map_err(|e| Failure::undecodable(syscall, &e, "bad socket address"))?;
    let act = if let NetAddr::Inet(at) = addr {
        let (_, dup, _) = duplicate(n.pid, sock)
            .map_err(|e| Failure::unresolved(syscall, &e, "not a socket of the caller"))?;
        Act::Net(Box::new(NetAct::Bind {
            sock: dup,
            addr: raw,
            at,
        }))
    } else {
        Act::Continue
    };
    let mut r = Resolved::new(syscall, Op::Bind, act);
    r.addr = Some(addr);
    Ok(Resolution::Judge(Box::new(r)))
}

/// EADDRNOTAVAIL when a bind the policy refuses would fail so anyway: `act` binds an address
/// that is none of this machine's (`1.1.1.1`), and the caller's socket may not bind a foreign
/// one (IP_FREEBIND, IP_TRANSPARENT). Asked of a socket of guard's own, of the same family and
/// type, bound to that address on port 0 (no port is taken, nothing is sent). `None` when the
/// address is bindable or that cannot be told: the refusal stands.
pub fn bind_fails_anyway(act: &NetAct) -> Option<i32> {
    use nix::sys::socket::{self, sockopt, AddressFamily, SockFlag};
    let NetAct::Bind { sock, addr, at } = act else {
        return None;
    };
    if at.ip().is_unspecified() {
        return None;
    }
    // Options that let a socket bind an address the machine does not have (IP_FREEBIND and
    // IP_TRANSPARENT apply to IPv6 sockets too); one that cannot be read counts as set.
    let foreign_ok = [
        (libc::IPPROTO_IP, libc::IP_FREEBIND),
        (libc::IPPROTO_IP, libc::IP_TRANSPARENT),
        (libc::IPPROTO_IPV6, libc::IPV6_FREEBIND),
        (libc::IPPROTO_IPV6, libc::IPV6_TRANSPARENT),
    ];
    let v6 = at.is_ipv6();
    let set = foreign_ok
        .iter()
        .filter(|(level, _)| v6 || *level == libc::IPPROTO_IP)
        .any(|&(level, opt)| {
            !matches!(
                crate::sys::net::sockopt_int_at(sock.as_fd(), level, opt),
                Ok(0)
            )
        });
    if set {
        return None;
    }
    let family = match at {
        std::net::SocketAddr::V4(_) => AddressFamily::Inet,
        std::net::SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let kind = socket::getsockopt(sock, sockopt::SockType).ok()?;
    let scratch = socket::socket(family, kind, SockFlag::SOCK_CLOEXEC, None).ok()?;
    // The caller's address as it gave it (an IPv6 scope included), on port 0: the port is
    // the same two bytes in `sockaddr_in` and `sockaddr_in6`.
    let mut probe = addr.clone();
    probe.get_mut(2..4)?.fill(0);
    match crate::sys::net::bind_raw(scratch.as_fd(), &probe) {
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Some(libc::EADDRNOTAVAIL),
        _ => None,
    }
}

/// Resolve listen(`sock`, `backlog`) by the caller of `n`.
pub fn resolve_listen(
    n: &Notif,
    syscall: &'static str,
    sock: i32,
    backlog: i32,
) -> Result<Resolution, Failure> {
    let kernel = |e: io::Error| Failure::unresolved(syscall, &e, "not a socket of the caller");
    let (_, dup, _) = duplicate(n.pid, sock).map_err(kernel)?;
    let domain = sockopt_int(dup.as_fd(), libc::SO_DOMAIN).map_err(kernel)?;
    let bound = sockname_raw(dup.as_fd())
        .ok()
        .and_then(|raw| decode_sockaddr(&raw, n.pid).ok())
        .unwrap_or(NetAddr::Unspecified);
    let addr = match (bound, domain) {
        // Not bound yet: listen binds the wildcard address, on a port of the kernel's choice.
        (NetAddr::Inet(sa), libc::AF_INET | libc::AF_INET6) if sa.port() == 0 => {
            let any = if domain == libc::AF_INET {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            } else {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            };
            NetAddr::Inet(SocketAddr::new(any, 0))
        }
        (NetAddr::Unspecified, libc::AF_INET) => {
            NetAddr::Inet(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
        }
        (NetAddr::Unspecified, libc::AF_INET6) => {
            NetAddr::Inet(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0))
        }
        (NetAddr::Unspecified, d) if d != libc::AF_UNIX => NetAddr::Other(d as u16),
        (a, _) => a,
    };
    let autobind = match &addr {
        NetAddr::Inet(sa) if sa.port() == 0 && sa.ip().is_unspecified() => Some(*sa),
        _ => None,
    };
    let mut r = Resolved::new(
        syscall,
        Op::Bind,
        Act::Net(Box::new(NetAct::Listen {
            sock: dup,
            backlog,
            autobind,
        })),
    );
    r.addr = Some(addr);
    Ok(Resolution::Judge(Box::new(r)))
}

/// The act for connect(`sock`, nameserver `ns`): to the relay when the socket is a UDP or TCP
/// one; `None` for any other socket (it is connected as it asked).
pub fn dns_connect(pid: u32, sock: i32, ns: SocketAddr) -> Option<NetAct> {
    let (_, dup, stype) = duplicate(pid, sock).ok()?;
    let domain = sockopt_int(dup.as_fd(), libc::SO_DOMAIN).ok()?;
    let stream = match stype {
        libc::SOCK_STREAM => true,
        libc::SOCK_DGRAM => false,
        _ => return None,
    };
    if !matches!(domain, libc::AF_INET | libc::AF_INET6) {
        return None;
    }
    Some(NetAct::ConnectDns(Box::new(ConnectDns {
        sock: dup,
        upstream: ns,
        stream,
        domain,
    })))
}

/// Connect the caller's socket to the relay, and tell the relay which nameserver the caller
/// meant, keyed by the socket's local address. The relay must know the socket before the
/// connect: over loopback a TCP handshake completes inside connect(), and the relay may
/// accept the connection before connect returns. So an unbound socket is first bound to the
/// loopback address the connect would have chosen.
pub fn connect_to_relay(
    state: &Arc<NetState>,
    relay: &Relay,
    n: &Notif,
    c: &ConnectDns,
) -> Outcome {
    let Some(target) = relay.target(c.stream, c.domain) else {
        return Outcome::Failed(libc::ENETUNREACH);
    };
    let local = match local_address(c, target) {
        Ok(l) => l,
        Err(e) => return Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    state.register(
        local,
        Client {
            upstream: c.upstream,
            pid: n.pid,
        },
    );
    match connect_raw(c.sock.as_fd(), &sockaddr_bytes(target, c.domain)) {
        Ok(()) => Outcome::Done(0),
        Err(e) => Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    }
}

/// The local address `c`'s socket will have once connected to `target`: its bound address
/// (a wildcard address stands for the loopback one the connect picks), or, when it is not
/// bound, the one guard binds it to now.
fn local_address(c: &ConnectDns, target: SocketAddr) -> io::Result<SocketAddr> {
    let bound = sockname_raw(c.sock.as_fd())
        .ok()
        .and_then(|raw| decode_sockaddr(&raw, 0).ok());
    let loopback = target.ip();
    match bound {
        Some(NetAddr::Inet(sa)) if sa.port() != 0 => Ok(if sa.ip().is_unspecified() {
            SocketAddr::new(loopback, sa.port())
        } else {
            sa
        }),
        _ => {
            crate::sys::net::bind_raw(
                c.sock.as_fd(),
                &sockaddr_bytes(SocketAddr::new(loopback, 0), c.domain),
            )?;
            match sockname_raw(c.sock.as_fd()).and_then(|raw| decode_sockaddr(&raw, 0)) {
                Ok(NetAddr::Inet(sa)) => Ok(sa),
                Ok(_) => Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT)),
                Err(e) => Err(e),
            }
        }
    }
}

/// `mem`'s bind address: the resolve stage's entry for bind.
pub fn bind_address(
    mem: &mut Memory,
    syscall: &'static str,
    addr: super::super::decode::BlockPtr,
) -> Result<Vec<u8>, Failure> {
    mem.block(addr)
        .map_err(|e| Failure::undecodable(syscall, &e, "cannot read the address"))
}
