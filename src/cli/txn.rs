//! The transaction commands: `guard rollback`, `guard undo`, `guard recover`, `guard prune`:
//! printers over [`History`], which does the work on a run's journal after the run has ended
//! (or after guard crashed). `guard diff` is in `diff.rs`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::CliError;
use crate::audit;
use crate::run::{History, HistoryError, Operation, OperationOptions, OperationReport, RunRecord};

/// Which run: an id or a unique prefix of one; when absent, the newest run that started (one
/// that failed to start is never the default).
pub fn find_run(run: Option<&str>) -> Result<RunRecord, CliError> {
    Ok(History::open()?.find(run)?)
}

pub(super) fn show(p: &Path) -> String {
    audit::escape_for_terminal(p.as_os_str().as_encoded_bytes())
}

pub(super) fn line(out: &mut impl Write, s: impl std::fmt::Display) -> Result<(), CliError> {
    writeln!(out, "{s}").map_err(CliError::Stdout)
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The run (default: the newest).
    pub run: Option<String>,
    /// Restore this checkpoint instead of the run's start (`guard log RUN` lists checkpoints).
    #[arg(long, value_name = "CHECKPOINT")]
    pub to: Option<u32>,
    /// Roll back even if paths the run touched were changed after it ended; what is there is
    /// kept in the journal (`guard undo` brings it back).
    #[arg(long)]
    pub force: bool,
    /// Show what the rollback would change and what stands in its way; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Afterwards, digest the whole workspace (names, types, modes, content), compare it with
    /// the run's start when the run recorded one, and put it in the audit log.
    #[arg(long)]
    pub verify: bool,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// The run (default: the newest).
    pub run: Option<String>,
    /// Undo even if paths were changed after the rollback; what is there is kept in the
    /// journal.
    #[arg(long)]
    pub force: bool,
    /// Show what the undo would change and what stands in its way; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `guard rollback [RUN] [--to CHECKPOINT] [--force] [--dry-run] [--verify]`: undo a run
/// after it ended, all or nothing; the rollback itself can be undone (`guard undo`).
pub fn rollback(args: RollbackArgs) -> Result<i32, CliError> {
    let options = OperationOptions {
        force: args.force,
        dry_run: args.dry_run,
        verify: args.verify,
    };
    operate(
        args.run.as_deref(),
        Operation::Rollback { to: args.to },
        &options,
    )
}

/// `guard undo [RUN] [--force] [--dry-run]`: revert the newest rollback of a run (or the newest
/// undo, which puts the rollback it reverted back).
pub fn undo(args: UndoArgs) -> Result<i32, CliError> {
    let options = OperationOptions {
        force: args.force,
        dry_run: args.dry_run,
        verify: false,
    };
    operate(args.run.as_deref(), Operation::Undo, &options)
}

fn operate(run: Option<&str>, op: Operation, options: &OperationOptions) -> Result<i32, CliError> {
    let history = History::open()?;
    let run = history.find(run)?;
    let name = op.name();
    let mut progress = super::progress::reporter(match op {
        Operation::Undo => "undoing",
        Operation::Rollback { .. } => "rolling back",
    });
    let report = match history.operate(&run, op, options, &mut progress) {
        Ok(r) => r,
        // A run that changed nothing left the workspace as it found it: what a rollback is
        // for holds already (`guard diff` says "0 change(s)"), and a script that rolls back
        // after every failed step should not take it for guard's own failure.
        Err(HistoryError::NothingChanged { .. }) if matches!(op, Operation::Rollback { .. }) => {
            let dry = if options.dry_run { "dry run: " } else { "" };
            println!(
                "{dry}nothing to roll back: run {} changed nothing in its workspace",
                run.id
            );
            return Ok(0);
        }
        Err(e @ HistoryError::Conflicts { .. }) => {
            eprintln!("guard: {e}");
            return Ok(1);
        }
        Err(HistoryError::Aborted { source, .. }) => {
            eprintln!("guard: the {name} of run {} failed: {source}", run.id);
            return Ok(1);
        }
        Err(e) => return Err(e.into()),
    };
    if report.dry_run {
        return print_plan(&run, &report);
    }
    let j = &report.journal;
    for p in &j.problems {
        eprintln!("guard: {name}: {p}");
    }
    for c in &j.replaced {
        eprintln!("guard: {name}: replaced {}: {}", show(&c.path), c.what);
    }
    if let Some(digest) = &report.digest_after {
        match (report.matches_start(), &report.digest_at_start) {
            (Some(true), _) => {
                println!("verified: the workspace digest equals the run's start ({digest})");
            }
            (Some(false), Some(start)) => eprintln!(
                "guard: {name}: the workspace digest {digest} differs from the run's start {start}"
            ),
            _ => println!("workspace digest after the {name}: {digest}"),
        }
    }
    let what = match (op, report.checkpoint) {
        (Operation::Rollback { .. }, Some(to)) => {
            format!("rolled back run {} to checkpoint {to}", run.id)
        }
        _ => format!("undid the last operation on run {}", run.id),
    };
    println!(
        "{what}: {} change(s) undone, {} verified{}",
        j.entries_undone,
        j.verified,
        if j.problems.is_empty() {
            String::new()
        } else {
            format!(", {} problem(s) above", j.problems.len())
        }
    );
    Ok(if report.is_clean() { 0 } else { 1 })
}

/// A dry run: every planned change, what it would replace, what refuses it.
fn print_plan(run: &RunRecord, report: &OperationReport) -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    let j = &report.journal;
    for p in &j.planned {
        line(&mut out, format!("{} {}", p.what, show(&p.path)))?;
    }
    for c in &j.replaced {
        line(&mut out, format!("replace {}: {}", show(&c.path), c.what))?;
    }
    for c in &j.conflicts {
        line(&mut out, format!("conflict {}: {}", show(&c.path), c.what))?;
    }
    let verdict = if j.conflicts.is_empty() {
        "would go ahead".to_string()
    } else {
        format!(
            "would be refused: {} conflict(s) (`--force` goes ahead, keeping what it replaces)",
            j.conflicts.len()
        )
    };
    line(
        &mut out,
        format!(
            "dry run: the {} of run {} would make {} change(s); {verdict}",
            report.operation.name(),
            run.id,
            j.planned.len()
        ),
    )?;
    Ok(if report.is_clean() { 0 } else { 1 })
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Only runs on this workspace (default: every interrupted run).
    #[arg(short, long)]
    pub workspace: Option<PathBuf>,
}

/// `guard recover [-w DIR]`: restore workspaces left by runs whose guard died (or by a rollback
/// that was interrupted: it is reverted).
pub fn recover(args: RecoverArgs) -> Result<i32, CliError> {
    let done = History::open()?.recover(args.workspace.as_deref())?;
    if done.is_empty() {
        println!("no interrupted runs");
        return Ok(0);
    }
    let mut problems = 0;
    for r in &done {
        if r.reverted_operation {
            println!(
                "recovered run {}: reverted an interrupted rollback (the workspace is as before it)",
                r.run
            );
        }
        if r.entries_undone > 0 || !r.reverted_operation {
            println!(
                "recovered run {}: {} change(s) undone, {} verified",
                r.run, r.entries_undone, r.verified
            );
        }
        for p in &r.problems {
            eprintln!("guard: recover {}: {p}", r.run);
            problems += 1;
        }
    }
    Ok(if problems == 0 { 0 } else { 1 })
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// How many runs' journals to keep, newest first.
    #[arg(long, default_value_t = 20)]
    pub keep: usize,
}

/// `guard prune [--keep N]`: delete the journals of older runs (their logs stay).
pub fn prune(args: PruneArgs) -> Result<i32, CliError> {
    let r = History::open()?.prune(args.keep)?;
    println!(
        "removed {} journal(s), kept {}",
        r.removed.len(),
        r.kept.len()
    );
    Ok(0)
}
