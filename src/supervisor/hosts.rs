//! Host names in `net.connect` (`crates.io:443`) are resolved off the start-up path: nothing
//! is looked up until the command makes its first network call that guard judges (a connect
//! or a DNS query); then a thread resolves every name in parallel and hands the supervisor the
//! addresses, which it adds to what the run has learned (`net::NetState::learn`). A connect
//! to an IP address that arrives before the answers, and that they could change the verdict
//! on (refused without them, or a profile rule names a host), waits for them (bounded), so it
//! is judged on the full list rather than refused; it waits on the lookups alone ([`Waiter`]),
//! so the calls made meanwhile are judged meanwhile. A connect allowed without them (loopback,
//! a listed address) never waits: with a slow nameserver a test's first connect to its own
//! server took 5 s. A connect to a unix socket cannot match a host
//! entry and never waits (the C library connects to nscd's socket for `ls -l` and `id`: with
//! a slow nameserver those took the whole 5 s). A command that never uses the network costs
//! no lookup at all.
//! Wildcard names (`*.github.com`) cannot be resolved: their addresses come only from DNS
//! answers guard judged during the run.

use std::net::ToSocketAddrs;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
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

/// The lookups once they are done, shared by the resolving thread and every call that waits
/// for them.
#[derive(Default)]
struct Outcome {
    /// `None` while the lookups run.
    done: Mutex<Option<Arc<Lookups>>>,
    ended: Condvar,
}

/// The supervisor's side: the lookups, until they are done.
pub struct PendingHosts {
    /// The names (with the port asked for) not looked up yet.
    names: Vec<(String, u16)>,
    /// The lookups begun and not yet handed out by [`PendingHosts::poll`].
    outcome: Option<Arc<Outcome>>,
}

/// A wait for lookups under way, made without holding the [`PendingHosts`] (and so without
/// holding up the calls judged meanwhile).
pub struct Waiter(Arc<Outcome>);

impl Waiter {
    /// The lookups, once they are done, waiting for them at most [`WAIT_FOR_LOOKUPS`].
    pub fn wait(&self) -> Option<Arc<Lookups>> {
        let deadline = Instant::now() + WAIT_FOR_LOOKUPS;
        let mut done = self.0.done.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(lookups) = done.as_ref() {
                return Some(Arc::clone(lookups));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    "name lookups for net.connect are still running; judging without them"
                );
                return None;
            }
            done = self
                .0
                .ended
                .wait_timeout(done, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
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
        PendingHosts {
            names,
            outcome: None,
        }
    }

    /// Start the lookups, unless they were started already or there is nothing to look up.
    pub fn begin(&mut self) {
        if self.names.is_empty() {
            return;
        }
        let names = std::mem::take(&mut self.names);
        let outcome = Arc::new(Outcome::default());
        let shared = Arc::clone(&outcome);
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
                let mut done = shared.done.lock().unwrap_or_else(PoisonError::into_inner);
                *done = Some(Arc::new((found, failures)));
                shared.ended.notify_all();
            });
        match spawned {
            Ok(_) => self.outcome = Some(outcome),
            Err(e) => {
                tracing::warn!("cannot start the name resolver: {e}; host entries of net.connect match nothing");
            }
        }
    }

    /// The lookups if they are done and were not handed out before (then once only: a later
    /// call finds what they found in the policy already). Never waits.
    pub fn poll(&mut self) -> Option<Arc<Lookups>> {
        let outcome = self.outcome.as_ref()?;
        let done = outcome
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if done.is_some() {
            self.outcome = None;
        }
        done
    }

    /// A [`Waiter`] for the lookups while they run; `None` when none are under way.
    pub fn waiter(&self) -> Option<Waiter> {
        self.outcome.as_ref().map(|o| Waiter(Arc::clone(o)))
    }

    /// The lookups, waiting for them while they run (at most [`WAIT_FOR_LOOKUPS`]).
    pub fn wait(&mut self) -> Option<Arc<Lookups>> {
        let found = self.waiter()?.wait();
        if found.is_some() {
            self.outcome = None;
        }
        found
    }
}
