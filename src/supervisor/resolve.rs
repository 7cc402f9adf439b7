//! Turning a path argument into the absolute path the caller means: relative paths start at the
//! caller's cwd or dirfd (read from /proc/PID), directory symlinks are resolved, and the last
//! component is followed only when the system call follows it.
//!
//! This is a judgement aid, not the enforcement: a path-based allow that is continued can still
//! be raced, which is why Landlock bounds every write and why allows inside the workspace are to
//! be emulated on a resolved fd (DESIGN.md, "Enforcement").

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// `AT_FDCWD` as it appears in a 64-bit argument register (sign-extended or not).
fn is_at_fdcwd(dirfd: u64) -> bool {
    dirfd as i32 == libc::AT_FDCWD
}

/// The caller's current directory.
pub fn caller_cwd(pid: u32) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd"))
}

/// What descriptor `fd` of the caller refers to.
pub fn caller_fd_path(pid: u32, fd: i32) -> io::Result<PathBuf> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
}

/// The directory a relative path argument starts from.
pub fn base_dir(pid: u32, dirfd: u64) -> io::Result<PathBuf> {
    if is_at_fdcwd(dirfd) {
        caller_cwd(pid)
    } else {
        caller_fd_path(pid, dirfd as i32)
    }
}

/// Remove `.`, `..` and repeated separators without touching the filesystem.
pub fn lexical(path: &Path) -> PathBuf {
    crate::policy::normalize(path)
}

/// A resolved path argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub path: PathBuf,
    /// Whether an entry exists at `path` (not following a final symlink unless asked).
    pub exists: bool,
}

/// Resolve `raw` (as passed to a *at call with `dirfd`) for process `pid`.
pub fn resolve(pid: u32, dirfd: u64, raw: &[u8], follow_last: bool) -> io::Result<Resolved> {
    if raw.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let raw_path = Path::new(OsStr::from_bytes(raw));
    let full = if raw_path.is_absolute() {
        raw_path.to_path_buf()
    } else {
        base_dir(pid, dirfd)?.join(raw_path)
    };
    let trailing_dir = raw.ends_with(b"/")
        || matches!(
            full.components().next_back(),
            Some(Component::CurDir | Component::ParentDir | Component::RootDir)
        );
    if trailing_dir {
        let p = canonical_or_lexical(&full);
        let exists = p.symlink_metadata().is_ok();
        return Ok(Resolved { path: p, exists });
    }
    let name = full
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    let parent = full.parent().unwrap_or(Path::new("/"));
    let mut path = canonical_or_lexical(parent).join(&name);
    if follow_last {
        path = follow(&path);
    }
    let exists = path.symlink_metadata().is_ok();
    Ok(Resolved { path, exists })
}

/// Resolve a path that must already exist in full (an executable), following every symlink.
pub fn resolve_existing(pid: u32, dirfd: u64, raw: &[u8]) -> io::Result<PathBuf> {
    let r = resolve(pid, dirfd, raw, true)?;
    Ok(r.path)
}

fn canonical_or_lexical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        // A missing directory: resolve the longest existing ancestor, keep the rest lexical.
        let lex = lexical(p);
        let mut existing = lex.as_path();
        let mut rest = Vec::new();
        while let Some(parent) = existing.parent() {
            if let Some(n) = existing.file_name() {
                rest.push(n.to_os_string());
            }
            existing = parent;
            if let Ok(c) = std::fs::canonicalize(existing) {
                let mut out = c;
                for n in rest.iter().rev() {
                    out.push(n);
                }
                return out;
            }
        }
        lex
    })
}

/// Follow a final symlink (up to 40 hops, as the kernel does); a dangling link resolves to
/// where its target would be created.
fn follow(path: &Path) -> PathBuf {
    let mut cur = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&cur) {
            Ok(target) => {
                let parent = cur.parent().unwrap_or(Path::new("/")).to_path_buf();
                let joined = if target.is_absolute() {
                    target
                } else {
                    parent.join(target)
                };
                let name = joined.file_name().map(|n| n.to_os_string());
                let dir = joined.parent().unwrap_or(Path::new("/"));
                cur = match name {
                    Some(n) => canonical_or_lexical(dir).join(n),
                    None => canonical_or_lexical(&joined),
                };
            }
            Err(_) => return cur,
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_start_at_the_callers_cwd() {
        let me = std::process::id();
        let cwd = std::env::current_dir().expect("cwd");
        let r = resolve(me, libc::AT_FDCWD as u64, b"src/../Cargo.toml", false).expect("resolves");
        assert_eq!(
            r.path,
            std::fs::canonicalize(cwd.join("Cargo.toml")).expect("exists")
        );
        assert!(r.exists);
    }

    #[test]
    fn dangling_symlink_resolves_to_its_target_when_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canon");
        std::os::unix::fs::symlink(base.join("target"), base.join("link")).expect("symlink");
        let raw = base.join("link");
        let followed = resolve(
            std::process::id(),
            libc::AT_FDCWD as u64,
            raw.as_os_str().as_bytes(),
            true,
        )
        .expect("resolves");
        assert_eq!(followed.path, base.join("target"));
        assert!(!followed.exists);
        let not_followed = resolve(
            std::process::id(),
            libc::AT_FDCWD as u64,
            raw.as_os_str().as_bytes(),
            false,
        )
        .expect("resolves");
        assert_eq!(not_followed.path, base.join("link"));
        assert!(not_followed.exists);
    }
}
