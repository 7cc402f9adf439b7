//! The steps a rollback is made of, each journaled before it changes anything (the same
//! entries the hooks write: `created`, `deleted`, `rmdir`, `renamed`, `exchanged`,
//! `modified`, `meta`), so the rollback can be reverted exactly, by `guard undo` or, when it
//! fails half-way or is interrupted, by replaying its steps backwards. Which steps undo which
//! entry is `inverse.rs`.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::dir::{Dir, Type};
use nix::fcntl::{OFlag, RenameFlags};

use super::cache;
use super::copy;
use super::fsops::{self, stat_at};
use super::ids::Copies;
use super::journal::{Journal, StoreMode};
use super::log::{FileId, Kind, Op, Stat};
use super::report::Conflict;
use crate::audit::PathText;

/// How many places [`Journal::alias_of`] looks for one name of an inode at most (each rename
/// of a directory above it that the kernel may have refused doubles them).
const MAX_ALIAS_PATHS: usize = 16;

/// A step that could not be done: the rollback stops and is reverted.
pub(crate) type Step = Result<(), String>;

/// Why a store object could not be put back.
pub(crate) enum Unstash {
    /// Something stands where it goes.
    Taken,
    /// The object is not in the store: the hook drops it when the call it was kept for fails.
    Missing,
    Failed(String),
}

impl From<String> for Unstash {
    fn from(s: String) -> Unstash {
        Unstash::Failed(s)
    }
}

impl Unstash {
    pub(crate) fn into_step(self) -> String {
        match self {
            Unstash::Taken => "something stands where it goes back".to_string(),
            Unstash::Missing => "its saved copy is missing".to_string(),
            Unstash::Failed(s) => s,
        }
    }
}

/// `path` with its leading `from` (whole components) replaced by `to`; `None` when `path` is
/// not `from` or beneath it.
fn moved_path(path: &Path, from: &Path, to: &Path) -> Option<PathText> {
    let rest = path.strip_prefix(from).ok()?;
    Some(PathText::from(if rest.as_os_str().is_empty() {
        to.to_path_buf()
    } else {
        to.join(rest)
    }))
}

pub(crate) fn p(t: &PathText) -> &Path {
    Path::new(t.as_os_str())
}

pub(crate) fn fail<'a>(what: &'a str, path: &'a PathText) -> impl FnOnce(io::Error) -> String + 'a {
    move |e| format!("cannot {what} {}: {e}", path.display())
}

/// The state of one rollback while its steps run.
#[derive(Default)]
pub(crate) struct Apply {
    /// Every path may be overwritten (what was there is kept in the journal).
    pub force: bool,
    /// Paths overwritten although they changed since the run, and why.
    pub replaced: BTreeMap<PathBuf, String>,
    /// Entries that cannot be restored (no pre-image): reported, not fatal.
    pub problems: Vec<String>,
    /// Directories this rollback made, whose metadata is set once their entries are back,
    /// at the path each one has now: a later step of the same rollback may move one (with a
    /// directory above it: `mv src src2; rm -r src2/sub` undone) or take it away again (a
    /// directory the run made, emptied and removed: `git worktree add` then `remove`).
    pub dirs: Vec<(PathText, Stat)>,
    /// Inodes restored as copies: the original's id -> (path, id of the copy).
    links: HashMap<FileId, (PathText, FileId)>,
    /// Names of each inode in the log, with the seq of the entry that names it, built on
    /// first use (copies of hard links).
    names: Option<HashMap<FileId, Vec<(PathText, u64)>>>,
    /// The log's renames and exchanges (seq, from, to, exchange), built on first use: a name
    /// of an inode recorded at one seq may sit elsewhere since, under a renamed directory.
    moves: Option<Vec<(u64, PathText, PathText, bool)>>,
    /// The workspace's non-directories by inode number (`Journal::names_by_ino`), listed on
    /// first use, with the count of directory moves it was listed at.
    unlogged: Option<(u64, HashMap<u64, Vec<PathText>>)>,
    /// Inodes replaced by copies, earlier and in this rollback (`ids.rs`), and directories
    /// this rollback made again.
    pub(crate) copies: Copies,
}

impl Apply {
    pub fn new(force: bool, copies: Copies) -> Apply {
        Apply {
            force,
            copies,
            ..Apply::default()
        }
    }

    /// The id now of the inode entry `seq` recorded as `id` (a copy's, once restored as one).
    pub(crate) fn now_id(&self, id: FileId, seq: u64) -> FileId {
        self.copies.now(id, seq)
    }

    /// A step moved the tree at `from` to `to`: the directories this rollback made inside it
    /// moved with it.
    pub(crate) fn dirs_moved(&mut self, from: &PathText, to: &PathText) {
        for (d, _) in &mut self.dirs {
            if let Some(moved) = moved_path(p(d), p(from), p(to)) {
                *d = moved;
            }
        }
    }

    /// A step swapped the trees at `a` and `b` (RENAME_EXCHANGE).
    pub(crate) fn dirs_swapped(&mut self, a: &PathText, b: &PathText) {
        for (d, _) in &mut self.dirs {
            if let Some(moved) =
                moved_path(p(d), p(a), p(b)).or_else(|| moved_path(p(d), p(b), p(a)))
            {
                *d = moved;
            }
        }
    }

    /// A step took the tree at `rel` away (into the store, or removed an empty directory):
    /// the directories this rollback made inside it are no longer there to finish.
    pub(crate) fn dirs_gone(&mut self, rel: &PathText) {
        self.dirs.retain(|(d, _)| !p(d).starts_with(p(rel)));
    }

    pub fn replaced_list(&self) -> Vec<Conflict> {
        self.replaced
            .iter()
            .map(|(path, what)| Conflict {
                path: path.clone(),
                what: what.clone(),
            })
            .collect()
    }
}

impl Journal {
    /// The directory of `rel` (open, kept for the next step in it) and its final name.
    pub(crate) fn parent(&self, rel: &PathText) -> io::Result<(Arc<OwnedFd>, OsString)> {
        let rel = p(rel);
        let name = rel
            .file_name()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?
            .to_owned();
        let dir = rel.parent().unwrap_or(Path::new(""));
        let mut last = self.last_dir.borrow_mut();
        if let Some((d, fd)) = last.as_ref() {
            if d == dir {
                return Ok((Arc::clone(fd), name));
            }
        }
        let fd = Arc::new(fsops::open_dir_beneath(self.ws(), dir)?);
        *last = Some((dir.to_path_buf(), Arc::clone(&fd)));
        Ok((fd, name))
    }

    /// A directory moved or went away: open directories again from the workspace.
    pub(crate) fn forget_dirs(&self) {
        self.last_dir.borrow_mut().take();
        self.dir_moves.set(self.dir_moves.get() + 1);
    }

    /// The workspace's non-directories by inode number, from its listings alone (no stat of
    /// each): where the other names of a deleted hard link are when the log never names them
    /// (a link made before the run, `cp -al`, `git clone --local` of a repository beside it).
    fn names_by_ino(&self) -> HashMap<u64, Vec<PathText>> {
        let mut found: HashMap<u64, Vec<PathText>> = HashMap::new();
        let mut todo = vec![PathBuf::new()];
        while let Some(rel) = todo.pop() {
            // Opened `O_PATH` beneath the workspace, then for reading through that.
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
            let Ok(mut listing) = fsops::open_dir_beneath(self.ws(), &rel)
                .and_then(|d| fsops::open_at(d.as_fd(), OsStr::new("."), flags, 0))
                .and_then(|d| Ok(Dir::from(d)?))
            else {
                continue;
            };
            for entry in listing.iter().flatten() {
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                let path = rel.join(name);
                let dir = match entry.file_type() {
                    Some(kind) => kind == Type::Directory,
                    None => self
                        .stat_rel(&PathText::from(path.clone()))
                        .ok()
                        .flatten()
                        .is_some_and(|st| st.kind == Kind::Dir),
                };
                if dir {
                    todo.push(path);
                } else {
                    found
                        .entry(entry.ino())
                        .or_default()
                        .push(PathText::from(path));
                }
            }
        }
        found
    }

    /// What is at `rel` now; `None` when it or a directory on the way is missing.
    pub(crate) fn stat_rel(&self, rel: &PathText) -> io::Result<Option<Stat>> {
        match self.parent(rel) {
            Ok((dir, name)) => stat_at(dir.as_fd(), &name),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn overridable(&self, rel: &PathText, a: &Apply) -> bool {
        a.force || self.is_excluded(p(rel)) || cache::is_cache(p(rel))
    }

    pub(crate) fn append_step(&mut self, op: Op) -> Result<u64, String> {
        self.append(op).map_err(|e| e.to_string())
    }

    /// Moves what is at `rel` (a whole tree for a directory) into `store/<obj>` (the step's
    /// own seq when `None`), journaled as `deleted`.
    pub(crate) fn stash(&mut self, rel: &PathText, obj: Option<u64>) -> Step {
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        let raw = fsops::raw_stat_at(dir.as_fd(), &name)
            .map_err(fail("inspect", rel))?
            .ok_or_else(|| format!("{} vanished", rel.display()))?;
        let st = Stat::from_nix(&raw);
        let seq = self.next_seq();
        if obj.is_none() {
            // A new object, named by a seq a crash may have left an object under.
            self.make_room(seq)
                .map_err(fail("make room in the store for", rel))?;
        }
        let target = self.object_name(obj.unwrap_or(seq));
        if st.kind == Kind::Dir {
            self.forget_dirs();
        }
        // Another name holds the inode (a hard link a restore made to it, say): moved into the
        // store, it would count one link more there for good. A copy is kept instead, and a
        // restore links the name to that other one again, as the hooks do for a deletion.
        if st.kind != Kind::Dir && raw.st_nlink > 1 {
            let sha256 = self
                .copy_out(dir.as_fd(), &name, OsStr::new(&target), &st)
                .map_err(fail("keep", rel))?;
            self.append_step(Op::Deleted {
                path: rel.clone(),
                st,
                sha256,
                obj,
            })?;
            return fsops::unlink_at(dir.as_fd(), &name, false).map_err(fail("remove", rel));
        }
        self.append_step(Op::Deleted {
            path: rel.clone(),
            st,
            sha256: None,
            obj,
        })?;
        self.move_into_store(dir.as_fd(), &name, OsStr::new(&target))
            .map_err(fail("keep", rel))
    }

    /// Moves `dir/name` to `store/<target>`: a rename, or a copy and a removal across
    /// filesystems.
    pub(crate) fn move_into_store(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        name: &OsStr,
        target: &OsStr,
    ) -> io::Result<()> {
        if self.header.mode != StoreMode::Copy {
            match fsops::rename_at(
                dir,
                name,
                self.store()?,
                target,
                RenameFlags::RENAME_NOREPLACE,
            ) {
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
                other => return other,
            }
        }
        copy::copy_tree(dir, name, self.store()?, target, self.header.fsync)?;
        copy::remove_tree(dir, name)
    }

    /// Makes way at `rel` for a restore: nothing there, or something the rollback may replace
    /// (kept in the store); anything else is a conflict.
    pub(crate) fn clear_way(&mut self, rel: &PathText, a: &mut Apply, why: &str) -> Step {
        if self.stat_rel(rel).map_err(fail("inspect", rel))?.is_none() {
            return Ok(());
        }
        if !self.overridable(rel, a) {
            return Err(format!("conflict: {} {why}", rel.display()));
        }
        self.stash(rel, None)?;
        a.dirs_gone(rel);
        a.replaced
            .entry(PathBuf::from(rel.clone()))
            .or_insert_with(|| format!("{why}; what was there is kept in the journal"));
        Ok(())
    }

    /// A path that holds the inode `st` described (or its copy restored earlier in this
    /// rollback), other than `rel`: restoring a hard link links to it.
    /// An inode number can have been given to another file since it was recorded, so a
    /// candidate must also hold the object's content (same type, size, mode, sha256).
    /// `upto`: the entry being undone (the newer ones are undone already).
    fn alias_of(
        &self,
        orig: FileId,
        rel: &PathText,
        object: &OsStr,
        upto: u64,
        a: &mut Apply,
    ) -> Option<(PathText, FileId)> {
        let want = stat_at(self.store().ok()?, object).ok().flatten()?;
        let want_hash = OnceCell::new();
        let holds = |cand: &PathText, id: FileId| {
            if cand == rel {
                return false;
            }
            let Ok((dir, name)) = self.parent(cand) else {
                return false;
            };
            let same = stat_at(dir.as_fd(), &name).ok().flatten().is_some_and(|s| {
                s.id() == id && s.kind == want.kind && s.size == want.size && s.mode == want.mode
            });
            same && (want.kind != Kind::File || {
                let w = want_hash.get_or_init(|| hash_of(self.store().ok()?, object));
                w.is_some() && *w == hash_of(dir.as_fd(), &name)
            })
        };
        if let Some((cand, id)) = a.links.get(&orig) {
            if holds(cand, *id) {
                return Some((cand.clone(), *id));
            }
        }
        let names = a.names.get_or_insert_with(|| {
            let mut m: HashMap<FileId, Vec<(PathText, u64)>> = HashMap::new();
            let mut name = |id: FileId, paths: &[&PathText], seq: u64| {
                m.entry(id)
                    .or_default()
                    .extend(paths.iter().map(|p| ((*p).clone(), seq)));
            };
            for e in &self.entries {
                if let Some(id) = inode(&e.op) {
                    name(id, &e.op.paths(), e.seq);
                }
                // A rename names the inode it moves at both ends: another link of a deleted
                // file may be there now (`ln g y; mv g z; rm y` keeps y by copy, z is g).
                match &e.op {
                    Op::Renamed { from, to, src, .. } => name(*src, &[from, to], e.seq),
                    Op::Exchanged {
                        from,
                        to,
                        from_id,
                        to_id,
                        ..
                    } => {
                        name(*from_id, &[from, to], e.seq);
                        name(*to_id, &[from, to], e.seq);
                    }
                    _ => {}
                }
            }
            m
        });
        let cands = names.get(&orig).cloned().unwrap_or_default();
        let moves = a.moves.get_or_insert_with(|| {
            self.entries
                .iter()
                .filter_map(|e| match &e.op {
                    Op::Renamed { from, to, .. } => Some((e.seq, from.clone(), to.clone(), false)),
                    Op::Exchanged { from, to, .. } => Some((e.seq, from.clone(), to.clone(), true)),
                    _ => None,
                })
                .collect()
        });
        // Where each name may be now: every entry newer than `upto` is undone already, so the
        // renames of a directory above it between its entry and `upto` still stand, unless
        // the kernel refused one (`mv a a/b/`: journaled before the call, it moved nothing).
        // Which did is not written down, so the name is looked for both ways at each such
        // rename (a few at most; `holds` tells the right one by identity and content).
        let now_at = |path: &PathText, since: u64| -> Vec<PathText> {
            let mut paths = vec![p(path).to_path_buf()];
            for (seq, from, to, exchange) in moves.iter() {
                if *seq <= since || *seq >= upto {
                    continue;
                }
                let above = |dir: &PathText, cur: &Path| {
                    cur.strip_prefix(p(dir))
                        .ok()
                        .filter(|rest| !rest.as_os_str().is_empty())
                        .map(Path::to_path_buf)
                };
                let moved: Vec<PathBuf> = paths
                    .iter()
                    .filter_map(|cur| {
                        if let Some(rest) = above(from, cur) {
                            Some(p(to).join(rest))
                        } else {
                            above(to, cur)
                                .filter(|_| *exchange)
                                .map(|rest| p(from).join(rest))
                        }
                    })
                    .collect();
                for m in moved {
                    if paths.len() < MAX_ALIAS_PATHS && !paths.contains(&m) {
                        // The rename that happened is the likelier: looked at first.
                        paths.insert(0, m);
                    }
                }
            }
            paths.into_iter().map(PathText::from).collect()
        };
        if let Some(c) = cands
            .into_iter()
            .flat_map(|(c, since)| now_at(&c, since))
            .find(|c| holds(c, orig))
        {
            return Some((c, orig));
        }
        // A name the log does not know: one the run never touched (`ln` before it). Looked
        // up by inode number among the workspace's names, listed once, and again when a step
        // of this rollback has moved a directory since. Only with a store on the workspace's
        // filesystem: there a file is kept by copy only when it had another link or was open
        // elsewhere, while a copying store keeps every file so, and listing the workspace
        // after each directory move for each of them would cost the rollback its size again
        // and again (such a store restores hard links as copies, as it always did).
        if self.header.mode != StoreMode::Move {
            return None;
        }
        let look = |a: &Apply| {
            let (_, names) = a.unlogged.as_ref()?;
            names
                .get(&orig.ino)?
                .iter()
                .find(|c| holds(c, orig))
                .cloned()
        };
        let stale = a
            .unlogged
            .as_ref()
            .is_none_or(|(moves, _)| *moves != self.dir_moves.get());
        if let Some(c) = look(a) {
            return Some((c, orig));
        }
        if stale {
            a.unlogged = Some((self.dir_moves.get(), self.names_by_ino()));
            return look(a).map(|c| (c, orig));
        }
        None
    }

    /// Puts `store/<obj>` (the entry `st` described) at `rel`, which must be free, journaled
    /// as `created` with the inode put there and the object it came from. `seq`: the entry
    /// that stored it.
    pub(crate) fn unstash(
        &mut self,
        obj: u64,
        rel: &PathText,
        st: &Stat,
        seq: u64,
        a: &mut Apply,
    ) -> Result<(), Unstash> {
        let orig = a.now_id(st.id(), seq - 1);
        let oname = self.object_name(obj);
        let oname = OsStr::new(&oname);
        let Some(object) = (self.store().and_then(|store| stat_at(store, oname)))
            .map_err(fail("inspect the saved copy of", rel))?
        else {
            return Err(Unstash::Missing);
        };
        if object.kind == Kind::Dir {
            self.forget_dirs();
        }
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        let dir = dir.as_fd();
        // Checked before the step is journaled: an entry for a restore that never happens would
        // make an undo of this rollback take away whatever stands there.
        if stat_at(dir, &name).map_err(fail("inspect", rel))?.is_some() {
            return Err(Unstash::Taken);
        }
        let taken = |e: io::Error| {
            if e.raw_os_error() == Some(libc::EEXIST) {
                Unstash::Taken
            } else {
                Unstash::Failed(fail("restore", rel)(e))
            }
        };
        if object.id() != orig && object.kind != Kind::Dir {
            // A copy: a name of the same inode may be back already; hard links stay links.
            if let Some((alias, id)) = self.alias_of(orig, rel, oname, seq, a) {
                self.append_step(Op::Created {
                    path: rel.clone(),
                    id: Some(id),
                    obj: None,
                })?;
                let (adir, aname) = self.parent(&alias).map_err(fail("open", &alias))?;
                fsops::link_at(adir.as_fd(), &aname, dir, &name).map_err(taken)?;
                if id != orig {
                    // Linked to a copy restored earlier: an older entry that names the inode
                    // (a rename of this name, undone next) finds the copy.
                    a.copies.record(seq, id);
                }
                return Ok(());
            }
        }
        if self.header.mode != StoreMode::Copy {
            self.append_step(Op::Created {
                path: rel.clone(),
                id: Some(object.id()),
                obj: Some(obj),
            })?;
            let flags = RenameFlags::RENAME_NOREPLACE;
            let store = self.store().map_err(fail("open the store for", rel))?;
            match fsops::rename_at(store, oname, dir, &name, flags) {
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {}
                Ok(()) => {
                    if object.id() != orig {
                        a.links.insert(orig, (rel.clone(), object.id()));
                        a.copies.record(seq, object.id());
                    }
                    return Ok(());
                }
                Err(e) => return Err(taken(e)),
            }
        }
        // Another filesystem: copy next to it under a temporary name (journaled too, so an
        // interrupted copy is cleaned up), move into place, drop the object.
        let tmp = OsString::from(format!(".guard-restore-{}", self.next_seq()));
        let tmp_rel = PathText::from(p(rel).with_file_name(&tmp));
        self.append_step(Op::Created {
            path: tmp_rel.clone(),
            id: None,
            obj: None,
        })?;
        (self.store())
            .and_then(|store| copy::copy_tree(store, oname, dir, &tmp, false))
            .map_err(fail("copy", rel))?;
        let copied = stat_at(dir, &tmp)
            .map_err(fail("inspect", &tmp_rel))?
            .ok_or_else(|| format!("{} vanished", tmp_rel.display()))?;
        self.append_step(Op::Created {
            path: rel.clone(),
            id: Some(copied.id()),
            obj: Some(obj),
        })?;
        fsops::rename_at(dir, &tmp, dir, &name, RenameFlags::RENAME_NOREPLACE)
            .map_err(fail("restore", rel))?;
        a.links.insert(orig, (rel.clone(), copied.id()));
        a.copies.record(seq, copied.id());
        (self.store())
            .and_then(|store| copy::remove_tree(store, oname))
            .map_err(fail("drop the saved copy of", rel))
            .map_err(Unstash::Failed)
    }

    /// Renames `from` to the free name `to`, journaled as `renamed`.
    pub(crate) fn move_entry(&mut self, from: &PathText, to: &PathText) -> Step {
        self.forget_dirs();
        let (fd, fname) = self
            .parent(from)
            .map_err(fail("open the directory of", from))?;
        let (td, tname) = self.parent(to).map_err(fail("open the directory of", to))?;
        let src = stat_at(fd.as_fd(), &fname)
            .map_err(fail("inspect", from))?
            .ok_or_else(|| format!("{} vanished", from.display()))?;
        self.append_step(Op::Renamed {
            from: from.clone(),
            to: to.clone(),
            src: src.id(),
            replaced: None,
            boundary: None,
        })?;
        fsops::rename_at(
            fd.as_fd(),
            &fname,
            td.as_fd(),
            &tname,
            RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(fail("move back", to))
    }

    /// Makes the directory `rel` (mode 0700 until [`Journal::finish_dirs`] sets `st`'s).
    pub(crate) fn make_dir(&mut self, rel: &PathText, st: Option<&Stat>, a: &mut Apply) -> Step {
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        self.append_step(Op::Created {
            path: rel.clone(),
            id: None,
            obj: None,
        })?;
        fsops::mkdir_at(dir.as_fd(), &name, if st.is_some() { 0o700 } else { 0o755 })
            .map_err(fail("recreate", rel))?;
        if let Some(st) = st {
            a.dirs.push((rel.clone(), st.clone()));
        }
        Ok(())
    }

    /// Makes the missing directories above `rel` (an excluded path whose tree was removed
    /// since: the entry goes back where it came from).
    pub(crate) fn make_parents(&mut self, rel: &PathText, a: &mut Apply) -> Step {
        let mut missing = Vec::new();
        let mut cur = p(rel).parent();
        while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty()) {
            let t = PathText::from(d);
            if self.stat_rel(&t).map_err(fail("inspect", &t))?.is_some() {
                break;
            }
            missing.push(t);
            cur = d.parent();
        }
        for d in missing.iter().rev() {
            self.make_dir(d, None, a)?;
        }
        Ok(())
    }

    /// Writes the pre-image `store/<obj>` into the file at `rel` (same inode, so its other
    /// names see it), after saving what it holds now (journaled as `modified`); then `st`'s
    /// metadata.
    pub(crate) fn rewrite(&mut self, rel: &PathText, obj: u64, st: &Stat) -> Step {
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        let dir = dir.as_fd();
        let current = copy::open_readable(dir, &name).map_err(fail("read", rel))?;
        let now = Stat::from_meta(&current.metadata().map_err(fail("inspect", rel))?);
        let seq = self.next_seq();
        self.make_room(seq)
            .map_err(fail("make room in the store for", rel))?;
        let save = || -> io::Result<()> {
            let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
            let o = self.object_name(seq);
            let dst =
                std::fs::File::from(fsops::open_at(self.store()?, OsStr::new(&o), flags, 0o600)?);
            copy::copy_content(&current, &dst)?;
            if self.header.fsync {
                dst.sync_all()?;
            }
            Ok(())
        };
        save().map_err(fail("save the current content of", rel))?;
        self.append_step(Op::Modified {
            path: rel.clone(),
            st: now,
        })?;
        let o = self.object_name(obj);
        let write = || -> io::Result<()> {
            let src = copy::open_readable(self.store()?, OsStr::new(&o))?;
            let dst = copy::open_writable(dir, &name)?;
            copy::copy_content(&src, &dst)?;
            fsops::set_meta_at(dir, &name, st)
        };
        write().map_err(fail("restore the content of", rel))
    }

    /// Sets `st`'s mode, owner and times on `rel`, journaled as `meta` with the current ones.
    pub(crate) fn set_meta(&mut self, rel: &PathText, st: &Stat) -> Step {
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        let now = stat_at(dir.as_fd(), &name)
            .map_err(fail("inspect", rel))?
            .ok_or_else(|| format!("{} vanished", rel.display()))?;
        self.append_step(Op::Meta {
            path: rel.clone(),
            st: now,
        })?;
        fsops::set_meta_at(dir.as_fd(), &name, st).map_err(fail("restore the metadata of", rel))
    }

    /// Sets the metadata of the directories this rollback made, deepest first.
    pub(crate) fn finish_dirs(&mut self, a: &mut Apply) -> Step {
        let mut dirs = std::mem::take(&mut a.dirs);
        dirs.sort_by_key(|(rel, _)| std::cmp::Reverse(p(rel).components().count()));
        for (rel, st) in &dirs {
            self.set_meta(rel, st)?;
        }
        Ok(())
    }

    /// Brings the pre-image `store/<obj>` back as a new file at the free name `rel`.
    pub(crate) fn restore_copy(&mut self, obj: u64, rel: &PathText, st: &Stat) -> Step {
        let (dir, name) = self
            .parent(rel)
            .map_err(fail("open the directory of", rel))?;
        let dir = dir.as_fd();
        let tmp = OsString::from(format!(".guard-restore-{}", self.next_seq()));
        let tmp_rel = PathText::from(p(rel).with_file_name(&tmp));
        self.append_step(Op::Created {
            path: tmp_rel.clone(),
            id: None,
            obj: None,
        })?;
        let o = self.object_name(obj);
        let mut file = st.clone();
        file.kind = Kind::File;
        (self.store())
            .and_then(|store| {
                copy::copy_entry(store, OsStr::new(&o), dir, &tmp, &file, false, false)
            })
            .map_err(fail("copy", rel))?;
        let copied = stat_at(dir, &tmp)
            .map_err(fail("inspect", &tmp_rel))?
            .ok_or_else(|| format!("{} vanished", tmp_rel.display()))?;
        self.append_step(Op::Created {
            path: rel.clone(),
            id: Some(copied.id()),
            obj: None,
        })?;
        fsops::rename_at(dir, &tmp, dir, &name, RenameFlags::RENAME_NOREPLACE)
            .map_err(fail("restore", rel))
    }
}

fn hash_of(dir: std::os::fd::BorrowedFd<'_>, name: &OsStr) -> Option<String> {
    copy::open_readable(dir, name)
        .and_then(|f| fsops::hash_file(&f))
        .ok()
}

/// The inode whose content or metadata an entry restores.
pub(crate) fn inode(op: &Op) -> Option<FileId> {
    match op {
        Op::Deleted { st, .. } | Op::Modified { st, .. } | Op::Meta { st, .. } => Some(st.id()),
        Op::Renamed { replaced, .. } => replaced.as_ref().map(Stat::id),
        _ => None,
    }
}
