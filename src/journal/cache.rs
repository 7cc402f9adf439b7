//! Files that are caches of the rest of the workspace, which tools rewrite on their own: a
//! rollback restores them with the rest even when they changed since the run, and says so
//! (what it replaced is kept in the journal, so `guard undo` brings it back).
//!
//! The list is built in and small, so nothing a user edits by hand is ever on it: git's index
//! (`.git/index`, and its split-index files `.git/sharedindex.*`) of any repository in the
//! workspace, of its submodules (`.git/modules/**`) and of its worktrees
//! (`.git/worktrees/*`). `git status`, `git diff` and most read-only git commands refresh the
//! index's stat data and rewrite it; a rollback that kept the rewritten index would leave it
//! naming blobs the rollback removed (`unable to read <blob>`), where the index the run
//! started with is consistent with the restored repository.

use std::path::{Component, Path};

/// Whether `rel` (relative to the workspace) is one of the caches listed in the module doc.
pub fn is_cache(rel: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some(git) = parts.iter().rposition(|p| *p == ".git") else {
        return false;
    };
    let rest = &parts[git + 1..];
    let index = |name: &std::ffi::OsStr| {
        name == "index" || name.to_str().is_some_and(|n| n.starts_with("sharedindex."))
    };
    match rest {
        [name] => index(name),
        // A submodule's name may hold slashes; a ref or object called `index` is no cache.
        [m, mid @ .., name] if *m == "modules" => {
            !mid.is_empty()
                && !mid.iter().any(|p| {
                    ["refs", "objects", "logs", "info", "hooks"].contains(&p.to_str().unwrap_or(""))
                })
                && index(name)
        }
        [w, _, name] if *w == "worktrees" => index(name),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_git_index_files_are_caches() {
        for yes in [
            ".git/index",
            "sub/project/.git/index",
            ".git/sharedindex.0123abcd",
            ".git/modules/lib/index",
            ".git/modules/a/b/index",
            ".git/worktrees/wt1/index",
        ] {
            assert!(is_cache(Path::new(yes)), "{yes}");
        }
        for no in [
            "index",
            ".git/index.lock",
            ".git/HEAD",
            ".git/refs/heads/index",
            ".git/objects/ab/index",
            "src/.git-index",
            ".git/worktrees/wt1/sub/index",
            ".git/modules/lib/refs/heads/index",
            ".git/modules/index",
        ] {
            assert!(!is_cache(Path::new(no)), "{no}");
        }
    }
}
