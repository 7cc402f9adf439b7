//! Settings found without a flag: the user's `$XDG_CONFIG_HOME/guard/config.toml` (else
//! `~/.config/guard/config.toml`) and the workspace's `.guard.toml`, layered under the
//! profiles named with `-p` (see [`policy::load_layers`](crate::policy::load_layers)).
//!
//! - The workspace file is the nearest `.guard.toml` walking up from the workspace: the
//!   workspace itself, then each parent, stopping after the first directory that holds a
//!   `.git` (the repository's root) or at the filesystem root.
//! - A workspace file is used only once its user trusted it: a cloned repository must not
//!   widen its own sandbox. [`trust`] records the file's path and the SHA-256 of its content
//!   in the state directory (`trusted-configs`); a changed file is untrusted again until
//!   trusted again. The user's own file needs no trust.
//! - Both are guard's own configuration: the policy lists them (and the user's configuration
//!   directory, even when it holds no file yet) in `guard_files`, so the command can neither
//!   change, move nor remove them, nor create a `.guard.toml` anywhere.

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::policy::WORKSPACE_CONFIG;

/// The file in the state directory that lists trusted workspace files.
const TRUSTED: &str = "trusted-configs";

/// The configuration files found for a workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigFiles {
    /// The user's configuration directory (`$XDG_CONFIG_HOME/guard`), whether or not it
    /// exists; `None` without XDG_CONFIG_HOME and HOME.
    pub user_dir: Option<PathBuf>,
    /// The user's `config.toml`, when it exists.
    pub user: Option<PathBuf>,
    /// The workspace's `.guard.toml`, when one was found, and whether it is trusted.
    pub workspace: Option<(PathBuf, bool)>,
}

impl ConfigFiles {
    /// The files to layer, in order: the user's, then the workspace's when it is trusted.
    pub fn layers(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.user.iter().cloned().collect();
        if let Some((path, true)) = &self.workspace {
            v.push(path.clone());
        }
        v
    }

    /// The workspace file that was found but is not trusted, if any.
    pub fn untrusted(&self) -> Option<&Path> {
        match &self.workspace {
            Some((path, false)) => Some(path),
            _ => None,
        }
    }
}

/// Why a file could not be trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The file to trust could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file to trust.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
    /// The list of trusted files could not be written.
    #[error("cannot record the trust in {}", path.display())]
    Write {
        /// The list of trusted files, in the state directory.
        path: PathBuf,
        /// The error from the kernel.
        #[source]
        source: io::Error,
    },
}

/// The user's configuration directory, from `get` (an environment lookup): guard's
/// `$XDG_CONFIG_HOME/guard`, else `$HOME/.config/guard`.
pub fn user_dir(get: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let nonempty = |v: &str| get(v).filter(|s| !s.is_empty()).map(PathBuf::from);
    nonempty("XDG_CONFIG_HOME")
        .map(|d| d.join("guard"))
        .or_else(|| nonempty("HOME").map(|h| h.join(".config/guard")))
}

/// Find the configuration files for `workspace` (absolute), with the trust recorded in
/// `state`, and the user's directory `user_dir`.
pub fn discover(workspace: &Path, state: &Path, user_dir: Option<PathBuf>) -> ConfigFiles {
    let user = user_dir
        .as_ref()
        .map(|d| d.join("config.toml"))
        .filter(|f| f.is_file());
    let workspace = nearest(workspace).map(|path| {
        let trusted = is_trusted(&path, state);
        (path, trusted)
    });
    ConfigFiles {
        user_dir,
        user,
        workspace,
    }
}

/// The nearest `.guard.toml` from `dir` up to the repository's root or `/`.
fn nearest(dir: &Path) -> Option<PathBuf> {
    for d in dir.ancestors() {
        let candidate = d.join(WORKSPACE_CONFIG);
        if candidate.is_file() {
            return Some(candidate);
        }
        if d.join(".git").exists() {
            return None;
        }
    }
    None
}

fn digest(content: &[u8]) -> String {
    Sha256::digest(content)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_trusted(path: &Path, state: &Path) -> bool {
    let Ok(content) = std::fs::read(path) else {
        return false;
    };
    let line = format!("{} {}", digest(&content), canonical(path).display());
    std::fs::read_to_string(state.join(TRUSTED))
        .map(|list| list.lines().any(|l| l == line))
        .unwrap_or(false)
}

/// Trust the workspace file `path` as it is now: record its content's digest in `state`.
/// Returns the digest.
///
/// # Errors
///
/// [`TrustError::Read`] when `path` cannot be read, [`TrustError::Write`] when the list of
/// trusted files in `state` cannot be written.
pub fn trust(path: &Path, state: &Path) -> Result<String, TrustError> {
    let content = std::fs::read(path).map_err(|source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let sum = digest(&content);
    let file = canonical(path);
    let list_path = state.join(TRUSTED);
    let old = std::fs::read_to_string(&list_path).unwrap_or_default();
    let suffix = format!(" {}", file.display());
    let mut lines: Vec<&str> = old.lines().filter(|l| !l.ends_with(&suffix)).collect();
    let line = format!("{sum}{suffix}");
    lines.push(&line);
    let write = || -> io::Result<()> {
        std::fs::create_dir_all(state)?;
        let tmp = state.join(format!("{TRUSTED}.tmp"));
        std::fs::write(&tmp, lines.join("\n") + "\n")?;
        std::fs::rename(&tmp, &list_path)
    };
    write().map_err(|source| TrustError::Write {
        path: list_path.clone(),
        source,
    })?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_file_up_to_the_repository_root_and_trust_by_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("outer");
        let repo = root.join("repo");
        let ws = repo.join("a/b");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(repo.join(".git")).expect("mkdir .git");
        std::fs::write(root.join(WORKSPACE_CONFIG), "# above the repository\n").expect("write");
        let state = dir.path().join("state");
        assert_eq!(
            discover(&ws, &state, None).workspace,
            None,
            "stops at the repository"
        );
        let file = repo.join("a").join(WORKSPACE_CONFIG);
        std::fs::write(&file, "[fs]\nwrite = [\"/tmp/x\"]\n").expect("write");
        let found = discover(&ws, &state, None);
        assert_eq!(found.workspace, Some((file.clone(), false)));
        assert!(found.layers().is_empty(), "not trusted yet");
        assert_eq!(found.untrusted(), Some(file.as_path()));
        trust(&file, &state).expect("trust");
        let found = discover(&ws, &state, None);
        assert_eq!(found.layers(), std::slice::from_ref(&file));
        std::fs::write(&file, "[fs]\nwrite = [\"/\"]\n").expect("rewrite");
        assert_eq!(
            discover(&ws, &state, None).workspace,
            Some((file.clone(), false)),
            "a changed file is untrusted again"
        );
    }

    #[test]
    fn the_user_directory_follows_xdg() {
        let env = |xdg: Option<&str>, home: Option<&str>| {
            let (xdg, home) = (xdg.map(String::from), home.map(String::from));
            user_dir(move |k| match k {
                "XDG_CONFIG_HOME" => xdg.clone().map(Into::into),
                "HOME" => home.clone().map(Into::into),
                _ => None,
            })
        };
        assert_eq!(env(Some("/x"), Some("/h")), Some(PathBuf::from("/x/guard")));
        assert_eq!(
            env(Some(""), Some("/h")),
            Some(PathBuf::from("/h/.config/guard"))
        );
        assert_eq!(env(None, None), None);
    }
}
