//! The decide stage: the verdict on a call, from the pure [`policy::decide`]. This stage only
//! gathers what `decide` needs: the policy in force (with the `net.connect` host names filled
//! in once their lookups are done), and whether the call's targets are the run's own creations
//! (`Request::fresh`); then a delete the policy allows is counted for `mass-delete`
//! ([`super::volume`]). A call that failed before it could be judged has the verdict of its
//! failure.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use crate::audit;
use crate::policy::{self, Action, Op, Policy, Verdict};

use super::resolve::Resolved;
use super::{lock, Core, Judged};

/// The policy in force and the verdict on `judged`.
pub(super) fn decide(core: &Core, pid: u32, judged: &Judged) -> (Arc<Policy>, Verdict) {
    let r = match judged {
        Judged::Call(r) => r,
        Judged::Failed(f) => return (policy_in_force(core), f.verdict()),
    };
    if lock(&core.hosts).is_pending() {
        // Only this worker waits (for a connect) while the names are looked up.
        let resolved = lock(&core.hosts).poll(r.op == Op::Connect);
        if let Some((resolved, failures)) = resolved {
            for f in failures {
                core.audit.emit(audit::Event::Error(audit::ErrorEvent {
                    message: format!("net.connect host not resolved, it matches nothing: {f}"),
                }));
            }
            *core.policy.write().unwrap_or_else(PoisonError::into_inner) = resolved;
        }
    }
    let policy = policy_in_force(core);
    let fresh = is_fresh(&lock(&core.created), r);
    let mut verdict = policy::decide(&policy, &r.request(fresh));
    if verdict.action == Action::Allow {
        // A delete the policy allows may still be the one that makes a mass deletion.
        if let Some(v) = lock(&core.volume).judge(&policy, pid, core.root, r) {
            verdict = v;
        }
    }
    (policy, verdict)
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
