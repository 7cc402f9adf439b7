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
//! Consequences, documented in the profile reference: an entry created in an expanded
//! directory after the start is not granted (it did not exist when the rules were made), and
//! a symlink among the entries is not granted itself (the path it points to is judged where
//! it leads).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use landlock::{AccessFs, BitFlags};

/// Expanding deeper than this grants the directory whole instead (and says so by counting
/// nothing hidden there).
const MAX_DEPTH: usize = 8;

/// The compiled `fs.hide` patterns.
pub struct Hidden {
    set: GlobSet,
    /// The directories to expand: the deepest directory each pattern's hidden entries lie
    /// in, and every directory above it. A set, since every entry of an expanded directory
    /// is looked up in it (hundreds in `/etc` and `/dev`).
    expand: HashSet<PathBuf>,
}

/// The components of `glob` up to the first one with glob syntax.
fn anchor(glob: &str) -> PathBuf {
    Path::new(glob)
        .components()
        .take_while(|c| {
            !c.as_os_str()
                .as_encoded_bytes()
                .iter()
                .any(|b| b"*?[{\\".contains(b))
        })
        .collect()
}

impl Hidden {
    /// The patterns were validated with the profile; one that does not compile hides
    /// nothing.
    pub fn new(patterns: &[String]) -> Hidden {
        let mut b = GlobSetBuilder::new();
        let mut expand = HashSet::new();
        for p in patterns {
            if let Ok(g) = GlobBuilder::new(p).literal_separator(true).build() {
                b.add(g);
                // Nothing to hide where nothing is: no root is expanded for it.
                let a = anchor(p);
                if std::fs::symlink_metadata(&a).is_err() {
                    continue;
                }
                let literal = a.as_os_str().len() == p.trim_end_matches('/').len();
                let dir = if literal {
                    a.parent().map(Path::to_path_buf)
                } else {
                    Some(a)
                };
                for d in dir.iter().flat_map(|d| d.ancestors()) {
                    expand.insert(d.to_path_buf());
                }
            }
        }
        Hidden {
            set: b.build().unwrap_or_else(|_| GlobSet::empty()),
            expand,
        }
    }

    /// Whether `path` (absolute, symlinks resolved) is hidden: it or a directory above it
    /// matches a pattern.
    pub fn hides(&self, path: &Path) -> bool {
        path.ancestors().any(|p| self.set.is_match(p))
    }

    /// The rules that grant `root` with `access` minus the hidden paths, appended to `out`;
    /// returns how many hidden entries were left out.
    pub fn grant(
        &self,
        root: &Path,
        access: BitFlags<AccessFs>,
        out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    ) -> usize {
        self.grant_at(root, access, out, 0)
    }

    fn grant_at(
        &self,
        path: &Path,
        access: BitFlags<AccessFs>,
        out: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
        depth: usize,
    ) -> usize {
        if self.set.is_match(path) {
            return 1;
        }
        let below = self.expand.contains(path);
        if !below || depth >= MAX_DEPTH {
            out.push((path.to_path_buf(), access));
            return 0;
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            // Not a directory guard can list: granted as it is.
            out.push((path.to_path_buf(), access));
            return 0;
        };
        let mut hidden = 0;
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_symlink() {
                // Reached through its target, whose own rule (or lack of one) decides.
                continue;
            }
            hidden += self.grant_at(&e.path(), access, out, depth + 1);
        }
        let list = access & AccessFs::ReadDir;
        if !list.is_empty() {
            out.push((path.to_path_buf(), list));
        }
        hidden
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use landlock::ABI;

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
        let mut out = Vec::new();
        assert_eq!(hide.grant(&etc, read, &mut out), 2);
        let granted = |p: &str| out.iter().any(|(g, a)| g == &etc.join(p) && *a == read);
        assert!(granted("passwd") && granted("ssl") && granted("empty"));
        assert!(granted("ssh/ssh_host_rsa_key.pub"));
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
        // A root with nothing hidden inside is one rule.
        let mut out = Vec::new();
        assert_eq!(hide.grant(&dir.path().join("etc/ssl"), read, &mut out), 0);
        assert_eq!(out.len(), 1);
    }
}
