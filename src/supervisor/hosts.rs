//! Host names in `net.connect` (`crates.io:443`) are resolved off the start-up path: a thread
//! resolves them all in parallel while the command starts, then hands the supervisor a copy of
//! the policy with the addresses filled in. A connect that arrives before the answers waits for
//! them (bounded), so an early connect is judged on the full list rather than refused.

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

/// The supervisor's side: the current policy, replaced once the lookups are done.
pub struct PendingHosts {
    rx: Option<Receiver<(Arc<Policy>, Vec<String>)>>,
}

impl PendingHosts {
    /// Start resolving every `Host` target of `policy`; `None` work when there is none.
    pub fn start(policy: &Arc<Policy>) -> PendingHosts {
        let names: Vec<(String, u16)> = policy
            .net
            .connect
            .iter()
            .filter_map(|t| match t {
                NetTarget::Host { name, port, .. } => Some((name.clone(), port.unwrap_or(443))),
                _ => None,
            })
            .collect();
        if names.is_empty() {
            return PendingHosts { rx: None };
        }
        let (tx, rx) = mpsc::channel();
        let base = Arc::clone(policy);
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
                let mut policy = (*base).clone();
                let mut failures = Vec::new();
                for t in &mut policy.net.connect {
                    if let NetTarget::Host { name, addrs, .. } = t {
                        match results.iter().find(|(n, _)| n == name).map(|(_, r)| r) {
                            Some(Ok(ips)) => {
                                addrs.extend(ips.iter().copied());
                                addrs.sort();
                                addrs.dedup();
                            }
                            Some(Err(e)) => failures.push(format!("{name}: {e}")),
                            None => failures.push(format!("{name}: lookup did not finish")),
                        }
                    }
                }
                let _ = tx.send((Arc::new(policy), failures));
            });
        match spawned {
            Ok(_) => PendingHosts { rx: Some(rx) },
            Err(e) => {
                tracing::warn!("cannot start the name resolver: {e}; host entries of net.connect match nothing");
                PendingHosts { rx: None }
            }
        }
    }

    /// A resolved policy if the lookups have finished; with `wait`, block for them (bounded).
    /// Returns the lookups that failed alongside.
    pub fn poll(&mut self, wait: bool) -> Option<(Arc<Policy>, Vec<String>)> {
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

    pub fn is_pending(&self) -> bool {
        self.rx.is_some()
    }
}
