//! The transaction commands: `guard diff`, `guard rollback`, `guard recover`, `guard prune`.
//! They work on a run's journal after the run has ended (or after guard crashed).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::audit;
use crate::journal::{self, CheckpointId, Journal, RunDir};

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
    /// Roll back even if files the run touched were changed after it ended (that newer work is
    /// lost).
    #[arg(long)]
    pub force: bool,
}

/// `guard rollback [RUN] [--to CHECKPOINT] [--force]`: undo a run after it ended.
pub fn rollback(args: RollbackArgs) -> Result<i32, CliError> {
    let run = find_run(args.run.as_deref())?;
    let mut meta = run.read_meta()?;
    if meta.state == "running" {
        return Err(CliError::Usage(format!(
            "run {} is still running (guard pid {})\nhint: if guard crashed, run `guard recover`",
            run.id, meta.guard_pid
        )));
    }
    let mut j = open_journal(&run)?;
    let to = match args.to {
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
        None => first_checkpoint(&j)?,
    };
    if !args.force {
        let conflicts = j.conflicts().map_err(|e| {
            CliError::Usage(format!("cannot check run {} for conflicts: {e}", run.id))
        })?;
        if !conflicts.is_empty() {
            let mut msg = format!(
                "refusing to roll back run {}: {} path(s) changed since it ended, and rolling back would lose that work:",
                run.id,
                conflicts.len()
            );
            for c in conflicts.iter().take(20) {
                msg.push_str(&format!("\n  {}: {}", c.path.display(), c.what));
            }
            if conflicts.len() > 20 {
                msg.push_str(&format!("\n  ... and {} more", conflicts.len() - 20));
            }
            msg.push_str("\nhint: `guard rollback --force` rolls back anyway");
            return Err(CliError::Usage(msg));
        }
    }
    let report = j
        .rollback(to, &mut super::progress::reporter("rolling back"))
        .map_err(|e| {
            CliError::Usage(format!(
                "rollback of run {} failed: {e}\nhint: it can be run again",
                run.id
            ))
        })?;
    for p in &report.problems {
        eprintln!("guard: rollback: {p}");
    }
    let digest = journal::tree_digest(j.workspace(), &[]).unwrap_or_default();
    let line = audit::encode(
        &audit::Event::Rollback(audit::Rollback {
            checkpoint: to.0.to_string(),
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
    meta.state = "rolled-back".into();
    run.write_meta(&meta)?;
    println!(
        "rolled back run {} to checkpoint {}: {} change(s) undone, {} verified{}",
        run.id,
        to.0,
        report.entries_undone,
        report.verified,
        if report.problems.is_empty() {
            String::new()
        } else {
            format!(", {} problem(s) above", report.problems.len())
        }
    );
    Ok(if report.problems.is_empty() { 0 } else { 1 })
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Only runs on this workspace (default: every interrupted run).
    #[arg(short, long)]
    pub workspace: Option<PathBuf>,
}

/// `guard recover [-w DIR]`: restore workspaces left by runs whose guard died.
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
        println!(
            "recovered run {}: {} change(s) undone, {} verified",
            r.run, r.entries_undone, r.verified
        );
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
