//! The react stage: carries out the [`Reaction`] that [`policy::react`](crate::policy::react)
//! chose for a verdict: the checkpoints before a risky call or a new command, the rollback of
//! the offending command, the end of the run. Nothing here decides; it acts, under the
//! transactional lock wherever the workspace's history is concerned.

use std::sync::atomic::Ordering;

use crate::audit;
use crate::policy::{Reaction, Verdict};

use super::{lock, Core, Judged, TxGuard, TxState};

/// What happens to the call after the react stage.
pub(super) enum Next<'a> {
    /// Perform it. The transactional state stays locked when a checkpoint was just taken for
    /// it, so the call lands in the journal right after its checkpoint.
    Perform(Option<TxGuard<'a>>),
    /// Do not: fail it with this errno.
    Refuse(i32),
}

/// Carry out `reaction` to `verdict` on `judged`, a call by `pid`.
pub(super) fn react<'a>(
    core: &'a Core,
    pid: u32,
    judged: &Judged,
    verdict: &Verdict,
    reaction: Reaction,
) -> Next<'a> {
    match reaction {
        Reaction::Allow => Next::Perform(None),
        Reaction::CheckpointThenAllow { risky, new_command } => {
            let mut tx = core.tx.take();
            let TxState { journal, txn } = &mut *tx;
            if let Some(j) = journal.as_mut() {
                if risky {
                    txn.on_risky(j, &core.audit, pid, verdict.rule.as_str());
                }
                if let (true, Judged::Call(r)) = (new_command, judged) {
                    let cp = txn.command_starts(j, &core.audit, pid, &r.argv);
                    lock(&core.volume).command_started(pid, cp.map(|c| c.0.to_string()));
                }
            }
            Next::Perform(Some(tx))
        }
        Reaction::Fail => Next::Refuse(verdict.errno),
        Reaction::RollbackCommand => {
            // The command is found and ended while the caller is still waiting in this call:
            // once answered it could exit and be reaped, and its parent chain would be gone.
            let mut tx = core.tx.take();
            let TxState { journal, txn } = &mut *tx;
            if let Some(j) = journal.as_mut() {
                if !txn.rollback_command(j, &core.audit, pid, core.root()) {
                    core.audit.emit(audit::Event::Error(audit::ErrorEvent {
                        message: format!(
                            "on-deny rollback: pid {pid} belongs to no command of the run (the root process itself?): the call just fails"
                        ),
                    }));
                }
            }
            Next::Refuse(verdict.errno)
        }
        Reaction::KillRun => {
            // End the run before the caller can run on past its denied call.
            core.shared.policy_stop.store(true, Ordering::SeqCst);
            core.tree.kill();
            Next::Refuse(verdict.errno)
        }
    }
}
