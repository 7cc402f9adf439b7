//! git judged by content: a repository's config by the keys a change adds, its hooks by what
//! would run, and `git push`/`send-pack` by what the push would do to the remote's refs. The
//! supervisor gathers the facts (the config text it is about to install, the executables in a
//! hooks directory, the repository's effective config for a push) and hands them over as
//! [`GitFacts`]; everything here is pure.
//!
//! - [`config`] reads git's configuration format exactly as git does;
//! - [`keys`] judges config entries against the profile's `[git]` keys;
//! - [`push`] parses git's command line (global options, `-c`, aliases, push options) and
//!   judges whether a push deletes or force-updates remote refs.

pub mod config;
pub mod keys;
pub mod push;

use std::ffi::OsString;
use std::path::PathBuf;

pub use config::{Entry, ParseError};
pub use keys::KeySet;
pub use push::GitExec;

/// The `[git]` part of a policy.
#[derive(Debug, Clone)]
pub struct GitPolicy {
    /// Config keys refused in a repository's config (globs, matched case-insensitively on the
    /// whole key, `*` crossing dots).
    pub refuse_keys: Vec<String>,
    /// Keys exempt from `refuse_keys` and from the built-in value checks.
    pub allow_keys: Vec<String>,
    /// `refuse_keys` compiled (when first used).
    pub refuse_set: KeySet,
    /// `allow_keys` compiled (when first used).
    pub allow_set: KeySet,
    /// Refuse executables (and symlinks) in a repository's hooks directory.
    pub refuse_hooks: bool,
    /// Refuse pushes that delete or force-update remote refs.
    pub refuse_destructive_push: bool,
}

impl Default for GitPolicy {
    fn default() -> Self {
        GitPolicy {
            refuse_keys: Vec::new(),
            allow_keys: Vec::new(),
            refuse_set: KeySet::default(),
            allow_set: KeySet::default(),
            refuse_hooks: true,
            refuse_destructive_push: true,
        }
    }
}

/// What the supervisor found about a call that touches git's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitFacts {
    /// The config of the repository at `git_dir` (its `config` or `config.worktree`) is
    /// about to hold `new`, replacing `old` (empty when there was none).
    Config {
        /// The repository's git directory.
        git_dir: PathBuf,
        /// The entries of the config as it is.
        old: Vec<Entry>,
        /// The entries of the config as the call leaves it, or why git could not read it.
        new: Result<Vec<Entry>, ParseError>,
    },
    /// A change to a repository's config that guard cannot judge by content (written in
    /// place, linked, exchanged, not a regular file): refused, with this reason.
    Unjudgeable(&'static str),
    /// An executable file, or a symlink, appears in a repository's hooks directory under a
    /// name git would run (anything but `*.sample`).
    Hook {
        /// The hook's file name.
        name: OsString,
    },
    /// A `.git` file or symlink that sends git to `target` (absolute, normalised).
    Redirect {
        /// Where the `.git` file or symlink points.
        target: PathBuf,
    },
    /// An exec of git that may push: the repository's effective config as that git sees it.
    Exec(GitExec),
}

/// Whether `name` in a hooks directory is one git never runs.
pub fn is_sample(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().ends_with(b".sample")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples() {
        assert!(is_sample("pre-commit.sample".as_ref()));
        assert!(!is_sample("pre-commit".as_ref()));
        assert!(!is_sample("sample".as_ref()));
    }
}
