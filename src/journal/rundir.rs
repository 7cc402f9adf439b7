//! The state directory and run directories.

use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::RenameFlags;
use serde::{Deserialize, Serialize};

/// Failures of the state directory and the run directories in it; I/O failures name their path.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Neither `GUARD_STATE_DIR`, `XDG_STATE_HOME` nor `HOME` is set.
    #[error("cannot find a state directory\nhint: set GUARD_STATE_DIR or HOME")]
    NoStateDir,
    /// A directory or file could not be created.
    #[error("cannot create {path}")]
    Create {
        /// The directory or file.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file (`run.json`).
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A file could not be read (or is not what guard wrote).
    #[error("cannot read {path}")]
    Read {
        /// The file (`run.json`).
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
}

/// `$GUARD_STATE_DIR`, else `$XDG_STATE_HOME/guard`, else `~/.local/state/guard`.
///
/// # Errors
///
/// [`StateError::NoStateDir`] when none of the three is set.
pub fn state_dir() -> Result<PathBuf, StateError> {
    if let Some(d) = std::env::var_os("GUARD_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("guard"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => Ok(PathBuf::from(h).join(".local/state/guard")),
        None => Err(StateError::NoStateDir),
    }
}

/// What `run.json` records about a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    /// The layout version of `run.json`.
    pub v: u32,
    /// The run id (also the run directory's name).
    pub id: String,
    /// The absolute workspace path.
    pub workspace: PathBuf,
    /// The argv of the confined command, lossily as text.
    pub command: Vec<String>,
    /// The profile name as given.
    pub profile: String,
    /// When the run started (RFC 3339, UTC).
    pub started: String,
    /// The pid of the guard process that ran it (to tell a dead guard from a live one).
    pub guard_pid: u32,
    /// `running` until the run ends, then `ended`; `failed` when guard could not start the
    /// command (nothing ran; such a run is never the default of `log`, `diff`, `rollback`);
    /// `recovered` after `guard recover`.
    pub state: String,
    /// guard's exit status once the run has ended.
    pub status: Option<i32>,
    /// The run's private temporary directory (`$TMPDIR/guard-<id>`), removed when the run
    /// ends, or by `guard recover` when guard was killed. Absent from older runs' metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<PathBuf>,
}

/// One run's directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The run id.
    pub id: String,
    /// The run directory.
    pub path: PathBuf,
}

fn mkdir_private(p: &Path) -> Result<(), StateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|source| StateError::Create {
            path: p.to_path_buf(),
            source,
        })
}

impl RunDir {
    /// Create a fresh run directory under `state`.
    ///
    /// # Errors
    ///
    /// [`StateError::Create`] when the run directory or its active marker cannot be created.
    pub fn create(state: &Path) -> Result<RunDir, StateError> {
        let runs = state.join("runs");
        // `runs` and `active` are made when missing, not asked for first on every start.
        let mut made_runs = false;
        // 2026-12-02T11:02:32.123456Z -> 20261202T110232.123456Z: ids sort by start time to
        // the microsecond (two runs started in one second sort in the order they started).
        let stamp = crate::audit::Timestamp::now().to_string();
        let base: String = stamp
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        let mut n = 0u32;
        while n < 1000 {
            let id = if n == 0 {
                format!("{base}-{:04x}", std::process::id() & 0xffff)
            } else {
                format!("{base}-{:04x}-{n}", std::process::id() & 0xffff)
            };
            let path = runs.join(&id);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    // The active marker lets the next start find interrupted runs without
                    // reading every run's metadata.
                    let active = state.join("active");
                    let marker = active.join(&id);
                    let mark = || std::fs::write(&marker, b"");
                    let marked = match mark() {
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            mkdir_private(&active)?;
                            mark()
                        }
                        other => other,
                    };
                    marked.map_err(|source| StateError::Create {
                        path: marker.clone(),
                        source,
                    })?;
                    return Ok(RunDir { id, path });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && !made_runs => {
                    mkdir_private(&runs)?;
                    made_runs = true;
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
                Err(source) => return Err(StateError::Create { path, source }),
            }
        }
        Err(StateError::Create {
            path: runs,
            source: io::Error::from(io::ErrorKind::AlreadyExists),
        })
    }

    /// An operation starts on the run's journal: mark it active, so a crash in the middle is
    /// found by the next start on its workspace.
    ///
    /// # Errors
    ///
    /// [`StateError::Create`] when the marker cannot be created.
    pub fn mark_active(&self, state: &Path) -> Result<(), StateError> {
        let active = state.join("active");
        mkdir_private(&active)?;
        std::fs::write(active.join(&self.id), b"").map_err(|source| StateError::Create {
            path: active.join(&self.id),
            source,
        })
    }

    /// The run ended (or was recovered, or an operation on it ended): drop its active marker.
    /// A run that has a journal is listed in the index of journals instead (see
    /// [`journal_runs`]): the marker is renamed there, so no file is made.
    pub fn mark_inactive(&self, state: &Path) {
        let active = state.join("active").join(&self.id);
        if self.path.join("journal").is_dir() {
            let kept = state.join(JOURNALS).join(&self.id);
            // Without a marker to move (an operation that never set one), an empty file says
            // the same. Without an index yet, the next prune makes it from the run directories,
            // this run's among them.
            if std::fs::rename(&active, &kept).is_ok() || std::fs::write(&kept, b"").is_ok() {
                return;
            }
        }
        let _ = std::fs::remove_file(&active);
    }

    /// The run's audit log (`audit.jsonl`).
    pub fn audit_log(&self) -> PathBuf {
        self.path.join("audit.jsonl")
    }

    /// The run's summary (`summary.json`).
    pub fn summary(&self) -> PathBuf {
        self.path.join("summary.json")
    }

    /// Makes the temporary file the next [`RunDir::write_meta`] writes through, empty, ahead
    /// of time (for the last one, while the command runs): the write then finds it made.
    pub fn prepare_meta(&self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(self.meta_tmp());
    }

    fn meta_tmp(&self) -> PathBuf {
        self.path.join(".run.json.tmp")
    }

    /// Write `run.json` atomically.
    ///
    /// # Errors
    ///
    /// [`StateError::Write`] when the file cannot be written or renamed into place.
    pub fn write_meta(&self, meta: &RunMeta) -> Result<(), StateError> {
        let path = self.path.join("run.json");
        let tmp = self.meta_tmp();
        let text = serde_json::to_string_pretty(meta).map_err(|e| StateError::Write {
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        let write = || -> io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            drop(f);
            // Replacing run.json by a rename over it makes ext4 (auto_da_alloc) start writing
            // the new file's blocks out at once, in the run's last steps; exchanging the two
            // names does not, and the old content is then removed under the temporary name.
            // Either way a reader finds a whole run.json, the old or the new.
            match nix::fcntl::renameat2(None, &tmp, None, &path, RenameFlags::RENAME_EXCHANGE) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&tmp);
                    Ok(())
                }
                // The first write (nothing to exchange with), or a filesystem without it.
                Err(_) => std::fs::rename(&tmp, &path),
            }
        };
        write().map_err(|source| StateError::Write {
            path: path.clone(),
            source,
        })
    }

    /// Records that guard could not start the command of this run: keeps the metadata already
    /// written (or writes what is known) with state `failed`.
    pub fn record_failed_start(&self, workspace: &Path, command: &[String], profile: &str) {
        let meta = match self.read_meta() {
            Ok(meta) => RunMeta {
                state: "failed".into(),
                ..meta
            },
            Err(_) => RunMeta {
                v: 1,
                id: self.id.clone(),
                workspace: workspace.to_path_buf(),
                command: command.to_vec(),
                profile: profile.to_owned(),
                started: crate::audit::Timestamp::now().to_string(),
                guard_pid: std::process::id(),
                state: "failed".into(),
                status: None,
                tmp: None,
            },
        };
        if let Err(e) = self.write_meta(&meta) {
            tracing::warn!("cannot record the failed start of run {}: {e}", self.id);
        }
    }

    /// Reads `run.json`.
    ///
    /// # Errors
    ///
    /// [`StateError::Read`] when it is missing or not valid.
    pub fn read_meta(&self) -> Result<RunMeta, StateError> {
        let path = self.path.join("run.json");
        let text = std::fs::read_to_string(&path).map_err(|source| StateError::Read {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| StateError::Read {
            path,
            source: io::Error::other(e),
        })
    }
}

/// Runs that have not ended: those with an active marker, newest first.
pub fn active_runs(state: &Path) -> Vec<RunDir> {
    let mut out: Vec<RunDir> = std::fs::read_dir(state.join("active"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let id = e.file_name().to_str()?.to_string();
                    let path = state.join("runs").join(&id);
                    Some(RunDir { id, path })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out
}

/// The directory under the state directory that lists, by an empty file named by the run id,
/// every ended run that still has a journal. Pruning reads it instead of every run directory
/// the state directory ever held (run directories stay after their journal is pruned).
pub(super) const JOURNALS: &str = "journals";

/// The ended runs listed in the index of journals (see [`JOURNALS`]), newest first; `None`
/// when there is no index yet (a state directory from an older guard, or a fresh one).
pub(super) fn journal_runs(state: &Path) -> Option<Vec<RunDir>> {
    let listing = std::fs::read_dir(state.join(JOURNALS)).ok()?;
    let mut out: Vec<RunDir> = listing
        .flatten()
        .filter_map(|e| {
            let id = e.file_name().to_str()?.to_string();
            (!id.starts_with('.')).then(|| RunDir {
                path: state.join("runs").join(&id),
                id,
            })
        })
        .collect();
    out.sort_by(|a, b| b.id.cmp(&a.id));
    Some(out)
}

/// The run that `guard log`, `diff` and `rollback` take when none is named: the newest one
/// that started (it has metadata and its state is not `failed`).
pub fn default_run(state: &Path) -> Option<RunDir> {
    list_runs(state)
        .into_iter()
        .find(|r| r.read_meta().is_ok_and(|m| m.state != "failed"))
}

/// Every run under `state`, newest first.
pub fn list_runs(state: &Path) -> Vec<RunDir> {
    let runs = state.join("runs");
    let mut out: Vec<RunDir> = std::fs::read_dir(&runs)
        .map(|d| {
            d.flatten()
                // The entry's type comes with the listing: no stat per run, except for a
                // symlink, which is followed.
                .filter(|e| {
                    e.file_type()
                        .is_ok_and(|t| t.is_dir() || (t.is_symlink() && e.path().is_dir()))
                })
                .filter_map(|e| {
                    let id = e.file_name().to_str()?.to_string();
                    Some(RunDir { id, path: e.path() })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by(|a, b| b.id.cmp(&a.id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rewrite of run.json leaves the new content under its name and nothing under the
    /// temporary one, whether it replaces a run.json or makes the first.
    #[test]
    fn run_json_is_replaced_whole_and_nothing_is_left_beside_it() {
        let state = tempfile::tempdir().expect("tempdir");
        let run = RunDir::create(state.path()).expect("run dir");
        let meta = |s: &str| RunMeta {
            v: 1,
            id: run.id.clone(),
            workspace: PathBuf::from("/ws"),
            command: vec!["true".into()],
            profile: "agent".into(),
            started: "2026-12-04T00:00:00Z".into(),
            guard_pid: 1,
            state: s.into(),
            status: None,
            tmp: None,
        };
        for s in ["running", "done", "rolled-back"] {
            run.write_meta(&meta(s)).expect("write");
            assert_eq!(run.read_meta().expect("read").state, s);
            let names: Vec<String> = std::fs::read_dir(&run.path)
                .expect("list")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(names, ["run.json"]);
        }
    }

    /// A start makes `runs` and `active` when they are missing, and finds them otherwise.
    #[test]
    fn a_run_directory_is_made_with_its_marker_whatever_is_missing() {
        let state = tempfile::tempdir().expect("tempdir");
        let marked =
            |run: &RunDir| run.path.is_dir() && state.path().join("active").join(&run.id).is_file();
        let first = RunDir::create(state.path()).expect("fresh state");
        let second = RunDir::create(state.path()).expect("both there");
        assert!(marked(&first) && marked(&second));
        assert_ne!(first.id, second.id);
        std::fs::remove_dir_all(state.path().join("active")).unwrap();
        let third = RunDir::create(state.path()).expect("no active");
        assert!(marked(&third));
    }
}
