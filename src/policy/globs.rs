//! Sets of path globs (`fs.protect`, `fs.hide`, the `path` of rules, `transaction.exclude`),
//! matched as a glob set with `*` not crossing `/` matches them, without a regex where the
//! pattern needs none.
//!
//! Nearly every pattern in a profile is a path whose components are plain names, names with
//! `*` (`env*`, `*_key`) or `**` (`{workspace}/**/.git`, `target/**`). Such a pattern is
//! matched here, component by component: each plain or `*` component takes exactly one
//! component of the path, and a `**` any number of them (at least one at the end of the
//! pattern: `dir/**` is what lies inside `dir`, not `dir`). Building the set is then a split
//! of each pattern, where a glob set compiles a regex (tens of microseconds per pattern, at
//! every start), and a match walks the path once. Patterns with other syntax (`?`, `[...]`,
//! `{a,b}`, escapes, `**` inside a name) go to a glob set, built only when there are any.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A compiled set of path globs.
#[derive(Debug, Clone, Default)]
pub struct PathSet {
    /// Patterns without glob syntax: the paths themselves (a few per profile: compared in
    /// turn, length first, which beats hashing the path).
    literal: Vec<Box<[u8]>>,
    /// Patterns of plain, `*` and `**` components.
    /// The [`Split`] patterns, grouped by their literal prefix (see [`literal_prefix`]): a
    /// path meets a group's patterns only when it starts with that prefix. Built-in profiles
    /// have a dozen `/dev/...` patterns and a few `/etc/...` ones in `fs.hide`, so an entry of
    /// `/etc` is compared with the `/dev` group once, not with each of its patterns.
    split: Vec<(Box<[u8]>, Vec<Split>)>,
    /// The other patterns, when there are any.
    rest: Option<GlobSet>,
}

/// The patterns of a [`PathSet`] that can match an entry of one directory
/// ([`PathSet::children`]).
pub struct Children<'a> {
    set: &'a PathSet,
    /// The literal patterns naming an entry of the directory: its name.
    names: Vec<&'a [u8]>,
    /// The last component of each pattern without `**` whose other components match the
    /// directory.
    last: Vec<&'a [u8]>,
    /// Whether some pattern (with `**`, or other syntax) is matched against the whole path.
    whole: bool,
}

impl Children<'_> {
    /// Whether the entry `name` (a name a listing gives: not empty, no `/`) of the directory,
    /// at `path`, matches one of the patterns.
    pub fn is_match(&self, name: &[u8], path: &Path) -> bool {
        if self.whole {
            return self.set.is_match(path);
        }
        self.names.contains(&name) || self.last.iter().any(|p| component_match(p, name))
    }
}

/// A pattern of plain, `*` and `**` components: `runs` of one-component patterns, with a
/// `**` between each two runs, before the first when `open_start`, after the last when
/// `open_end`.
#[derive(Debug, Clone)]
struct Split {
    runs: Vec<Vec<Box<[u8]>>>,
    open_start: bool,
    open_end: bool,
    /// The first run joined with `/`, when it is anchored at the start and has no `*`: one
    /// comparison of the path's head instead of one per component (`{workspace}` for every
    /// `{workspace}/**/...` pattern).
    head: Option<Box<[u8]>>,
}

/// Whether `s` has glob syntax other than `*`: what [`Split`] does not handle, and the only
/// syntax the glob parser can refuse (it accepts any run of `*`; `policy::resolve`'s
/// `star_only_patterns_always_compile` holds it to that).
pub(super) fn other_syntax(s: &[u8]) -> bool {
    s.iter().any(|b| b"?[]{}\\".contains(b))
}

impl Split {
    fn new(pattern: &[u8]) -> Option<Split> {
        if other_syntax(pattern) {
            return None;
        }
        let mut runs: Vec<Vec<Box<[u8]>>> = vec![Vec::new()];
        let mut open_start = false;
        for comp in pattern.split(|&b| b == b'/') {
            if comp == b"**" {
                match runs.last() {
                    Some(run) if run.is_empty() && runs.len() == 1 => open_start = true,
                    // `**/**` is one `**`.
                    Some(run) if run.is_empty() => {}
                    _ => runs.push(Vec::new()),
                }
            } else if comp.windows(2).any(|w| w == b"**") {
                return None;
            } else {
                runs.last_mut()?.push(comp.into());
            }
        }
        let open_end = runs.last().is_some_and(Vec::is_empty) && (runs.len() > 1 || open_start);
        if open_end {
            runs.pop();
        }
        let head = match runs.first() {
            Some(first) if !open_start && !first.iter().any(|c| c.contains(&b'*')) => {
                Some(first.join(&b'/').into_boxed_slice())
            }
            _ => None,
        };
        Some(Split {
            runs,
            open_start,
            open_end,
            head,
        })
    }

    /// Whether `path`, whose components are `comps`, matches.
    fn is_match(&self, path: &[u8], comps: &[&[u8]]) -> bool {
        // Without `**`, the path has as many components as the pattern.
        if let ([run], false, false) = (self.runs.as_slice(), self.open_start, self.open_end) {
            return comps.len() == run.len()
                && run.iter().zip(comps).all(|(p, c)| component_match(p, c));
        }
        let n = comps.len();
        let run_at = |run: &[Box<[u8]>], at: usize| {
            at + run.len() <= n
                && run
                    .iter()
                    .zip(&comps[at..])
                    .all(|(p, c)| component_match(p, c))
        };
        let last = self.runs.len().saturating_sub(1);
        let mut pos = 0;
        for (i, run) in self.runs.iter().enumerate() {
            let anchored_start = i == 0 && !self.open_start;
            let anchored_end = i == last && !self.open_end;
            match (anchored_start, anchored_end) {
                (true, true) => return n == run.len() && run_at(run, 0),
                (true, false) => {
                    let at_head = match &self.head {
                        Some(head) => {
                            path.starts_with(head)
                                && path.get(head.len()).is_none_or(|&b| b == b'/')
                        }
                        None => run_at(run, 0),
                    };
                    if !at_head {
                        return false;
                    }
                    pos = run.len();
                }
                (false, true) => {
                    return n >= pos + run.len() && run_at(run, n - run.len());
                }
                (false, false) => {
                    // The leftmost place leaves the most room to the runs after it.
                    let Some(at) = (pos..n).find(|&at| run_at(run, at)) else {
                        return false;
                    };
                    pos = at + run.len();
                }
            }
        }
        // `**` alone matches everything; a final `**` at least one component.
        self.runs.is_empty() || !self.open_end || n > pos
    }
}

/// Calls `f` with the components of `path` (split at every `/`), kept on the stack for any
/// usual depth: a judged call inside the workspace is matched against `fs.protect`, and its
/// journaled paths and each of their ancestors against `transaction.exclude`.
fn with_components<R>(path: &[u8], f: impl FnOnce(&[&[u8]]) -> R) -> R {
    let mut on_stack: [&[u8]; 32] = [&[]; 32];
    let mut n = 0;
    for c in path.split(|&b| b == b'/') {
        if n == on_stack.len() {
            return f(&path.split(|&b| b == b'/').collect::<Vec<_>>());
        }
        on_stack[n] = c;
        n += 1;
    }
    f(&on_stack[..n])
}

/// Whether the path component `c` matches the pattern component `p`, whose only wildcard is
/// `*` (any run of bytes): the usual greedy match that, on a mismatch, lets the last `*` take
/// one more byte.
/// The components of `pattern` before the first that holds a `*` (a `**` included), joined:
/// every path the pattern matches starts with them, at a component boundary. Empty for a
/// pattern that starts with `**` (`open_start`) or whose first component has a `*`.
fn literal_prefix(pattern: &[u8], open_start: bool) -> &[u8] {
    if open_start {
        return &[];
    }
    let mut end = 0;
    for (i, comp) in pattern.split(|&b| b == b'/').enumerate() {
        if comp.contains(&b'*') {
            break;
        }
        // The offset after this component: the next one starts one byte later.
        end = if i == 0 {
            comp.len()
        } else {
            end + 1 + comp.len()
        };
    }
    &pattern[..end]
}

/// Whether `path` starts with `prefix` at a component boundary (an empty prefix: always).
fn under_prefix(path: &[u8], prefix: &[u8]) -> bool {
    path.starts_with(prefix)
        && (prefix.is_empty() || path.get(prefix.len()).is_none_or(|&b| b == b'/'))
}

/// Whether the component `c` matches the pattern component `p` (plain bytes and `*`). What
/// precedes the first `*` is compared at once, so most components are refused by their first
/// bytes: `fs.hide` meets each of `/dev`'s some 250 entries with thirty patterns at every
/// start (`tty0*`..`tty9*`, `ttyS*`, `sd*`, ...), and the policy every judged path with its
/// globs.
fn component_match(p: &[u8], c: &[u8]) -> bool {
    let Some(star) = p.iter().position(|&b| b == b'*') else {
        return p == c;
    };
    if !c.starts_with(&p[..star]) {
        return false;
    }
    // Before the first `*` there is nothing to backtrack to: go on from there.
    let (mut i, mut j) = (star, star);
    let mut star: Option<(usize, usize)> = None;
    while j < c.len() {
        if i < p.len() && p[i] == b'*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == c[j] {
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

impl PathSet {
    /// The set of `patterns`.
    ///
    /// # Errors
    ///
    /// A pattern with other syntax than [`Split`] handles that is not a valid glob.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<PathSet, globset::Error> {
        let mut set = PathSet::default();
        let mut rest = GlobSetBuilder::new();
        let mut any_rest = false;
        for p in patterns {
            let p = p.as_ref();
            let bytes = p.as_bytes();
            if !bytes.contains(&b'*') && !other_syntax(bytes) {
                set.literal.push(bytes.into());
            } else if let Some(split) = Split::new(bytes) {
                let prefix = literal_prefix(bytes, split.open_start);
                match set.split.iter_mut().find(|(p, _)| **p == *prefix) {
                    Some((_, group)) => group.push(split),
                    None => set.split.push((prefix.into(), vec![split])),
                }
            } else {
                rest.add(GlobBuilder::new(p).literal_separator(true).build()?);
                any_rest = true;
            }
        }
        if any_rest {
            set.rest = Some(rest.build()?);
        }
        Ok(set)
    }

    /// Whether `path` matches one of the patterns.
    pub fn is_match(&self, path: impl AsRef<Path>) -> bool {
        let path = path.as_ref();
        let bytes = path.as_os_str().as_bytes();
        self.literal.iter().any(|l| **l == *bytes)
            || (self
                .split
                .iter()
                .any(|(prefix, _)| under_prefix(bytes, prefix))
                && with_components(bytes, |comps| {
                    self.split.iter().any(|(prefix, group)| {
                        under_prefix(bytes, prefix)
                            && group.iter().any(|s| s.is_match(bytes, comps))
                    })
                }))
            || self.rest.as_ref().is_some_and(|r| r.is_match(path))
    }

    /// The patterns that can match an entry of the directory `dir`, picked once for all of its
    /// entries: `fs.hide` lists every entry of `/etc` and `/dev` at each start (some 250), and
    /// matching each one's whole path against every pattern was the start's largest cost in
    /// user space. [`Children::is_match`] answers as [`PathSet::is_match`] does for the
    /// entry's path.
    pub fn children(&self, dir: &Path) -> Children<'_> {
        let dir = dir.as_os_str().as_bytes();
        // The entry's path is `dir/name`, or `dir` + `name` for a `dir` that ends in `/`.
        let stem = dir.strip_suffix(b"/").unwrap_or(dir);
        let names = self
            .literal
            .iter()
            .filter_map(|l| {
                let name = l.strip_prefix(stem)?.strip_prefix(b"/")?;
                (!name.is_empty() && !name.contains(&b'/')).then_some(name)
            })
            .collect();
        let mut last = Vec::new();
        // An entry of the empty path is `name` alone, which no component list above shows.
        let mut whole = self.rest.is_some() || dir.is_empty();
        with_components(stem, |comps| {
            for split in self.split.iter().flat_map(|(_, group)| group) {
                match (split.runs.as_slice(), split.open_start, split.open_end) {
                    ([run], false, false) => {
                        if let Some((name, above)) = run.split_last() {
                            if above.len() == comps.len()
                                && above.iter().zip(comps).all(|(p, c)| component_match(p, c))
                            {
                                last.push(&**name);
                            }
                        }
                    }
                    // A `**` may match any number of components: left to the whole path.
                    _ => whole = true,
                }
            }
        });
        Children {
            set: self,
            names,
            last,
            whole,
        }
    }

    /// The set of those `patterns` that compile, for patterns the profile checked already:
    /// one that does not compile matches nothing rather than failing the whole set.
    pub fn lenient<S: AsRef<str>>(patterns: &[S]) -> PathSet {
        PathSet::new(patterns).unwrap_or_else(|_| {
            let valid: Vec<&str> = patterns
                .iter()
                .map(AsRef::as_ref)
                .filter(|p| PathSet::new(&[p]).is_ok())
                .collect();
            PathSet::new(&valid).unwrap_or_default()
        })
    }

    /// Whether the set has no pattern.
    pub fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.split.is_empty() && self.rest.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pattern of the built-in profiles' shapes, and the corner cases of `*` and `**`.
    const PATTERNS: &[&str] = &[
        "/etc/shadow",
        "/etc/ssh/*_key",
        "/dev/sd*",
        "/dev/*/by-id",
        "/dev/tty1*",
        "/dev/tt*y",
        "/a/*b*c*",
        "/a/b*c",
        "/x/**",
        "/x/**/y",
        "/x/**/y/**",
        "/x/**/y/**/z",
        "/x/**/**/y",
        "**/y",
        "**/y/**",
        "**",
        "*",
        "/ws/**/.git",
        "/ws/**/.git/**/hooks",
        "/ws/**/.git/**/hooks/**",
        "/ws/**/.git/**/commondir",
        "/h/.cargo/bin/**",
        "/h/.cargo/env*",
        "target/**",
        "node_modules/**",
        "target",
        "a**b",
        "/x/a?c",
        "/x/[ab]c",
        "/x/{a,b}c",
        "",
        "/",
    ];

    /// Paths around them.
    const PATHS: &[&str] = &[
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
        "/dev/tty1",
        "/dev/tty10",
        "/dev/tty",
        "/dev/tty2",
        "/dev/tt",
        "/dev/ttyy",
        "/a/bc",
        "/a/b",
        "/a/bcc",
        "/a/bxcxc",
        "/a/xbycz",
        "/a/cb",
        "/a/bxc/",
        "/x",
        "/x/",
        "/x/y",
        "/x/y/",
        "/x/a/y",
        "/x/a/b/y",
        "/x/y/z",
        "/x/y/a/z",
        "/x/a/y/b/z/c",
        "/x/yy",
        "/x/abc",
        "/x/bc",
        "/x/cc",
        "y",
        "y/z",
        "a/y",
        "/y",
        "",
        "/",
        "//",
        "/ws/.git",
        "/ws/sub/.git",
        "/ws/.git/hooks",
        "/ws/.git/hooks/pre-commit",
        "/ws/.git/modules/m/hooks",
        "/ws/.git/modules/m/hooks/x",
        "/ws/.git/commondir",
        "/ws/.git/worktrees/w/commondir",
        "/ws/.gitignore",
        "/ws/a.git",
        "/h/.cargo/bin",
        "/h/.cargo/bin/cargo",
        "/h/.cargo/env",
        "/h/.cargo/env.fish",
        "/h/.cargo/registry",
        "target",
        "target/debug/x",
        "src/target",
        "node_modules",
        "node_modules/a/b",
        "axxb",
        "ab",
        "a/b",
    ];

    /// Each pattern against the paths: the answers must be a glob set's.
    #[test]
    fn patterns_match_as_a_glob_set_matches_them() {
        for pattern in PATTERNS {
            agree(pattern, PATHS);
        }
    }

    /// All of them in one set, where patterns that share a literal prefix are grouped under
    /// it (`/dev`, `/etc/ssh`, `/ws`), answer every path as one glob set of them does.
    #[test]
    fn one_set_of_them_matches_as_one_glob_set_matches_them() {
        let extra = [
            "/dev/vd*",
            "/dev/mapper",
            "/etc/ppp/*-secrets",
            "/devices/*",
            "/etc/shadow",
        ];
        let patterns: Vec<&str> = PATTERNS.iter().copied().chain(extra).collect();
        let paths: Vec<&str> = PATHS
            .iter()
            .copied()
            .chain([
                "/devices/sda",
                "/dev/vda",
                "/dev/mapper",
                "/dev/mapperx",
                "/etc/ppp/chap-secrets",
                "/etc/pppx/chap-secrets",
                "/etc/shadow",
            ])
            .collect();
        let ours = PathSet::new(&patterns).expect("compiles");
        let mut glob = GlobSetBuilder::new();
        for p in &patterns {
            glob.add(
                GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .expect("glob"),
            );
        }
        let glob = glob.build().expect("glob set");
        for path in paths {
            assert_eq!(ours.is_match(path), glob.is_match(path), "{path:?}");
        }
        // Each pattern alone, against the set without it: the grouping loses none.
        for (i, p) in patterns.iter().enumerate() {
            let others: Vec<&str> = patterns
                .iter()
                .enumerate()
                .filter_map(|(j, q)| (j != i).then_some(*q))
                .collect();
            let without = PathSet::new(&others).expect("compiles");
            let alone = PathSet::new(&[p]).expect("compiles");
            for path in PATHS {
                if alone.is_match(path) && !without.is_match(path) {
                    assert!(ours.is_match(path), "{p:?} against {path:?}");
                }
            }
        }
    }

    /// `pattern` as a `PathSet` answers every path as a glob set does.
    fn agree(pattern: &str, paths: &[&str]) {
        let ours = PathSet::new(&[pattern]).expect("compiles");
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .expect("glob")
            .compile_matcher();
        for path in paths {
            assert_eq!(
                ours.is_match(path),
                glob.is_match(path),
                "{pattern:?} against {path:?}"
            );
        }
    }

    /// Paths deeper than the components kept on the stack are matched all the same.
    #[test]
    fn deep_paths_match_as_a_glob_set_matches_them() {
        let deep = format!("/ws/{}.git/hooks/x", "d/".repeat(40));
        let shallow = format!("/ws/{}.git", "d/".repeat(30));
        for pattern in [
            "/ws/**/.git",
            "/ws/**/.git/**/hooks/**",
            "/ws/*/d/**",
            "**/x",
        ] {
            agree(pattern, &[&deep, &shallow]);
        }
    }

    /// A directory's [`Children`] answer for each of its entries as the whole set does for the
    /// entry's path: each pattern alone, all of them together, and the default `fs.hide`.
    #[test]
    fn children_of_a_directory_match_as_their_paths_do() {
        let hide = [
            "/etc/shadow",
            "/etc/sudoers.d",
            "/etc/ssh/*_key",
            "/etc/ppp/*-secrets",
            "/dev/sd*",
            "/dev/vd*",
            "/dev/mapper",
            "/dev/vcs*",
            "/run/secrets",
            "/dev/*/by-id",
            "/dev/tty1*",
            "/etc/*ss*/*_config",
        ];
        let mut entries: Vec<(String, String)> = Vec::new();
        for path in PATHS.iter().chain(&hide).chain(&[
            "/etc/ssh/x_key",
            "/dev/vcsa1",
            "/run",
            "/dev/disk/by-id",
            "/dev/disk/by-idx",
            "/dev/tty1",
            "/dev/tty10",
            "/dev/tty2",
            "/etc/ssh/sshd_config",
            "/etc/ssh/sshd_config2",
        ]) {
            // A listing's names are never empty.
            if let Some((dir, name)) = path.rsplit_once('/').filter(|(_, n)| !n.is_empty()) {
                let dir = if dir.is_empty() && path.starts_with('/') {
                    "/"
                } else {
                    dir
                };
                entries.push((dir.into(), name.into()));
            }
        }
        // Directories that hold nothing the patterns name, and names in them.
        for dir in [
            "/", "/etc", "/dev", "/etc/ssh", "/x", "/x/a", "/ws", "a", "",
        ] {
            for name in [
                "shadow", "sda", "ssh", "y", ".git", "x_key", "etc", "dev", "a",
            ] {
                entries.push((dir.into(), name.into()));
            }
        }
        let mut sets: Vec<Vec<&str>> = PATTERNS.iter().map(|p| vec![*p]).collect();
        sets.push(PATTERNS.to_vec());
        sets.push(hide.to_vec());
        for patterns in &sets {
            let set = PathSet::new(patterns).expect("compiles");
            for (dir, name) in &entries {
                let path = Path::new(dir).join(name);
                assert_eq!(
                    set.children(Path::new(dir))
                        .is_match(name.as_bytes(), &path),
                    set.is_match(&path),
                    "{patterns:?}: {name:?} in {dir:?}"
                );
            }
        }
        let hidden = PathSet::new(&hide).expect("compiles");
        assert!(
            !hidden.children(Path::new("/dev")).whole,
            "no pattern needs the whole path"
        );
    }

    #[test]
    fn only_other_syntax_needs_a_glob_set() {
        let plain = PathSet::new(&["/ws/**/.git", "/h/.cargo/env*", "/etc/shadow"]).unwrap();
        assert!(plain.rest.is_none() && plain.split.len() == 2 && plain.literal.len() == 1);
        let other = PathSet::new(&["/x/{a,b}"]).unwrap();
        assert!(other.rest.is_some());
        assert!(PathSet::new(&["/x/{a"]).is_err(), "a bad glob is an error");
        assert!(PathSet::new::<&str>(&[]).unwrap().is_empty());
    }
}
