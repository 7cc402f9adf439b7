//! [`Journal`]: creating and opening a run's journal, the log it appends to, the checkpoints
//! and which workspace paths it covers. The write-ahead hooks live in `hooks.rs` and
//! `rename.rs`, rollback in `rollback.rs` (its steps in `steps.rs`, the revert of an
//! interrupted one in `undo.rs`).

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};

use super::fsops;
use super::history::History;
use super::log::{read_log, Boundary, Entry, FileId, LogWriter, Op};
use super::report::Conflict;
use crate::audit::PathText;
use crate::policy::{PathSet, TransactionPolicy};

/// A checkpoint's number, 1 for the first one of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckpointId(pub u32);

impl std::fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How pre-images reach the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "how")]
pub enum StoreMode {
    /// The store is on the workspace's filesystem: deleted and replaced entries are renamed into
    /// it (O(1), inode exact); pre-images of written files are reflinked where the filesystem
    /// can, else copied (`copy.rs` tries the reflink first). Journals written before this
    /// said whether a probe could reflink (`"reflink": true`); that field is read and ignored.
    Move,
    /// The store is on another filesystem: everything is copied.
    Copy,
}

/// What `will_write` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// The pre-image was saved; a rollback restores the file's content.
    Saved,
    /// Nothing to do: this inode's pre-image was already taken since the last checkpoint, or it
    /// is not a regular file (writing a fifo or device changes nothing in the tree).
    AlreadySaved,
    /// Larger than `max_preimage_bytes`: recorded as unprotected, no pre-image.
    Unprotected {
        /// The file's size in bytes.
        size: u64,
    },
}

/// Why a journal operation failed; every I/O failure names its path.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The journal directory or one of its files could not be created.
    #[error("cannot create the journal {path}")]
    Create {
        /// The file or directory.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The journal could not be read.
    #[error("cannot read the journal {path}")]
    Read {
        /// The journal file (header, log, store, lock) that cannot be read.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// An entry could not be appended to the journal's log.
    #[error(
        "cannot append to the journal log {path}\nhint: is the state directory full or read-only?"
    )]
    Append {
        /// The log file.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A file's pre-image could not be saved before it changed.
    #[error("cannot save a pre-image of {path}")]
    Save {
        /// The workspace file.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A workspace entry could not be examined.
    #[error("cannot inspect {path}")]
    Inspect {
        /// The entry, absolute.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// A new file was announced where an entry already exists.
    #[error(
        "{path} already exists\nhint: an existing file opened for writing goes through will_write"
    )]
    Exists {
        /// The existing entry.
        path: PathBuf,
    },
    /// The path lies outside the journaled tree.
    #[error("{path} is not journaled (outside the workspace {workspace} or excluded)")]
    NotCovered {
        /// The path the caller named.
        path: PathBuf,
        /// The journal's workspace.
        workspace: PathBuf,
    },
    /// The journal has no checkpoint with that id.
    #[error("the journal {path} has no checkpoint {id}\nhint: `guard runs` lists runs; the log shows their checkpoints")]
    NoCheckpoint {
        /// The checkpoint asked for.
        id: CheckpointId,
        /// The journal's log file.
        path: PathBuf,
    },
    /// A `transaction.exclude` pattern is not a valid glob.
    #[error("invalid exclude pattern `{pattern}`")]
    Exclude {
        /// The pattern as written.
        pattern: String,
        /// What the glob compiler found wrong.
        #[source]
        source: globset::Error,
    },
    /// The run's metadata could not be updated.
    #[error("cannot update the run metadata")]
    Run(#[from] super::StateError),
    /// Paths changed since the run left them; a rollback without `--force` would lose that work.
    #[error("{} path(s) changed since the run left them, and rolling back would lose that work:{}\nhint: `--force` rolls back anyway and keeps what it replaces in the journal (`guard undo` brings it back)", conflicts.len(), list(conflicts))]
    Conflicts {
        /// Each changed path and what changed.
        conflicts: Vec<Conflict>,
    },
    /// A rollback failed part way and was reverted: the workspace is as it was before it.
    #[error("the rollback stopped at {at}: {why}; everything it had done was reverted, the workspace is as it was before{}", problems(reverted))]
    Aborted {
        /// The path (or entry) at which it stopped.
        at: String,
        /// Why the step failed.
        why: String,
        /// Steps the revert itself could not undo (empty when the revert was complete).
        reverted: Vec<String>,
    },
    /// The journal has no seal (the run did not end cleanly), so changes made since cannot be
    /// detected.
    #[error("the journal {path} has no record of the state the run left (it did not end cleanly)\nhint: `guard recover` restores interrupted runs; `--force` rolls back without the check")]
    NoSeal {
        /// Where the seal should be.
        path: PathBuf,
    },
    /// An earlier operation on the journal was interrupted; `recover` reverts it.
    #[error(
        "an operation on the journal {path} was interrupted\nhint: `guard recover` reverts it"
    )]
    Interrupted {
        /// The journal's log file.
        path: PathBuf,
    },
    /// There is no rollback of this run to undo.
    #[error("nothing to undo: no rollback of this run is in effect")]
    NothingToUndo,
    /// The run changed the workspace after the rollback, so undoing it would overwrite that.
    #[error("the run changed the workspace after that rollback; undoing it would overwrite those changes\nhint: roll the run back first")]
    UndoBuried,
    /// Another guard process holds the journal's lock.
    #[error("the journal {path} is in use by another guard process")]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
}

fn list(conflicts: &[Conflict]) -> String {
    let mut s = String::new();
    for c in conflicts.iter().take(20) {
        s.push_str(&format!("\n  {}: {}", c.path.display(), c.what));
    }
    if conflicts.len() > 20 {
        s.push_str(&format!("\n  ... and {} more", conflicts.len() - 20));
    }
    s
}

fn problems(p: &[String]) -> String {
    if p.is_empty() {
        return String::new();
    }
    format!(" except:\n  {}", p.join("\n  "))
}

/// `journal.json`: what `open` needs to know about the journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Header {
    pub v: u32,
    pub workspace: PathText,
    pub exclude: Vec<String>,
    pub max_preimage_bytes: u64,
    pub fsync: bool,
    pub mode: StoreMode,
    /// How many store objects share one directory of the store (`store/<seq / bucket>/<seq>`);
    /// 0, in a journal written before there were buckets: every object in the store itself.
    #[serde(default)]
    pub bucket: u64,
}

/// Store objects per directory of the store in a new journal. A rename into a directory
/// (and out of it) searches the directory's block and looks for room in it entry by entry:
/// `benches/store_layout.py` on an ext4 image here, 20,000 renames: 22.5 µs each into one
/// directory, 12.4 into directories of 64, their `mkdir`s included (32: 11.6, 128: 13.6,
/// 256: 17.7). 64 makes half as many directories as 32 for about the same.
pub(crate) const BUCKET: u64 = 64;

/// One run's transactional journal (see the module doc).
pub struct Journal {
    pub(crate) dir: PathBuf,
    pub(crate) header: Header,
    pub(crate) workspace: PathBuf,
    pub(crate) ws_fd: OwnedFd,
    /// The journal's files (store, log, header), made at the first entry that is not a
    /// checkpoint: a run that changes nothing leaves no journal on disk (see [`Journal::disk`]).
    disk: std::cell::OnceCell<Disk>,
    /// `log.jsonl`, once made.
    log_path: PathBuf,
    exclude: PathSet,
    pub(crate) entries: Vec<Entry>,
    /// Inodes whose content pre-image (or unprotected record) was taken since the checkpoint.
    pub(crate) content_saved: HashMap<FileId, Saved>,
    /// Inodes whose metadata was recorded since the checkpoint.
    pub(crate) meta_saved: HashSet<FileId>,
    /// How many entries at the end of `entries` are checkpoints not yet in the log: they
    /// reach it with the next entry that is not a checkpoint, in the same write (see
    /// [`Journal::append`]).
    unwritten: std::cell::Cell<usize>,
    /// The id of the newest checkpoint (0: none yet).
    last_checkpoint: u32,
    /// Files guard itself created since the checkpoint, under a name it journaled as created,
    /// and never renamed since ([`Journal::made_file`]): a rollback to the checkpoint removes them, so their
    /// content, metadata and deletion need no copy.
    pub(crate) made: HashSet<FileId>,
    /// Whether the store may hold an object no entry accounts for, named by a seq not yet in
    /// the log: left by a crash (so a journal opened again assumes so), or by a failed
    /// removal. A journal made by this process starts with an empty store, and needs no look
    /// for one before each object it makes (`make_room`).
    pub(crate) maybe_leftovers: std::cell::Cell<bool>,
    /// The store directory (bucket) the last object was made in: it exists.
    pub(crate) bucket_made: std::cell::Cell<Option<u64>>,
    /// Excluded paths that hold what was journaled (a directory renamed into an excluded
    /// path): journaled like any other path from then on.
    adopted: Vec<PathBuf>,
    /// When the last checkpoint was taken (`None` after `open`: nothing counts as new).
    pub(crate) checkpoint_time: Option<[i64; 2]>,
    /// The directory a rollback step last worked in (steps come in runs that share one);
    /// forgotten whenever a step moves or removes a directory.
    pub(crate) last_dir: std::cell::RefCell<Option<(PathBuf, std::sync::Arc<OwnedFd>)>>,
    /// How many times a rollback step moved or removed a directory: what was found by path
    /// before is stale when it changed.
    pub(crate) dir_moves: std::cell::Cell<u64>,
}

/// The open files of a journal that exists on disk.
struct Disk {
    store_fd: OwnedFd,
    log: LogWriter,
}

fn mkdir_private(p: &Path) -> Result<(), JournalError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|source| JournalError::Create {
            path: p.to_path_buf(),
            source,
        })
}

fn open_dir(p: &Path) -> io::Result<OwnedFd> {
    let root = std::fs::File::open("/")?;
    fsops::open_at(
        root.as_fd(),
        p.as_os_str(),
        OFlag::O_PATH | OFlag::O_DIRECTORY,
        0,
    )
}

/// Compiles `exclude`; a `dir/**` pattern also excludes `dir` itself.
fn exclude_set(patterns: &[String]) -> Result<PathSet, JournalError> {
    let mut all: Vec<&str> = Vec::with_capacity(patterns.len() * 2);
    for p in patterns {
        all.push(p);
        if let Some(base) = p.strip_suffix("/**").filter(|b| !b.is_empty()) {
            all.push(base);
        }
    }
    PathSet::new(&all).map_err(|source| {
        // Name the pattern that does not compile.
        let pattern = all
            .iter()
            .find(|p| PathSet::new(&[p]).is_err())
            .map_or_else(|| patterns.join(", "), |p| p.to_string());
        JournalError::Exclude { pattern, source }
    })
}

/// Whether `rel` (relative to the workspace) or one of its ancestors matches `set`.
pub(crate) fn excluded(set: &PathSet, rel: &Path) -> bool {
    let mut p = Some(rel);
    while let Some(cur) = p.filter(|c| !c.as_os_str().is_empty()) {
        if set.is_match(cur) {
            return true;
        }
        p = cur.parent();
    }
    false
}

pub(crate) fn compile_exclude(patterns: &[String]) -> Result<PathSet, JournalError> {
    exclude_set(patterns)
}

impl Journal {
    /// Creates the journal of a run in `<run_dir>/journal`. `workspace` must be canonical.
    ///
    /// # Errors
    ///
    /// [`JournalError::Create`] naming the directory or file that cannot be made,
    /// [`JournalError::Exclude`] for an exclude pattern that is not a glob.
    pub fn create(
        run_dir: &Path,
        workspace: &Path,
        policy: &TransactionPolicy,
        fsync: bool,
    ) -> Result<Journal, JournalError> {
        Self::create_inner(run_dir, workspace, policy, fsync, false)
    }

    pub(crate) fn create_inner(
        run_dir: &Path,
        workspace: &Path,
        policy: &TransactionPolicy,
        fsync: bool,
        force_copy: bool,
    ) -> Result<Journal, JournalError> {
        let dir = run_dir.join("journal");
        let create_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Create { path, source }
        };
        // The store will lie in the run directory: moves into it work when that is on the
        // workspace's filesystem.
        let ws_meta = std::fs::metadata(workspace).map_err(create_err(workspace))?;
        let run_meta = std::fs::metadata(run_dir).map_err(create_err(run_dir))?;
        let mode = if force_copy
            || std::os::unix::fs::MetadataExt::dev(&ws_meta)
                != std::os::unix::fs::MetadataExt::dev(&run_meta)
        {
            StoreMode::Copy
        } else {
            StoreMode::Move
        };
        let header = Header {
            v: 1,
            workspace: PathText::from(workspace),
            exclude: policy.exclude.clone(),
            max_preimage_bytes: policy.max_preimage_bytes,
            fsync,
            mode,
            bucket: BUCKET,
        };
        Self::assemble(dir, header, None, Vec::new())
    }

    /// The journal's files, made now if they are not yet: the store, then the log with the
    /// entries so far (the checkpoints taken before the first change), then `journal.json`,
    /// which a recovery looks for first, so a journal it finds has a log and a store.
    fn disk(&self) -> Result<&Disk, JournalError> {
        if let Some(d) = self.disk.get() {
            return Ok(d);
        }
        let create_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Create { path, source }
        };
        let store = self.dir.join("store");
        mkdir_private(&store)?;
        // Callers rename what they delete into it with their own credentials (keep.rs).
        std::fs::set_permissions(
            &store,
            std::os::unix::fs::PermissionsExt::from_mode(super::keep::STORE_MODE),
        )
        .map_err(create_err(&store))?;
        let store_fd = open_dir(&store).map_err(create_err(&store))?;
        let log = LogWriter::open(&self.log_path, self.header.fsync)
            .map_err(create_err(&self.log_path))?;
        // An earlier attempt that failed half-way (a full disk) may have left part of the log:
        // nothing else writes it before the journal is made, so it starts again from empty.
        log.truncate_to(0).map_err(create_err(&self.log_path))?;
        log.append_all(&self.entries)
            .map_err(|source| JournalError::Append {
                path: self.log_path.clone(),
                source,
            })?;
        self.unwritten.set(0);
        // Written aside and renamed into place: a recovery that finds journal.json finds it
        // whole. guard killed between creating it and writing it left an empty one, which no
        // recovery could read (the run's first change was not made yet: nothing to undo).
        let path = self.dir.join("journal.json");
        let tmp = self.dir.join(".journal.json.tmp");
        let text = serde_json::to_vec_pretty(&self.header).map_err(io::Error::other);
        text.and_then(|t| std::fs::write(&tmp, t))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(create_err(&path))?;
        Ok(self.disk.get_or_init(|| Disk { store_fd, log }))
    }

    /// Whether the journal exists on disk: false until the run's first change.
    pub fn on_disk(&self) -> bool {
        self.disk.get().is_some()
    }

    /// Opens the journal of an existing run (for rollback, diff or recovery). A torn last log
    /// line is cut off.
    ///
    /// # Errors
    ///
    /// [`JournalError::Read`] naming the header, log or store that cannot be read or reopened.
    pub fn open(run_dir: &Path) -> Result<Journal, JournalError> {
        let dir = run_dir.join("journal");
        let read_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Read { path, source }
        };
        let path = dir.join("journal.json");
        let header: Header = std::fs::read(&path)
            .and_then(|b| serde_json::from_slice(&b).map_err(io::Error::other))
            .map_err(read_err(&path))?;
        let log_path = dir.join("log.jsonl");
        let (entries, valid) = read_log(&log_path).map_err(read_err(&log_path))?;
        let log = LogWriter::open(&log_path, header.fsync).map_err(read_err(&log_path))?;
        log.truncate_to(valid).map_err(read_err(&log_path))?;
        let store = dir.join("store");
        let store_fd = open_dir(&store).map_err(read_err(&store))?;
        let mut j = Self::assemble(dir, header, Some(Disk { store_fd, log }), entries)?;
        j.maybe_leftovers.set(true);
        // Rebuild the per-checkpoint sets, should the run go on.
        let since = j.entries.iter().rposition(|e| {
            matches!(
                e.op,
                Op::Checkpoint { .. }
                    | Op::RolledBack { .. }
                    | Op::Undone { .. }
                    | Op::Aborted { .. }
            )
        });
        for e in &j.entries[since.map_or(0, |i| i + 1)..] {
            match &e.op {
                Op::Modified { st, .. } => {
                    j.content_saved.insert(st.id(), Saved::AlreadySaved);
                }
                Op::Meta { st, .. } => {
                    j.meta_saved.insert(st.id());
                }
                _ => {}
            }
        }
        Ok(j)
    }

    fn assemble(
        dir: PathBuf,
        header: Header,
        disk: Option<Disk>,
        entries: Vec<Entry>,
    ) -> Result<Journal, JournalError> {
        let workspace = PathBuf::from(header.workspace.clone());
        let ws_fd = open_dir(&workspace).map_err(|source| JournalError::Read {
            path: workspace.clone(),
            source,
        })?;
        let adopted = entries
            .iter()
            .filter_map(|e| match &e.op {
                Op::Renamed {
                    to,
                    boundary: Some(Boundary::ToAdopted),
                    ..
                } => Some(PathBuf::from(to.clone())),
                Op::Exchanged {
                    adopted: Some(p), ..
                } => Some(PathBuf::from(p.clone())),
                _ => None,
            })
            .collect();
        let last_checkpoint = entries
            .iter()
            .filter_map(|e| match e.op {
                Op::Checkpoint { id, .. } => Some(id),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Ok(Journal {
            unwritten: std::cell::Cell::new(0),
            last_checkpoint,
            exclude: exclude_set(&header.exclude)?,
            log_path: dir.join("log.jsonl"),
            dir,
            header,
            workspace,
            ws_fd,
            disk: disk.map(std::cell::OnceCell::from).unwrap_or_default(),
            entries,
            content_saved: HashMap::new(),
            meta_saved: HashSet::new(),
            made: HashSet::new(),
            // A fresh store is empty; `open` says otherwise.
            maybe_leftovers: std::cell::Cell::new(false),
            bucket_made: std::cell::Cell::new(None),
            adopted,
            checkpoint_time: None,
            last_dir: std::cell::RefCell::new(None),
            dir_moves: std::cell::Cell::new(0),
        })
    }

    /// How pre-images reach the store.
    pub fn mode(&self) -> StoreMode {
        self.header.mode
    }

    /// The workspace the journal covers.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The `transaction.exclude` patterns the run was journaled with.
    pub fn exclude_patterns(&self) -> &[String] {
        &self.header.exclude
    }

    /// The path of `log.jsonl`.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `abs` relative to the workspace, when it lies strictly inside it.
    pub(crate) fn rel<'a>(&self, abs: &'a Path) -> Option<&'a Path> {
        let rel = abs.strip_prefix(&self.workspace).ok()?;
        let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
        (plain && !rel.as_os_str().is_empty()).then_some(rel)
    }

    /// Whether `abs_path` is journaled: strictly inside the workspace and not excluded (a path
    /// is excluded when it or one of its ancestors matches an `exclude` glob, unless it lies in
    /// an excluded directory that holds what was journaled: see `rename.rs`).
    pub fn covers(&self, abs_path: &Path) -> bool {
        self.rel(abs_path).is_some_and(|rel| !self.is_excluded(rel))
    }

    pub(crate) fn is_excluded(&self, rel: &Path) -> bool {
        excluded(&self.exclude, rel) && !self.adopted.iter().any(|a| rel.starts_with(a))
    }

    /// From now on, `rel` (an excluded path) and everything under it is journaled.
    pub(crate) fn adopt(&mut self, rel: &Path) {
        if self.is_excluded(rel) {
            self.adopted.push(rel.to_path_buf());
        }
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.entries.last().map_or(1, |e| e.seq + 1)
    }

    /// Appends `op` as the next entry; returns its seq. A checkpoint is kept in memory only: it
    /// marks where later changes begin, so it reaches the log with the next entry that is not
    /// a checkpoint, in the same write(2) (or with the journal's files, made at the first
    /// change: see [`Journal::disk`]). Every command a shell starts takes a checkpoint, and
    /// most change nothing. A crash loses only checkpoints that no change followed; the end of
    /// a run writes them (its seal or rollback appends an entry).
    pub(crate) fn append(&mut self, op: Op) -> Result<u64, JournalError> {
        let entry = Entry {
            seq: self.next_seq(),
            op,
        };
        let seq = entry.seq;
        if let Op::Checkpoint { id, .. } = entry.op {
            self.last_checkpoint = self.last_checkpoint.max(id);
            self.entries.push(entry);
            self.unwritten.set(self.unwritten.get() + 1);
            return Ok(seq);
        }
        // Made now, the journal's files hold every entry so far, checkpoints included.
        let disk = self.disk()?;
        let waiting = &self.entries[self.entries.len() - self.unwritten.get()..];
        disk.log
            .append_all(waiting.iter().chain([&entry]))
            .map_err(|source| JournalError::Append {
                path: self.log_path.clone(),
                source,
            })?;
        self.unwritten.set(0);
        self.entries.push(entry);
        Ok(seq)
    }

    /// The store, made now if the journal is not on disk yet.
    pub(crate) fn store(&self) -> io::Result<BorrowedFd<'_>> {
        match self.disk() {
            Ok(d) => Ok(d.store_fd.as_fd()),
            Err(JournalError::Create { source, .. } | JournalError::Append { source, .. }) => {
                Err(source)
            }
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }

    pub(crate) fn ws(&self) -> BorrowedFd<'_> {
        self.ws_fd.as_fd()
    }

    /// Marks a checkpoint: later entries are undone by `rollback(id)`.
    ///
    /// # Errors
    ///
    /// [`JournalError::Append`] when the entry cannot be written to the log.
    pub fn checkpoint(
        &mut self,
        reason: &str,
        pid: Option<u32>,
    ) -> Result<CheckpointId, JournalError> {
        let id = self.last_checkpoint + 1;
        self.append(Op::Checkpoint {
            id,
            reason: reason.to_string(),
            pid,
        })?;
        self.content_saved.clear();
        self.meta_saved.clear();
        self.made.clear();
        self.checkpoint_time = Some(now());
        Ok(CheckpointId(id))
    }

    /// Every checkpoint: its id, reason and the number of change entries before it.
    pub fn checkpoints(&self) -> Vec<(CheckpointId, String, u64)> {
        let mut changes = 0u64;
        let mut out = Vec::new();
        for e in &self.entries {
            match &e.op {
                Op::Checkpoint { id, reason, .. } => {
                    out.push((CheckpointId(*id), reason.clone(), changes));
                }
                op if op.is_change() => changes += 1,
                _ => {}
            }
        }
        out
    }

    /// The seq of checkpoint `id`.
    pub(crate) fn checkpoint_seq(&self, id: CheckpointId) -> Result<u64, JournalError> {
        self.entries
            .iter()
            .find_map(|e| match e.op {
                Op::Checkpoint { id: i, .. } if i == id.0 => Some(e.seq),
                _ => None,
            })
            .ok_or_else(|| JournalError::NoCheckpoint {
                id,
                path: self.log_path.clone(),
            })
    }

    /// What the markers of the log say about operations.
    pub(crate) fn history(&self) -> History {
        History::of(&self.entries)
    }

    /// The run's own change entries after `after` that no rollback in effect has undone (steps
    /// of operations are not the run's), oldest first.
    pub(crate) fn live_changes_after(&self, after: u64) -> Vec<Entry> {
        let h = self.history();
        self.entries
            .iter()
            .filter(|e| e.seq > after && e.op.is_change())
            .filter(|e| !h.is_step(e.seq) && !h.is_undone(e.seq))
            .cloned()
            .collect()
    }

    /// The name of store object `seq`, relative to the store: in its bucket
    /// (`seq / bucket`, the directory [`Journal::make_room`] makes), or flat in a journal
    /// written before buckets.
    pub(crate) fn object_name(&self, seq: u64) -> String {
        match seq.checked_div(self.header.bucket) {
            Some(b) => format!("{b}/{seq}"),
            None => seq.to_string(),
        }
    }
}

/// The time now, from the clock file times are taken from.
pub(crate) fn now() -> [i64; 2] {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => [
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i64::from(d.subsec_nanos()),
        ],
        // A clock before 1970: nothing can be shown to be newer than a checkpoint.
        Err(_) => [i64::MAX, 0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_written_with_the_reflink_probe_still_opens() {
        // journal.json as guard wrote it before the probe was dropped, and as it writes it now.
        for mode in [r#"{"how": "move", "reflink": true}"#, r#"{"how": "move"}"#] {
            let text = format!(
                r#"{{"v": 1, "workspace": "/w", "exclude": [], "max_preimage_bytes": 1,
                    "fsync": false, "mode": {mode}}}"#
            );
            let h: Header = serde_json::from_str(&text).expect("header");
            assert_eq!(h.mode, StoreMode::Move);
        }
        let h: Header = serde_json::from_str(
            r#"{"v": 1, "workspace": "/w", "exclude": [], "max_preimage_bytes": 1,
                "fsync": false, "mode": {"how": "copy"}}"#,
        )
        .expect("header");
        assert_eq!(h.mode, StoreMode::Copy);
    }
}
