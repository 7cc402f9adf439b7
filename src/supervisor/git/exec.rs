//! The config an exec of git would read, for judging pushes ([`crate::policy::git::push`]):
//! found the way git finds it and read by guard before the exec runs.
//!
//! - the repository: `--git-dir`, else `GIT_DIR` from the new environment, else discovered
//!   upwards from the caller's cwd moved by each `-C` (a `.git` directory, a `.git` file's
//!   `gitdir:`, or a bare repository); a worktree's `commondir` leads to the shared config;
//! - the files, in git's order: system (`GIT_CONFIG_SYSTEM`, else `/etc/gitconfig`, unless
//!   `GIT_CONFIG_NOSYSTEM`), global (`GIT_CONFIG_GLOBAL`, else `$XDG_CONFIG_HOME/git/config`
//!   and `~/.gitconfig` of the new environment's `HOME`), the repository's `config` and, with
//!   `extensions.worktreeConfig`, `config.worktree`;
//! - includes: `include.path` and every `includeIf.*.path`, whatever its condition (more
//!   config can only make guard stricter), relative to the including file, `~/` expanded;
//! - the environment's config (`GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`...), which the
//!   policy reads from [`GitExec::env`].
//!
//! Only execs that may push are read (`policy::git::push::plan`): a builtin that never
//! pushes costs nothing here.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::policy::git::config::{self, Entry};
use crate::policy::git::push::{self, GitExec};
use crate::policy::normalize;
use crate::supervisor::memory;
use crate::supervisor::resolve::Resolved;
use crate::sys::Notif;

const MAX_INCLUDE_DEPTH: usize = 10;
const ENV_MAX_VARS: usize = 16 * 1024;
const ENV_MAX_BYTES: usize = 2 * 1024 * 1024;

/// The facts for an exec of git that may push, or `None` when it cannot.
pub fn inspect(n: &Notif, r: &Resolved) -> Option<GitExec> {
    let plan = push::plan(&r.argv, r.exe.as_deref())?;
    let env: Vec<(String, String)> = r
        .envp
        .and_then(|p| memory::read_argv(n.pid, p.0, ENV_MAX_VARS, ENV_MAX_BYTES).ok())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| {
            let kv = OsString::from_vec(kv);
            let s = kv.to_string_lossy();
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut start = r.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
    for d in &plan.chdir {
        start = normalize(&start.join(d));
    }
    let git_dir = plan
        .git_dir
        .clone()
        .or_else(|| var("GIT_DIR"))
        .map(|d| normalize(&start.join(d)))
        .or_else(|| discover(&start));
    let home = var("HOME").map(PathBuf::from);
    let mut reader = Reader {
        home: home.clone(),
        files: Vec::new(),
        unreadable: None,
    };
    if var("GIT_CONFIG_NOSYSTEM").is_none() {
        let system = var("GIT_CONFIG_SYSTEM").unwrap_or_else(|| "/etc/gitconfig".into());
        reader.file(Path::new(&system), 0);
    }
    match var("GIT_CONFIG_GLOBAL") {
        Some(g) => reader.file(Path::new(&g), 0),
        None => {
            let xdg = var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            if let Some(x) = xdg {
                reader.file(&x.join("git/config"), 0);
            }
            if let Some(h) = &home {
                reader.file(&h.join(".gitconfig"), 0);
            }
        }
    }
    let mut branch = None;
    if let Some(gd) = &git_dir {
        let common = crate::sys::fs::read_unseen(gd.join("commondir"))
            .ok()
            .map(|c| normalize(&gd.join(OsString::from_vec(trim(c)))))
            .unwrap_or_else(|| gd.clone());
        reader.file(&common.join("config"), 0);
        let worktree_config = reader
            .files
            .iter()
            .rev()
            .find(|e| e.key == "extensions.worktreeconfig");
        if worktree_config.is_some_and(|e| config::as_bool(e.value.as_deref()) == Some(true)) {
            reader.file(&gd.join("config.worktree"), 0);
        }
        branch = crate::sys::fs::read_unseen(gd.join("HEAD"))
            .ok()
            .and_then(|h| {
                let h = String::from_utf8_lossy(&trim(h)).into_owned();
                h.strip_prefix("ref: refs/heads/").map(str::to_string)
            });
    }
    Some(GitExec {
        files: reader.files,
        env,
        branch,
        unreadable: reader.unreadable,
    })
}

fn trim(mut b: Vec<u8>) -> Vec<u8> {
    while b.last().is_some_and(u8::is_ascii_whitespace) {
        b.pop();
    }
    b
}

/// The git directory git would find from `start`, walking up.
fn discover(start: &Path) -> Option<PathBuf> {
    for d in start.ancestors() {
        let dot = d.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => return Some(dot),
            Ok(m) if m.is_file() => {
                let c = crate::sys::fs::read_unseen(&dot).ok()?;
                let line = c.split(|&b| b == b'\n').next()?;
                let t = line.strip_prefix(b"gitdir:")?;
                let t = std::ffi::OsStr::from_bytes(t.trim_ascii());
                return Some(normalize(&d.join(t)));
            }
            Ok(_) => {
                // A symlink: git follows it.
                if dot.is_dir() {
                    return Some(dot);
                }
            }
            Err(_) => {}
        }
        if d.join("HEAD").is_file() && d.join("objects").is_dir() && d.join("refs").is_dir() {
            return Some(d.to_path_buf());
        }
    }
    None
}

struct Reader {
    home: Option<PathBuf>,
    files: Vec<Entry>,
    unreadable: Option<String>,
}

impl Reader {
    /// Read the config file at `path` (absent: nothing) with its includes, in place.
    fn file(&mut self, path: &Path, depth: usize) {
        let Ok(text) = crate::sys::fs::read_unseen(path) else {
            return;
        };
        let entries = match config::parse(&text) {
            Ok(e) => e,
            Err(e) => {
                self.unreadable
                    .get_or_insert_with(|| format!("{}: {e}", path.display()));
                return;
            }
        };
        for e in entries {
            let include = (e.key == "include.path"
                || (e.section() == "includeif" && e.name() == "path"))
                .then(|| e.value.clone())
                .flatten();
            self.files.push(e);
            if let Some(inc) = include {
                if depth >= MAX_INCLUDE_DEPTH {
                    self.unreadable
                        .get_or_insert_with(|| format!("{}: includes too deep", path.display()));
                    continue;
                }
                let target = match (inc.strip_prefix("~/"), &self.home) {
                    (Some(rest), Some(h)) => h.join(rest),
                    _ => path.parent().unwrap_or(Path::new("/")).join(&inc),
                };
                self.file(&normalize(&target), depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_followed_and_repositories_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canon");
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join(".git/objects")).expect("mkdir");
        std::fs::create_dir_all(repo.join("src/deep")).expect("mkdir");
        std::fs::write(
            repo.join(".git/config"),
            "[include]\n\tpath = extra\n[includeIf \"onbranch:x\"]\n\tpath = ../more\n",
        )
        .expect("write");
        std::fs::write(repo.join(".git/extra"), "[remote \"o\"]\n\tpush = +a:a\n").expect("write");
        std::fs::write(repo.join("more"), "[alias]\n\tp = push -f\n").expect("write");
        assert_eq!(discover(&repo.join("src/deep")), Some(repo.join(".git")));
        let mut r = Reader {
            home: None,
            files: Vec::new(),
            unreadable: None,
        };
        r.file(&repo.join(".git/config"), 0);
        let keys: Vec<&str> = r.files.iter().map(|e| e.key.as_str()).collect();
        assert!(
            keys.contains(&"remote.o.push") && keys.contains(&"alias.p"),
            "{keys:?}"
        );
        // A worktree's .git file.
        let wt = root.join("wt");
        std::fs::create_dir_all(&wt).expect("mkdir");
        std::fs::write(wt.join(".git"), "gitdir: ../repo/.git\n").expect("write");
        assert_eq!(discover(&wt), Some(repo.join(".git")));
    }
}
