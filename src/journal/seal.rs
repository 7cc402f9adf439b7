//! The seal: a fingerprint of every path the journal names, and of each one's directory, as
//! the run (or the last operation on the journal) left them. A rollback compares the paths it
//! will write against it before touching anything, and refuses with the list when any differs.
//!
//! A fingerprint is the entry's type, inode, mode, owner, size and mtime; nothing is hashed.
//! ctime is recorded but not compared: guard's own restores move it (a rename does), so
//! rolling back an older run after a newer one would otherwise always conflict. What this
//! cannot see is an edit that keeps a file's inode, size and mtime (a tool that writes in place
//! and then sets the mtime back, or an edit within the filesystem's timestamp granularity of
//! the seal; git's index has the same limit). Directories compare by type, inode, mode and
//! owner: their times move whenever an entry in them does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cache;
use super::fsops;
use super::journal::{Journal, JournalError};
use super::log::{Entry, Kind, Op};
use super::report::Conflict;
use crate::audit::PathText;

/// One path's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Print {
    kind: Kind,
    ino: u64,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: [i64; 2],
    ctime: [i64; 2],
}

impl SealFile {
    /// Type, permission bits and size of each path, as probed.
    pub fn shapes(&self) -> std::collections::HashMap<&PathText, Option<(Kind, u32, u64)>> {
        self.paths
            .iter()
            .map(|(p, print)| (p, print.as_ref().map(|x| (x.kind, x.mode, x.size))))
            .collect()
    }
}

impl Print {
    fn of(st: &libc::stat) -> Print {
        Print {
            kind: Kind::of_mode(st.st_mode),
            ino: st.st_ino,
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: [st.st_mtime, st.st_mtime_nsec],
            ctime: [st.st_ctime, st.st_ctime_nsec],
        }
    }
}

/// `seal.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct SealFile {
    v: u32,
    /// The log's next seq when the seal was taken: it describes the workspace as long as no
    /// change or operation marker has a seq at or above it.
    upto: u64,
    /// A list, not a map: JSON object keys are strings, and a name need not be UTF-8.
    paths: Vec<(PathText, Option<Print>)>,
    /// The directories of those paths (type and inode are compared).
    dirs: Vec<(PathText, Option<Print>)>,
}

/// Stats workspace paths, keeping the last parent directory open (paths come sorted, so
/// neighbours share it).
pub(crate) struct Prober<'a> {
    j: &'a Journal,
    last: Option<(PathBuf, Option<OwnedFd>)>,
}

impl<'a> Prober<'a> {
    pub fn new(j: &'a Journal) -> Prober<'a> {
        Prober { j, last: None }
    }

    /// The entry at `rel`, `None` when it (or a directory on the way) does not exist.
    pub fn stat(&mut self, rel: &Path) -> io::Result<Option<libc::stat>> {
        let Some(name) = rel.file_name() else {
            return Ok(None);
        };
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        if self.last.as_ref().is_none_or(|(p, _)| *p != parent) {
            let fd = match fsops::open_dir_beneath(self.j.ws(), &parent) {
                Ok(fd) => Some(fd),
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => None,
                // A symlink where a directory was: not the path the journal names.
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => None,
                Err(e) => return Err(e),
            };
            self.last = Some((parent, fd));
        }
        match self.last.as_ref().and_then(|(_, fd)| fd.as_ref()) {
            Some(fd) => fsops::raw_stat_at(fd.as_fd(), name),
            None => Ok(None),
        }
    }

    fn print(&mut self, rel: &PathText) -> Result<Option<Print>, JournalError> {
        let path = Path::new(rel.as_os_str());
        self.stat(path)
            .map(|s| s.as_ref().map(Print::of))
            .map_err(|source| JournalError::Inspect {
                path: self.j.workspace().join(path),
                source,
            })
    }

    /// [`Prober::print`], or `None` when a directory on the way may not be searched (EACCES):
    /// a run may leave one so (`chmod 600 dir`, for a guard without capabilities), and its
    /// entries are then neither there nor absent as far as guard can tell.
    fn print_unless_hidden(
        &mut self,
        rel: &PathText,
    ) -> Result<Option<Option<Print>>, JournalError> {
        match self.print(rel) {
            Err(JournalError::Inspect { source, .. })
                if source.raw_os_error() == Some(libc::EACCES) =>
            {
                Ok(None)
            }
            other => other.map(Some),
        }
    }
}

/// Why a path is not as the seal recorded it, for the check before a rollback (`None`: the
/// same as far as guard can tell). `then`: the seal's record, absent for a path hidden from
/// guard when the run ended; `now`: `None` for one hidden now (see
/// [`Prober::print_unless_hidden`]). Hidden then and now is as it was; hidden on one side only
/// changed since.
fn changed(
    then: Option<&Option<Print>>,
    now: Option<Option<Print>>,
    dir_only: bool,
) -> Option<String> {
    match (then, now) {
        (Some(then), Some(now)) => {
            differs(then, &now, dir_only).map(|why| format!("{why} since the run left it"))
        }
        (None, None) => None,
        (None, Some(_)) => Some(
            "revealed since the run left it (a directory on the way gained search permission)"
                .into(),
        ),
        (Some(_), None) => Some(
            "hidden since the run left it (a directory on the way lost search permission)".into(),
        ),
    }
}

/// Why `now` is not what `then` was (`None`: the same). `dir_only`: compare type and inode.
fn differs(then: &Option<Print>, now: &Option<Print>, dir_only: bool) -> Option<&'static str> {
    match (then, now) {
        (None, None) => None,
        (Some(_), None) => Some("deleted"),
        (None, Some(_)) => Some("created"),
        (Some(a), Some(b)) if a.kind != b.kind => Some("replaced by another type"),
        (Some(a), Some(b)) if a.ino != b.ino => Some("replaced"),
        _ if dir_only => None,
        (Some(a), Some(b)) if (a.mode, a.uid, a.gid) != (b.mode, b.uid, b.gid) => {
            Some("mode or owner changed")
        }
        (Some(a), Some(_)) if a.kind == Kind::Dir => None,
        (Some(a), Some(b)) if (a.size, a.mtime) != (b.size, b.mtime) => Some("changed"),
        _ => None,
    }
}

fn parent_of(p: &PathText) -> Option<PathText> {
    Path::new(p.as_os_str())
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(PathText::from)
}

/// What a rollback would overwrite.
#[derive(Debug, Default)]
pub(crate) struct Preflight {
    /// Changed paths that are the user's work: the rollback refuses (unless forced).
    pub refuse: Vec<Conflict>,
    /// Changed paths it may replace: git's caches, excluded paths.
    pub tolerate: Vec<Conflict>,
}

impl Journal {
    fn seal_path(&self) -> PathBuf {
        self.dir.join("seal.json")
    }

    /// Every path a change entry names, once.
    fn named_paths(&self) -> BTreeSet<PathText> {
        self.entries
            .iter()
            .flat_map(|e| e.op.paths().into_iter().cloned())
            .collect()
    }

    /// Writes `seal.json` for the workspace as it is now (see the module doc).
    pub(crate) fn write_seal(&self) -> Result<u64, JournalError> {
        let seal = self.probe_seal()?;
        self.save_seal(seal)
    }

    /// The fingerprints of the workspace as it is now.
    pub(crate) fn probe_seal(&self) -> Result<SealFile, JournalError> {
        let mut probe = Prober::new(self);
        let mut seal = SealFile {
            v: 2,
            ..SealFile::default()
        };
        // A path guard may not look at (under a directory the run left unsearchable) is left
        // out: the seal does not know it, and the check before a rollback compares it only if
        // it can be looked at then (see `preflight`).
        let paths = self.named_paths();
        for rel in &paths {
            if let Some(print) = probe.print_unless_hidden(rel)? {
                seal.paths.push((rel.clone(), print));
            }
        }
        let dirs: BTreeSet<PathText> = paths
            .iter()
            .filter_map(parent_of)
            .filter(|d| !paths.contains(d))
            .collect();
        for d in dirs {
            if let Some(print) = probe.print_unless_hidden(&d)? {
                seal.dirs.push((d, print));
            }
        }
        Ok(seal)
    }

    /// Writes `seal` as describing the workspace from the log's next entry on (nothing may
    /// have changed since it was probed).
    pub(crate) fn save_seal(&self, mut seal: SealFile) -> Result<u64, JournalError> {
        seal.upto = self.next_seq();
        let path = self.seal_path();
        let tmp = self.dir.join(".seal.json.tmp");
        let text = serde_json::to_vec(&seal).map_err(io::Error::other);
        text.and_then(|t| std::fs::write(&tmp, t))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|source| JournalError::Create {
                path: path.clone(),
                source,
            })?;
        Ok(seal.paths.len() as u64)
    }

    /// Records the state the run leaves (see the module doc), for the checks of a later
    /// `guard rollback`. Call it when the run ends.
    ///
    /// # Errors
    ///
    /// [`JournalError::Inspect`] when a path cannot be examined, [`JournalError::Create`] when
    /// the seal cannot be written, [`JournalError::Append`] when its log entry cannot.
    pub fn seal(&mut self) -> Result<(), JournalError> {
        if !self.on_disk() {
            // The run changed nothing: there is no journal, and nothing for a rollback to check.
            return Ok(());
        }
        let n = self.write_seal()?;
        self.append(Op::Sealed { paths: n })?;
        Ok(())
    }

    /// The seal, when it describes the workspace as the log leaves it.
    fn read_seal(&self) -> Option<SealFile> {
        self.read_seal_before(u64::MAX)
    }

    /// Whether the seal described the workspace up to (not including) entry `seq`.
    pub(crate) fn sealed_before(&self, seq: u64) -> bool {
        self.read_seal_before(seq).is_some()
    }

    fn read_seal_before(&self, before: u64) -> Option<SealFile> {
        let bytes = std::fs::read(self.seal_path()).ok()?;
        let seal: SealFile = serde_json::from_slice(&bytes).ok()?;
        let stale = self.entries.iter().take_while(|e| e.seq < before).any(|e| {
            e.seq >= seal.upto
                && (e.op.is_change()
                    || matches!(
                        e.op,
                        Op::Begin { .. }
                            | Op::RolledBack { .. }
                            | Op::Undone { .. }
                            | Op::Aborted { .. }
                    ))
        });
        (seal.v == 2 && !stale).then_some(seal)
    }

    /// Compares every path the undo of `plan` writes (and each one's directory) with the seal;
    /// also finds entries the run did not make in directories the undo removes.
    pub(crate) fn preflight(&self, plan: &[Entry]) -> Result<Preflight, JournalError> {
        let seal = self.read_seal().ok_or_else(|| JournalError::NoSeal {
            path: self.seal_path(),
        })?;
        let paths: BTreeSet<PathText> = plan
            .iter()
            .flat_map(|e| e.op.paths().into_iter().cloned())
            .collect();
        let sealed: BTreeMap<PathText, Option<Print>> = seal.paths.into_iter().collect();
        let sealed_dirs: BTreeMap<PathText, Option<Print>> = seal.dirs.into_iter().collect();
        let mut probe = Prober::new(self);
        let mut out = Preflight::default();
        let mut note = |j: &Journal, rel: &PathText, what: String| {
            let p = Path::new(rel.as_os_str());
            let c = Conflict {
                path: PathBuf::from(rel.clone()),
                what,
            };
            if j.is_excluded(p) || cache::is_cache(p) {
                out.tolerate.push(c);
            } else {
                out.refuse.push(c);
            }
        };
        for rel in &paths {
            let now = probe.print_unless_hidden(rel)?;
            if let Some(why) = changed(sealed.get(rel), now, false) {
                note(self, rel, why);
            }
        }
        let dirs: BTreeSet<PathText> = paths
            .iter()
            .filter_map(parent_of)
            .filter(|d| !paths.contains(d))
            .collect();
        for d in &dirs {
            let now = probe.print_unless_hidden(d)?;
            // The seal lists a directory among its paths when an entry of the log names it
            // (made, renamed, its mode changed): one the plan's entries do not name is found
            // there, not missing (which would read as hidden when the run ended).
            let then = sealed_dirs.get(d).or_else(|| sealed.get(d));
            if let Some(why) = changed(then, now, true) {
                note(self, d, format!("directory {why}"));
            }
        }
        // A directory the run created holds only what the journal knows of (or excluded
        // paths): anything else is newer work the removal would take away. Only while nothing
        // newer put another entry at its path or at a directory above it, or took one away:
        // the directory there now may then be another one (`mkdir d; rmdir d; mv e d`, or a
        // rename of a parent), whose entries the journal names where they were, and whose
        // undo moves them back with it. The undo of the creation itself still refuses to
        // remove a directory that holds something the run did not make.
        let mut placed: HashMap<&Path, u64> = HashMap::new();
        for e in plan {
            // What puts an entry at a path or takes it away (not a change of its metadata or
            // content).
            if matches!(
                e.op,
                Op::Meta { .. } | Op::Modified { .. } | Op::Unprotected { .. }
            ) {
                continue;
            }
            for path in e.op.paths() {
                let seq = placed.entry(Path::new(path.as_os_str())).or_insert(e.seq);
                *seq = (*seq).max(e.seq);
            }
        }
        for e in plan {
            let Op::Created { path, id: None, .. } = &e.op else {
                continue;
            };
            let replaced_since = Path::new(path.as_os_str())
                .ancestors()
                .any(|a| placed.get(a).is_some_and(|seq| *seq > e.seq));
            if replaced_since {
                continue;
            }
            let Ok((dir, name)) = fsops::parent_of(self.ws(), Path::new(path.as_os_str())) else {
                continue;
            };
            let Ok(children) = fsops::list_dir(dir.as_fd(), &name) else {
                continue;
            };
            for child in children {
                let rel = PathText::from(Path::new(path.as_os_str()).join(&child));
                if !paths.contains(&rel) && !self.is_excluded(Path::new(rel.as_os_str())) {
                    note(
                        self,
                        &rel,
                        "created in a directory the run made".to_string(),
                    );
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(ino: u64, ctime: i64) -> Option<Print> {
        Some(Print {
            kind: Kind::File,
            ino,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 1,
            mtime: [1, 0],
            ctime: [ctime, 0],
        })
    }

    #[test]
    fn a_file_differs_by_identity_size_mtime_or_mode_a_directory_by_identity() {
        assert_eq!(differs(&print(1, 5), &print(1, 5), false), None);
        assert_eq!(
            differs(&print(1, 5), &print(1, 6), false),
            None,
            "ctime alone"
        );
        let mut longer = print(1, 5);
        if let Some(p) = longer.as_mut() {
            p.size = 2;
        }
        assert_eq!(differs(&print(1, 5), &longer, false), Some("changed"));
        assert_eq!(differs(&print(1, 5), &print(2, 5), false), Some("replaced"));
        assert_eq!(differs(&print(1, 5), &None, false), Some("deleted"));
        assert_eq!(differs(&print(1, 5), &print(1, 6), true), None);
    }
}
