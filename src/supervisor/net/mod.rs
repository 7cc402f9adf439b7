//! The network calls: every way out of the sandbox is judged and performed by guard on a
//! duplicate of the caller's socket (pidfd_getfd), with its arguments and payload copied once,
//! so a thread that rewrites them, or swaps the descriptor, after the verdict changes nothing.
//!
//! | call | judged | performed |
//! |---|---|---|
//! | sendto with a destination, sendmsg/sendmmsg with `msg_name` | the destination against `net.connect` ([`send`]) | on the duplicate, payload and control copied ([`send`]) |
//! | sendmsg/sendmmsg without `msg_name` | nothing: the peer was judged at connect | on the duplicate (a swapped descriptor or a flipped `msg_name` must not reach the kernel) |
//! | a datagram to port 53 | the question name ([`crate::dns`]) | the normalised query, after guard looked the name up itself to learn the answer |
//! | connect to port 53 (UDP, TCP) | the nameserver | connected to guard's DNS relay instead ([`relay`]), which judges each query |
//! | bind (inet), listen | the local address against `net.bind` ([`sock`]) | on the duplicate |
//! | bind (unix, netlink) | allowed | continued: Landlock's make-socket right bounds unix paths, and what a flipped address could bind is judged again at listen and at every send |
//!
//! [`NetState`] holds what these share with the relay's threads: the policy in force, with
//! the addresses the run learned for host names (start-up lookups and judged DNS answers).

pub(super) mod msg;
pub(super) mod relay;
pub(super) mod send;
pub(super) mod sock;
pub(super) mod upstream;

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use crate::audit::AuditHandle;
use crate::policy::{self, Action, NetAddr, NetTarget, Op, Policy, Request, Verdict};
use crate::sys::{Listener, Notif};

use super::answer::{self, Answer};
use super::emulate::Outcome;
use super::resolve::Resolved;
use super::Core;

/// At most this many addresses are learned for one host entry.
const LEARNED_MAX: usize = 256;

/// The GNU C library from which on its resolver takes a UDP answer by its id and question
/// alone: verified on 2.36 (guard's relay answers glibc's queries there), whose send_dg no
/// longer compares the answer's source with the nameserver's address.
const GLIBC_WITHOUT_SOURCE_CHECK: (u32, u32) = (2, 36);

/// The `RES_OPTIONS` the command gets under `policy`, given the one it would have had
/// (`current`) and the GNU C library of the machine (`glibc`, from guard's own): `use-vc`
/// appended when the policy lets it reach a nameserver and the C library is older than
/// [`GLIBC_WITHOUT_SOURCE_CHECK`]. Older resolvers drop a UDP answer that does not come from
/// the nameserver's own address (`res_ourserver_p`), and guard's relay answers from its own;
/// over TCP there is no such check. `None`: leave the variable as it is.
pub fn resolver_options(
    policy: &Policy,
    current: Option<&std::ffi::OsStr>,
    glibc: Option<(u32, u32)>,
) -> Option<std::ffi::OsString> {
    if glibc.is_none_or(|v| v >= GLIBC_WITHOUT_SOURCE_CHECK) {
        return None;
    }
    let reaches_53 = policy.net.dns
        || policy.net.connect.iter().any(|t| match t {
            NetTarget::Cidr { port, .. } | NetTarget::Host { port, .. } => {
                port.is_none_or(|p| p == 53)
            }
            NetTarget::AnyHost { port } => *port == 53,
            NetTarget::UnixPath(_) | NetTarget::Abstract(_) => false,
        });
    if policy.mode != policy::Mode::Enforce || !reaches_53 {
        return None;
    }
    let mut v = current
        .map(std::ffi::OsStr::to_os_string)
        .unwrap_or_default();
    if !v.is_empty() {
        v.push(" ");
    }
    v.push("use-vc");
    Some(v)
}

/// What the network stage performs for an allowed call.
#[derive(Debug)]
pub enum NetAct {
    /// A send on the caller's socket.
    Send(Box<send::Send>),
    /// bind(2) of an inet socket on its duplicate, to `addr` (decoded: `at`).
    Bind {
        sock: OwnedFd,
        addr: Vec<u8>,
        at: std::net::SocketAddr,
    },
    /// listen(2) on the duplicate; `autobind`: the wildcard address the kernel binds it to
    /// because it is not bound yet.
    Listen {
        sock: OwnedFd,
        backlog: i32,
        autobind: Option<std::net::SocketAddr>,
    },
    /// A connect to nameserver `upstream`, made to guard's DNS relay instead.
    ConnectDns(Box<sock::ConnectDns>),
    /// Allowed by the policy, but guard does not perform it: fail with this errno.
    Fail(i32),
}

/// What the supervisor's workers and the DNS relay's threads share.
pub struct NetState {
    /// The policy in force: replaced (copy on write) when the run learns addresses.
    pub policy: Arc<RwLock<Arc<Policy>>>,
    pub audit: AuditHandle,
    pub seq: Arc<AtomicU64>,
    pub listener: Arc<Listener>,
    /// Set when the run ends: the relay's threads leave.
    pub stop: AtomicBool,
    relay: OnceLock<Option<relay::Relay>>,
    clients: Mutex<relay::Clients>,
}

impl NetState {
    pub fn new(
        policy: Arc<RwLock<Arc<Policy>>>,
        audit: AuditHandle,
        seq: Arc<AtomicU64>,
        listener: Arc<Listener>,
    ) -> NetState {
        NetState {
            policy,
            audit,
            seq,
            listener,
            stop: AtomicBool::new(false),
            relay: OnceLock::new(),
            clients: Mutex::new(relay::Clients::default()),
        }
    }

    pub fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Add `addrs`, the addresses `name` resolved to in an answer guard judged (or looked up
    /// itself), to every host entry covering `name`, in `net.connect` and in the rules.
    /// Bounded per entry; the policy is copied only when something is new.
    pub fn learn(&self, name: &str, addrs: &[IpAddr]) {
        if addrs.is_empty() {
            return;
        }
        let news = |p: &Policy| {
            hosts_of(p).any(|(pattern, have)| {
                policy::name_matches(pattern, name)
                    && have.len() < LEARNED_MAX
                    && addrs.iter().any(|a| !have.contains(a))
            })
        };
        if !news(&self.policy()) {
            return;
        }
        let mut current = self.policy.write().unwrap_or_else(PoisonError::into_inner);
        if !news(&current) {
            return;
        }
        let mut p = (**current).clone();
        let add = |t: &mut NetTarget| {
            if let NetTarget::Host {
                name: pattern,
                addrs: have,
                ..
            } = t
            {
                if policy::name_matches(pattern, name) {
                    for a in addrs {
                        if have.len() < LEARNED_MAX && !have.contains(a) {
                            have.push(*a);
                        }
                    }
                }
            }
        };
        p.net.connect.iter_mut().for_each(add);
        for rule in &mut p.rules {
            rule.addr.iter_mut().for_each(add);
        }
        *current = Arc::new(p);
    }

    /// The relay, started on first use; `None` when it cannot run here.
    fn relay(self: &Arc<Self>) -> Option<&relay::Relay> {
        self.relay
            .get_or_init(|| match relay::start(Arc::clone(self)) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(
                        "cannot start the DNS relay: {e}; connects to nameservers are refused"
                    );
                    None
                }
            })
            .as_ref()
    }
}

/// Every host entry of `p` (in `net.connect` and in rules), with the addresses it has.
fn hosts_of(p: &Policy) -> impl Iterator<Item = (&str, &Vec<IpAddr>)> {
    p.net
        .connect
        .iter()
        .chain(p.rules.iter().flat_map(|r| r.addr.iter()))
        .filter_map(|t| match t {
            NetTarget::Host { name, addrs, .. } => Some((name.as_str(), addrs)),
            _ => None,
        })
}

/// One more thing a call asks the policy besides its main request: another destination of a
/// sendmmsg, or another query in it.
#[derive(Debug, Clone)]
pub struct Check {
    pub op: Op,
    pub addr: NetAddr,
    pub name: Option<String>,
}

/// The verdict on `r` given `first`, the verdict on its main request: the first refusal among
/// its further checks, named in the reason, or `first`.
pub(super) fn judge_more(policy: &Policy, r: &Resolved, first: Verdict) -> Verdict {
    if !matches!(first.action, Action::Allow | Action::Risky) {
        return first;
    }
    for c in &r.more {
        let v = policy::decide(
            policy,
            &Request {
                addr: Some(&c.addr),
                name: c.name.as_deref(),
                ..Request::new(c.op)
            },
        );
        if !matches!(v.action, Action::Allow | Action::Risky) {
            let what = c
                .name
                .clone()
                .unwrap_or_else(|| super::record::format_addr(&c.addr));
            return Verdict {
                reason: Some(match v.reason {
                    Some(why) => format!("{why} (another message of the call: {what})"),
                    None => format!("another message of the call: {what}"),
                }),
                ..v
            };
        }
    }
    first
}

/// Perform `act` for the caller of `n` under `policy`; `Outcome::Answered` when a thread
/// answers later. A socket that is to serve on every address but may serve only loopback
/// ([`Policy::bind_fence`]) gets a locked socket filter first that drops every packet from
/// any other source.
pub(super) fn perform(core: &Core, n: &Notif, act: &NetAct, policy: &Policy) -> Outcome {
    use std::os::fd::AsFd;
    let done = |r: std::io::Result<()>| match r {
        Ok(()) => Outcome::Done(0),
        Err(e) => Outcome::Failed(e.raw_os_error().unwrap_or(libc::EIO)),
    };
    let fence = |sock: &OwnedFd, at: Option<&std::net::SocketAddr>| match at {
        Some(at) if policy.bind_fence(at) => crate::sys::net::fence_to_loopback(sock.as_fd()),
        _ => Ok(()),
    };
    match act {
        NetAct::Send(s) => send::perform(&core.net, n, s),
        NetAct::Bind { sock, addr, at } => {
            done(fence(sock, Some(at)).and_then(|()| crate::sys::net::bind_raw(sock.as_fd(), addr)))
        }
        NetAct::Listen {
            sock,
            backlog,
            autobind,
        } => done(
            fence(sock, autobind.as_ref())
                .and_then(|()| crate::sys::net::listen(sock.as_fd(), *backlog)),
        ),
        NetAct::ConnectDns(c) => match core.net.relay() {
            Some(relay) => sock::connect_to_relay(&core.net, relay, n, c),
            None => Outcome::Failed(libc::ECONNREFUSED),
        },
        NetAct::Fail(errno) => Outcome::Failed(*errno),
    }
}

/// A send with nothing to judge (no destination), performed on the duplicate of the socket
/// and answered, with no decision recorded.
pub(super) fn carry(core: &Core, n: &Notif, act: &NetAct) {
    let policy = core.net.policy();
    let a = match perform(core, n, act, &policy) {
        Outcome::Done(v) => Some(Answer::Value(v)),
        Outcome::Failed(e) => Some(Answer::Errno(e)),
        Outcome::Answered => None,
        Outcome::Continue => Some(Answer::Continue),
    };
    if let Some(a) = a {
        answer::answer(core, n.id, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_glibc_asks_over_tcp_when_a_nameserver_is_reachable() {
        let vars = policy::Vars {
            workspace: "/ws".into(),
            home: None,
            tmp: "/tmp/g".into(),
            state: "/var/g".into(),
        };
        let agent = policy::load(&["agent".into()], &vars).expect("agent");
        let strict = policy::load(&["strict".into()], &vars).expect("strict");
        let old = Some((2, 31));
        assert_eq!(resolver_options(&agent, None, old), Some("use-vc".into()));
        assert_eq!(
            resolver_options(&agent, Some("rotate".as_ref()), old),
            Some("rotate use-vc".into())
        );
        assert_eq!(resolver_options(&strict, None, old), None, "no DNS at all");
        assert_eq!(resolver_options(&agent, None, Some((2, 36))), None);
        assert_eq!(resolver_options(&agent, None, None), None, "not glibc");
    }
}
