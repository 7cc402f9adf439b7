//! Judging a repository's config by its entries: the keys a change adds or changes are
//! refused when they can run a program or send git elsewhere, allowed when benign.
//!
//! The profile's `git.refuse-keys` globs name the keys (matched case-insensitively on the
//! whole key, so `diff.*.textconv` matches any driver), `git.allow-keys` exempts some. On top
//! of the list, a few keys are judged by their value, because the same key is benign or not
//! depending on it:
//! - `core.fsmonitor` and `pager.<cmd>` are benign as booleans (the built-in daemon, paging
//!   on or off) and run a program otherwise (when the profile refuses them);
//! - `core.worktree` must lie inside the write roots (checkouts write there);
//! - `remote.<name>.push` may not force (`+`) or delete (`:dst`), `remote.<name>.mirror` may
//!   not be true: a later `git push` would rewrite or delete the remote's refs;
//! - `submodule.<name>.update` may not be a `!command`;
//! - `remote.<name>.url`/`pushurl` may not use the `ext::` transport (a shell command).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use super::config::{as_bool, Entry};
use super::GitPolicy;
use crate::policy::normalize;

/// Config key globs (case-insensitive, `*` crossing dots), compiled into one matcher the first
/// time a key is matched: most runs never judge a config change, and compiling a set costs
/// about half a millisecond at every start.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    patterns: Vec<String>,
    set: OnceLock<(GlobSet, Vec<Glob>)>,
}

impl KeySet {
    /// The set of `patterns`; a pattern that is not a glob is left out (profiles validate
    /// every key pattern before they get here).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> KeySet {
        KeySet {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            set: OnceLock::new(),
        }
    }

    /// Whether `key` matches one of the globs.
    pub fn is_match(&self, key: &str) -> bool {
        let (set, globs) = self.set.get_or_init(|| {
            let globs: Vec<Glob> = self
                .patterns
                .iter()
                .filter_map(|p| GlobBuilder::new(p).case_insensitive(true).build().ok())
                .collect();
            let mut b = GlobSetBuilder::new();
            for g in &globs {
                b.add(g.clone());
            }
            (b.build().unwrap_or_else(|_| GlobSet::empty()), globs)
        });
        if set.len() == globs.len() {
            return set.is_match(key);
        }
        // The set did not compile: the same answers, one glob at a time.
        globs.iter().any(|g| g.compile_matcher().is_match(key))
    }
}

/// The entries of `new` that `old` does not have with the same value (a key that appears
/// more often counts once more per extra occurrence).
pub fn added<'a>(old: &[Entry], new: &'a [Entry]) -> Vec<&'a Entry> {
    let mut remaining: Vec<&Entry> = old.iter().collect();
    let mut out = Vec::new();
    for e in new {
        match remaining.iter().position(|o| *o == e) {
            Some(i) => {
                remaining.swap_remove(i);
            }
            None => out.push(e),
        }
    }
    out
}

/// Why `entry`, added to the config of the repository at `git_dir`, is refused; `None` when
/// it is allowed.
pub fn refused(
    policy: &GitPolicy,
    write_roots: &[PathBuf],
    git_dir: &Path,
    entry: &Entry,
) -> Option<String> {
    let key = entry.key.to_ascii_lowercase();
    if policy.allow_set.is_match(&key) {
        return None;
    }
    let value = entry.value.as_deref();
    let section = entry.section();
    let name = entry.name();
    let sub = entry.subsection().is_some();
    let why = |what: &str| Some(format!("git config key `{}` {what}", entry.key));
    if section == "core" && name == "worktree" && !sub {
        // `~` is refused rather than guessed at: whether git expands it is not this
        // function's to know.
        let inside = value.is_some_and(|v| {
            let p = normalize(&git_dir.join(v));
            !v.starts_with('~') && write_roots.iter().any(|r| p.starts_with(r))
        });
        return (!inside).then(|| {
            format!(
                "git config key `{}` points the work tree outside the write roots",
                entry.key
            )
        });
    }
    if section == "remote" && sub && name == "push" {
        if let Some(v) = value {
            if v.starts_with('+') || v.starts_with(':') {
                return why("makes every later push force-update or delete remote refs");
            }
        }
    }
    if section == "remote" && sub && name == "mirror" && as_bool(value) == Some(true) {
        return why("makes every later push mirror (force-update and delete) remote refs");
    }
    if section == "submodule"
        && sub
        && name == "update"
        && value.is_some_and(|v| v.starts_with('!'))
    {
        return why("runs a command on `git submodule update`");
    }
    if section == "remote"
        && sub
        && (name == "url" || name == "pushurl")
        && value.is_some_and(|v| v.to_ascii_lowercase().starts_with("ext::"))
    {
        return why("uses the ext:: transport, which runs a command");
    }
    if !policy.refuse_set.is_match(&key) {
        return None;
    }
    let boolean_ok = (section == "core" && name == "fsmonitor" && !sub) || section == "pager";
    if boolean_ok && as_bool(value).is_some() {
        return None;
    }
    why("can run a program or send git elsewhere")
}

/// The first refusal among the entries `new` adds to `old`.
pub fn judge(
    policy: &GitPolicy,
    write_roots: &[PathBuf],
    git_dir: &Path,
    old: &[Entry],
    new: &[Entry],
) -> Option<String> {
    added(old, new)
        .into_iter()
        .find_map(|e| refused(policy, write_roots, git_dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::git::config::parse;

    fn policy(refuse: &[&str], allow: &[&str]) -> GitPolicy {
        GitPolicy {
            refuse_set: KeySet::new(refuse),
            allow_set: KeySet::new(allow),
            ..GitPolicy::default()
        }
    }

    fn entries(text: &str) -> Vec<Entry> {
        parse(text.as_bytes()).unwrap()
    }

    fn judge_text(p: &GitPolicy, old: &str, new: &str) -> Option<String> {
        judge(
            p,
            &[PathBuf::from("/ws")],
            Path::new("/ws/.git"),
            &entries(old),
            &entries(new),
        )
    }

    #[test]
    fn only_added_or_changed_entries_are_judged() {
        let p = policy(&["alias.*", "core.hookspath"], &[]);
        let old = "[alias]\n\tst = status\n";
        assert_eq!(
            judge_text(&p, old, "[alias]\nst = status\n[user]\nname = x\n"),
            None
        );
        let why = judge_text(&p, old, "[alias]\nst = status\nci = !touch m\n").unwrap();
        assert!(why.contains("`alias.ci`"), "{why}");
        let why = judge_text(&p, old, "[alias]\nst = !sh\n").unwrap();
        assert!(why.contains("`alias.st`"), "changed value: {why}");
        assert!(judge_text(&p, "", "[Core]\n\tHooksPath = /x\n").is_some());
    }

    #[test]
    fn globs_match_subsections_case_insensitively() {
        let p = policy(&["diff.*.textconv", "url.*", "credential.*"], &[]);
        for text in [
            "[diff \"Pdf\"]\ntextconv = x\n",
            "[url \"https://evil/\"]\ninsteadOf = https://github.com/\n",
            "[credential \"https://x\"]\nhelper = y\n",
            "[credential]\nhelper = y\n",
        ] {
            assert!(judge_text(&p, "", text).is_some(), "{text}");
        }
        assert_eq!(judge_text(&p, "", "[diff]\nrenames = true\n"), None);
    }

    #[test]
    fn allow_keys_exempt() {
        let p = policy(&["filter.*"], &["filter.lfs.*"]);
        assert_eq!(
            judge_text(&p, "", "[filter \"lfs\"]\nclean = git-lfs clean\n"),
            None
        );
        assert!(judge_text(&p, "", "[filter \"x\"]\nclean = sh\n").is_some());
    }

    #[test]
    fn values_decide_for_some_keys() {
        let p = policy(&["core.fsmonitor", "pager.*"], &[]);
        assert_eq!(judge_text(&p, "", "[core]\nfsmonitor = true\n"), None);
        assert_eq!(judge_text(&p, "", "[core]\nfsmonitor\n"), None);
        assert!(judge_text(&p, "", "[core]\nfsmonitor = .git/fsm.sh\n").is_some());
        assert_eq!(judge_text(&p, "", "[pager]\nbranch = false\n"), None);
        assert!(judge_text(&p, "", "[pager]\nlog = touch x\n").is_some());

        let none = policy(&[], &[]);
        assert_eq!(judge_text(&none, "", "[core]\nworktree = ../sub\n"), None);
        let why = judge_text(&none, "", "[core]\nworktree = /home/u\n").unwrap();
        assert!(why.contains("outside the write roots"), "{why}");
        assert!(judge_text(&none, "", "[core]\nworktree = ../..\n").is_some());
        for bad in [
            "[remote \"o\"]\npush = +refs/heads/*:refs/heads/*\n",
            "[remote \"o\"]\npush = :refs/heads/main\n",
            "[remote \"o\"]\nmirror = true\n",
            "[submodule \"s\"]\nupdate = !sh -c x\n",
            "[remote \"o\"]\nurl = ext::sh -c x\n",
        ] {
            assert!(judge_text(&none, "", bad).is_some(), "{bad}");
        }
        for good in [
            "[remote \"o\"]\nurl = https://x/y\npushurl = ../r.git\nfetch = +refs/heads/*:refs/remotes/o/*\npush = refs/heads/main\nmirror = false\n",
            "[branch \"main\"]\nremote = o\nmerge = refs/heads/main\n",
            "[submodule \"s\"]\nurl = ../s\nupdate = rebase\nactive = true\n",
            "[user]\nname = a\nemail = b\n",
        ] {
            assert_eq!(judge_text(&none, "", good), None, "{good}");
        }
    }
}
