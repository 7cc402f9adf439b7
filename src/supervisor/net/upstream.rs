//! guard's own exchanges with a nameserver: forwarding a judged query for the DNS relay, and
//! asking the same question itself to learn the addresses a name resolves to. Each exchange
//! uses a fresh socket of guard's (outside the sandbox), is bounded in time, and takes only a
//! reply with the query's id.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::dns::Answer;

/// How long guard waits for a nameserver.
const TIMEOUT: Duration = Duration::from_secs(3);
/// The largest answer over UDP guard takes.
const UDP_MAX: usize = 65535;

fn timed_out() -> io::Error {
    io::Error::from_raw_os_error(libc::ETIMEDOUT)
}

/// Send `query` (a whole DNS message) to `ns` over UDP and return the reply with its id.
pub fn exchange_udp(ns: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if ns.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let sock = UdpSocket::bind(local)?;
    sock.connect(ns)?;
    sock.send(query)?;
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; UDP_MAX];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        sock.set_read_timeout(Some(left))?;
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(timed_out()),
            Err(e) => return Err(e),
        };
        if n >= 2 && buf[..2] == query[..2] {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

/// Send `query` to `ns` over TCP (a new connection) and return the reply.
pub fn exchange_tcp(ns: SocketAddr, query: &[u8]) -> io::Result<Vec<u8>> {
    let mut conn = TcpStream::connect_timeout(&ns, TIMEOUT)?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    write_framed(&mut conn, query)?;
    read_framed(&mut conn)
}

/// One DNS message over a stream: its length (two bytes, big-endian), then the message.
pub fn write_framed(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let len = u16::try_from(msg.len()).map_err(|_| io::Error::from_raw_os_error(libc::EMSGSIZE))?;
    let mut framed = len.to_be_bytes().to_vec();
    framed.extend_from_slice(msg);
    w.write_all(&framed)
}

/// Read one length-prefixed DNS message from a stream.
pub fn read_framed(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 2];
    r.read_exact(&mut len)?;
    let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
    r.read_exact(&mut msg)?;
    Ok(msg)
}

/// Ask `ns` the question of `query` and return what the answer says: over UDP, then over TCP
/// when the answer was truncated.
pub fn lookup(ns: SocketAddr, query: &[u8]) -> io::Result<Answer> {
    let bad = |e| io::Error::new(io::ErrorKind::InvalidData, e);
    let reply = exchange_udp(ns, query)?;
    let answer = Answer::parse(&reply).map_err(bad)?;
    if !answer.truncated {
        return Ok(answer);
    }
    Answer::parse(&exchange_tcp(ns, query)?).map_err(bad)
}
