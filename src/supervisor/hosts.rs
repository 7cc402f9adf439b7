//! Host names in `net.connect` (`crates.io:443`) are resolved off the start-up path: nothing
//! is looked up until the command makes its first network call that guard judges (a connect
//! or a DNS query); then a thread resolves every name in parallel and hands the supervisor the
//! addresses, which it adds to what the run has learned (`net::NetState::learn`). A connect
//! that arrives before the answers waits for them (bounded), so it is judged on the full list
//! rather than refused. A command that never uses the network costs no lookup at all.
//! Wildcard names (`*.github.com`) cannot be resolved: their addresses come only from DNS
//! answers guard judged during the run.

use std::net::ToSocketAddrs;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::policy::{NetTarget, Policy};

/// How long a connect waits for outstanding name lookups.
const WAIT_FOR_LOOKUPS: Duration = Duration::from_secs(5);

/// The nameservers of /etc/resolv.conf as port-53 targets (for `net.dns = true`).
pub fn nameservers() -> Vec<NetTarget> {
    let Ok(text) = std::fs::read_to_string("/etc/resolv.conf") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            (it.next() == Some("nameserver")).then_some(())?;
            let ip: std::net::IpAddr = it.next()?.parse().ok()?;
            let prefix = if ip.is_ipv4() { 32 } else { 128 };
            Some(NetTarget::Cidr {
                addr: ip,
                prefix,
                port: Some(53),
            })
        })
        .collect()
}

/// What the start-up lookups found: each name with its addresses, and the lookups that failed.
pub type Lookups = (Vec<(String, Vec<std::net::IpAddr>)>, Vec<String>);

/// The supervisor's side: the lookups, until they are done.
pub struct PendingHosts {
    /// The names (with the port asked for) not looked up yet.
    names: Vec<(String, u16)>,
    rx: Option<Receiver<Lookups>>,
}

impl PendingHosts {
    /// Start resolving every `Host` target of `policy` now; no work when there is none.
    pub fn start(policy: &Arc<Policy>) -> PendingHosts {
        let mut hosts = PendingHosts::deferred(policy);
        hosts.begin();
        hosts
    }

    /// The `Host` targets of `policy`, to be looked up when [`PendingHosts::begin`] is called.
    pub fn deferred(policy: &Policy) -> PendingHosts {
        let names: Vec<(String, u16)> = policy
            .net
            .connect
            .iter()
            .filter_map(|t| match t {
                NetTarget::Host { name, port, .. } if !name.starts_with('*') => {
                    Some((name.clone(), port.unwrap_or(443)))
                }
                _ => None,
            })
            .collect();
        PendingHosts { names, rx: None }
    }

    /// Start the lookups, unless they were started already or there is nothing to look up.
    pub fn begin(&mut self) {
        if self.names.is_empty() {
            return;
        }
        let names = std::mem::take(&mut self.names);
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("guard-resolver".into())
            .spawn(move || {
                let results: Vec<(String, Result<Vec<std::net::IpAddr>, String>)> =
                    std::thread::scope(|s| {
                        let handles: Vec<_> = names
                            .iter()
                            .map(|(name, port)| {
                                s.spawn(move || {
                                    let r = (name.as_str(), *port)
                                        .to_socket_addrs()
                                        .map(|it| it.map(|a| a.ip()).collect::<Vec<_>>())
                                        .map_err(|e| e.to_string());
                                    (name.clone(), r)
                                })
                            })
                            .collect();
                        handles.into_iter().filter_map(|h| h.join().ok()).collect()
                    });
                let mut found = Vec::new();
                let mut failures = Vec::new();
                for (name, _) in &names {
                    match results.iter().find(|(n, _)| n == name).map(|(_, r)| r) {
                        Some(Ok(ips)) => found.push((name.clone(), ips.clone())),
                        Some(Err(e)) => failures.push(format!("{name}: {e}")),
                        None => failures.push(format!("{name}: lookup did not finish")),
                    }
                }
                let _ = tx.send((found, failures));
            });
        match spawned {
            Ok(_) => self.rx = Some(rx),
            Err(e) => {
                tracing::warn!("cannot start the name resolver: {e}; host entries of net.connect match nothing");
            }
        }
    }

    /// The lookups if they have finished; with `wait`, block for them (bounded). `None` while
    /// they have not begun.
    pub fn poll(&mut self, wait: bool) -> Option<Lookups> {
        let rx = self.rx.as_ref()?;
        let got = if wait {
            let deadline = Instant::now() + WAIT_FOR_LOOKUPS;
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(v) => Some(v),
                Err(RecvTimeoutError::Timeout) => {
                    tracing::warn!(
                        "name lookups for net.connect are still running; judging without them"
                    );
                    None
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.rx = None;
                    None
                }
            }
        } else {
            rx.try_recv().ok()
        };
        if got.is_some() {
            self.rx = None;
        }
        got
    }
}
