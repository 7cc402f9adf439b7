//! Counting deletes per command, for `transaction.mass-delete` (`policy::volume`): one
//! command deleting much of the workspace is a policy event whatever program does it.
//!
//! What counts: an entry of the journaled workspace (not under `transaction.exclude`) that
//! existed when the command started (born before it, by the entry's birth time; an entry
//! whose filesystem records none counts), removed by unlink, rmdir, or a rename that takes it
//! out of the workspace. A command is a direct child of the run's root process, from its exec
//! on; everything else (the root process itself, orphans) counts against the run.
//!
//! An entry born after the latest start of any command was made by whichever command deletes
//! it, and is let go before anything else is asked; for the others, the deleting process's
//! command is found by walking up its parents ([`txn::Parents`]: a held pidfd per process,
//! one ioctl per level where /proc/PID/stat cost an open, a read and a close).
//!
//! git's own object maintenance is not counted: a `git` process removing a loose object
//! (`.git/objects/ab/cdef...`) or an emptied fan-out directory (`.git/objects/ab`), as `git gc`
//! and `git prune-packed` do once the objects are in a pack. A repository whose loose objects
//! made up half of the workspace had every `git gc` (and git's automatic one after a commit)
//! taken for a mass deletion, and under `--atomic` the whole run rolled back. Any other
//! program removing them counts as before.
//!
//! The workspace's size is counted once, at the first counted delete of the run (one walk of
//! the tree, skipping excluded directories), not at every start. The checkpoint the command
//! took when it started precedes all of its deletes, so rolling back to it restores
//! everything the mass deletion removed; `--atomic` turns a crossing into a denial.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::resolve::{Act, Resolved};
use super::target::Target;
use super::txn;
use crate::policy::{volume, Action, Op, PathSet, Policy, Verdict};

/// The pseudo-command of everything that is not a direct child of the root.
const RUN: u32 = 0;

#[derive(Debug)]
struct Command {
    started: [i64; 2],
    checkpoint: Option<String>,
    deleted: u64,
    crossed: bool,
}

/// The per-run counts.
#[derive(Debug)]
pub struct Volume {
    ws: PathBuf,
    exclude: PathSet,
    /// Entries in the workspace, counted at the first counted delete.
    total: Option<u64>,
    commands: HashMap<u32, Command>,
    /// The latest start of a command (or of the run): an entry born after it was made by
    /// whichever command deletes it, which is then not asked for.
    latest: [i64; 2],
    parents: txn::Parents,
}

fn now() -> [i64; 2] {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    [d.as_secs() as i64, i64::from(d.subsec_nanos())]
}

impl Volume {
    pub fn new(policy: &Policy) -> Volume {
        // The profile checked each pattern; one that does not compile excludes nothing.
        let exclude = PathSet::lenient(&policy.transaction.exclude);
        let mut commands = HashMap::new();
        let started = now();
        commands.insert(
            RUN,
            Command {
                started,
                checkpoint: None,
                deleted: 0,
                crossed: false,
            },
        );
        Volume {
            ws: policy.vars.workspace.clone(),
            exclude,
            total: None,
            commands,
            latest: started,
            parents: txn::Parents::default(),
        }
    }

    /// A command (`pid`, a direct child of the root) started, after checkpoint `checkpoint`.
    pub fn command_started(&mut self, pid: u32, checkpoint: Option<String>) {
        let started = now();
        self.latest = self.latest.max(started);
        self.commands.insert(
            pid,
            Command {
                started,
                checkpoint,
                deleted: 0,
                crossed: false,
            },
        );
    }

    fn excluded(&self, rel: &Path) -> bool {
        rel.ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| self.exclude.is_match(a))
    }

    /// The entry `r` removes from the workspace, if it removes one that counts. A name that is
    /// not there deletes nothing (and has no birth time to ask for): it is let go before the
    /// exclude globs are matched.
    fn removed<'a>(&self, r: &'a Resolved) -> Option<&'a Target> {
        let t = match &r.act {
            Act::Unlink(t) | Act::Rmdir(t) if r.op == Op::Delete => t,
            Act::Rename { from, to, .. } if !to.path.starts_with(&self.ws) => from,
            _ => return None,
        };
        t.kind?;
        let rel = t.path.strip_prefix(&self.ws).ok()?;
        (!rel.as_os_str().is_empty() && !self.excluded(rel)).then_some(t)
    }

    /// Count a delete by `pid` that the policy allowed; the verdict when it crosses the line
    /// (or comes after a refused crossing). `exe` tells the deleting process's executable,
    /// asked only of a loose object's removal; `root` the run's root process, asked only of a
    /// delete that counts.
    pub fn judge(
        &mut self,
        policy: &Policy,
        pid: u32,
        root: impl FnOnce() -> u32,
        r: &Resolved,
        exe: impl FnOnce() -> Option<std::sync::Arc<Path>>,
    ) -> Option<Verdict> {
        let m = policy.transaction.mass_delete;
        if m.action == Action::Allow {
            return None;
        }
        let t = self.removed(r)?;
        // Born after every command's start, so after the deleting one's (whichever it is):
        // made by it, and not counted below either. A build's or git's temporary files.
        if t.born.is_some_and(|b| b > self.latest) {
            return None;
        }
        if t.path.strip_prefix(&self.ws).is_ok_and(is_loose_object)
            && exe().is_some_and(|e| is_git(&e))
        {
            return None;
        }
        let key = txn::command_of(pid, root(), &mut self.parents)
            .filter(|c| self.commands.contains_key(c))
            .unwrap_or(RUN);
        let started = self.commands.get(&key)?.started;
        // The walk's statx gave the birth time with the type.
        if t.born.is_some_and(|b| b > started) {
            return None; // made by this command: not the workspace it found
        }
        if self.total.is_none() {
            self.total = Some(count_entries(&self.ws, &self.exclude));
        }
        let total = self.total.unwrap_or(0);
        let c = self.commands.get_mut(&key)?;
        c.deleted += 1;
        if c.crossed {
            return matches!(m.action, Action::Deny | Action::Kill)
                .then(|| volume::verdict(&m, c.deleted, total, c.checkpoint.as_deref()));
        }
        if !volume::crosses(&m, c.deleted, total) {
            return None;
        }
        c.crossed = true;
        Some(volume::verdict(
            &m,
            c.deleted,
            total,
            c.checkpoint.as_deref(),
        ))
    }
}

/// Whether `rel` is a loose object of a git repository, or one of the directories they are
/// spread over: `objects/ab/cdef...` (38 or 62 hex digits after the two of the directory:
/// SHA-1 or SHA-256) or `objects/ab`, with `objects` in a git directory (`.git`, `x.git`, or
/// under one: `.git/modules/sub/objects`).
fn is_loose_object(rel: &Path) -> bool {
    fn hex(s: &std::ffi::OsStr, lens: &[usize]) -> bool {
        let b = s.as_encoded_bytes();
        lens.contains(&b.len()) && b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
    }
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let objects_at = match parts.as_slice() {
        [.., o, dir, name] if hex(dir, &[2]) && hex(name, &[38, 62]) && *o == "objects" => {
            parts.len() - 3
        }
        [.., o, dir] if hex(dir, &[2]) && *o == "objects" => parts.len() - 2,
        _ => return false,
    };
    parts[..objects_at]
        .iter()
        .any(|p| p.as_encoded_bytes().ends_with(b".git"))
}

/// Whether `exe` is git (named `git`, or `git-*` as its helpers in git-core are).
fn is_git(exe: &Path) -> bool {
    exe.file_name().is_some_and(|n| {
        let n = n.as_encoded_bytes();
        n == b"git" || n.starts_with(b"git-")
    })
}

/// The entries under `ws` (not `ws` itself), excluded directories left out.
fn count_entries(ws: &Path, exclude: &PathSet) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(names) = crate::sys::fs::list_dir(None, &ws.join(&rel)) else {
            continue;
        };
        for (name, kind) in names {
            let child = rel.join(name);
            if child
                .ancestors()
                .any(|a| !a.as_os_str().is_empty() && exclude.is_match(a))
            {
                continue;
            }
            n += 1;
            let dir = match kind {
                Some(t) => t == nix::dir::Type::Directory,
                None => std::fs::symlink_metadata(ws.join(&child)).is_ok_and(|m| m.is_dir()),
            };
            if dir {
                stack.push(child);
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_objects_are_named_as_git_names_them() {
        let sha1 = format!("objects/ab/{}", "c".repeat(38));
        let sha256 = format!("objects/0f/{}", "9".repeat(62));
        for yes in [
            format!(".git/{sha1}"),
            format!(".git/{sha256}"),
            ".git/objects/ab".to_string(),
            format!("sub/.git/modules/lib/{sha1}"),
            format!("mirror.git/{sha1}"),
        ] {
            assert!(is_loose_object(Path::new(&yes)), "{yes}");
        }
        for no in [
            format!("src/{sha1}"),
            format!(".git/objects/ab/{}", "c".repeat(37)),
            format!(".git/objects/AB/{}", "c".repeat(38)),
            ".git/objects/pack/pack-1.pack".to_string(),
            ".git/objects/info".to_string(),
            ".git/objects".to_string(),
            format!(".git/objects/ab/tmp_obj_{}", "c".repeat(6)),
            ".git/refs/heads/ab".to_string(),
        ] {
            assert!(!is_loose_object(Path::new(&no)), "{no}");
        }
    }

    /// What is no counted delete (the root's first exec, judged before its pid may be known)
    /// never asks for the run's root; a counted delete does.
    #[test]
    fn only_a_counted_delete_asks_for_the_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("f"), "x").expect("write");
        let vars = crate::policy::Vars {
            workspace: dir.path().to_path_buf(),
            home: None,
            tmp: "/tmp/guard-test".into(),
            state: "/nonexistent/state".into(),
        };
        let policy = crate::policy::load(&["agent".into()], &vars).expect("agent");
        let mut volume = Volume::new(&policy);
        let exec = Resolved::new("execve", Op::Exec, Act::Continue);
        let never = || -> u32 { panic!("the root was asked for") };
        assert!(volume.judge(&policy, 7, never, &exec, || None).is_none());
        let asked = std::cell::Cell::new(false);
        let path = dir.path().join("f");
        let target = super::super::target::target(
            std::process::id(),
            libc::AT_FDCWD as u64,
            std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()),
            super::super::target::Last::Entry,
        )
        .expect("walk");
        let unlink = Resolved::new("unlinkat", Op::Delete, Act::Unlink(target));
        let root = || {
            asked.set(true);
            1
        };
        volume.judge(&policy, 7, root, &unlink, || None);
        assert!(asked.get(), "a counted delete asks");
    }

    #[test]
    fn git_is_told_by_its_executables_name() {
        for yes in [
            "/usr/bin/git",
            "/usr/lib/git-core/git",
            "/usr/lib/git-core/git-prune-packed",
        ] {
            assert!(is_git(Path::new(yes)), "{yes}");
        }
        for no in [
            "/usr/bin/rm",
            "/usr/bin/gitk",
            "/usr/bin/python3",
            "/opt/git/bin/legit",
        ] {
            assert!(!is_git(Path::new(no)), "{no}");
        }
    }

    #[test]
    fn counting_skips_excluded_trees() {
        let dir = tempfile::tempdir().expect("tempdir");
        for d in ["a/b", "target/debug", "node_modules/x"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        for f in ["a/1", "a/b/2", "3", "target/debug/4", "node_modules/x/5"] {
            std::fs::write(dir.path().join(f), "x").expect("write");
        }
        let exclude = PathSet::new(&["target/**", "node_modules/**"]).unwrap();
        // a, a/b, a/1, a/b/2, 3; target and node_modules themselves are not matched by
        // `x/**` and count, their contents do not.
        assert_eq!(count_entries(dir.path(), &exclude), 7);
    }
}
