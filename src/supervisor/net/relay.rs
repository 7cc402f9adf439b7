//! guard's DNS relay: UDP and TCP sockets on loopback (127.0.0.1, and ::1 where there is one)
//! that the sandbox's connects to nameservers are connected to instead ([`super::sock`]).
//! Each query that arrives is parsed, judged by its question name (a `decision` event with
//! syscall `relay`), answered REFUSED when the policy refuses the name, and otherwise
//! forwarded, normalised, to the nameserver the caller connected to; the addresses in the
//! answer become addresses its host rules allow. Only sockets guard connected here are served
//! (they are known by their local address); anything else is dropped.
//!
//! One thread polls the sockets; each query (UDP) or connection (TCP) is handled on its own
//! thread, bounded, so a slow nameserver holds up only its own callers.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::audit;
use crate::dns::{Answer, Query, RCODE_REFUSED, RCODE_SERVFAIL};
use crate::policy::{self, Action, NetAddr, Op, Request, Verdict};

use super::upstream;
use super::NetState;

/// Clients the relay remembers (sockets connected to it), oldest forgotten first.
const CLIENTS_MAX: usize = 4096;
/// Queries and connections handled at once; beyond, a query is dropped (the caller retries).
const HANDLERS_MAX: usize = 64;
/// How long a TCP client may stay idle between queries.
const IDLE: Duration = Duration::from_secs(30);

static HANDLERS: AtomicUsize = AtomicUsize::new(0);

/// A socket guard connected to the relay: the nameserver it meant, and who connected it.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    pub upstream: SocketAddr,
    pub pid: u32,
}

/// The relay's clients by local address.
#[derive(Debug, Default)]
pub struct Clients {
    map: HashMap<SocketAddr, Client>,
    order: VecDeque<SocketAddr>,
}

fn canonical(sa: SocketAddr) -> SocketAddr {
    SocketAddr::new(sa.ip().to_canonical(), sa.port())
}

impl NetState {
    pub(super) fn register(&self, local: SocketAddr, c: Client) {
        let mut clients = super::super::lock(&self.clients);
        let key = canonical(local);
        if clients.map.insert(key, c).is_none() {
            clients.order.push_back(key);
        }
        while clients.order.len() > CLIENTS_MAX {
            if let Some(old) = clients.order.pop_front() {
                clients.map.remove(&old);
            }
        }
    }

    fn client(&self, from: SocketAddr) -> Option<Client> {
        super::super::lock(&self.clients)
            .map
            .get(&canonical(from))
            .copied()
    }
}

/// Where the relay listens.
#[derive(Debug)]
pub struct Relay {
    udp4: SocketAddr,
    tcp4: SocketAddr,
    udp6: Option<SocketAddr>,
    tcp6: Option<SocketAddr>,
}

impl Relay {
    /// The relay address a socket of `domain` connects to.
    pub fn target(&self, stream: bool, domain: i32) -> Option<SocketAddr> {
        let (v4, v6) = if stream {
            (self.tcp4, self.tcp6)
        } else {
            (self.udp4, self.udp6)
        };
        Some(if domain == libc::AF_INET6 {
            v6.unwrap_or(v4)
        } else {
            v4
        })
    }
}

/// Open the relay's sockets and start its thread.
pub fn start(state: Arc<NetState>) -> io::Result<Relay> {
    let udp4 = UdpSocket::bind("127.0.0.1:0")?;
    let tcp4 = TcpListener::bind("127.0.0.1:0")?;
    let udp6 = UdpSocket::bind("[::1]:0").ok();
    let tcp6 = TcpListener::bind("[::1]:0").ok();
    let relay = Relay {
        udp4: udp4.local_addr()?,
        tcp4: tcp4.local_addr()?,
        udp6: udp6.as_ref().and_then(|s| s.local_addr().ok()),
        tcp6: tcp6.as_ref().and_then(|s| s.local_addr().ok()),
    };
    let udps: Vec<UdpSocket> = [Some(udp4), udp6].into_iter().flatten().collect();
    let tcps: Vec<TcpListener> = [Some(tcp4), tcp6].into_iter().flatten().collect();
    for s in &udps {
        s.set_nonblocking(true)?;
    }
    for s in &tcps {
        s.set_nonblocking(true)?;
    }
    std::thread::Builder::new()
        .name("guard-dns-relay".into())
        .spawn(move || serve(&state, &udps, &tcps))?;
    Ok(relay)
}

fn serve(state: &Arc<NetState>, udps: &[UdpSocket], tcps: &[TcpListener]) {
    let mut buf = vec![0u8; 65535];
    while !state.stop.load(Ordering::Relaxed) {
        let mut fds: Vec<PollFd<'_>> = udps
            .iter()
            .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
            .chain(
                tcps.iter()
                    .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN)),
            )
            .collect();
        if poll(&mut fds, PollTimeout::from(200u16)).unwrap_or(0) <= 0 {
            continue;
        }
        for s in udps {
            while let Ok((len, from)) = s.recv_from(&mut buf) {
                let Some(client) = state.client(from) else {
                    continue;
                };
                let (Ok(reply_sock), msg) = (s.try_clone(), buf[..len].to_vec()) else {
                    continue;
                };
                let state = Arc::clone(state);
                spawn_handler(move || {
                    if let Some(reply) = relay_one(&state, client, &msg, false) {
                        let _ = reply_sock.send_to(&reply, from);
                    }
                });
            }
        }
        for l in tcps {
            while let Ok((conn, from)) = l.accept() {
                let Some(client) = state.client(from) else {
                    continue;
                };
                let state = Arc::clone(state);
                spawn_handler(move || serve_stream(&state, client, conn));
            }
        }
    }
}

/// Run `f` on a thread of its own, unless too many are running already (then drop the work:
/// the caller's resolver times out and retries).
fn spawn_handler(f: impl FnOnce() + Send + 'static) {
    if HANDLERS.fetch_add(1, Ordering::Relaxed) >= HANDLERS_MAX {
        HANDLERS.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("guard-dns-query".into())
        .spawn(move || {
            f();
            HANDLERS.fetch_sub(1, Ordering::Relaxed);
        });
    if spawned.is_err() {
        HANDLERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Queries over one TCP connection, until the client closes it or stays idle.
fn serve_stream(state: &Arc<NetState>, client: Client, mut conn: TcpStream) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(IDLE));
    while let Ok(msg) = upstream::read_framed(&mut conn) {
        let Some(reply) = relay_one(state, client, &msg, true) else {
            return;
        };
        if upstream::write_framed(&mut conn, &reply).is_err() {
            return;
        }
    }
}

/// Judge one query from `client`, record the decision, and return the reply to give it:
/// the nameserver's, REFUSED, or SERVFAIL when the nameserver did not answer. `None` for a
/// message that is not a query (nothing is sent back).
fn relay_one(state: &NetState, client: Client, msg: &[u8], stream: bool) -> Option<Vec<u8>> {
    let start = Instant::now();
    let query = Query::parse(msg);
    let ns = NetAddr::Inet(client.upstream);
    let name = query.as_ref().ok().map(|q| q.name.clone());
    let verdict = policy::decide(
        &state.policy(),
        &Request {
            addr: Some(&ns),
            name: name.as_deref(),
            ..Request::new(Op::Dns)
        },
    );
    let verdict = match (&query, verdict) {
        (Err(e), v) if v.action == Action::Deny => Verdict {
            reason: Some(format!("not a DNS query guard can read: {e}")),
            ..v
        },
        (_, v) => v,
    };
    let allowed = matches!(verdict.action, Action::Allow | Action::Risky);
    let reply = match &query {
        Ok(q) if allowed => {
            let wire = q.to_wire();
            let got = if stream {
                upstream::exchange_tcp(client.upstream, &wire)
            } else {
                upstream::exchange_udp(client.upstream, &wire)
            };
            match got {
                Ok(reply) => {
                    if let Ok(a) = Answer::parse(&reply) {
                        if a.rcode == 0 {
                            state.learn(&q.name, &a.addrs);
                        }
                    }
                    Some(reply)
                }
                Err(_) => Some(q.refused(RCODE_SERVFAIL)),
            }
        }
        Ok(q) => Some(q.refused(RCODE_REFUSED)),
        Err(_) => None,
    };
    record(state, client, name, &ns, verdict, start);
    reply
}

/// One `decision` event for a query judged at the relay.
fn record(
    state: &NetState,
    client: Client,
    name: Option<String>,
    ns: &NetAddr,
    verdict: Verdict,
    start: Instant,
) {
    let comm = crate::sys::process::read_proc(format!("/proc/{}/comm", client.pid))
        .map(|mut b| {
            while b.last() == Some(&b'\n') {
                b.pop();
            }
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(b)
        })
        .unwrap_or_default();
    let exe = std::fs::read_link(format!("/proc/{}/exe", client.pid)).ok();
    let seq = state.seq.fetch_add(1, Ordering::Relaxed) + 1;
    state.audit.decision(audit::Decision {
        seq,
        pid: client.pid,
        comm: comm.into(),
        exe: exe.map(Into::into),
        syscall: "relay".into(),
        op: Op::Dns.as_str().into(),
        path: None,
        path2: None,
        argv: None,
        addr: Some(super::super::record::format_addr(ns)),
        name,
        cwd: None,
        verdict: match verdict.action {
            Action::Allow => audit::Verdict::Allow,
            Action::Deny => audit::Verdict::Deny,
            Action::Risky => audit::Verdict::Risky,
            Action::Kill => audit::Verdict::Kill,
        },
        errno: (verdict.errno != 0).then(|| audit::errno_name(verdict.errno)),
        rule: verdict.rule.to_string(),
        reason: verdict.reason,
        latency_us: start.elapsed().as_micros() as u64,
    });
}
