//! Journals across runs: crash recovery ([`recover`]), retention ([`prune`]), and the lock
//! that keeps two guard processes from operating on one journal at once.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;

use super::journal::{Journal, JournalError};
use super::rundir::{active_runs, journal_runs, list_runs, RunDir, RunMeta, JOURNALS};

/// One interrupted run that [`recover`] restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The run id.
    pub run: String,
    /// An operation on the journal (a rollback, or an undo) was interrupted and was reverted:
    /// the workspace is as it was before it.
    pub reverted_operation: bool,
    /// The run itself was interrupted and was rolled back to its start.
    pub entries_undone: u64,
    /// How many restored paths were checked and found as the journal recorded them.
    pub verified: u64,
    /// Entries that could not be restored or verified, one line each.
    pub problems: Vec<String>,
}

/// The state a run is in while a rollback or undo runs on its journal (with the pid of that
/// guard process in `guard_pid`).
pub const STATE_ROLLING_BACK: &str = "rolling-back";

/// An exclusive lock on a run's journal, held while guard operates on it.
pub struct JournalLock {
    _file: nix::fcntl::Flock<std::fs::File>,
}

/// Takes the journal lock of the run at `run_dir`, or fails with [`JournalError::Busy`].
///
/// # Errors
///
/// [`JournalError::Busy`] when another guard process holds it, [`JournalError::Read`] when
/// the lock file cannot be opened.
pub fn lock_journal(run_dir: &Path) -> Result<JournalLock, JournalError> {
    let path = run_dir.join("journal").join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| JournalError::Read {
            path: path.clone(),
            source,
        })?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(f) => Ok(JournalLock { _file: f }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(JournalError::Busy { path }),
        Err((_, e)) => Err(JournalError::Read {
            path,
            source: e.into(),
        }),
    }
}

/// What [`prune`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Runs whose journal directory was removed.
    pub removed: Vec<String>,
    /// Runs kept: the newest ones, and any still running or interrupted.
    pub kept: Vec<String>,
}

/// Whether `pid` is a live guard process.
fn guard_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    let alive = match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(e) => e == nix::errno::Errno::EPERM,
    };
    alive
        && crate::sys::process::read_proc_text(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim_end().starts_with("guard"))
}

/// Whether the run recorded in `meta` was interrupted: still "running" (or being rolled back)
/// by its metadata, but its guard process is gone (or the pid now belongs to another program).
fn interrupted(meta: &RunMeta) -> bool {
    (meta.state == "running" || meta.state == STATE_ROLLING_BACK) && !guard_alive(meta.guard_pid)
}

/// Debug builds only: `GUARD_DEBUG_PAUSE_INTERRUPTED_MS=N` waits N ms between reading a run's
/// metadata and looking at its guard, so that tests can end that run in between
/// (`a_run_ending_while_another_starts_is_not_taken_for_interrupted`).
#[cfg(debug_assertions)]
fn pause_point() {
    if let Some(ms) = std::env::var("GUARD_DEBUG_PAUSE_INTERRUPTED_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// The metadata of `run` when the run was interrupted ([`interrupted`]). Read again once its
/// guard is seen gone: a run that ends records so before its guard exits, so a run that ended
/// between the first read and the look at its guard (another run on the same workspace,
/// finishing just then) is not taken for interrupted, nor rolled back by `recover`.
fn interrupted_meta(run: &RunDir) -> Option<RunMeta> {
    let meta = run.read_meta().ok()?;
    #[cfg(debug_assertions)]
    pause_point();
    if !interrupted(&meta) {
        return None;
    }
    run.read_meta().ok().filter(interrupted)
}

/// The state a run's metadata should show after operations on its journal: `rolled-back`
/// while a rollback is the newest operation in effect, else `ended`.
pub fn settled_state(j: &Journal) -> &'static str {
    match j.history().newest_in_effect().map(|o| o.kind) {
        Some(super::log::OpKind::Rollback) => "rolled-back",
        _ => "ended",
    }
}

/// The ids of the runs on `workspace` that were interrupted and not yet recovered. Only runs
/// with an active marker are looked at (see [`RunDir::create`]), so the cost does not grow
/// with the number of runs kept.
pub fn interrupted_runs(state: &Path, workspace: &Path) -> Vec<String> {
    crate::journal::rundir::active_runs(state)
        .into_iter()
        .filter(|run| interrupted_meta(run).is_some_and(|m| m.workspace == workspace))
        .map(|run| run.id)
        .collect()
}

/// Finds runs under `state` that were interrupted (on `workspace` only, when given). An
/// operation interrupted on a journal (a rollback or an undo) is reverted, so the workspace is
/// as before it; a run interrupted while running is then rolled back to its first checkpoint
/// and marked "recovered".
///
/// # Errors
///
/// The first failure to lock, open, revert or roll back a run's journal, or to update its
/// `run.json`; the runs before it are recovered, and recovering again goes on from there.
pub fn recover(state: &Path, workspace: Option<&Path>) -> Result<Vec<Recovered>, JournalError> {
    let mut out = Vec::new();
    for run in list_runs(state) {
        let Some(mut meta) = interrupted_meta(&run) else {
            continue;
        };
        if workspace.is_some_and(|w| w != meta.workspace) {
            continue;
        }
        let mut rec = Recovered {
            run: run.id.clone(),
            reverted_operation: false,
            entries_undone: 0,
            verified: 0,
            problems: Vec::new(),
        };
        let running = meta.state == "running";
        let mut settled = "recovered";
        if run.path.join("journal/journal.json").exists() {
            let _lock = lock_journal(&run.path)?;
            let mut journal = Journal::open(&run.path)?;
            if let Some(problems) = journal.revert_interrupted()? {
                rec.reverted_operation = true;
                rec.problems = problems;
            }
            if running {
                if let Some((first, _, _)) = journal.checkpoints().first().cloned() {
                    let report = journal.rollback(first, &mut |_, _| {})?;
                    rec.entries_undone = report.entries_undone;
                    rec.verified = report.verified;
                    rec.problems.extend(report.problems);
                }
            } else {
                settled = settled_state(&journal);
            }
        }
        meta.state = settled.to_string();
        // Writing run.json takes the temporary file the killed guard made for it; the
        // summary's, made ahead of the run's end too, goes here.
        run.write_meta(&meta)?;
        crate::audit::Summary::remove_leftovers(&run.summary());
        run.mark_inactive(state);
        remove_private_tmp(&run, &meta);
        tracing::info!(run = %run.id, undone = rec.entries_undone, "recovered an interrupted run");
        out.push(rec);
    }
    Ok(out)
}

/// Removes the private temporary directory a killed run left (its guard could not), if
/// `run.json` names one and it is what guard made: a directory, not a symlink, named
/// `guard-<run id>`.
fn remove_private_tmp(run: &RunDir, meta: &RunMeta) {
    let Some(tmp) = meta.tmp.as_deref() else {
        return;
    };
    let ours = tmp
        .file_name()
        .is_some_and(|n| *n == *format!("guard-{}", run.id));
    let is_dir = std::fs::symlink_metadata(tmp).is_ok_and(|m| m.is_dir());
    if !ours || !is_dir {
        return;
    }
    make_removable(tmp);
    if let Err(e) = std::fs::remove_dir_all(tmp) {
        tracing::warn!("cannot remove {}: {e}", tmp.display());
    }
}

/// The file under the state directory that named the oldest run whose journal the last prune
/// kept, before the index of journals (see [`super::rundir::JOURNALS`]): a state directory
/// made by an older guard is indexed from the runs no older than it.
const PRUNE_MARK: &str = "prune-mark";

/// Whether [`prune`] down to `keep` could remove a journal: the index of journals and the
/// active runs together name more than `keep` runs, or there is no index yet (the prune
/// makes it). Two short directory listings, cheap enough to spare a run's start a thread
/// for nothing: a run that changes nothing makes no journal, so a state directory used for
/// such runs never needs a prune.
pub fn may_prune(state: &Path, keep: usize) -> bool {
    let count = |dir: &str| std::fs::read_dir(state.join(dir)).map(Iterator::count);
    match count(JOURNALS) {
        Ok(journals) => journals + count("active").unwrap_or(0) > keep,
        Err(_) => true,
    }
}

/// Keeps the journals of the newest `keep` runs and removes the other runs' `journal/`
/// directories (their audit logs and summaries stay). A run still running, or interrupted and
/// not yet recovered, is never touched; it counts among the newest `keep`.
///
/// The runs looked at are those in the index of journals (the ended runs that still have
/// one) and the active runs, both short lists, not every run the state directory ever held:
/// run directories stay, so that would be one look per past run at every start. The first
/// prune on a state directory without an index makes it (see [`index_journals`]).
///
/// # Errors
///
/// [`JournalError::Create`] naming a journal directory that cannot be removed (journals
/// removed before it stay removed).
pub fn prune(state: &Path, keep: usize) -> Result<PruneReport, JournalError> {
    let mut report = PruneReport::default();
    let indexed = journal_runs(state).unwrap_or_else(|| index_journals(state));
    let active = active_runs(state);
    let active_ids: std::collections::HashSet<String> =
        active.iter().map(|r| r.id.clone()).collect();
    let mut runs: Vec<RunDir> = indexed.into_iter().chain(active).collect();
    runs.sort_by(|a, b| b.id.cmp(&a.id));
    runs.dedup_by(|a, b| a.id == b.id);
    // The runs that hold a journal, newest first. A run still going counts whether or not its
    // journal exists yet (it is made at the run's first change), as it did when every run made
    // one at its start. An indexed run without one had it removed by hand, or by a prune
    // running at the same time: it leaves the index.
    let mut with_journal = Vec::with_capacity(runs.len());
    for r in runs {
        if active_ids.contains(&r.id) || r.path.join("journal").is_dir() {
            with_journal.push(r);
        } else {
            let _ = std::fs::remove_file(state.join(JOURNALS).join(&r.id));
        }
    }
    for (i, run) in with_journal.into_iter().enumerate() {
        // Only runs beyond the newest `keep` have their metadata read.
        let busy = |m: RunMeta| m.state == "running" || m.state == STATE_ROLLING_BACK;
        if i < keep || run.read_meta().map_or(true, busy) {
            report.kept.push(run.id);
            continue;
        }
        let dir = run.path.join("journal");
        make_removable(&dir);
        match std::fs::remove_dir_all(&dir) {
            // An ended run still marked active that changed nothing: no journal to remove.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            other => other.map_err(|source| JournalError::Create {
                path: dir.clone(),
                source,
            })?,
        }
        let _ = std::fs::remove_file(state.join(JOURNALS).join(&run.id));
        report.removed.push(run.id);
    }
    Ok(report)
}

/// Makes the index of journals of a state directory that has none: one empty file for each
/// run with a journal, written in a directory of its own and renamed into place, so a reader
/// sees no index or a whole one. Only runs no older than the old prune mark are looked at (no
/// older run had a journal left). When another guard made the index first, that one is used.
fn index_journals(state: &Path) -> Vec<RunDir> {
    let mark = std::fs::read_to_string(state.join(PRUNE_MARK)).ok();
    let mark = mark.as_deref().map(str::trim).filter(|m| !m.is_empty());
    let found: Vec<RunDir> = list_runs(state)
        .into_iter()
        .take_while(|r| mark.is_none_or(|m| r.id.as_str() >= m))
        .filter(|r| r.path.join("journal").is_dir())
        .collect();
    let index = state.join(JOURNALS);
    let tmp = state.join(format!(".{JOURNALS}.{}", std::process::id()));
    let made = std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&tmp)
        .and_then(|()| {
            found
                .iter()
                .try_for_each(|r| std::fs::write(tmp.join(&r.id), b""))
        })
        .and_then(|()| std::fs::rename(&tmp, &index));
    match made {
        Ok(()) => {
            let _ = std::fs::remove_file(state.join(PRUNE_MARK));
            found
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            match journal_runs(state) {
                Some(theirs) => theirs,
                None => {
                    tracing::debug!("cannot make {}: {e}", index.display());
                    found
                }
            }
        }
    }
}

/// Gives the owner write and search permission on every directory under `dir` (recorded
/// directories may be read-only), so the tree can be removed.
fn make_removable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    if !meta.is_dir() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o700 != 0o700 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            make_removable(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prune_is_needed_only_past_keep_or_without_an_index() {
        let state = tempfile::tempdir().expect("tempdir");
        let s = state.path();
        assert!(may_prune(s, 20), "no index yet: the prune makes it");
        std::fs::create_dir_all(s.join(JOURNALS)).expect("index");
        std::fs::create_dir_all(s.join("active")).expect("active");
        assert!(!may_prune(s, 0), "nothing at all");
        for id in ["r1", "r2"] {
            std::fs::write(s.join(JOURNALS).join(id), b"").expect("indexed");
        }
        std::fs::write(s.join("active").join("r3"), b"").expect("active run");
        assert!(!may_prune(s, 3));
        assert!(may_prune(s, 2));
        assert!(!may_prune(s, 20));
    }
}
