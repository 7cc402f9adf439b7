//! The decide stage: the verdict on a call, from the pure [`policy::decide`]. This stage only
//! gathers what `decide` needs: the policy in force (with the addresses the run learned for
//! host names: the lookups the first network call begins, and judged DNS answers), and
//! whether the call's targets are the run's own creations (`Request::fresh`); then a delete
//! the policy allows is counted for `mass-delete` ([`super::volume`]). A call that failed
//! before it could be judged has the verdict of its failure; a send with several destinations
//! is judged on each. A refused call that the kernel fails anyway fails with the kernel's
//! errno, not as a refusal (`names`; at the write-root boundary only the errno the kernel
//! gives before Landlock is asked).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use crate::audit;
use crate::policy::{self, Action, Builtin, Op, Policy, RuleId, Verdict};

use super::names;
use super::resolve::Resolved;
use super::{lock, Core, Judged};

/// The policy in force and the verdict on `judged`.
pub(super) fn decide(core: &Core, pid: u32, judged: &Judged) -> (Arc<Policy>, Verdict) {
    let r = match judged {
        Judged::Call(r) => r,
        Judged::Failed(f) => return (policy_in_force(core), f.verdict()),
    };
    let (done, waiter) = {
        let mut hosts = lock(&core.hosts);
        if matches!(r.op, Op::Connect | Op::Dns) {
            // The command's first network call starts the lookups of net.connect's names.
            hosts.begin();
        }
        let done = hosts.poll();
        // A host entry stands for IP addresses, so only a connect to one can match it: that
        // call waits for lookups still under way, and no other (a connect to a unix socket,
        // such as the C library's to nscd for `ls -l`, is judged at once). It waits without
        // the lock, so calls made meanwhile are judged meanwhile.
        let inet = matches!(r.addr, Some(policy::NetAddr::Inet(_)));
        let waiter = (done.is_none() && r.op == Op::Connect && inet)
            .then(|| hosts.waiter())
            .flatten();
        (done.map(|d| (d, true)), waiter)
    };
    // Only a refusal can turn on what the lookups find, and an allow only through a rule that
    // names a host: a connect allowed without them (loopback, a listed address) goes on at
    // once, however slow the nameserver.
    let waiter = waiter.filter(|_| !allowed_without_lookups(&policy_in_force(core), r));
    // The call that takes the lookups from `poll` reports their failures; a waiter learns
    // what they found as well (learning twice adds nothing), so it is judged on it even when
    // another call took them a moment before.
    let waited = || {
        let lookups = waiter?.wait()?;
        let first = lock(&core.hosts).poll().is_some();
        Some((lookups, first))
    };
    if let Some((lookups, first)) = done.or_else(waited) {
        let (found, failures) = &*lookups;
        if first {
            for f in failures {
                core.audit.emit(audit::Event::Error(audit::ErrorEvent {
                    message: format!("net.connect host not resolved, it matches nothing: {f}"),
                }));
            }
        }
        for (name, addrs) in found {
            core.net.learn(name, addrs);
        }
    }
    let policy = policy_in_force(core);
    // Whether the targets are the run's own creations matters only to `protect`, which
    // `fresh` relaxes: asked only of a call `protect` refused (a walk up every target's
    // ancestors, each hashed, on every call under a `.git` the run made).
    let mut verdict = policy::decide(&policy, &r.request(false));
    if verdict.rule == RuleId::Builtin(Builtin::Protect) && is_fresh(&lock(&core.created), r) {
        verdict = policy::decide(&policy, &r.request(true));
    }
    // Likewise whether the targets in a shared directory are the run's: asked only of a call
    // refused for not being so.
    if verdict.rule == RuleId::Builtin(Builtin::Shared) && core.made_shared.owns(&policy, r) {
        let req = policy::Request {
            own_shared: true,
            ..r.request(false)
        };
        verdict = policy::decide(&policy, &req);
    }
    verdict = super::net::judge_more(&policy, r, verdict);
    if verdict.action == Action::Deny {
        // A refusal of a call the kernel fails anyway gets the kernel's own answer, not a
        // refusal (nothing is explained to the caller): see `names`.
        let answer = names::kernel_first(
            &verdict.rule.to_string(),
            names::before_landlock(&r.act),
            || names::fails_anyway(&r.act),
        );
        if let Some((errno, reason)) = answer {
            verdict.errno = errno;
            verdict.reason = Some(reason);
            verdict.rule = RuleId::Builtin(Builtin::Resolve);
        }
    }
    if verdict.action == Action::Allow {
        // A delete the policy allows may still be the one that makes a mass deletion.
        // The executable from the cache the call's record reads next (`Record::who`).
        let exe = || lock(&core.procs).get(pid, super::answer::received()).exe;
        // The run's root only for a delete that counts (the root's first exec, judged
        // before its pid may be known, is none: `RootPid::for_call`).
        let root = || core.root();
        if let Some(v) = lock(&core.volume).judge(&policy, pid, root, r, exe) {
            verdict = v;
        }
    }
    (policy, verdict)
}

/// Whether `r` is allowed on what the run knows now, whatever the lookups of host names find:
/// allowed, and no rule names a host (a rule that refuses one could match what they find).
fn allowed_without_lookups(policy: &Policy, r: &Resolved) -> bool {
    let names_host = |rule: &policy::Rule| {
        rule.addr
            .iter()
            .any(|t| matches!(t, policy::NetTarget::Host { .. }))
    };
    let verdict = policy::decide(policy, &r.request(false));
    matches!(verdict.action, Action::Allow | Action::Risky) && !policy.rules.iter().any(names_host)
}

fn policy_in_force(core: &Core) -> Arc<Policy> {
    Arc::clone(&core.policy.read().unwrap_or_else(PoisonError::into_inner))
}

/// True when every target of `r` lies in (or is) something this run created.
fn is_fresh(created: &HashSet<PathBuf>, r: &Resolved) -> bool {
    if created.is_empty() {
        return false;
    }
    let under_created = |p: &Path| p.ancestors().any(|a| created.contains(a));
    let mut any = false;
    for p in r.paths() {
        if !under_created(p) {
            return false;
        }
        any = true;
    }
    any
}
