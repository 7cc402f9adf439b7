//! sendto, sendmsg and sendmmsg: resolved into what the policy judges (each destination, and
//! the question of a DNS query to port 53) and performed by guard on a duplicate of the
//! caller's socket with the payload copied once.
//!
//! Performing a send for the caller: guard always sends with MSG_NOSIGNAL (a broken pipe must
//! not signal guard) and raises SIGPIPE on the calling thread itself when the caller did not
//! ask for MSG_NOSIGNAL; descriptors passed with SCM_RIGHTS are duplicated from the caller
//! and sent as guard's; SCM_CREDENTIALS are passed on only when they are the caller's own (the
//! kernel then checks them against guard, which must be allowed to claim them). A blocking
//! send that cannot finish at once (a full socket buffer, a Fast Open connect) finishes on a
//! thread that answers the caller, so no supervisor worker waits on the network.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::dns::Query;
use crate::policy::{NetAddr, Op};
use crate::sys::net::{sendmmsg_raw, sendmsg_raw, Message};
use crate::sys::Notif;

use super::super::decode::{Args, Call, Failure};
use super::super::emulate::Outcome;
use super::super::read::Memory;
use super::super::resolve::{Act, Resolution, Resolved};
use super::super::sockaddr::{absolute_unix, decode_sockaddr};
use super::msg::{self, Msg, MMSGHDR_LEN};
use super::{upstream, Check, NetAct, NetState};

/// Sends now finishing on threads; beyond this, a blocking send is answered EAGAIN.
static SEND_WORKERS: AtomicUsize = AtomicUsize::new(0);
const MAX_SEND_WORKERS: usize = 64;

/// Which call made the send (what the answer and the caller's memory must look like).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// sendto or sendmsg: one message, the answer is the bytes sent.
    One,
    /// sendmmsg: the answer is the messages sent, and each one's `msg_len` is written back to
    /// the caller's vector at `vec`.
    Many { vec: u64 },
}

/// A send, ready to be performed.
#[derive(Debug)]
pub struct Send {
    sock: OwnedFd,
    kind: Kind,
    flags: i32,
    msgs: Vec<Msg>,
    stream: bool,
    /// The caller's socket is non-blocking, or it asked for MSG_DONTWAIT.
    nonblocking: bool,
    /// Descriptors passed with SCM_RIGHTS, duplicated from the caller; alive until sent.
    fds: Vec<OwnedFd>,
    /// A DNS query (to this nameserver) whose answer guard learns first, by asking itself.
    lookup: Option<(SocketAddr, Query)>,
}

impl Send {
    fn try_clone(&self) -> io::Result<Send> {
        Ok(Send {
            sock: self.sock.try_clone()?,
            kind: self.kind,
            flags: self.flags,
            msgs: self.msgs.clone(),
            stream: self.stream,
            nonblocking: self.nonblocking,
            fds: self
                .fds
                .iter()
                .map(OwnedFd::try_clone)
                .collect::<io::Result<_>>()?,
            lookup: self.lookup.clone(),
        })
    }
}

/// The caller's socket `sock`, duplicated, with the caller's pidfd and the socket's type.
pub(super) fn duplicate(pid: u32, sock: i32) -> io::Result<(OwnedFd, OwnedFd, i32)> {
    let pidfd = crate::sys::process::pidfd_for_caller(pid)
        .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    let dup = crate::sys::process::pidfd_getfd(pidfd.as_fd(), sock)
        .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    let stype = crate::sys::net::sockopt_int(dup.as_fd(), libc::SO_TYPE)?;
    Ok((pidfd, dup, stype))
}

/// The numbers of a `/proc/PID/status` line (`Uid:`: real, effective, saved, filesystem).
fn status_field(pid: u32, key: &str) -> Option<Vec<u32>> {
    let text = crate::sys::process::read_proc_text(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix(key))?;
    Some(
        line.split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect(),
    )
}

/// The control messages `control` of the caller `pid`, for guard to send: SCM_RIGHTS
/// descriptors duplicated into guard (returned, to keep them open), SCM_CREDENTIALS checked to
/// be the caller's own. Other control messages are passed as they are.
fn translate_control(
    pid: u32,
    pidfd: &OwnedFd,
    control: &[u8],
) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    const HDR: usize = 16;
    let mut out = control.to_vec();
    let mut fds = Vec::new();
    let mut at = 0usize;
    while at + HDR <= out.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&out[at..at + 8]);
        let len = u64::from_ne_bytes(w) as usize;
        if len < HDR || at + len > out.len() {
            // The kernel refuses what it cannot parse; let it (EINVAL), on guard's copy.
            break;
        }
        let level = i32::from_ne_bytes(out[at + 8..at + 12].try_into().unwrap_or([0; 4]));
        let ctype = i32::from_ne_bytes(out[at + 12..at + 16].try_into().unwrap_or([0; 4]));
        if level == libc::SOL_SOCKET && ctype == libc::SCM_RIGHTS {
            for slot in out[at + HDR..at + len].chunks_exact_mut(4) {
                let theirs = i32::from_ne_bytes(slot.try_into().unwrap_or([0xff; 4]));
                let ours = crate::sys::process::pidfd_getfd(pidfd.as_fd(), theirs)
                    .map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
                slot.copy_from_slice(&ours.as_raw_fd().to_ne_bytes());
                fds.push(ours);
            }
        } else if level == libc::SOL_SOCKET && ctype == libc::SCM_CREDENTIALS {
            let field = |i: usize| {
                u32::from_ne_bytes(
                    out.get(at + HDR + 4 * i..at + HDR + 4 * i + 4)
                        .and_then(|b| b.try_into().ok())
                        .unwrap_or([0xff; 4]),
                )
            };
            let (cpid, uid, gid) = (field(0), field(1), field(2));
            let own = |key: &str, v: u32| {
                status_field(pid, key).is_some_and(|ids| ids.iter().take(3).any(|&i| i == v))
            };
            if Some(cpid) != crate::sys::process::tgid_of(pid).ok()
                || !own("Uid:", uid)
                || !own("Gid:", gid)
            {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
        }
        at += (len + 7) & !7;
    }
    Ok((out, fds))
}

/// Resolve a send: what the policy judges, and the send to perform. A send without any
/// destination has nothing to judge (its socket's peer was judged when it connected) and
/// comes back as [`Resolution::Carry`].
pub fn resolve(n: &Notif, call: &Call, mut mem: Memory) -> Result<Resolution, Failure> {
    let name = call.syscall;
    let kernel = |e: io::Error, what: &str| Failure::unresolved(name, &e, what);
    let (sock, flags) = match call.args {
        Args::SendTo { sock, flags, .. }
        | Args::SendMsg { sock, flags, .. }
        | Args::SendMmsg { sock, flags, .. } => (sock, flags),
        _ => {
            return Err(Failure::undecodable(
                name,
                &io::Error::from_raw_os_error(libc::ENOSYS),
                "not a send",
            ))
        }
    };
    let (pidfd, dup, stype) =
        duplicate(n.pid, sock).map_err(|e| kernel(e, "not a socket of the caller"))?;
    let (kind, mut msgs) = match call.args {
        Args::SendTo { buf, len, addr, .. } => {
            let payload = if buf.len == 0 {
                Vec::new()
            } else {
                mem.block(buf)
                    .map_err(|e| kernel(e, "cannot read the payload"))?
            };
            let dest = addr
                .map(|a| mem.block(a))
                .transpose()
                .map_err(|e| kernel(e, "cannot read the address"))?;
            let m = Msg {
                name: dest,
                payload,
                asked: len,
                control: Vec::new(),
            };
            (Kind::One, vec![m])
        }
        Args::SendMsg { msg, .. } => {
            let h = mem
                .block(msg)
                .map_err(|e| kernel(e, "cannot read the message header"))?;
            let msgs =
                msg::read_msgs(n.pid, &[&h]).map_err(|e| kernel(e, "cannot read the message"))?;
            (Kind::One, msgs)
        }
        Args::SendMmsg { vec, vlen, .. } => {
            let msgs = msg::read_mmsg(n.pid, vec, vlen)
                .map_err(|e| kernel(e, "cannot read the messages"))?;
            (Kind::Many { vec }, msgs)
        }
        _ => unreachable!("matched above"),
    };
    let mut fds = Vec::new();
    for m in &mut msgs {
        if !m.control.is_empty() {
            let (control, passed) = translate_control(n.pid, &pidfd, &m.control)
                .map_err(|e| kernel(e, "cannot pass the control messages"))?;
            m.control = control;
            fds.extend(passed);
        }
    }
    let stream = stype == libc::SOCK_STREAM;
    let datagram = matches!(stype, libc::SOCK_DGRAM | libc::SOCK_RAW);
    let nonblocking = flags & libc::MSG_DONTWAIT != 0
        || nix::fcntl::fcntl(dup.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .is_ok_and(|fl| fl & libc::O_NONBLOCK != 0);

    // Each destination, decoded; a DNS query to port 53 is judged by its question.
    let mut checks: Vec<Check> = Vec::new();
    let mut lookup = None;
    let mut tfo_to_nameserver = false;
    for m in &mut msgs {
        let Some(raw) = &m.name else { continue };
        let addr = decode_sockaddr(raw, n.pid).map_err(|e| kernel(e, "bad socket address"))?;
        m.name = Some(absolute_unix(raw, &addr));
        let check = match &addr {
            NetAddr::Inet(sa) if sa.port() == 53 && datagram => {
                let query = Query::parse(&m.payload).ok();
                if let Some(q) = &query {
                    m.payload = q.to_wire();
                    m.asked = m.payload.len();
                    lookup.get_or_insert((*sa, q.clone()));
                }
                Check {
                    op: Op::Dns,
                    addr,
                    name: query.map(|q| q.name),
                }
            }
            NetAddr::Inet(sa) if sa.port() == 53 && stream => {
                tfo_to_nameserver = true;
                Check {
                    op: Op::Connect,
                    addr,
                    name: None,
                }
            }
            _ => Check {
                op: Op::Connect,
                addr,
                name: None,
            },
        };
        let seen = checks
            .iter()
            .any(|c| c.addr == check.addr && c.name == check.name);
        if !seen {
            checks.push(check);
        }
    }
    let send = Send {
        sock: dup,
        kind,
        flags,
        msgs,
        stream,
        nonblocking,
        fds,
        lookup,
    };
    if checks.is_empty() {
        return Ok(Resolution::Carry(Box::new(NetAct::Send(Box::new(send)))));
    }
    let first = checks.remove(0);
    let act = if tfo_to_nameserver {
        // A stream to a nameserver must reach guard's relay, which only connect() can
        // arrange: EOPNOTSUPP is what a kernel without Fast Open answers, and callers then
        // connect.
        NetAct::Fail(libc::EOPNOTSUPP)
    } else {
        NetAct::Send(Box::new(send))
    };
    let mut r = Resolved::new(name, first.op, Act::Net(Box::new(act)));
    r.addr = Some(first.addr);
    r.name = first.name;
    r.more = checks;
    Ok(Resolution::Judge(Box::new(r)))
}

/// How far a send got.
struct Sent {
    /// Bytes (one message) or messages (sendmmsg) sent so far.
    count: usize,
    /// For a single message: bytes of its payload sent so far.
    offset: usize,
    /// For sendmmsg: the next message to send.
    next: usize,
}

/// One attempt from `at`, with `flags` (always MSG_NOSIGNAL). `Ok(true)`: all sent.
fn attempt(n: &Notif, s: &Send, at: &mut Sent, flags: i32) -> io::Result<bool> {
    match s.kind {
        Kind::One => {
            let m = &s.msgs[0];
            if !s.stream && m.asked > m.payload.len() {
                return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
            }
            let sent = sendmsg_raw(
                s.sock.as_fd(),
                &Message {
                    name: m.name.as_deref(),
                    payload: &m.payload[at.offset..],
                    // Control data goes with the first bytes only.
                    control: if at.offset == 0 { &m.control } else { &[] },
                },
                flags,
            )?;
            at.offset += sent;
            at.count = at.offset;
            Ok(!s.stream || at.offset >= m.payload.len())
        }
        Kind::Many { vec } => {
            let rest: Vec<Message<'_>> = s.msgs[at.next..]
                .iter()
                .map(|m| Message {
                    name: m.name.as_deref(),
                    payload: &m.payload,
                    control: &m.control,
                })
                .collect();
            if rest.is_empty() {
                return Ok(true);
            }
            let lens = sendmmsg_raw(s.sock.as_fd(), &rest, flags)?;
            write_back(n.pid, vec, at.next, &lens);
            at.next += lens.len();
            at.count = at.next;
            Ok(at.next >= s.msgs.len())
        }
    }
}

/// Write each sent message's `msg_len` into the caller's `struct mmsghdr` vector, as the
/// kernel does.
fn write_back(pid: u32, vec: u64, first: usize, lens: &[u32]) {
    use nix::sys::uio::{process_vm_writev, RemoteIoVec};
    for (i, len) in lens.iter().enumerate() {
        let at = vec as usize + (first + i) * MMSGHDR_LEN + crate::supervisor::decode::MSGHDR_LEN;
        let bytes = len.to_ne_bytes();
        let _ = process_vm_writev(
            nix::unistd::Pid::from_raw(pid as i32),
            &[io::IoSlice::new(&bytes)],
            &[RemoteIoVec { base: at, len: 4 }],
        );
    }
}

/// The answer for a send that got as far as `at` and then ended with `end`.
fn settle(s: &Send, at: &Sent, end: io::Result<()>) -> Outcome {
    match end {
        Ok(()) => Outcome::Done(at.count as i64),
        // Something was sent: the caller learns how much; the error comes on its next call.
        Err(_) if at.count > 0 => Outcome::Done(at.count as i64),
        Err(e) => {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            if errno == libc::EPIPE && s.flags & libc::MSG_NOSIGNAL == 0 {
                // The kernel raises SIGPIPE on the thread that sent. Raised now, before the
                // answer, the signal would interrupt the caller's wait and restart the call;
                // so it comes right after (see `pipe_after`).
                return Outcome::Failed(-libc::EPIPE);
            }
            Outcome::Failed(errno)
        }
    }
}

/// Perform `s` for the caller of `n`.
pub fn perform(state: &Arc<NetState>, n: &Notif, s: &Send) -> Outcome {
    let ours = s.flags | libc::MSG_NOSIGNAL;
    let mut at = Sent {
        count: 0,
        offset: 0,
        next: 0,
    };
    let connects = s.stream && s.msgs.iter().any(|m| m.name.is_some());
    if s.lookup.is_none() && (s.nonblocking || !connects) {
        let flags = if s.nonblocking {
            ours
        } else {
            ours | libc::MSG_DONTWAIT
        };
        match attempt(n, s, &mut at, flags) {
            Ok(true) => return finish(state, n, settle(s, &at, Ok(()))),
            Err(e) if s.nonblocking || e.raw_os_error() != Some(libc::EAGAIN) => {
                return finish(state, n, settle(s, &at, Err(e)))
            }
            // Blocking, and it would block (or sent in part): finish on a thread.
            Ok(false) | Err(_) => {}
        }
    }
    if SEND_WORKERS.load(Ordering::Relaxed) >= MAX_SEND_WORKERS {
        return finish(
            state,
            n,
            settle(s, &at, Err(io::Error::from_raw_os_error(libc::EAGAIN))),
        );
    }
    let Ok(owned) = s.try_clone() else {
        return Outcome::Failed(libc::ENOMEM);
    };
    let (state, n) = (Arc::clone(state), *n);
    SEND_WORKERS.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("guard-send".into())
        .spawn(move || {
            if let Some((ns, q)) = &owned.lookup {
                // Learn what the caller is about to be told: ask the nameserver the same
                // question first, so a connect to the answer is allowed when it comes.
                if let Ok(answer) = upstream::lookup(*ns, &q.to_wire()) {
                    state.learn(&q.name, &answer.addrs);
                }
            }
            let mut end = Ok(());
            loop {
                let flags = if owned.nonblocking {
                    ours
                } else {
                    ours & !libc::MSG_DONTWAIT
                };
                match attempt(&n, &owned, &mut at, flags) {
                    Ok(true) => break,
                    Ok(false) => continue,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => {
                        end = Err(e);
                        break;
                    }
                }
            }
            let outcome = settle(&owned, &at, end);
            answer_later(&state, &n, outcome);
            SEND_WORKERS.fetch_sub(1, Ordering::Relaxed);
        });
    match spawned {
        Ok(_) => Outcome::Answered,
        Err(_) => {
            SEND_WORKERS.fetch_sub(1, Ordering::Relaxed);
            Outcome::Failed(libc::EAGAIN)
        }
    }
}

/// The outcome, with a broken pipe's SIGPIPE raised after the answer (see [`settle`]).
fn finish(state: &Arc<NetState>, n: &Notif, outcome: Outcome) -> Outcome {
    if let Outcome::Failed(e) = outcome {
        if e == -libc::EPIPE {
            answer_later(state, n, outcome);
            return Outcome::Answered;
        }
    }
    outcome
}

/// Answer the caller of `n` from here (a send thread, or a broken pipe).
fn answer_later(state: &NetState, n: &Notif, outcome: Outcome) {
    let (val, error, pipe) = match outcome {
        Outcome::Done(v) => (v, 0, false),
        Outcome::Failed(e) if e == -libc::EPIPE => (0, -libc::EPIPE, true),
        Outcome::Failed(e) => (0, -e, false),
        Outcome::Answered | Outcome::Continue => (0, -libc::EIO, false),
    };
    let _ = state.listener.respond(n.id, val, error, false);
    if pipe {
        let tgid = crate::sys::process::tgid_of(n.pid).unwrap_or(n.pid);
        let _ = crate::sys::process::tgkill(tgid, n.pid, libc::SIGPIPE);
    }
}
