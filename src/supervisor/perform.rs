//! The perform stage: an allowed call carried out for the caller ([`emulate`]), recorded in
//! the journal first when it changes the workspace; and the answer the kernel gets for it.
//!
//! The transactional state is locked only for what touches the workspace's history: a change
//! inside the workspace, or a call the react stage just took a checkpoint for. Everything else
//! (the private tmp, execs deeper in the tree, connects) goes on while another worker copies a
//! large pre-image or rolls a command back.

use crate::policy::Policy;
use crate::sys::Notif;

use super::answer::Answer;
use super::emulate::{self, Inject, Outcome};
use super::resolve::Resolved;
use super::{lock, Core, TxGuard};

/// Perform `r` for the caller of `n`; `tx` is the transactional state if the react stage
/// holds it. Returns the answer (`None` when the caller was answered already) and a note for
/// the audit log (e.g. a file written without a pre-image).
pub(super) fn perform(
    core: &Core,
    n: &Notif,
    r: &Resolved,
    tx: Option<TxGuard<'_>>,
    inject: Inject,
    policy: &Policy,
) -> (Option<Answer>, Option<String>) {
    if let super::resolve::Act::Net(act) = &r.act {
        let answer = match super::net::perform(core, n, act, policy) {
            Outcome::Done(v) => Some(Answer::Value(v)),
            Outcome::Failed(e) => Some(Answer::Errno(e)),
            Outcome::Answered => None,
            Outcome::Continue => Some(Answer::Continue),
        };
        return (answer, None);
    }
    let mut note = None;
    // A change in a shared directory: what it removes and makes there, read before it is made.
    let shared = (!policy.fs.shared.is_empty()
        && r.paths()
            .any(|p| policy.fs.shared.iter().any(|s| p.starts_with(s))))
    .then(|| super::shared::Made::before(policy, r));
    let ws = &policy.vars.workspace;
    let tx = tx.or_else(|| r.paths().any(|p| p.starts_with(ws)).then(|| core.tx.take()));
    let outcome = match tx {
        Some(mut tx) => {
            let since = tx.since;
            let outcome = emulate::perform(
                &r.act,
                n,
                &core.listener,
                inject,
                tx.journal.as_mut().map(|j| (j, since)),
                policy.transaction.oversize,
                &mut note,
            );
            let outcome = reinstall(r, tx.journal.as_mut(), outcome);
            // Remember what the run made itself that `protect` cares about (see
            // `Request::fresh`), while the change is still the newest in the journal.
            let succeeded = !matches!(outcome, Outcome::Failed(_));
            if let (true, Some(c)) = (succeeded, &r.creates) {
                if policy.is_protect_relevant(c) {
                    lock(&core.created).insert(c.clone());
                }
            }
            outcome
        }
        None if shared.is_some() => {
            emulate::perform_shared(&r.act, n, &core.listener, inject, &core.made_shared)
        }
        None => {
            let outcome = emulate::perform(
                &r.act,
                n,
                &core.listener,
                inject,
                None,
                policy.transaction.oversize,
                &mut note,
            );
            reinstall(r, None, outcome)
        }
    };
    if let (Some(settle), Outcome::Done(_)) = (shared, &outcome) {
        core.made_shared.settle(settle);
    }
    let answer = match outcome {
        Outcome::Done(v) => Some(Answer::Value(v)),
        Outcome::Failed(e) => Some(Answer::Errno(e)),
        Outcome::Answered => None,
        Outcome::Continue => Some(Answer::Continue),
    };
    (answer, note)
}

/// Once a call that made a directory a repository is done, the configs judged then are
/// installed as guard read them (see `git::Reinstall`); the call fails with EIO if one cannot
/// be (its config is then removed).
fn reinstall(
    r: &Resolved,
    mut journal: Option<&mut crate::journal::Journal>,
    outcome: Outcome,
) -> Outcome {
    if matches!(outcome, Outcome::Failed(_)) || r.reinstall.is_empty() {
        return outcome;
    }
    for ri in &r.reinstall {
        // The journal's own steps take on the caller's credentials where the caller's call
        // would have needed them; without one, the whole install is the caller's.
        let done = match journal.as_deref_mut() {
            Some(j) => super::git::install::reinstall(Some(j), ri),
            None => crate::creds::as_caller(|| super::git::install::reinstall(None, ri)),
        };
        if done.is_err() {
            return Outcome::Failed(libc::EIO);
        }
    }
    outcome
}
