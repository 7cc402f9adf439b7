//! The resolve stage's view of a path, for `guard explain`: the path argument walked exactly as
//! the supervisor walks a caller's (`target::target`), with guard's own process as the
//! caller (its cwd is where relative paths start). What explain judges is then what a run
//! would judge: the parent's real path and the final name, or the kernel's errno when the path
//! does not resolve; and, for a change, the errno the kernel's own name rules give it
//! ([`names`](super::names)), which a run answers with whatever the profile says, and the
//! kernel's answers to a call that fails anyway, which a run gives instead of a refusal.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::names;
pub use super::names::kernel_first;
use super::resolve::Act;
use super::target::{self, Kind, Last, Target};

/// A path as the supervisor would see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathView {
    /// Absolute, with the directory part's symlinks resolved (and the last component's when
    /// the call follows it).
    pub path: PathBuf,
    /// What is there now.
    pub kind: Option<EntryKind>,
}

/// The type of an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

/// A change explain asks about, as the call a program makes for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// `open(PATH, O_WRONLY|O_CREAT|O_TRUNC)`, as `> PATH` does.
    Write,
    /// `unlink(PATH)`, or `rmdir(PATH)` when it is a directory.
    Delete,
}

/// A change's target as the supervisor would see it, with the kernel's own answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeView {
    /// The target.
    pub view: PathView,
    /// The errno the kernel refuses the call with for its names alone: the call fails with
    /// it before it is judged.
    pub by_name: Option<i32>,
    /// The errno the kernel gives before it would ask Landlock: a run answers with it instead
    /// of a write-root refusal (rule `resolve`).
    pub before_landlock: Option<i32>,
    /// The errno the kernel gives after its permission checks because the call fails anyway
    /// (a directory that holds entries): a run answers with it instead of a refusal by a rule
    /// that guard alone enforces (rule `resolve`).
    pub fails_anyway: Option<i32>,
}

/// What the supervisor finds about git's files for a write-open of `path` (resolved): a
/// repository's config is never written in place.
pub fn git_facts_of_write(path: &Path) -> Vec<crate::policy::git::GitFacts> {
    if super::git::is_repository_config(path) {
        vec![crate::policy::git::GitFacts::Unjudgeable(
            super::git::CONFIG_IN_PLACE,
        )]
    } else {
        Vec::new()
    }
}

/// Walk `raw` as the supervisor walks a caller's path: following a final symlink when
/// `follow` (an open, an exec), else the entry itself (an unlink); the errno when it does not
/// resolve.
pub fn resolve_path(raw: &Path, follow: bool) -> Result<PathView, i32> {
    let last = if follow { Last::Follow } else { Last::Entry };
    walk(raw, last).map(|t| view(&t))
}

/// Walk `raw` for `change` as the resolve stage does, and apply the kernel's name rules.
pub fn resolve_change(raw: &Path, change: Change) -> Result<ChangeView, i32> {
    let (last, flags) = match change {
        Change::Write => (Last::Follow, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC),
        Change::Delete => (Last::Entry, 0),
    };
    let t = walk(raw, last)?;
    let view = view(&t);
    let act = match change {
        Change::Write => Act::Open {
            at: t,
            flags,
            mode: 0o666,
        },
        Change::Delete if view.kind == Some(EntryKind::Dir) => Act::Rmdir(t),
        Change::Delete => Act::Unlink(t),
    };
    Ok(ChangeView {
        view,
        by_name: names::refused(&act),
        before_landlock: names::before_landlock(&act),
        fails_anyway: names::fails_anyway(&act),
    })
}

fn walk(raw: &Path, last: Last) -> Result<Target, i32> {
    target::target(
        std::process::id(),
        libc::AT_FDCWD as u64,
        raw.as_os_str().as_bytes(),
        last,
    )
    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

fn view(t: &Target) -> PathView {
    PathView {
        path: t.path.clone(),
        kind: t.kind.map(|k| match k {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink,
            Kind::Magic | Kind::Other => EntryKind::Other,
        }),
    }
}
