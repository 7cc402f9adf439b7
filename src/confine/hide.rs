//! Hidden paths inside the roots (`fs.hide`): root-only secrets such as `/etc/shadow` that no
//! profile may let the sandbox read, root included (a sandboxed root keeps its uid, so file
//! ownership still lets it read what root owns).
//!
//! Landlock grants a right on a whole hierarchy and has no way to take a path back out of
//! it. So a root that holds a hidden path is not granted as a whole: it is granted entry by
//! entry, minus the hidden entries, recursing only into the entries a hidden path lies in
//! (`/etc` -> every entry of `/etc` but `shadow`, `gshadow`, `sudoers`, ...; `/etc/ssh` -> every
//! entry but the host keys), and the expanded directory itself gets the right to be listed
//! only. That costs one directory listing per expanded level at start, and no rule at all for
//! a root that holds nothing hidden.
//!
//! This runs on every start (the default profile expands `/etc` and `/dev`: some 250 rules),
//! so it is built for that: an expanded directory is listed through its descriptor and each
//! entry opened relative to it (no path walked from `/` per rule), and the patterns are a
//! [`PathSet`], which matches the profiles' patterns without compiling a regex.
//!
//! Consequences, documented in the profile reference: an entry created in an expanded
//! directory after the start is not granted (it did not exist when the rules were made), and
//! a symlink among the entries is not granted itself (the path it points to is judged where
//! it leads).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{AccessFs, BitFlags};
use nix::dir::{Dir, Type};
use nix::fcntl::OFlag;
use nix::sys::stat::{fstatat, Mode, SFlag};

use crate::policy::PathSet;
use crate::sys::fs::openat;

/// Expanding deeper than this grants the directory whole instead (and says so by counting
/// nothing hidden there).
const MAX_DEPTH: usize = 8;

/// Where a rule of [`Hidden::grant`] applies.
pub enum Place<'a> {
    /// The root itself, by path: it may not exist, which the caller reports.
    Root(&'a Path),
    /// An entry inside an expanded root, already opened (`O_PATH`) through its directory,
    /// and whether it is a directory (the listing said, or `fstatat` where it did not).
    Open(OwnedFd, &'a Path, bool),
}

/// What [`Hidden::grant`] calls for each rule: grant the right at the place.
pub type AddRule<'f, E> = dyn FnMut(Place<'_>, BitFlags<AccessFs>) -> Result<(), E> + 'f;

/// The compiled `fs.hide` patterns.
pub struct Hidden {
    set: PathSet,
    /// The directories to expand: the deepest directory each pattern's hidden entries lie
    /// in, and every directory above it. A set, since every entry of an expanded directory
    /// is looked up in it (hundreds in `/etc` and `/dev`).
    expand: HashSet<PathBuf>,
}

/// The components of `glob` up to the first one with glob syntax.
fn anchor(glob: &str) -> PathBuf {
    Path::new(glob)
        .components()
        .take_while(|c| !has_syntax(c.as_os_str().as_bytes()))
        .collect()
}

fn has_syntax(s: &[u8]) -> bool {
    s.iter().any(|b| b"*?[{\\".contains(b))
}

impl Hidden {
    /// The patterns were validated with the profile; one that does not compile hides
    /// nothing.
    pub fn new(patterns: &[String]) -> Hidden {
        let trimmed: Vec<&str> = patterns
            .iter()
            .map(|p| match p.trim_end_matches('/') {
                "" => "/",
                t => t,
            })
            .collect();
        let set = PathSet::lenient(&trimmed);
        let mut expand = HashSet::new();
        for (p, trimmed) in patterns.iter().zip(&trimmed) {
            // Nothing to hide where nothing is: no root is expanded for it.
            let a = anchor(p);
            if std::fs::symlink_metadata(&a).is_err() {
                continue;
            }
            let dir = if a.as_os_str().len() == trimmed.len() {
                a.parent().map(Path::to_path_buf)
            } else {
                Some(a)
            };
            for d in dir.iter().flat_map(|d| d.ancestors()) {
                expand.insert(d.to_path_buf());
            }
        }
        Hidden { set, expand }
    }

    /// Whether `path` (absolute, symlinks resolved) is hidden: it or a directory above it
    /// matches a pattern.
    pub fn hides(&self, path: &Path) -> bool {
        path.ancestors().any(|p| self.set.is_match(p))
    }

    /// Grants `root` with `access` minus the hidden paths, one `add` per rule; returns how
    /// many hidden entries were left out. An entry that vanishes while it is listed is left
    /// out as well (it holds nothing to grant).
    pub fn grant<E>(
        &self,
        root: &Path,
        access: BitFlags<AccessFs>,
        add: &mut AddRule<'_, E>,
    ) -> Result<usize, E> {
        if self.set.is_match(root) {
            return Ok(1);
        }
        if !self.expand.contains(root) {
            add(Place::Root(root), access)?;
            return Ok(0);
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match openat(None, root, flags, Mode::empty()) {
            Ok(dir) => self.expand_dir(dir, &mut root.to_path_buf(), access, add, 0),
            // Not a directory guard can list: granted as it is.
            Err(_) => add(Place::Root(root), access).map(|()| 0),
        }
    }

    /// Grants the entries of the expanded directory `dir` (at `path`) and the listing of
    /// `dir` itself.
    fn expand_dir<E>(
        &self,
        dir: OwnedFd,
        path: &mut PathBuf,
        access: BitFlags<AccessFs>,
        add: &mut AddRule<'_, E>,
        depth: usize,
    ) -> Result<usize, E> {
        let fd = dir.as_fd();
        let mut hidden = 0;
        let mut names = Vec::new();
        if let Ok(mut listing) = dir
            .try_clone()
            .map_err(drop)
            .and_then(|d| Dir::from(d).map_err(drop))
        {
            for entry in listing.iter().flatten() {
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    names.push((name.to_vec(), entry.file_type()));
                }
            }
        }
        for (name, kind) in names {
            let kind = kind.or_else(|| kind_at(fd, &name));
            if matches!(kind, None | Some(Type::Symlink)) {
                // Reached through its target, whose own rule (or lack of one) decides.
                continue;
            }
            path.push(OsStr::from_bytes(&name));
            if self.set.is_match(&*path) {
                hidden += 1;
            } else if kind == Some(Type::Directory)
                && depth + 1 < MAX_DEPTH
                && self.expand.contains(path.as_path())
            {
                let flags =
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                match openat(Some(fd), name.as_slice(), flags, Mode::empty()) {
                    Ok(sub) => hidden += self.expand_dir(sub, path, access, add, depth + 1)?,
                    Err(_) => {
                        if let Some(entry) = open_path(fd, &name) {
                            add(Place::Open(entry, path, true), access)?;
                        }
                    }
                }
            } else if let Some(entry) = open_path(fd, &name) {
                add(
                    Place::Open(entry, path, kind == Some(Type::Directory)),
                    access,
                )?;
            }
            path.pop();
        }
        let list = access & AccessFs::ReadDir;
        if !list.is_empty() {
            add(Place::Open(dir, path, true), list)?;
        }
        Ok(hidden)
    }
}

/// `name` in the directory `dir`, opened `O_PATH` without following a symlink.
fn open_path(dir: BorrowedFd<'_>, name: &[u8]) -> Option<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(Some(dir), name, flags, Mode::empty()).ok()
}

/// The type of `name` in `dir` where the listing did not say it.
fn kind_at(dir: BorrowedFd<'_>, name: &[u8]) -> Option<Type> {
    let st = fstatat(
        Some(dir.as_raw_fd()),
        name,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    let fmt = SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits());
    Some(match fmt {
        SFlag::S_IFDIR => Type::Directory,
        SFlag::S_IFLNK => Type::Symlink,
        _ => Type::File,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use landlock::ABI;

    /// The rules `grant` makes, as paths.
    fn granted(
        hide: &Hidden,
        root: &Path,
        access: BitFlags<AccessFs>,
    ) -> (usize, Vec<(PathBuf, BitFlags<AccessFs>)>) {
        let mut out = Vec::new();
        let hidden = hide
            .grant::<()>(root, access, &mut |place, a| {
                let path = match place {
                    Place::Root(p) => p.to_path_buf(),
                    Place::Open(_, p, _) => p.to_path_buf(),
                };
                out.push((path, a));
                Ok(())
            })
            .expect("grant");
        (hidden, out)
    }

    #[test]
    fn a_root_is_granted_around_what_it_hides() {
        let dir = tempfile::tempdir().expect("tempdir");
        let etc = dir.path().join("etc");
        for d in ["ssh", "ssl/certs", "empty"] {
            std::fs::create_dir_all(etc.join(d)).expect("mkdir");
        }
        for f in [
            "shadow",
            "passwd",
            "ssh/ssh_host_rsa_key",
            "ssh/ssh_host_rsa_key.pub",
            "ssl/certs/ca",
        ] {
            std::fs::write(etc.join(f), "x").expect("write");
        }
        std::os::unix::fs::symlink("shadow", etc.join("alias")).expect("symlink");
        let hide = Hidden::new(&[
            format!("{}/shadow", etc.display()),
            format!("{}/ssh/*_key", etc.display()),
        ]);
        let read = AccessFs::from_read(ABI::V1);
        let (hidden, out) = granted(&hide, &etc, read);
        assert_eq!(hidden, 2);
        let has = |p: &str| out.iter().any(|(g, a)| g == &etc.join(p) && *a == read);
        assert!(has("passwd") && has("ssl") && has("empty"));
        assert!(has("ssh/ssh_host_rsa_key.pub"));
        assert!(!out
            .iter()
            .any(|(g, _)| g.ends_with("shadow") || g.ends_with("ssh_host_rsa_key")));
        assert!(
            !out.iter().any(|(g, _)| g.ends_with("alias")),
            "symlinks are not granted"
        );
        assert!(
            out.contains(&(etc.clone(), AccessFs::ReadDir.into())),
            "listing only"
        );
        assert!(
            out.contains(&(etc.join("ssh"), AccessFs::ReadDir.into())),
            "listing only, one level down"
        );
        // A root with nothing hidden inside is one rule.
        let (hidden, out) = granted(&hide, &dir.path().join("etc/ssl"), read);
        assert_eq!((hidden, out.len()), (0, 1));
    }
}
