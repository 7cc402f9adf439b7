//! The end of a run, once the sandbox's init is reaped (steps 22-23 of `docs/launch.md`): stop
//! the supervisor, roll back when the policy says so, finish the audit log, write the summary,
//! wait for the pruning of old journals, and record the run as ended.

use std::sync::atomic::Ordering;

use super::outcome::RollbackOutcome;
use super::running::Active;
use super::{Notice, Outcome, RunError};
use crate::audit::{self, Event};
use crate::journal::{self, Journal};
use crate::launch::{self, Reaped, EXIT_POLICY_STOP};
use crate::policy::{OnDeny, OnFailure};

fn notify(a: &mut Active, notice: Notice) {
    match a.notices.as_mut() {
        Some(handler) => handler(&notice),
        None => tracing::warn!("{notice}"),
    }
}

/// End the run whose init ended with `status`: reaped, or (`reaped` false) told `status` and
/// exiting with it, its tree gone, for the caller to reap after.
pub(super) fn finish(mut a: Active, status: Reaped, reaped: bool) -> Result<Outcome, RunError> {
    let result = record(&mut a, status, reaped);
    if result.is_err() {
        a.meta.state = "failed".into();
        let _ = a.run_dir.write_meta(&a.meta);
    }
    a.run_dir.mark_inactive(&a.state);
    super::prepare::remove_tmp(&a.tmp, &a.tmp_files);
    a.process.leave();
    result
}

fn record(a: &mut Active, status: Reaped, reaped: bool) -> Result<Outcome, RunError> {
    // The init killed its tree before it exited. A program that is a subreaper also gets the
    // orphans of a tree whose init was killed from outside (which then told nothing): end
    // them too.
    if reaped && a.process.subreaper() {
        launch::kill_tree();
    }
    // The supervisor may already have ended (no process holds the filter any more).
    let mut journal = None;
    let mut explanations = Default::default();
    if let Some(supervisor) = a.supervisor.take() {
        if !supervisor.is_finished() {
            let _ = nix::unistd::write(&a.stop, b"x");
        }
        let report = supervisor.report().unwrap_or_default();
        journal = report.journal;
        explanations = report.explanations;
    }

    let policy_stop = a.shared.policy_stop.load(Ordering::SeqCst);
    let failed = policy_stop || a.exec_failed || status.status != 0;
    let roll_back = (policy_stop && a.policy.transaction.on_deny == OnDeny::Kill)
        || (failed && a.policy.transaction.on_failure == OnFailure::Rollback);
    let mut rollback = None;
    if let Some(j) = journal.as_mut() {
        if roll_back {
            rollback = Some(roll_back_run(a, j));
        } else if let Err(e) = j.seal() {
            tracing::warn!("cannot seal the journal: {e}");
        }
    }
    let files_changed = journal
        .as_ref()
        .and_then(|j| j.diff(a.run_start).ok())
        .map(|d| (d.added.len() + d.modified.len() + d.deleted.len() + d.metadata.len()) as u64);
    let code = if policy_stop {
        EXIT_POLICY_STOP
    } else {
        status.status
    };
    let kind = if policy_stop {
        audit::Outcome::PolicyKill
    } else if a.exec_failed {
        audit::Outcome::Error
    } else if status.signal.is_some() {
        audit::Outcome::Signaled
    } else {
        audit::Outcome::Exited
    };
    if policy_stop {
        notify(a, Notice::PolicyStop);
    }

    let duration_ms = a.started.elapsed().as_millis() as u64;
    let writer = a.writer.take().ok_or(audit::AuditError::WriterPanicked)?;
    let stats = writer.finish(audit::RunEnd {
        status: code,
        signal: status.signal,
        outcome: kind,
        counts: Default::default(),
        suppressed: 0,
        duration_ms,
        otlp_dropped: None,
    })?;
    let summary = audit::Summary {
        v: 1,
        run: a.run_dir.id.clone(),
        profile: a.policy.name.clone(),
        workspace: a.workspace.clone().into(),
        command: a.argv.iter().map(|x| x.clone().into()).collect(),
        status: code,
        outcome: kind,
        started: a.start_time,
        ended: audit::Timestamp::now(),
        duration_ms,
        counts: stats.counts,
        suppressed: stats.suppressed,
        denied: stats.denied.clone(),
        checkpoints: stats.checkpoints,
        rollbacks: stats.rollbacks.max(u32::from(rollback.is_some())),
        files_changed,
        digest_before: a.digest_before.clone(),
        digest_after: rollback.as_ref().and_then(|r| r.digest_after.clone()),
        audit_chain_head: Some(stats.chain_head.clone()),
    };
    summary.write(&a.run_dir.summary())?;
    if let Some(path) = &a.summary_path {
        summary.write(path)?;
    }
    // Begun after the fork (`prune.rs`).
    a.pruning.join();
    a.meta.state = "ended".into();
    a.meta.status = Some(code);
    a.run_dir.write_meta(&a.meta)?;
    Ok(Outcome {
        run_id: a.run_dir.id.clone(),
        run_dir: a.run_dir.path.clone(),
        audit_log: a.run_dir.audit_log(),
        status: status.status,
        signal: status.signal,
        kind,
        rollback,
        summary,
        explanations,
    })
}

/// Restore the workspace to the run's start, and say so in the audit log.
fn roll_back_run(a: &mut Active, j: &mut Journal) -> RollbackOutcome {
    let mut progress = a.progress.take();
    let mut report_progress = |done: u64, total: u64| {
        if let Some(p) = progress.as_mut() {
            p(done, total);
        }
    };
    match j.rollback(a.run_start, &mut report_progress) {
        Ok(r) => {
            for p in &r.problems {
                notify(a, Notice::RollbackProblem(p.clone()));
            }
            // Each path the rollback restored was checked (`r.verified`); the whole workspace
            // only when asked.
            let digest_after = if a.verify {
                journal::tree_digest(&a.workspace, &a.policy.transaction.exclude).ok()
            } else {
                None
            };
            if a.digest_before.is_some() && digest_after != a.digest_before {
                notify(a, Notice::DigestDiffers);
            }
            notify(
                a,
                Notice::RolledBack {
                    entries_undone: r.entries_undone,
                },
            );
            a.handle.emit(Event::Rollback(audit::Rollback {
                checkpoint: a.run_start.0.to_string(),
                entries_undone: r.entries_undone,
                digest_after: digest_after.clone().unwrap_or_default(),
            }));
            RollbackOutcome {
                checkpoint: a.run_start.0,
                entries_undone: r.entries_undone,
                verified: r.verified,
                problems: r.problems,
                digest_after,
                error: None,
            }
        }
        Err(e) => {
            let run = a.run_dir.id.clone();
            notify(
                a,
                Notice::RollbackFailed {
                    run,
                    error: e.to_string(),
                },
            );
            a.handle.emit(Event::Error(audit::ErrorEvent {
                message: format!("rollback failed: {e}"),
            }));
            RollbackOutcome {
                checkpoint: a.run_start.0,
                entries_undone: 0,
                verified: 0,
                problems: Vec::new(),
                digest_after: None,
                error: Some(e.to_string()),
            }
        }
    }
}
