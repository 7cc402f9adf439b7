//! Network operations for `tests/it/net.rs`: one way out each (a datagram, a Fast Open
//! connect, a server, a DNS query by hand or through the C library). Each prints one line:
//! `ok ...` (with what came back) or `errno N NAME`.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn failed(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EINPROGRESS => "EINPROGRESS",
        libc::EAGAIN => "EAGAIN",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => "OTHER",
    };
    format!("errno {e} {name}")
}

fn v4(s: &OsString) -> libc::sockaddr_in {
    let addr: SocketAddrV4 = s.to_string_lossy().parse().expect("ipv4:port");
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

const SIN_LEN: u32 = std::mem::size_of::<libc::sockaddr_in>() as u32;

unsafe fn socket(kind: i32) -> OwnedFd {
    let fd = libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0);
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    OwnedFd::from_raw_fd(fd)
}

fn sent(rc: isize) -> String {
    if rc < 0 {
        failed(errno())
    } else {
        format!("ok sent={rc}")
    }
}

/// A DNS query for `name`, type A, class IN, recursion desired.
pub fn query(id: u16, name: &str) -> Vec<u8> {
    let mut m = Vec::new();
    for w in [id, 0x0100, 1, 0, 0, 0] {
        m.extend_from_slice(&w.to_be_bytes());
    }
    for label in name.split('.').filter(|l| !l.is_empty()) {
        m.push(label.len() as u8);
        m.extend_from_slice(label.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&[0, 1, 0, 1]);
    m
}

/// `answer rcode=R addrs=A,B` for a reply (A records only).
fn describe(reply: &[u8]) -> String {
    if reply.len() < 12 {
        return "ok short-reply".into();
    }
    let rcode = reply[3] & 0x0f;
    let ancount = u16::from_be_bytes([reply[6], reply[7]]);
    let mut pos = 12;
    let skip_name = |mut p: usize| -> usize {
        while p < reply.len() {
            let l = reply[p] as usize;
            if l == 0 {
                return p + 1;
            }
            if l & 0xc0 == 0xc0 {
                return p + 2;
            }
            p += 1 + l;
        }
        p
    };
    pos = skip_name(pos) + 4;
    let mut addrs = Vec::new();
    for _ in 0..ancount {
        pos = skip_name(pos);
        if pos + 10 > reply.len() {
            break;
        }
        let rtype = u16::from_be_bytes([reply[pos], reply[pos + 1]]);
        let rdlen = usize::from(u16::from_be_bytes([reply[pos + 8], reply[pos + 9]]));
        let data = reply.get(pos + 10..pos + 10 + rdlen).unwrap_or(&[]);
        if rtype == 1 && data.len() == 4 {
            addrs.push(format!("{}.{}.{}.{}", data[0], data[1], data[2], data[3]));
        }
        pos += 10 + rdlen;
    }
    format!("ok answer rcode={rcode} addrs={}", addrs.join(","))
}

/// Wait up to 3 s for `fd` to be readable.
unsafe fn readable(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    libc::poll(&mut p, 1, 3000) > 0
}

unsafe fn recv_reply(fd: i32) -> String {
    if !readable(fd) {
        return "ok no-answer".into();
    }
    let mut buf = [0u8; 1500];
    let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
    if n < 0 {
        return failed(errno());
    }
    describe(&buf[..n as usize])
}

unsafe fn udp_sendmsg(to: &libc::sockaddr_in, payload: &[u8]) -> String {
    let s = socket(libc::SOCK_DGRAM);
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut _,
        iov_len: payload.len(),
    };
    let mut h: libc::msghdr = std::mem::zeroed();
    h.msg_name = (to as *const libc::sockaddr_in) as *mut _;
    h.msg_namelen = SIN_LEN;
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    sent(libc::sendmsg(s.as_raw_fd(), &h, 0))
}

unsafe fn udp_sendmmsg(to: &libc::sockaddr_in, payload: &[u8]) -> String {
    let s = socket(libc::SOCK_DGRAM);
    let mut iovs = [
        libc::iovec {
            iov_base: payload.as_ptr() as *mut _,
            iov_len: payload.len(),
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut _,
            iov_len: payload.len(),
        },
    ];
    let mut hdrs: [libc::mmsghdr; 2] = std::mem::zeroed();
    for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()) {
        h.msg_hdr.msg_name = (to as *const libc::sockaddr_in) as *mut _;
        h.msg_hdr.msg_namelen = SIN_LEN;
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    let rc = libc::sendmmsg(s.as_raw_fd(), hdrs.as_mut_ptr(), 2, 0);
    if rc < 0 {
        return failed(errno());
    }
    format!("ok sent={rc} lens={},{}", hdrs[0].msg_len, hdrs[1].msg_len)
}

unsafe fn unix_sendto(path: &OsString, payload: &[u8]) -> String {
    let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    let s = OwnedFd::from_raw_fd(fd);
    let mut sun: libc::sockaddr_un = std::mem::zeroed();
    sun.sun_family = libc::AF_UNIX as u16;
    for (d, b) in sun.sun_path.iter_mut().zip(path.as_bytes()) {
        *d = *b as libc::c_char;
    }
    let len = (2 + path.len() + 1) as u32;
    sent(libc::sendto(
        s.as_raw_fd(),
        payload.as_ptr().cast(),
        payload.len(),
        0,
        (&sun as *const libc::sockaddr_un).cast(),
        len,
    ))
}

unsafe fn tfo(to: &libc::sockaddr_in, payload: &[u8]) -> String {
    let s = socket(libc::SOCK_STREAM);
    sent(libc::sendto(
        s.as_raw_fd(),
        payload.as_ptr().cast(),
        payload.len(),
        libc::MSG_FASTOPEN,
        (to as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ))
}

/// Bind and listen at `at`, then wait up to 3 s for one connection.
unsafe fn serve(at: &libc::sockaddr_in) -> String {
    let s = socket(libc::SOCK_STREAM);
    let one: i32 = 1;
    libc::setsockopt(
        s.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_REUSEADDR,
        (&one as *const i32).cast(),
        4,
    );
    if libc::bind(
        s.as_raw_fd(),
        (at as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ) != 0
    {
        return format!("bind {}", failed(errno()));
    }
    if libc::listen(s.as_raw_fd(), 4) != 0 {
        return format!("listen {}", failed(errno()));
    }
    accept_one(s.as_raw_fd())
}

unsafe fn accept_one(fd: i32) -> String {
    println!("listening");
    let _ = std::io::stdout().flush();
    if !readable(fd) {
        return "ok no-connection".into();
    }
    let c = libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut());
    if c < 0 {
        return failed(errno());
    }
    libc::close(c);
    "ok accepted".into()
}

/// listen() on a socket never bound: the kernel binds it to the wildcard address. Prints the
/// port, then waits for one connection like `serve`.
unsafe fn listen_unbound() -> String {
    let s = socket(libc::SOCK_STREAM);
    if libc::listen(s.as_raw_fd(), 4) != 0 {
        return format!("listen {}", failed(errno()));
    }
    let mut sin: libc::sockaddr_in = std::mem::zeroed();
    let mut len = SIN_LEN;
    libc::getsockname(
        s.as_raw_fd(),
        (&mut sin as *mut libc::sockaddr_in).cast(),
        &mut len,
    );
    println!("port {}", u16::from_be(sin.sin_port));
    accept_one(s.as_raw_fd())
}

/// Bind a UDP socket at `at`, then wait up to 3 s for one datagram.
unsafe fn udp_recv(at: &libc::sockaddr_in) -> String {
    let s = socket(libc::SOCK_DGRAM);
    if libc::bind(
        s.as_raw_fd(),
        (at as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ) != 0
    {
        return format!("bind {}", failed(errno()));
    }
    println!("listening");
    let _ = std::io::stdout().flush();
    if !readable(s.as_raw_fd()) {
        return "ok nothing".into();
    }
    let mut buf = [0u8; 64];
    let n = libc::recv(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0);
    format!(
        "ok got {}",
        String::from_utf8_lossy(&buf[..n.max(0) as usize])
    )
}

unsafe fn bind_udp(at: &libc::sockaddr_in) -> String {
    let s = socket(libc::SOCK_DGRAM);
    if libc::bind(
        s.as_raw_fd(),
        (at as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ) != 0
    {
        return failed(errno());
    }
    "ok bound".into()
}

/// A DNS query with sendto on an unconnected socket (musl's way).
unsafe fn dns_sendto(ns: &libc::sockaddr_in, name: &str) -> String {
    let s = socket(libc::SOCK_DGRAM);
    let q = query(0x5151, name);
    let rc = libc::sendto(
        s.as_raw_fd(),
        q.as_ptr().cast(),
        q.len(),
        0,
        (ns as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    );
    if rc < 0 {
        return failed(errno());
    }
    recv_reply(s.as_raw_fd())
}

/// A DNS query with sendto, then a TCP connect to the first address of the answer at `port`.
unsafe fn dns_sendto_connect(ns: &libc::sockaddr_in, name: &str, port: &str) -> String {
    let answer = dns_sendto(ns, name);
    let Some(first) = answer
        .strip_prefix("ok answer rcode=0 addrs=")
        .and_then(|a| a.split(',').next())
        .filter(|a| !a.is_empty())
    else {
        return format!("no address: {answer}");
    };
    let to = v4(&OsString::from(format!("{first}:{port}")));
    let s = socket(libc::SOCK_STREAM);
    if libc::connect(
        s.as_raw_fd(),
        (&to as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ) != 0
    {
        return failed(errno());
    }
    format!("ok connected={first}:{port}")
}

/// A DNS query on a connected UDP socket with write() and read() (Go's way).
unsafe fn dns_write(ns: &libc::sockaddr_in, name: &str) -> String {
    let s = socket(libc::SOCK_DGRAM);
    if libc::connect(
        s.as_raw_fd(),
        (ns as *const libc::sockaddr_in).cast(),
        SIN_LEN,
    ) != 0
    {
        return format!("connect {}", failed(errno()));
    }
    let q = query(0x6262, name);
    if libc::write(s.as_raw_fd(), q.as_ptr().cast(), q.len()) < 0 {
        return failed(errno());
    }
    recv_reply(s.as_raw_fd())
}

/// A DNS query over TCP (connect, then the length-prefixed message with write()).
fn dns_tcp(ns: &OsString, name: &str) -> String {
    let addr: SocketAddr = ns.to_string_lossy().parse().expect("ip:port");
    let mut c = match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3))
    {
        Ok(c) => c,
        Err(e) => return format!("connect {}", failed(e.raw_os_error().unwrap_or(0))),
    };
    let q = query(0x7373, name);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    if let Err(e) = c.write_all(&framed) {
        return failed(e.raw_os_error().unwrap_or(0));
    }
    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(3)));
    let mut len = [0u8; 2];
    if c.read_exact(&mut len).is_err() {
        return "ok no-answer".into();
    }
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    if c.read_exact(&mut reply).is_err() {
        return "ok no-answer".into();
    }
    describe(&reply)
}

/// getaddrinfo through the C library, then (with a port) a TCP connect to the first address.
fn resolve(name: &str, port: Option<u16>) -> String {
    let addrs: Vec<SocketAddr> = match (name, port.unwrap_or(0)).to_socket_addrs() {
        Ok(a) => a.filter(SocketAddr::is_ipv4).collect(),
        Err(e) => return format!("resolve-failed {e}"),
    };
    let list: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
    let Some(first) = addrs.first() else {
        return "resolve-failed no address".into();
    };
    if port.is_none() {
        return format!("ok addrs={}", list.join(","));
    }
    match std::net::TcpStream::connect_timeout(first, std::time::Duration::from_secs(3)) {
        Ok(_) => format!("ok connected={first}"),
        Err(e) => failed(e.raw_os_error().unwrap_or(0)),
    }
}

unsafe fn pair(kind: i32) -> (OwnedFd, OwnedFd) {
    let mut sv = [0i32; 2];
    assert_eq!(
        libc::socketpair(libc::AF_UNIX, kind | libc::SOCK_CLOEXEC, 0, sv.as_mut_ptr()),
        0
    );
    (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1]))
}

/// Pass an open file (`path`) over a unix socket pair with SCM_RIGHTS; `ok same-file` when the
/// descriptor received is the same open file.
unsafe fn pass_fd(path: &OsString) -> String {
    let (a, b) = pair(libc::SOCK_DGRAM);
    let file = std::fs::File::open(path).expect("open the file to pass");
    let fd = file.as_raw_fd();
    let mut cbuf = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: b"f".as_ptr() as *mut _,
        iov_len: 1,
    };
    let mut h: libc::msghdr = std::mem::zeroed();
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    h.msg_control = cbuf.as_mut_ptr().cast();
    h.msg_controllen = libc::CMSG_SPACE(4) as _;
    let c = libc::CMSG_FIRSTHDR(&h);
    (*c).cmsg_level = libc::SOL_SOCKET;
    (*c).cmsg_type = libc::SCM_RIGHTS;
    (*c).cmsg_len = libc::CMSG_LEN(4) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
    if libc::sendmsg(a.as_raw_fd(), &h, 0) != 1 {
        return failed(errno());
    }
    let mut rbuf = [0u64; 8];
    let mut byte = [0u8; 1];
    let mut riov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut r: libc::msghdr = std::mem::zeroed();
    r.msg_iov = &mut riov;
    r.msg_iovlen = 1;
    r.msg_control = rbuf.as_mut_ptr().cast();
    r.msg_controllen = std::mem::size_of_val(&rbuf) as _;
    if libc::recvmsg(b.as_raw_fd(), &mut r, 0) != 1 {
        return failed(errno());
    }
    let rc = libc::CMSG_FIRSTHDR(&r);
    if rc.is_null() || (*rc).cmsg_type != libc::SCM_RIGHTS {
        return "no descriptor arrived".into();
    }
    let got = std::ptr::read_unaligned(libc::CMSG_DATA(rc).cast::<i32>());
    let (mut s1, mut s2): (libc::stat, libc::stat) = (std::mem::zeroed(), std::mem::zeroed());
    libc::fstat(fd, &mut s1);
    libc::fstat(got, &mut s2);
    if (s1.st_dev, s1.st_ino) == (s2.st_dev, s2.st_ino) {
        "ok same-file".into()
    } else {
        "a different file arrived".into()
    }
}

static PIPES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn on_pipe(_: i32) {
    PIPES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// sendmsg on a stream whose peer is gone, without MSG_NOSIGNAL: the kernel raises SIGPIPE on
/// the caller and returns EPIPE. Prints the errno and how many SIGPIPEs arrived.
unsafe fn sigpipe() -> String {
    libc::signal(libc::SIGPIPE, on_pipe as *const () as usize);
    let (a, b) = pair(libc::SOCK_STREAM);
    drop(b);
    let mut iov = libc::iovec {
        iov_base: b"x".as_ptr() as *mut _,
        iov_len: 1,
    };
    let mut h: libc::msghdr = std::mem::zeroed();
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    let rc = libc::sendmsg(a.as_raw_fd(), &h, 0);
    let e = errno();
    // The signal may be delivered right after the call returns.
    for _ in 0..100 {
        if PIPES.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let n = PIPES.load(std::sync::atomic::Ordering::SeqCst);
    if rc < 0 {
        format!("{} sigpipe={n}", failed(e))
    } else {
        format!("sent sigpipe={n}")
    }
}

/// One blocking sendmsg of 1 MiB on a stream pair with a small buffer, while a thread drains
/// the other end after a moment: the call blocks, then sends everything.
unsafe fn blocking_send() -> String {
    let (a, b) = pair(libc::SOCK_STREAM);
    let small: i32 = 4096;
    libc::setsockopt(
        a.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_SNDBUF,
        (&small as *const i32).cast(),
        4,
    );
    let reader = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut total = 0usize;
        let mut buf = vec![0u8; 65536];
        loop {
            let n = libc::read(b.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                return total;
            }
            total += n as usize;
        }
    });
    let payload = vec![b'z'; 1 << 20];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut _,
        iov_len: payload.len(),
    };
    let mut h: libc::msghdr = std::mem::zeroed();
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    let rc = libc::sendmsg(a.as_raw_fd(), &h, 0);
    let e = errno();
    drop(a);
    let got = reader.join().unwrap_or(0);
    if rc < 0 {
        return failed(e);
    }
    format!("ok sent={rc} received={got}")
}

/// Runs a network operation, if `args[0]` names one.
pub fn dispatch(args: &[OsString]) -> Option<String> {
    let op = args.first()?.to_string_lossy().into_owned();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let text = |i: usize| arg(i).to_string_lossy().into_owned();
    let line = unsafe {
        match op.as_str() {
            "udp-sendto" => {
                let to = v4(&arg(1));
                let s = socket(libc::SOCK_DGRAM);
                let p = text(2);
                sent(libc::sendto(
                    s.as_raw_fd(),
                    p.as_ptr().cast(),
                    p.len(),
                    0,
                    (&to as *const libc::sockaddr_in).cast(),
                    SIN_LEN,
                ))
            }
            "udp-sendmsg" => udp_sendmsg(&v4(&arg(1)), text(2).as_bytes()),
            "udp-sendmmsg" => udp_sendmmsg(&v4(&arg(1)), text(2).as_bytes()),
            "unix-sendto" => unix_sendto(&arg(1), text(2).as_bytes()),
            "tfo" => tfo(&v4(&arg(1)), text(2).as_bytes()),
            "serve" => serve(&v4(&arg(1))),
            "listen-unbound" => listen_unbound(),
            "udp-recv" => udp_recv(&v4(&arg(1))),
            "pass-fd" => pass_fd(&arg(1)),
            "sigpipe" => sigpipe(),
            "blocking-send" => blocking_send(),
            "bind-udp" => bind_udp(&v4(&arg(1))),
            "dns-sendto" => dns_sendto(&v4(&arg(1)), &text(2)),
            "dns-write" => dns_write(&v4(&arg(1)), &text(2)),
            "dns-sendto-connect" => dns_sendto_connect(&v4(&arg(1)), &text(2), &text(3)),
            "dns-tcp" => dns_tcp(&arg(1), &text(2)),
            "resolve" => resolve(&text(1), None),
            "resolve-connect" => resolve(&text(1), text(2).parse().ok()),
            _ => return None,
        }
    };
    Some(line)
}
