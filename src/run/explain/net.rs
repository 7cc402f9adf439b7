//! What explain says about a connect: by name, the lookup first (as a run judges the query
//! by its name), then the connect to the first address, judged against `net.connect` with its
//! host names looked up only when they could change the answer.

use std::sync::Arc;

use super::{connect_nr, Explainer, Explanation, Layer, Step};
use crate::policy::{self, Action, NetAddr, Op, Policy, Request};

impl Explainer {
    pub(super) fn connect(&self, target: &str, e: &mut Explanation) {
        e.target = target.to_string();
        let (addrs, name) = match parse_connect(target) {
            Ok(v) => v,
            Err(why) => {
                e.verdict = Action::Deny;
                e.reason = Some(why.clone());
                return self.kernel(libc::EINVAL, why, e);
            }
        };
        if self.filter(connect_nr(), [3, 0, 16, 0, 0, 0], e).is_some() {
            return;
        }
        if let Some(host) = &name {
            if !self.lookup(host, e) {
                return;
            }
        }
        let Some(first) = addrs.first() else {
            let why = format!("{target} does not resolve");
            return self.kernel(libc::ENOENT, why, e);
        };
        if name.is_some() {
            e.steps.push(Step {
                layer: Layer::Kernel,
                says: format!(
                    "{target} resolves to {}; the program connects to an address",
                    addrs.iter().map(format_addr).collect::<Vec<_>>().join(", ")
                ),
            });
        }
        e.target = format_addr(first);
        let req = Request {
            addr: Some(first),
            ..Request::new(Op::Connect)
        };
        // Host names of net.connect can only allow more: look them up (as a run does at its
        // start, waiting as long as a connect would) only when the address is refused without.
        let unresolved = policy::decide(&self.policy, &req);
        let has_hosts = self
            .policy
            .net
            .connect
            .iter()
            .any(|t| matches!(t, policy::NetTarget::Host { .. }));
        let policy = if unresolved.rule == policy::RuleId::Builtin(policy::Builtin::Connect)
            && unresolved.action == Action::Deny
            && has_hosts
        {
            self.resolved_policy()
        } else {
            Arc::new(self.policy.clone())
        };
        if self.judge(&policy, &req, e) {
            e.steps.push(Step {
                layer: Layer::Supervisor,
                says: "connects the caller's socket itself; whether anything answers is up to \
                       the network"
                    .into(),
            });
        }
    }

    /// The lookup of `host` a program makes before it has an address to connect to: from
    /// /etc/hosts (nothing guard judges), else a query to the first nameserver of
    /// /etc/resolv.conf, which a run judges by the name (rule `net.dns`) and the nameserver's
    /// address (`net.connect`), answering a refused one at its relay (REFUSED: the program
    /// gets no address, and no line on its stderr). Whether the lookup goes ahead.
    pub(super) fn lookup(&self, host: &str, e: &mut Explanation) -> bool {
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if in_hosts_file(&name) {
            e.steps.push(Step {
                layer: Layer::Kernel,
                says: format!("{name} is in /etc/hosts: no DNS query to judge"),
            });
            return true;
        }
        let server = crate::supervisor::nameservers()
            .into_iter()
            .find_map(|t| match t {
                policy::NetTarget::Cidr { addr, .. } => {
                    Some(NetAddr::Inet(std::net::SocketAddr::new(addr, 53)))
                }
                _ => None,
            });
        let Some(server) = server else {
            e.steps.push(Step {
                layer: Layer::Kernel,
                says: "no nameserver in /etc/resolv.conf: no DNS query to judge".into(),
            });
            return true;
        };
        e.steps.push(Step {
            layer: Layer::Supervisor,
            says: format!(
                "judges the lookup of {name} at {} first: the program needs an address",
                format_addr(&server)
            ),
        });
        let req = Request {
            addr: Some(&server),
            name: Some(&name),
            ..Request::new(Op::Dns)
        };
        if self.judge(&self.policy, &req, e) {
            return true;
        }
        e.target = name;
        e.told = None;
        false
    }

    /// The policy with the host names of `net.connect` resolved, as the supervisor resolves
    /// them during a run (at its first network call).
    pub(super) fn resolved_policy(&self) -> Arc<Policy> {
        Arc::clone(self.resolved.get_or_init(|| {
            let mut p = self.policy.clone();
            let mut pending = crate::supervisor::PendingHosts::start(&Arc::new(p.clone()));
            if let Some(lookups) = pending.wait() {
                for (name, addrs) in &lookups.0 {
                    crate::supervisor::add_addresses(&mut p, name, addrs);
                }
            }
            Arc::new(p)
        }))
    }
}

/// Whether /etc/hosts names `name` (lowercase), so a lookup needs no DNS query.
fn in_hosts_file(name: &str) -> bool {
    std::fs::read_to_string("/etc/hosts").is_ok_and(|text| {
        text.lines().any(|line| {
            let line = line.split('#').next().unwrap_or("");
            line.split_whitespace()
                .skip(1)
                .any(|n| n.eq_ignore_ascii_case(name))
        })
    })
}

/// The addresses a connect target names, and the host name when it is one.
fn parse_connect(target: &str) -> Result<(Vec<NetAddr>, Option<String>), String> {
    if target.starts_with('/') {
        return Ok((vec![NetAddr::Unix(target.into())], None));
    }
    if let Some(name) = target.strip_prefix('@') {
        return Ok((vec![NetAddr::Abstract(name.as_bytes().to_vec())], None));
    }
    if let Ok(sa) = target.parse::<std::net::SocketAddr>() {
        return Ok((vec![NetAddr::Inet(sa)], None));
    }
    let Some((host, port)) = target.rsplit_once(':') else {
        return Err(format!(
            "{target}: not HOST:PORT, IP:PORT, [IPv6]:PORT, /unix/socket or @abstract"
        ));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{target}: {port} is not a port number"))?;
    use std::net::ToSocketAddrs as _;
    let addrs = (host, port)
        .to_socket_addrs()
        .map(|it| it.map(NetAddr::Inet).collect())
        .unwrap_or_default();
    Ok((addrs, Some(host.to_string())))
}

fn format_addr(a: &NetAddr) -> String {
    match a {
        NetAddr::Inet(s) => s.to_string(),
        NetAddr::Unix(p) => p.display().to_string(),
        NetAddr::Abstract(n) => format!("@{}", String::from_utf8_lossy(n)),
        NetAddr::Unspecified => "unspecified".into(),
        NetAddr::Other(f) => format!("family {f}"),
    }
}
