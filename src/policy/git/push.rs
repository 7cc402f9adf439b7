//! Pushes that delete or force-update remote refs, judged from git's command line and the
//! config the pushing git would read. An argv glob cannot see `-c remote.origin.push=+...`,
//! an alias, an abbreviated `--forc`, or a `remote.<name>.push` refspec in the repository's
//! config; this module reads the command line the way git does:
//!
//! 1. git's global options (`-C`, `-c name=value`, `--config-env`, `--git-dir`, ...) up to
//!    the subcommand (also `git-push`/`git-send-pack` run by their dashed names);
//! 2. an alias is expanded from the config (`-c alias.x=...`, the environment's
//!    `GIT_CONFIG_PARAMETERS`/`GIT_CONFIG_COUNT`, then the files), as git splits it; a `!`
//!    alias runs a shell, whose own git commands are judged when they run;
//! 3. `push` options as git's option parser takes them: bundled short flags, long options
//!    abbreviated to any unique prefix, options after the arguments, `--`;
//! 4. the refspecs of the command line or, when it names none, the remote's configured
//!    `remote.<name>.push` and `remote.<name>.mirror`.
//!
//! A push is destructive when it forces (`-f`, `--force`, `--force-with-lease`, a `+`
//! refspec), deletes (`-d`, `--delete`, `:dst`), mirrors or prunes. [`plan`] says whether an
//! exec needs the repository's config at all (the supervisor reads it only then) and where
//! git would look for it; [`judge`] decides.

use std::ffi::OsString;
use std::path::Path;

use super::config::{as_bool, Entry};

/// What the supervisor read for an exec of git: the config that git would read, in git's
/// order (system, global, the repository's, its worktree's), and the environment it runs
/// with (only the variables git reads config from).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitExec {
    /// The entries of the config files, in the order git reads them.
    pub files: Vec<Entry>,
    /// `GIT_CONFIG_PARAMETERS`, `GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`,
    /// `GIT_CONFIG_VALUE_<n>` and the variables `--config-env` may name, as found.
    pub env: Vec<(String, String)>,
    /// The branch HEAD points to, when it is a symbolic ref.
    pub branch: Option<String>,
    /// A config file that could not be read as git reads it (its path and why).
    pub unreadable: Option<String>,
}

/// Where git would look for its repository: the directories of `-C` options in order
/// (each relative to the one before, the first to the caller's cwd) and `--git-dir`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The `-C` directories, in order.
    pub chdir: Vec<String>,
    /// `--git-dir`, when given.
    pub git_dir: Option<String>,
    /// `--work-tree`, when given.
    pub work_tree: Option<String>,
}

/// Builtins that never push (an alias cannot shadow a builtin, so these need no config).
const NON_PUSH: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-tree",
    "config",
    "count-objects",
    "describe",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "merge",
    "merge-base",
    "merge-file",
    "mktag",
    "mktree",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-refs",
    "prune",
    "pull",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-objects",
    "update-index",
    "update-ref",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
    "maintenance",
];

/// git's global options that take the next argument (when not written `--opt=value`).
const GLOBAL_WITH_ARG: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--super-prefix",
    "--attr-source",
    "--shallow-file",
];

fn lossy(a: &OsString) -> String {
    a.to_string_lossy().into_owned()
}

/// The program an exec runs, as git would take it: `git`, or a dashed builtin.
fn program(argv: &[OsString], exe: Option<&Path>) -> Option<String> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or_default().to_string();
    let a0 = argv.first().map(lossy).map(|s| base(&s));
    let ex = exe
        .and_then(|e| e.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    [a0, ex]
        .into_iter()
        .flatten()
        .find(|n| n == "git" || n.starts_with("git-"))
}

/// The command line after git's global options: the subcommand and its arguments, the
/// options seen on the way, and the `-c` pairs.
#[derive(Debug, Default)]
struct Parsed {
    plan: Plan,
    /// `-c name=value` (value `None`: `-c name` alone, boolean true).
    config: Vec<(String, Option<String>)>,
    /// `--config-env name=VAR`: the value comes from the environment.
    config_env: Vec<(String, String)>,
    words: Vec<String>,
}

/// Consume git's global options from `args`; the rest is the subcommand and its arguments.
fn global_options(args: &[String], into: &mut Parsed) {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let (opt, attached) = match a.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v.to_string())),
            _ => (a, None),
        };
        let value = if GLOBAL_WITH_ARG.contains(&opt) && attached.is_none() {
            i += 1;
            args.get(i).cloned()
        } else {
            attached
        };
        match (opt, value) {
            ("-C", Some(v)) => into.plan.chdir.push(v),
            ("-c", Some(v)) => into.config.push(match v.split_once('=') {
                Some((k, val)) => (canonical(k), Some(val.to_string())),
                None => (canonical(&v), None),
            }),
            ("--config-env", Some(v)) => {
                if let Some((k, var)) = v.split_once('=') {
                    into.config_env.push((canonical(k), var.to_string()));
                }
            }
            ("--git-dir", Some(v)) => into.plan.git_dir = Some(v),
            ("--work-tree", Some(v)) => into.plan.work_tree = Some(v),
            _ => {}
        }
        i += 1;
    }
    into.words = args[i.min(args.len())..].to_vec();
}

/// A config key as git canonicalises it: section and variable name lowercased, the
/// subsection between them kept.
pub fn canonical(key: &str) -> String {
    match (key.find('.'), key.rfind('.')) {
        (Some(first), Some(last)) if last > first => format!(
            "{}{}{}",
            key[..first].to_ascii_lowercase(),
            &key[first..last],
            key[last..].to_ascii_lowercase()
        ),
        _ => key.to_ascii_lowercase(),
    }
}

/// Whether an exec is git running something that may push, and if so where git would look for
/// its repository. `None`: not git, or a builtin that never pushes (nothing to read).
pub fn plan(argv: &[OsString], exe: Option<&Path>) -> Option<Plan> {
    let prog = program(argv, exe)?;
    let args: Vec<String> = argv.iter().skip(1).map(lossy).collect();
    if let Some(dashed) = prog.strip_prefix("git-") {
        return (dashed == "push" || dashed == "send-pack").then(Plan::default);
    }
    let mut p = Parsed::default();
    global_options(&args, &mut p);
    let sub = p.words.first()?;
    (!NON_PUSH.contains(&sub.as_str())).then_some(p.plan)
}

/// The effective config as (key, value) pairs in git's order: files, then the environment's
/// `GIT_CONFIG_PARAMETERS` and `GIT_CONFIG_COUNT` pairs, then `-c` and `--config-env`.
fn effective(facts: &GitExec, p: &Parsed) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = facts
        .files
        .iter()
        .map(|e| (e.key.clone(), e.value.clone()))
        .collect();
    let env = |name: &str| {
        facts
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if let Some(params) = env("GIT_CONFIG_PARAMETERS") {
        out.extend(config_parameters(&params));
    }
    if let Some(n) = env("GIT_CONFIG_COUNT").and_then(|n| n.trim().parse::<usize>().ok()) {
        for i in 0..n.min(10_000) {
            if let Some(k) = env(&format!("GIT_CONFIG_KEY_{i}")) {
                out.push((canonical(&k), env(&format!("GIT_CONFIG_VALUE_{i}"))));
            }
        }
    }
    out.extend(p.config.iter().cloned());
    for (k, var) in &p.config_env {
        out.push((k.clone(), env(var)));
    }
    out
}

/// `GIT_CONFIG_PARAMETERS`: shell-single-quoted words, each `'key'='value'`, `'key=value'`
/// (the older form) or `'key'`.
fn config_parameters(text: &str) -> Vec<(String, Option<String>)> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    // One single-quoted string starting at `b[i] == '\''`, with `'\''`-style escapes.
    let quoted = |i: &mut usize| -> Option<String> {
        let mut s = Vec::new();
        if b.get(*i) != Some(&b'\'') {
            return None;
        }
        *i += 1;
        loop {
            match b.get(*i)? {
                b'\'' => {
                    *i += 1;
                    // `'\''`: an escaped character between two quoted runs.
                    if b.get(*i) == Some(&b'\\') && b.get(*i + 2) == Some(&b'\'') {
                        s.push(b[*i + 1]);
                        *i += 3;
                        continue;
                    }
                    return Some(String::from_utf8_lossy(&s).into_owned());
                }
                &c => {
                    s.push(c);
                    *i += 1;
                }
            }
        }
    };
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        let Some(first) = quoted(&mut i) else { break };
        if b.get(i) == Some(&b'=') {
            i += 1;
            let value = quoted(&mut i);
            out.push((canonical(&first), value));
        } else {
            out.push(match first.split_once('=') {
                Some((k, v)) => (canonical(k), Some(v.to_string())),
                None => (canonical(&first), None),
            });
        }
    }
    out
}

/// git's `split_cmdline`, for aliases: whitespace separates words, single and double quotes
/// group, a backslash outside single quotes keeps the next character.
fn split_cmdline(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_ascii_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (q, '\\') if q != Some('\'') => {
                cur.push(chars.next()?);
                in_word = true;
            }
            (_, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

fn last<'a>(config: &'a [(String, Option<String>)], key: &str) -> Option<&'a Option<String>> {
    config.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// Why this exec is a push that deletes or force-updates remote refs; `None` if it is not.
pub fn judge(argv: &[OsString], exe: Option<&Path>, facts: &GitExec) -> Option<String> {
    let prog = program(argv, exe)?;
    let args: Vec<String> = argv.iter().skip(1).map(lossy).collect();
    let mut p = Parsed::default();
    let mut words = match prog.strip_prefix("git-") {
        Some(dashed) => {
            let mut w = vec![dashed.to_string()];
            w.extend(args);
            w
        }
        None => {
            global_options(&args, &mut p);
            std::mem::take(&mut p.words)
        }
    };
    if let Some(why) = &facts.unreadable {
        if words
            .first()
            .is_some_and(|w| w == "push" || w == "send-pack")
        {
            return Some(format!("cannot read the config this push would use: {why}"));
        }
    }
    // Aliases, as git expands them (a chain of at most 16).
    for _ in 0..16 {
        let sub = words.first().cloned()?;
        if sub == "push" || sub == "send-pack" || NON_PUSH.contains(&sub.as_str()) {
            break;
        }
        let config = effective(facts, &p);
        let Some(Some(alias)) = last(&config, &format!("alias.{}", sub.to_ascii_lowercase()))
        else {
            return None;
        };
        if alias.starts_with('!') {
            // A shell command: the git it runs is an exec of its own, judged then.
            return None;
        }
        let mut expanded = split_cmdline(alias)?;
        let mut inner = Parsed::default();
        global_options(&expanded, &mut inner);
        p.config.extend(inner.config);
        p.config_env.extend(inner.config_env);
        expanded = inner.words;
        expanded.extend(words.into_iter().skip(1));
        words = expanded;
    }
    let config = effective(facts, &p);
    match words.first().map(String::as_str) {
        Some("push") => push(&words[1..], &config, facts.branch.as_deref()),
        Some("send-pack") => send_pack(&words[1..]),
        _ => None,
    }
}

/// The long options of `git push`, for git's unique-prefix abbreviations; `true`: it takes a
/// separate argument when not written with `=`.
const PUSH_LONG: &[(&str, bool)] = &[
    ("all", false),
    ("branches", false),
    ("mirror", false),
    ("delete", false),
    ("tags", false),
    ("dry-run", false),
    ("porcelain", false),
    ("force", false),
    ("force-with-lease", false),
    ("force-if-includes", false),
    ("repo", true),
    ("set-upstream", false),
    ("thin", false),
    ("receive-pack", true),
    ("exec", true),
    ("recurse-submodules", true),
    ("verify", false),
    ("follow-tags", false),
    ("signed", false),
    ("atomic", false),
    ("push-option", true),
    ("ipv4", false),
    ("ipv6", false),
    ("prune", false),
    ("quiet", false),
    ("verbose", false),
    ("progress", false),
    ("no-verify", false),
];

/// What a long option (without `--`) names: the full option, and whether it is negated.
/// An ambiguous or unknown prefix is `None` (git refuses the command line then).
fn long_option(name: &str) -> Option<(&'static str, bool, bool)> {
    let (negated, base) = match name.strip_prefix("no-") {
        Some(rest) if !PUSH_LONG.iter().any(|(o, _)| o.starts_with(name)) => (true, rest),
        _ => (false, name),
    };
    if let Some(&(o, arg)) = PUSH_LONG.iter().find(|(o, _)| *o == base) {
        return Some((o, arg, negated));
    }
    let mut hits = PUSH_LONG.iter().filter(|(o, _)| o.starts_with(base));
    let first = hits.next()?;
    // Prefixes of several options are ambiguous, except when all of them share a meaning
    // here (`--forc` could be force, force-with-lease or force-if-includes: git refuses it,
    // and it would force anyway).
    let rest: Vec<_> = hits.collect();
    if rest.is_empty() || (base.len() >= 3 && "force".starts_with(base)) {
        return Some((first.0, first.1, negated));
    }
    None
}

fn push(
    args: &[String],
    config: &[(String, Option<String>)],
    branch: Option<&str>,
) -> Option<String> {
    let (mut force, mut delete, mut mirror, mut prune) = (false, false, false, false);
    let mut repo: Option<String> = None;
    let mut positional: Vec<String> = Vec::new();
    let mut i = 0;
    let mut only_args = false;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if only_args || !a.starts_with('-') || a == "-" {
            positional.push(a.clone());
            continue;
        }
        if a == "--" {
            only_args = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let Some((opt, takes_arg, negated)) = long_option(name) else {
                continue;
            };
            let value = match (takes_arg, attached) {
                (true, None) => {
                    i += 1;
                    args.get(i - 1).cloned()
                }
                (_, v) => v.map(str::to_string),
            };
            match opt {
                "force" | "force-with-lease" => force |= !negated,
                "delete" => delete |= !negated,
                "mirror" => mirror |= !negated,
                "prune" => prune |= !negated,
                "repo" => repo = value,
                _ => {}
            }
            continue;
        }
        // Short options, bundled: `-uf`, `-o value`, `-ovalue`.
        let mut chars = a[1..].chars();
        while let Some(c) = chars.next() {
            match c {
                'f' => force = true,
                'd' => delete = true,
                'o' => {
                    if chars.as_str().is_empty() {
                        i += 1;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    let remote = repo.or_else(|| (!positional.is_empty()).then(|| positional.remove(0)));
    let refspecs = positional;
    if force {
        return Some("git push with --force rewrites the remote's history".into());
    }
    if delete {
        return Some("git push --delete deletes remote refs".into());
    }
    if mirror {
        return Some("git push --mirror force-updates and deletes remote refs".into());
    }
    if prune {
        return Some("git push --prune deletes remote refs".into());
    }
    if let Some(why) = refspecs.iter().find_map(|r| destructive_refspec(r)) {
        return Some(why);
    }
    // Which configured remotes this push may use: the named one, else the one the branch
    // pushes to, else every remote (guard does not guess further).
    let remotes: Vec<String> = match &remote {
        Some(r) => vec![r.clone()],
        None => {
            let pick = |k: String| last(config, &k).cloned().flatten();
            let chosen = branch
                .and_then(|b| pick(format!("branch.{b}.pushremote")))
                .or_else(|| pick("remote.pushdefault".into()))
                .or_else(|| branch.and_then(|b| pick(format!("branch.{b}.remote"))));
            match chosen {
                Some(r) => vec![r],
                None => config
                    .iter()
                    .filter_map(|(k, _)| {
                        k.strip_prefix("remote.")
                            .and_then(|r| r.rsplit_once('.'))
                            .map(|(name, _)| name.to_string())
                    })
                    .chain(["origin".to_string()])
                    .collect(),
            }
        }
    };
    for r in &remotes {
        if let Some(Some(v)) = last(config, &format!("remote.{r}.mirror")) {
            if as_bool(Some(v)) == Some(true) {
                return Some(format!(
                    "remote `{r}` is configured to mirror (remote.{r}.mirror): the push force-updates and deletes remote refs"
                ));
            }
        }
        if refspecs.is_empty() {
            let key = format!("remote.{r}.push");
            for (k, v) in config {
                if *k == key {
                    if let Some(why) = v.as_deref().and_then(destructive_refspec) {
                        return Some(format!("{why} (from {key})"));
                    }
                }
            }
        }
    }
    None
}

/// Why a refspec forces or deletes.
fn destructive_refspec(r: &str) -> Option<String> {
    if r.starts_with('+') {
        return Some(format!("refspec `{r}` force-updates a remote ref"));
    }
    if r.starts_with(':') && r.len() > 1 {
        return Some(format!("refspec `{r}` deletes a remote ref"));
    }
    None
}

/// `git send-pack [options] <remote> [<ref>...]`.
fn send_pack(args: &[String]) -> Option<String> {
    let (mut stdin, mut stateless) = (false, false);
    let mut positional = Vec::new();
    for a in args {
        match a.as_str() {
            "-f" | "--force" | "--mirror" => {
                return Some(format!(
                    "git send-pack {a} force-updates or deletes remote refs"
                ))
            }
            s if s.starts_with("--force-with-lease") => {
                return Some(
                    "git send-pack --force-with-lease rewrites the remote's history".into(),
                )
            }
            "--stdin" => stdin = true,
            "--stateless-rpc" => stateless = true,
            s if s.starts_with('-') => {}
            s => positional.push(s.to_string()),
        }
    }
    if stdin && !stateless {
        // The refs come on standard input, out of sight. With --stateless-rpc it is git's own
        // HTTP helper relaying a `git push` that was judged when it ran.
        return Some("git send-pack --stdin takes refs guard cannot see".into());
    }
    positional
        .iter()
        .skip(1)
        .find_map(|r| destructive_refspec(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::git::config::parse;

    fn argv(s: &str) -> Vec<OsString> {
        split_cmdline(s)
            .unwrap()
            .into_iter()
            .map(OsString::from)
            .collect()
    }

    fn facts(config: &str) -> GitExec {
        GitExec {
            files: parse(config.as_bytes()).unwrap(),
            branch: Some("main".into()),
            ..GitExec::default()
        }
    }

    fn refused(cmd: &str, config: &str) -> bool {
        judge(&argv(cmd), None, &facts(config)).is_some()
    }

    #[test]
    fn every_spelling_of_a_destructive_push_is_refused() {
        let cfg = "[remote \"origin\"]\nurl = ../r.git\n[branch \"main\"]\nremote = origin\n";
        for cmd in [
            "git push --force",
            "git push -f origin main",
            "git push origin main -f",
            "git push -uf origin main",
            "git push -fu origin main",
            "git push --forc origin main",
            "git push --force-with-lease",
            "git push --force-with-lease=main:abc origin main",
            "git push origin +main",
            "git push origin +HEAD:refs/heads/main",
            "git push origin :branch",
            "git push origin :refs/tags/v1",
            "git push -d origin branch",
            "git push --delete origin branch",
            "git push origin --del branch",
            "git push --mirror origin",
            "git push --prune origin",
            "git push --all --prune",
            "git -C sub push -f",
            "git -c push.default=current push --force",
            "git --git-dir=.git push -f",
            "git -c remote.origin.push=+refs/heads/main:refs/heads/main push",
            "git -c remote.origin.push=:refs/heads/x push origin",
            "git -c remote.origin.mirror=true push",
            "git -c alias.p=push p -f",
            "git -c alias.p='push --force' p",
            "git -c alias.p=q -c alias.q='push -f' p",
            "git -c alias.p='-c remote.origin.push=+main:main push' p",
            "/usr/lib/git-core/git-push -f origin main",
            "git-push origin +main",
            "git send-pack --force ../r.git main",
            "git send-pack ../r.git +main",
            "git send-pack ../r.git :main",
            "git send-pack --mirror ../r.git",
            "git send-pack --stdin ../r.git",
            "git-send-pack --all --force ../r.git",
            "git push -o ci.skip -f origin main",
            "git push -- origin +main",
        ] {
            assert!(refused(cmd, cfg), "{cmd} must be refused");
        }
    }

    #[test]
    fn ordinary_pushes_and_other_commands_pass() {
        let cfg = "[remote \"origin\"]\nurl = ../r.git\nfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\nremote = origin\n";
        for cmd in [
            "git push",
            "git push origin main",
            "git push -u origin feature",
            "git push --follow-tags",
            "git push --tags origin",
            "git push --all origin",
            "git push -o +x origin main",
            "git push --push-option +x origin main",
            "git push --receive-pack=+x origin main",
            "git push origin main:main",
            "git push --force-if-includes origin main",
            "git commit -m -f",
            "git commit -m +main",
            "git status",
            "git fetch --prune origin",
            "git -c alias.p='!git push -f' p",
            "git send-pack --stateless-rpc --helper-status --thin --stdin https://x/r.git",
            "ls -f",
        ] {
            assert!(!refused(cmd, cfg), "{cmd} must pass");
        }
    }

    #[test]
    fn the_repositorys_config_is_read() {
        let force = "[remote \"origin\"]\nurl = ../r.git\npush = +refs/heads/*:refs/heads/*\n[branch \"main\"]\nremote = origin\n";
        assert!(refused("git push", force));
        assert!(refused("git push origin", force));
        assert!(!refused("git push origin main", force), "argv refspecs win");
        let mirror = "[remote \"backup\"]\nurl = ../b.git\nmirror = true\n";
        assert!(refused("git push backup", mirror));
        assert!(!refused("git push -c x origin main", mirror));
        // The branch's push remote decides which remote's config counts.
        let two = "[remote \"backup\"]\nurl = ../b.git\nmirror = true\n[remote \"origin\"]\nurl = ../r.git\n[branch \"main\"]\nremote = origin\n";
        assert!(!refused("git push", two));
        assert!(refused("git -c branch.main.pushRemote=backup push", two));
        // An alias from the files.
        assert!(refused("git p", "[alias]\np = push --force\n"));
        assert!(!refused("git p", "[alias]\np = push\n"));
    }

    #[test]
    fn the_environment_is_config_too() {
        let mut f = facts("");
        f.env = vec![(
            "GIT_CONFIG_PARAMETERS".into(),
            "'remote.origin.push'='+refs/heads/main:refs/heads/main'".into(),
        )];
        assert!(judge(&argv("git push origin"), None, &f).is_some());
        f.env = vec![
            ("GIT_CONFIG_COUNT".into(), "1".into()),
            ("GIT_CONFIG_KEY_0".into(), "alias.p".into()),
            ("GIT_CONFIG_VALUE_0".into(), "push -f".into()),
        ];
        assert!(judge(&argv("git p"), None, &f).is_some());
        f.env = vec![("EVIL".into(), "+main:main".into())];
        assert!(judge(
            &argv("git --config-env=remote.origin.push=EVIL push origin"),
            None,
            &f
        )
        .is_some());
        assert_eq!(
            config_parameters("'a.b=c' 'x.Y.z'='it'\\''s' 'flag'"),
            [
                ("a.b".to_string(), Some("c".to_string())),
                ("x.Y.z".to_string(), Some("it's".to_string())),
                ("flag".to_string(), None)
            ]
        );
    }

    #[test]
    fn plans() {
        assert_eq!(plan(&argv("git status"), None), None);
        assert_eq!(plan(&argv("ls"), None), None);
        let p = plan(&argv("git -C a -C b --git-dir=x push"), None).unwrap();
        assert_eq!(p.chdir, ["a", "b"]);
        assert_eq!(p.git_dir.as_deref(), Some("x"));
        assert!(plan(&argv("git st"), None).is_some(), "an alias may push");
        assert!(plan(&argv("git-push"), None).is_some());
        assert!(plan(&argv("mygit push"), Some(Path::new("/usr/bin/git"))).is_some());
        assert_eq!(canonical("Remote.Origin.PUSH"), "remote.Origin.push");
        assert_eq!(
            split_cmdline("a 'b c' \"d\\\"e\" f\\ g").unwrap(),
            ["a", "b c", "d\"e", "f g"]
        );
    }
}
