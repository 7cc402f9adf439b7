//! Network targets: parsing the `net.connect` / rule `addr` syntax into [`NetTarget`]s, and
//! matching a decoded [`NetAddr`] against a list of them.
//!
//! Syntax (after variable expansion): `10.0.0.0/8`, `10.0.0.0/8:443`, `::1`, `[::1]:8080`,
//! `[fd00::/8]:443`, `127.0.0.1:8080`, `*:443`, `*` (any address, any port), `crates.io:443`,
//! `crates.io`, `*.github.com:443` (every name under a domain), `/run/foo.sock` (a unix path
//! glob), `@name` (an abstract socket name glob). IPv4-mapped IPv6 addresses match the IPv4
//! targets. Host names match an address once the supervisor has learned that the name resolves
//! to it; [`name_matches`] says which names a host entry (or a `net.resolve` entry) covers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::globs::PathSet;
use super::model::{NetAddr, NetTarget};

/// Parses one entry; `*` yields two targets (all of IPv4 and all of IPv6).
pub fn parse_target(entry: &str) -> Result<Vec<NetTarget>, String> {
    let entry = entry.trim();
    if entry.is_empty() {
        return Err("empty entry".into());
    }
    if entry.starts_with('/') {
        compile_glob(entry, true).map_err(|e| e.to_string())?;
        return Ok(vec![NetTarget::UnixPath(entry.to_string())]);
    }
    if let Some(name) = entry.strip_prefix('@') {
        compile_glob(name, false).map_err(|e| e.to_string())?;
        return Ok(vec![NetTarget::Abstract(name.to_string())]);
    }
    if entry == "*" {
        return Ok(vec![
            NetTarget::Cidr {
                addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                prefix: 0,
                port: None,
            },
            NetTarget::Cidr {
                addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                prefix: 0,
                port: None,
            },
        ]);
    }
    if let Some(port) = entry.strip_prefix("*:") {
        return Ok(vec![NetTarget::AnyHost {
            port: parse_port(port)?,
        }]);
    }
    // `[v6]:port` or `[v6/prefix]:port`
    if let Some(rest) = entry.strip_prefix('[') {
        let (inner, tail) = rest.split_once(']').ok_or("missing `]`")?;
        let port = match tail {
            "" => None,
            t => Some(parse_port(
                t.strip_prefix(':').ok_or("expected `:port` after `]`")?,
            )?),
        };
        let (addr, prefix) = parse_cidr(inner)?;
        if !addr.is_ipv6() {
            return Err("brackets are for IPv6 addresses".into());
        }
        return Ok(vec![NetTarget::Cidr { addr, prefix, port }]);
    }
    // A bare IPv6 address or network (more than one `:`).
    if entry.matches(':').count() > 1 {
        let (addr, prefix) = parse_cidr(entry)?;
        return Ok(vec![NetTarget::Cidr {
            addr,
            prefix,
            port: None,
        }]);
    }
    let (host, port) = match entry.split_once(':') {
        Some((h, p)) => (h, Some(parse_port(p)?)),
        None => (entry, None),
    };
    if host.starts_with(|c: char| c.is_ascii_digit()) && host.contains(['.', '/']) {
        if let Ok((addr, prefix)) = parse_cidr(host) {
            return Ok(vec![NetTarget::Cidr { addr, prefix, port }]);
        }
        if host.contains('/') || host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Err(format!("`{host}` is not a valid IPv4 address or network"));
        }
    }
    let plain = host.strip_prefix("*.").unwrap_or(host);
    if !is_host_name(plain) {
        return Err(format!("`{host}` is not an address, network or host name"));
    }
    Ok(vec![NetTarget::Host {
        name: host.to_ascii_lowercase(),
        port,
        addrs: Vec::new(),
    }])
}

fn parse_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("`{text}` is not a port (1-65535)")),
        Ok(p) => Ok(p),
    }
}

fn parse_cidr(text: &str) -> Result<(IpAddr, u8), String> {
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("`{addr}` is not an IP address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) => match p.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ => return Err(format!("`/{p}` is not a prefix length (0-{max})")),
        },
    };
    Ok((addr, prefix))
}

fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Parses one `net.resolve` entry: a host name, `*.domain`, or `*`; lowercase.
pub fn parse_name(entry: &str) -> Result<String, String> {
    let entry = entry.trim().trim_end_matches('.');
    if entry == "*" {
        return Ok(entry.to_string());
    }
    let plain = entry.strip_prefix("*.").unwrap_or(entry);
    if is_host_name(plain) {
        Ok(entry.to_ascii_lowercase())
    } else {
        Err(format!("`{entry}` is not a host name, `*.domain` or `*`"))
    }
}

/// Whether `name` (lowercase, no final dot) is covered by `pattern`: the same name, any name
/// under the domain of a `*.domain` pattern (not the domain itself), or anything for `*`.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some("") => true,
        Some(suffix) if suffix.starts_with('.') => {
            name.len() > suffix.len() && name.ends_with(suffix)
        }
        _ => pattern == name,
    }
}

/// Whether `ip` is a loopback address (`127.0.0.0/8`, `::1`, or an IPv4-mapped loopback).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

fn compile_glob(pattern: &str, literal_separator: bool) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(literal_separator)
        .build()
}

/// The compiled globs of the `UnixPath` and `Abstract` targets of one target list.
#[derive(Debug, Clone, Default)]
pub struct NetMatcher {
    /// Socket paths, matched as the profile's other paths are ([`PathSet`]: component by
    /// component, no regex for patterns of plain, `*` and `**` components). A glob set
    /// compiled a regex here at every start: about 75 µs of `guard exec -- true` for the
    /// `agent` profile's three socket paths (`perf`, 2026-12-07).
    unix: PathSet,
    /// Abstract names: not paths (`*` crosses `/`), so a glob set, built only when the list
    /// has any.
    abstract_names: GlobSet,
}

impl NetMatcher {
    /// Compiles the glob targets of `targets` (invalid globs, which parsing rejects, are
    /// skipped: they match nothing).
    pub fn new(targets: &[NetTarget]) -> Self {
        let mut unix = Vec::new();
        let mut abstract_names = GlobSetBuilder::new();
        let mut any_abstract = false;
        for target in targets {
            match target {
                NetTarget::UnixPath(p) => unix.push(p.as_str()),
                NetTarget::Abstract(n) => {
                    if let Ok(g) = compile_glob(n, false) {
                        abstract_names.add(g);
                        any_abstract = true;
                    }
                }
                _ => {}
            }
        }
        NetMatcher {
            unix: PathSet::lenient(&unix),
            abstract_names: if any_abstract {
                abstract_names.build().unwrap_or_else(|_| GlobSet::empty())
            } else {
                GlobSet::empty()
            },
        }
    }

    /// Whether `addr` is one of `targets` (the list this matcher was built from).
    /// `Unspecified` and other families match no target (`decide` handles them).
    pub fn matches(&self, targets: &[NetTarget], addr: &NetAddr) -> bool {
        match addr {
            NetAddr::Inet(sa) => {
                let ip = sa.ip().to_canonical();
                targets.iter().any(|t| inet_matches(t, ip, sa.port()))
            }
            NetAddr::Unix(path) => self.unix.is_match(path),
            NetAddr::Abstract(name) => self
                .abstract_names
                .is_match(String::from_utf8_lossy(name).as_ref()),
            NetAddr::Unspecified | NetAddr::Other(_) => false,
        }
    }
}

/// Whether IP address `sa` is one of the IP targets of `targets` (for lists without unix or
/// abstract entries, which need no [`NetMatcher`]).
pub fn matches_inet(targets: &[NetTarget], sa: &std::net::SocketAddr) -> bool {
    let ip = sa.ip().to_canonical();
    targets.iter().any(|t| inet_matches(t, ip, sa.port()))
}

fn inet_matches(target: &NetTarget, ip: IpAddr, port: u16) -> bool {
    let port_ok = |want: &Option<u16>| want.is_none_or(|p| p == port);
    match target {
        NetTarget::Cidr {
            addr,
            prefix,
            port: want,
        } => port_ok(want) && in_network(ip, addr.to_canonical(), *prefix),
        NetTarget::AnyHost { port: want } => *want == port,
        NetTarget::Host {
            port: want, addrs, ..
        } => port_ok(want) && addrs.iter().any(|a| a.to_canonical() == ip),
        NetTarget::UnixPath(_) | NetTarget::Abstract(_) => false,
    }
}

fn in_network(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let bits = u32::from(prefix.min(32));
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let bits = u32::from(prefix.min(128));
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn one(s: &str) -> NetTarget {
        let mut v = parse_target(s).unwrap();
        assert_eq!(v.len(), 1, "{s}");
        v.remove(0)
    }

    #[test]
    fn parses_every_form() {
        let lo: IpAddr = "127.0.0.0".parse().unwrap();
        assert_eq!(
            one("127.0.0.0/8"),
            NetTarget::Cidr {
                addr: lo,
                prefix: 8,
                port: None
            }
        );
        assert_eq!(
            one("10.0.0.1:8080"),
            NetTarget::Cidr {
                addr: "10.0.0.1".parse().unwrap(),
                prefix: 32,
                port: Some(8080)
            }
        );
        assert_eq!(
            one("::1"),
            NetTarget::Cidr {
                addr: "::1".parse().unwrap(),
                prefix: 128,
                port: None
            }
        );
        assert_eq!(
            one("[::1]:8080"),
            NetTarget::Cidr {
                addr: "::1".parse().unwrap(),
                prefix: 128,
                port: Some(8080)
            }
        );
        assert_eq!(one("*:443"), NetTarget::AnyHost { port: 443 });
        assert_eq!(
            one("Crates.io:443"),
            NetTarget::Host {
                name: "crates.io".into(),
                port: Some(443),
                addrs: vec![]
            }
        );
        assert_eq!(
            one("*.GitHub.com:443"),
            NetTarget::Host {
                name: "*.github.com".into(),
                port: Some(443),
                addrs: vec![]
            }
        );
        assert_eq!(
            one("/run/foo.sock"),
            NetTarget::UnixPath("/run/foo.sock".into())
        );
        assert_eq!(
            one("@abstract-name"),
            NetTarget::Abstract("abstract-name".into())
        );
        assert_eq!(parse_target("*").unwrap().len(), 2);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "10.0.0.1:99999",
            "10.0.0.0/33",
            "300.1.1.1",
            "*:0",
            "[::1",
            "a b",
            "x:y",
            "*.:443",
            "**.a.com",
            "a.*.com",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    /// Socket paths match as the glob set with `*` not crossing `/` that they were compiled
    /// to before: the same answer for every pattern kind and path here.
    #[test]
    fn socket_paths_match_as_a_glob_set_would() {
        let patterns = [
            "/run/nscd/socket",
            "/tmp/guard-x/**",
            "/run/*.sock",
            "/run/user/*/bus",
            "/var/**/agent.sock",
            "/run/s?.sock",
            "/run/[ab].sock",
            "/run/{x,y}.sock",
        ];
        let paths = [
            "/run/nscd/socket",
            "/run/nscd/socket2",
            "/run/nscd",
            "/tmp/guard-x",
            "/tmp/guard-x/",
            "/tmp/guard-x/s",
            "/tmp/guard-x/a/b/c.sock",
            "/tmp/guard-xy/s",
            "/run/a.sock",
            "/run/d/a.sock",
            "/run/.sock",
            "/run/user/1000/bus",
            "/run/user/1000/x/bus",
            "/var/agent.sock",
            "/var/a/agent.sock",
            "/var/a/b/agent.sock",
            "/run/s1.sock",
            "/run/s12.sock",
            "/run/b.sock",
            "/run/c.sock",
            "/run/y.sock",
        ];
        for pattern in patterns {
            let targets = parse_target(pattern).unwrap();
            let m = NetMatcher::new(&targets);
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .unwrap()
                .compile_matcher();
            for path in paths {
                assert_eq!(
                    m.matches(&targets, &NetAddr::Unix(path.into())),
                    glob.is_match(path),
                    "{pattern} against {path}"
                );
            }
        }
    }

    #[test]
    fn matching() {
        let mut targets = Vec::new();
        for t in ["127.0.0.0/8", "::1", "*:443", "/run/*.sock", "@bus-*"] {
            targets.extend(parse_target(t).unwrap());
        }
        let m = NetMatcher::new(&targets);
        let inet = |s: &str| NetAddr::Inet(s.parse::<SocketAddr>().unwrap());
        assert!(m.matches(&targets, &inet("127.0.0.1:8080")));
        assert!(m.matches(&targets, &inet("[::ffff:127.0.0.1]:80")));
        assert!(m.matches(&targets, &inet("[::1]:1")));
        assert!(m.matches(&targets, &inet("1.2.3.4:443")));
        assert!(!m.matches(&targets, &inet("8.8.8.8:53")));
        assert!(m.matches(&targets, &NetAddr::Unix("/run/foo.sock".into())));
        assert!(!m.matches(&targets, &NetAddr::Unix("/run/x/foo.sock".into())));
        assert!(!m.matches(&targets, &NetAddr::Unix("/srv/foo.sock".into())));
        assert!(m.matches(&targets, &NetAddr::Abstract(b"bus-1/x".to_vec())));
        assert!(!m.matches(&targets, &NetAddr::Abstract(b"other".to_vec())));
        assert!(!m.matches(&targets, &NetAddr::Unspecified));
        assert!(!m.matches(&targets, &NetAddr::Other(16)));
    }

    #[test]
    fn names_and_wildcards() {
        assert!(name_matches("github.com", "github.com"));
        assert!(!name_matches("github.com", "api.github.com"));
        assert!(name_matches("*.github.com", "api.github.com"));
        assert!(name_matches("*.github.com", "a.b.github.com"));
        assert!(!name_matches("*.github.com", "github.com"));
        assert!(!name_matches("*.github.com", "evilgithub.com"));
        assert!(name_matches("*", "anything.example"));
        assert_eq!(parse_name("*.Corp.Example.").unwrap(), "*.corp.example");
        assert_eq!(parse_name("*").unwrap(), "*");
        assert!(parse_name("a b").is_err());
        assert!(parse_name("*x.com").is_err());
        assert!(is_loopback("127.1.2.3".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("0.0.0.0".parse().unwrap()));
    }
}
