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
//! entry opened relative to it (no path walked from `/` per rule), and the patterns are
//! matched without a glob automaton where they need none: a literal path is compared
//! byte for byte, a pattern whose only wildcard is a single `*` is matched component by
//! component (`*` never crosses a `/`, as the profile reference says), and the rest (`**`,
//! `?`, `[...]`, `{a,b}`, escapes) go to a glob set, built only when a profile has such a pattern.
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

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use landlock::{AccessFs, BitFlags};
use nix::dir::{Dir, Type};
use nix::fcntl::OFlag;
use nix::sys::stat::{fstatat, Mode, SFlag};

use crate::sys::fs::openat;

/// Expanding deeper than this grants the directory whole instead (and says so by counting
/// nothing hidden there).
const MAX_DEPTH: usize = 8;

/// Where a rule of [`Hidden::grant`] applies.
pub enum Place<'a> {
    /// The root itself, by path: it may not exist, which the caller reports.
    Root(&'a Path),
    /// An entry inside an expanded root, already opened (`O_PATH`) through its directory.
    Open(OwnedFd, &'a Path),
}

/// The compiled `fs.hide` patterns.
pub struct Hidden {
    /// Patterns without wildcards: the paths themselves.
    literal: HashSet<PathBuf>,
    /// Patterns whose only wildcard is `*`.
    star: Vec<Vec<u8>>,
    /// The other patterns, when there are any.
    set: Option<GlobSet>,
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

/// Whether `name` matches `pattern`, where `*` matches any run of bytes but `/` and every
/// other byte matches itself.
fn star_match(pattern: &[u8], name: &[u8]) -> bool {
    let mut p = pattern.split(|&b| b == b'/');
    let mut n = name.split(|&b| b == b'/');
    loop {
        match (p.next(), n.next()) {
            (None, None) => return true,
            (Some(p), Some(n)) if star_match_component(p, n) => {}
            _ => return false,
        }
    }
}

/// [`star_match`] within one component: the usual greedy match that, on a mismatch, lets
/// the last `*` take one more byte.
fn star_match_component(p: &[u8], n: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == n[j] {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&b| b == b'*')
}

impl Hidden {
    /// The patterns were validated with the profile; one that does not compile hides
    /// nothing.
    pub fn new(patterns: &[String]) -> Hidden {
        let mut literal = HashSet::new();
        let mut star = Vec::new();
        let mut globs = GlobSetBuilder::new();
        let mut globbed = false;
        let mut expand = HashSet::new();
        for p in patterns {
            let trimmed = match p.trim_end_matches('/') {
                "" => "/",
                t => t,
            };
            let bytes = trimmed.as_bytes();
            if !has_syntax(bytes) {
                literal.insert(PathBuf::from(trimmed));
            } else if !bytes.iter().any(|b| b"?[{\\".contains(b)) && !trimmed.contains("**") {
                star.push(bytes.to_vec());
            } else if let Ok(g) = GlobBuilder::new(p).literal_separator(true).build() {
                globs.add(g);
                globbed = true;
            } else {
                continue;
            }
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
        let set = globbed.then(|| globs.build().unwrap_or_else(|_| GlobSet::empty()));
        Hidden {
            literal,
            star,
            set,
            expand,
        }
    }

    /// Whether `path` itself matches a pattern.
    fn matches(&self, path: &Path) -> bool {
        let bytes = path.as_os_str().as_bytes();
        self.literal.contains(path)
            || self.star.iter().any(|p| star_match(p, bytes))
            || self.set.as_ref().is_some_and(|s| s.is_match(path))
    }

    /// Whether `path` (absolute, symlinks resolved) is hidden: it or a directory above it
    /// matches a pattern.
    pub fn hides(&self, path: &Path) -> bool {
        path.ancestors().any(|p| self.matches(p))
    }

    /// Grants `root` with `access` minus the hidden paths, one `add` per rule; returns how
    /// many hidden entries were left out. An entry that vanishes while it is listed is left
    /// out as well (it holds nothing to grant).
    pub fn grant<E>(
        &self,
        root: &Path,
        access: BitFlags<AccessFs>,
        add: &mut dyn FnMut(Place<'_>, BitFlags<AccessFs>) -> Result<(), E>,
    ) -> Result<usize, E> {
        if self.matches(root) {
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
        add: &mut dyn FnMut(Place<'_>, BitFlags<AccessFs>) -> Result<(), E>,
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
            if self.matches(path) {
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
                            add(Place::Open(entry, path), access)?;
                        }
                    }
                }
            } else if let Some(entry) = open_path(fd, &name) {
                add(Place::Open(entry, path), access)?;
            }
            path.pop();
        }
        let list = access & AccessFs::ReadDir;
        if !list.is_empty() {
            add(Place::Open(dir, path), list)?;
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
                    Place::Open(_, p) => p.to_path_buf(),
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

    /// The literal and `*` patterns skip the glob set; they must match exactly what it
    /// would.
    #[test]
    fn patterns_match_as_a_glob_set_matches_them() {
        let patterns = [
            "/etc/shadow",
            "/etc/ssh/*_key",
            "/dev/sd*",
            "/dev/*/by-id",
            "/a/*b*c*",
            "/x/**",
            "/etc/ppp/*-secrets",
            "/home/*/.ssh/id_*",
        ];
        let paths = [
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/shado",
            "/etc/ssh/ssh_host_rsa_key",
            "/etc/ssh/ssh_host_rsa_key.pub",
            "/etc/ssh/_key",
            "/etc/ssh/a/b_key",
            "/dev/sd",
            "/dev/sda1",
            "/dev/sda/x",
            "/dev/disk/by-id",
            "/dev/by-id",
            "/a/bc",
            "/a/xbycz",
            "/a/cb",
            "/a/bxc/",
            "/x/y/z",
            "/x",
            "/etc/ppp/chap-secrets",
            "/home/u/.ssh/id_ed25519",
            "/home/u/v/.ssh/id_rsa",
        ];
        for pattern in patterns {
            let hide = Hidden::new(&[pattern.to_string()]);
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .expect("glob")
                .compile_matcher();
            for path in paths {
                assert_eq!(
                    hide.matches(Path::new(path)),
                    glob.is_match(path),
                    "{pattern} against {path}"
                );
            }
        }
    }
}
