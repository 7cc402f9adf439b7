//! The resolve stage's view of a path, for `guard explain`: the path argument walked exactly as
//! the supervisor walks a caller's (`target::target`), with guard's own process as the
//! caller (its cwd is where relative paths start). What explain judges is then what a run
//! would judge: the parent's real path and the final name, or the kernel's errno when the path
//! does not resolve.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::target::{self, Kind};

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

/// Walk `raw` as the supervisor walks a caller's path (following a final symlink when
/// `follow`); the errno when it does not resolve.
pub fn resolve_path(raw: &Path, follow: bool) -> Result<PathView, i32> {
    let t = target::target(
        std::process::id(),
        libc::AT_FDCWD as u64,
        raw.as_os_str().as_bytes(),
        follow,
    )
    .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    Ok(PathView {
        path: t.path,
        kind: t.kind.map(|k| match k {
            Kind::File => EntryKind::File,
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink,
            Kind::Magic | Kind::Other => EntryKind::Other,
        }),
    })
}
