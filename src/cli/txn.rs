//! The transaction commands: `guard diff`, `guard rollback`, `guard undo`, `guard recover`,
//! `guard prune`. They work on a run's journal after the run has ended (or after guard
//! crashed).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::audit;
use crate::journal::{
    self, CheckpointId, Journal, JournalError, RollbackOptions, RollbackReport, RunDir,
};

/// Which run: an id or a unique prefix of one; when absent, the newest run that started (one
/// that failed to start is never the default).
pub fn find_run(run: Option<&str>) -> Result<RunDir, CliError> {
    let state = journal::state_dir()?;
    let runs = journal::list_runs(&state);
    let newest_started = journal::default_run(&state);
    let found: Vec<&RunDir> = match run {
        None => newest_started.iter().collect(),
        Some(id) => runs
            .iter()
            .filter(|r| r.id == id || r.id.starts_with(id))
            .collect(),
    };
    match (found.as_slice(), run) {
        ([one], _) => Ok((*one).clone()),
        ([], Some(id)) => Err(CliError::Usage(format!(
            "no run {id} in {}\nhint: `guard runs` lists them",
            state.display()
        ))),
        ([], None) => Err(CliError::Usage(format!(
            "no runs recorded in {}",
            state.display()
        ))),
        (many, Some(id)) => Err(CliError::Usage(format!(
            "{id} matches {} runs\nhint: give more of the id",
            many.len()
        ))),
        (_, None) => unreachable!("at most one newest run"),
    }
}

fn open_journal(run: &RunDir) -> Result<Journal, CliError> {
    if !run.path.join("journal").is_dir() {
        return Err(CliError::Usage(format!(
            "run {} has no journal (pruned, or a run that was not transactional)",
            run.id
        )));
    }
    Journal::open(&run.path)
        .map_err(|e| CliError::Usage(format!("cannot open the journal of run {}: {e}", run.id)))
}

fn first_checkpoint(j: &Journal) -> Result<CheckpointId, CliError> {
    j.checkpoints()
        .first()
        .map(|(id, _, _)| *id)
        .ok_or_else(|| CliError::Usage("the journal has no checkpoint".into()))
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The run (default: the newest).
    pub run: Option<String>,
}

/// `guard diff [RUN]`: what the run changed in its workspace, from the journal.
pub fn diff(args: DiffArgs) -> Result<i32, CliError> {
    let run = find_run(args.run.as_deref())?;
    let j = open_journal(&run)?;
    let d = j
        .diff(first_checkpoint(&j)?)
        .map_err(|e| CliError::Usage(format!("cannot read the journal of run {}: {e}", run.id)))?;
    let mut out = std::io::stdout().lock();
    let w =
        |out: &mut std::io::StdoutLock, s: String| writeln!(out, "{s}").map_err(CliError::Stdout);
    let ws = j.workspace().to_path_buf();
    w(&mut out, format!("run {} in {}", run.id, ws.display()))?;
    for (mark, list) in [
        ("A", &d.added),
        ("M", &d.modified),
        ("D", &d.deleted),
        ("m", &d.metadata),
    ] {
        for p in list {
            w(
                &mut out,
                format!(
                    "{mark} {}",
                    audit::escape_for_terminal(p.as_os_str().as_encoded_bytes())
                ),
            )?;
        }
    }
    let total = d.added.len() + d.modified.len() + d.deleted.len() + d.metadata.len();
    w(
        &mut out,
        format!(
            "{total} change(s): {} added, {} modified, {} deleted, {} metadata only",
            d.added.len(),
            d.modified.len(),
            d.deleted.len(),
            d.metadata.len()
        ),
    )?;
    if !d.excluded.is_empty() {
        w(
            &mut out,
            format!(
                "not journaled (transaction.exclude): {}",
                d.excluded.join(", ")
            ),
        )?;
    }
    Ok(0)
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

/// An operation on a run's journal.
enum Operation {
    Rollback(CheckpointId),
    Undo,
}

/// `guard rollback [RUN] [--to CHECKPOINT] [--force] [--dry-run] [--verify]`: undo a run
/// after it ended, all or nothing; the rollback itself can be undone (`guard undo`).
pub fn rollback(args: RollbackArgs) -> Result<i32, CliError> {
    let run = find_run(args.run.as_deref())?;
    let opts = RollbackOptions {
        force: args.force,
        dry_run: args.dry_run,
    };
    operate(&run, &opts, args.verify, |j| {
        Ok(Operation::Rollback(match args.to {
            Some(n) => {
                let id = CheckpointId(n);
                if !j.checkpoints().iter().any(|(c, _, _)| *c == id) {
                    return Err(CliError::Usage(format!(
                        "run {} has no checkpoint {n}\nhint: `guard log {}` shows its checkpoint events",
                        run.id, run.id
                    )));
                }
                id
            }
            None => first_checkpoint(j)?,
        }))
    })
}

/// `guard undo [RUN] [--force] [--dry-run]`: revert the newest rollback of a run (or the newest
/// undo, which puts the rollback it reverted back).
pub fn undo(args: UndoArgs) -> Result<i32, CliError> {
    let run = find_run(args.run.as_deref())?;
    let opts = RollbackOptions {
        force: args.force,
        dry_run: args.dry_run,
    };
    operate(&run, &opts, false, |_| Ok(Operation::Undo))
}

fn operate(
    run: &RunDir,
    opts: &RollbackOptions,
    verify: bool,
    choose: impl FnOnce(&Journal) -> Result<Operation, CliError>,
) -> Result<i32, CliError> {
    let state = journal::state_dir()?;
    let mut meta = run.read_meta()?;
    if meta.state == "running" {
        return Err(CliError::Usage(format!(
            "run {} is still running (guard pid {})\nhint: if guard crashed, run `guard recover`",
            run.id, meta.guard_pid
        )));
    }
    if meta.state == journal::STATE_ROLLING_BACK {
        return Err(CliError::Usage(format!(
            "a rollback of run {} was interrupted (or still runs as pid {})\nhint: `guard recover` reverts an interrupted one",
            run.id, meta.guard_pid
        )));
    }
    let _lock = journal::lock_journal(&run.path)
        .map_err(|e| CliError::Usage(format!("run {}: {e}", run.id)))?;
    let mut j = open_journal(run)?;
    let op = choose(&j)?;
    let name = match op {
        Operation::Rollback(_) => "rollback",
        Operation::Undo => "undo",
    };
    let mut progress = super::progress::reporter(if name == "undo" {
        "undoing"
    } else {
        "rolling back"
    });
    let mut go = |j: &mut Journal| match op {
        Operation::Rollback(to) => j.rollback_with(to, opts, &mut progress),
        Operation::Undo => j.undo_last(opts, &mut progress),
    };
    if opts.dry_run {
        return match go(&mut j) {
            Ok(report) => print_plan(run, name, &report),
            Err(e) => Err(CliError::Usage(format!("{name} of run {}: {e}", run.id))),
        };
    }
    meta.state = journal::STATE_ROLLING_BACK.to_string();
    meta.guard_pid = std::process::id();
    run.write_meta(&meta)?;
    run.mark_active(&state)?;
    let result = go(&mut j);
    meta.state = journal::settled_state(&j).to_string();
    run.write_meta(&meta)?;
    run.mark_inactive(&state);
    let report = match result {
        Ok(r) => r,
        Err(e @ JournalError::Conflicts { .. }) => {
            eprintln!("guard: refusing the {name} of run {}: {e}", run.id);
            return Ok(1);
        }
        Err(e @ JournalError::Aborted { .. }) => {
            eprintln!("guard: the {name} of run {} failed: {e}", run.id);
            return Ok(1);
        }
        Err(e) => {
            return Err(CliError::Usage(format!(
                "{name} of run {} failed: {e}",
                run.id
            )))
        }
    };
    for p in &report.problems {
        eprintln!("guard: {name}: {p}");
    }
    for c in &report.replaced {
        eprintln!("guard: {name}: replaced {}: {}", c.path.display(), c.what);
    }
    let mut digest = String::new();
    let mut mismatch = false;
    if verify {
        digest = journal::tree_digest(j.workspace(), j.exclude_patterns()).map_err(|e| {
            CliError::Usage(format!(
                "cannot digest the workspace {}: {e}",
                j.workspace().display()
            ))
        })?;
        let start = first_checkpoint(&j).ok();
        let at_start = matches!(op, Operation::Rollback(to) if Some(to) == start);
        match (at_start, recorded_start_digest(run)) {
            (true, Some(before)) if before == digest => {
                println!("verified: the workspace digest equals the run's start ({digest})");
            }
            (true, Some(before)) => {
                mismatch = true;
                eprintln!(
                    "guard: {name}: the workspace digest {digest} differs from the run's start {before}"
                );
            }
            _ => println!("workspace digest after the {name}: {digest}"),
        }
    }
    let checkpoint = match op {
        Operation::Rollback(to) => to.0.to_string(),
        Operation::Undo => "undo".to_string(),
    };
    let line = audit::encode(
        &audit::Event::Rollback(audit::Rollback {
            checkpoint: checkpoint.clone(),
            entries_undone: report.entries_undone,
            digest_after: digest,
        }),
        &run.id,
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .open(run.audit_log())
    {
        let _ = writeln!(f, "{line}");
    }
    let what = match op {
        Operation::Rollback(to) => format!("rolled back run {} to checkpoint {}", run.id, to.0),
        Operation::Undo => format!("undid the last operation on run {}", run.id),
    };
    println!(
        "{what}: {} change(s) undone, {} verified{}",
        report.entries_undone,
        report.verified,
        if report.problems.is_empty() {
            String::new()
        } else {
            format!(", {} problem(s) above", report.problems.len())
        }
    );
    Ok(if report.problems.is_empty() && !mismatch {
        0
    } else {
        1
    })
}

/// The tree digest the run recorded at its start (`--atomic` and rollback policies do).
fn recorded_start_digest(run: &RunDir) -> Option<String> {
    let text = std::fs::read_to_string(run.summary()).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("digest_before")?.as_str().map(str::to_string)
}

/// A dry run: every planned change, what it would replace, what refuses it.
fn print_plan(run: &RunDir, name: &str, report: &RollbackReport) -> Result<i32, CliError> {
    let mut out = std::io::stdout().lock();
    let w =
        |out: &mut std::io::StdoutLock, s: String| writeln!(out, "{s}").map_err(CliError::Stdout);
    let show = |p: &std::path::Path| audit::escape_for_terminal(p.as_os_str().as_encoded_bytes());
    for p in &report.planned {
        w(&mut out, format!("{} {}", p.what, show(&p.path)))?;
    }
    for c in &report.replaced {
        w(&mut out, format!("replace {}: {}", show(&c.path), c.what))?;
    }
    for c in &report.conflicts {
        w(&mut out, format!("conflict {}: {}", show(&c.path), c.what))?;
    }
    let verdict = if report.conflicts.is_empty() {
        "would go ahead".to_string()
    } else {
        format!(
            "would be refused: {} conflict(s) (`--force` goes ahead, keeping what it replaces)",
            report.conflicts.len()
        )
    };
    w(
        &mut out,
        format!(
            "dry run: the {name} of run {} would make {} change(s); {verdict}",
            run.id,
            report.planned.len()
        ),
    )?;
    Ok(if report.conflicts.is_empty() { 0 } else { 1 })
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
    let state = journal::state_dir()?;
    let ws = args
        .workspace
        .map(|w| std::fs::canonicalize(&w).unwrap_or(w));
    let done = journal::recover(&state, ws.as_deref())
        .map_err(|e| CliError::Usage(format!("recovery failed: {e}\nhint: it can be run again")))?;
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
    let state = journal::state_dir()?;
    let r = journal::prune(&state, args.keep)
        .map_err(|e| CliError::Usage(format!("prune failed: {e}")))?;
    println!(
        "removed {} journal(s), kept {}",
        r.removed.len(),
        r.kept.len()
    );
    Ok(0)
}
