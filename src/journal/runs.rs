//! Journals across runs: crash recovery ([`recover`]) and retention ([`prune`]).

use std::path::Path;

use super::journal::{Journal, JournalError};
use super::rundir::{list_runs, RunDir, RunMeta};

/// One interrupted run that [`recover`] rolled back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub run: String,
    pub entries_undone: u64,
    pub verified: u64,
    pub problems: Vec<String>,
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
        && std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim_end().starts_with("guard"))
}

/// Whether the run recorded in `meta` was interrupted: still "running" by its metadata, but
/// its guard process is gone (or the pid now belongs to another program).
fn interrupted(meta: &RunMeta) -> bool {
    meta.state == "running" && !guard_alive(meta.guard_pid)
}

/// The ids of the runs on `workspace` that were interrupted and not yet recovered.
pub fn interrupted_runs(state: &Path, workspace: &Path) -> Vec<String> {
    list_runs(state)
        .into_iter()
        .filter(|run| {
            run.read_meta()
                .is_ok_and(|m| m.workspace == workspace && interrupted(&m))
        })
        .map(|run| run.id)
        .collect()
}

/// Finds runs under `state` that were interrupted (on `workspace` only, when given), rolls each
/// journal back to its first checkpoint and marks the run "recovered".
pub fn recover(state: &Path, workspace: Option<&Path>) -> Result<Vec<Recovered>, JournalError> {
    let mut out = Vec::new();
    for run in list_runs(state) {
        let Ok(mut meta) = run.read_meta() else {
            continue;
        };
        if !interrupted(&meta) || workspace.is_some_and(|w| w != meta.workspace) {
            continue;
        }
        let mut rec = Recovered {
            run: run.id.clone(),
            entries_undone: 0,
            verified: 0,
            problems: Vec::new(),
        };
        if run.path.join("journal/journal.json").exists() {
            let mut journal = Journal::open(&run.path)?;
            if let Some((first, _, _)) = journal.checkpoints().first().cloned() {
                let report = journal.rollback(first, &mut |_, _| {})?;
                rec.entries_undone = report.entries_undone;
                rec.verified = report.verified;
                rec.problems = report.problems;
            }
        }
        meta.state = "recovered".to_string();
        run.write_meta(&meta)?;
        tracing::info!(run = %run.id, undone = rec.entries_undone, "recovered an interrupted run");
        out.push(rec);
    }
    Ok(out)
}

/// Keeps the journals of the newest `keep` runs and removes the other runs' `journal/`
/// directories (their audit logs and summaries stay). A run still running, or interrupted and
/// not yet recovered, is never touched.
pub fn prune(state: &Path, keep: usize) -> Result<PruneReport, JournalError> {
    let mut report = PruneReport::default();
    let with_journal: Vec<RunDir> = list_runs(state)
        .into_iter()
        .filter(|r| r.path.join("journal").is_dir())
        .collect();
    for (i, run) in with_journal.into_iter().enumerate() {
        let active = run.read_meta().map_or(true, |m| m.state == "running");
        if i < keep || active {
            report.kept.push(run.id);
            continue;
        }
        let dir = run.path.join("journal");
        make_removable(&dir);
        std::fs::remove_dir_all(&dir).map_err(|source| JournalError::Create {
            path: dir.clone(),
            source,
        })?;
        report.removed.push(run.id);
    }
    Ok(report)
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
