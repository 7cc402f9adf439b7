//! argv patterns of exec rules: one glob per argument, `**` alone matches zero or more whole
//! arguments, and the whole pattern must match the whole argument vector (anchored).
//!
//! Element 0 matches the basename of `argv[0]` or of the resolved executable, so `git` matches
//! `/usr/bin/git`; an element 0 beginning with `/` matches the full executable path or `argv[0]`
//! resolved against the cwd. Later elements beginning with `/` are path elements: the argument
//! (unless it begins with `-`) is joined to the caller's cwd and normalised before matching, so
//! `.` run in the workspace matches `{workspace}`; their `*` does not cross `/`. Other elements
//! match the raw argument, and their `*` does cross `/` (`--force-with-lease=origin/main`).
//! Non-UTF-8 arguments are matched lossily. Matching is O(pattern × argv) and never panics.

use std::borrow::Cow;
use std::ffi::OsString;
use std::path::Path;
use std::sync::OnceLock;

use globset::{Glob, GlobBuilder, GlobMatcher};

use super::paths::normalize;

#[derive(Debug, Clone)]
enum Element {
    /// `**`: any number of whole arguments.
    Any,
    /// An element without glob syntax, compared as a string (most of them: `git`, `push`).
    Literal { text: String, path: bool },
    /// An element with glob syntax. It is parsed and its regex compiled on the first match
    /// (tens of microseconds each): most rules' elements are never reached, since their
    /// program element (`git`, `rm`) does not match. The profile's load checked it
    /// ([`ArgvPattern::check`]); one that did not parse would match nothing.
    Glob {
        text: String,
        matcher: OnceLock<Option<GlobMatcher>>,
        path: bool,
    },
}

impl Element {
    /// Matches an already resolved candidate (basename, raw argument or normalised path).
    fn is_match(&self, candidate: &str) -> bool {
        match self {
            Element::Any => true,
            Element::Literal { text, .. } => text == candidate,
            Element::Glob { text, matcher, .. } => matcher
                .get_or_init(|| Some(glob_of(text).ok()??.compile_matcher()))
                .as_ref()
                .is_some_and(|m| m.is_match(candidate)),
        }
    }

    fn is_path(&self) -> bool {
        matches!(
            self,
            Element::Literal { path: true, .. } | Element::Glob { path: true, .. }
        )
    }
}

/// A compiled argv pattern.
#[derive(Debug, Clone)]
pub struct ArgvPattern {
    elements: Vec<Element>,
}

/// Every argv element of the built-in profiles' rules, sorted (build.rs, `argv_elements`).
/// A glob's validity is its text, so `every_builtin_argv_glob_parses` parses the globs among
/// them once for every start.
const BUILTIN_GLOBS: &[&str] = include!(concat!(env!("OUT_DIR"), "/profiles/argv_elements.rs"));

/// Whether an element is a glob rather than a string compared as it is.
fn has_glob_syntax(elem: &str) -> bool {
    elem.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// The parsed glob of one pattern element, `None` for `**` and for an element without glob
/// syntax (compared as a string). Path elements' `*` does not cross `/`.
fn glob_of(elem: &str) -> Result<Option<Glob>, (String, globset::Error)> {
    if elem == "**" || !has_glob_syntax(elem) {
        return Ok(None);
    }
    GlobBuilder::new(elem)
        .literal_separator(elem.starts_with('/'))
        .build()
        .map(Some)
        .map_err(|e| (elem.to_string(), e))
}

impl ArgvPattern {
    /// Checks that every (expanded) pattern element is a valid glob, without compiling the
    /// matchers (see [`super::Rule::argv_pattern`]); the error names the offending element.
    ///
    /// # Errors
    ///
    /// The element that is not a valid glob, with the glob parser's error.
    pub fn check(pattern: &[String]) -> Result<(), (String, globset::Error)> {
        // An element whose only glob syntax is `*` compiles whatever it holds
        // (`policy::resolve`'s `star_only_patterns_always_compile`): not parsed at every start
        // for nothing (the built-in rules' `-*r*`, `--force*`, ...). Neither is one of the
        // built-in profiles' own, which a test parses ([`BUILTIN_GLOBS`]).
        pattern
            .iter()
            .filter(|elem| super::globs::other_syntax(elem.as_bytes()))
            .filter(|elem| BUILTIN_GLOBS.binary_search(&elem.as_str()).is_err())
            .try_for_each(|elem| glob_of(elem).map(drop))
    }

    /// The pattern of the (expanded) elements, which [`ArgvPattern::check`] accepted when the
    /// profile was loaded: a glob element is parsed and compiled on its first match.
    pub fn compile(pattern: &[String]) -> Self {
        let mut elements = Vec::with_capacity(pattern.len());
        for elem in pattern {
            if elem == "**" {
                // Consecutive `**` are one.
                if !matches!(elements.last(), Some(Element::Any)) {
                    elements.push(Element::Any);
                }
                continue;
            }
            let path = elem.starts_with('/');
            elements.push(if has_glob_syntax(elem) {
                Element::Glob {
                    text: elem.clone(),
                    matcher: OnceLock::new(),
                    path,
                }
            } else {
                Element::Literal {
                    text: elem.clone(),
                    path,
                }
            });
        }
        ArgvPattern { elements }
    }

    /// Whether the pattern matches the argument vector of an exec.
    pub fn matches(&self, argv: &[OsString], exe: Option<&Path>, cwd: Option<&Path>) -> bool {
        let Some((first, rest)) = self.elements.split_first() else {
            return argv.is_empty();
        };
        match first {
            Element::Any => sequence_matches(&self.elements, argv, cwd),
            elem => {
                if !program_matches(elem, argv.first(), exe, cwd) {
                    return false;
                }
                sequence_matches(rest, argv.get(1..).unwrap_or(&[]), cwd)
            }
        }
    }
}

fn program_matches(
    elem: &Element,
    arg0: Option<&OsString>,
    exe: Option<&Path>,
    cwd: Option<&Path>,
) -> bool {
    let arg0 = arg0.map(Path::new);
    if elem.is_path() {
        let by_exe = exe.is_some_and(|e| elem.is_match(&normalize(e).to_string_lossy()));
        by_exe || arg0.is_some_and(|a| elem.is_match(&resolve(a, cwd).to_string_lossy()))
    } else {
        let base = |p: &Path| {
            p.file_name()
                .is_some_and(|n| elem.is_match(&n.to_string_lossy()))
        };
        exe.is_some_and(base) || arg0.is_some_and(base)
    }
}

fn resolve(arg: &Path, cwd: Option<&Path>) -> std::path::PathBuf {
    match cwd {
        Some(cwd) if arg.is_relative() => normalize(&cwd.join(arg)),
        _ => normalize(arg),
    }
}

fn element_matches(elem: &Element, arg: &OsString, cwd: Option<&Path>) -> bool {
    let text = lossy(arg);
    if !elem.is_path() || text.starts_with('-') {
        return elem.is_match(&text);
    }
    elem.is_match(&resolve(Path::new(text.as_ref()), cwd).to_string_lossy())
}

fn lossy(arg: &OsString) -> Cow<'_, str> {
    arg.to_string_lossy()
}

/// Anchored wildcard matching over whole arguments: the classic greedy algorithm with one
/// backtrack point, which is exact when every non-`**` element consumes exactly one argument.
fn sequence_matches(pattern: &[Element], args: &[OsString], cwd: Option<&Path>) -> bool {
    let (mut p, mut a) = (0usize, 0usize);
    // (pattern index after the last `**`, argument index it is retried from)
    let mut backtrack: Option<(usize, usize)> = None;
    while a < args.len() {
        match pattern.get(p) {
            Some(Element::Any) => {
                backtrack = Some((p + 1, a));
                p += 1;
            }
            Some(elem) if element_matches(elem, &args[a], cwd) => {
                p += 1;
                a += 1;
            }
            _ => match backtrack {
                Some((bp, ba)) => {
                    backtrack = Some((bp, ba + 1));
                    p = bp;
                    a = ba + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..]
        .iter()
        .all(|e| matches!(e, Element::Any))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What lets `check` take the built-in profiles' elements without parsing them.
    #[test]
    fn every_builtin_argv_glob_parses() {
        assert!(BUILTIN_GLOBS.windows(2).all(|w| w[0] < w[1]), "sorted");
        let globs: Vec<_> = BUILTIN_GLOBS
            .iter()
            .filter(|g| super::super::globs::other_syntax(g.as_bytes()))
            .collect();
        assert!(globs.len() >= 3, "{BUILTIN_GLOBS:?}");
        for g in globs {
            assert!(glob_of(g).is_ok_and(|g| g.is_some()), "{g}");
        }
        assert!(BUILTIN_GLOBS.contains(&"{-[rR]*,-[!-]*[rR]*,--r*}"));
        // Anything else is still parsed, and refused when it does not parse.
        assert!(ArgvPattern::check(&["rm".into(), "{-[rR]*".into()]).is_err());
    }

    fn pat(p: &[&str]) -> ArgvPattern {
        let p: Vec<String> = p.iter().map(|s| s.to_string()).collect();
        ArgvPattern::check(&p).expect("valid globs");
        ArgvPattern::compile(&p)
    }

    fn args(a: &str) -> Vec<OsString> {
        a.split_whitespace().map(OsString::from).collect()
    }

    fn m(p: &ArgvPattern, a: &str) -> bool {
        p.matches(&args(a), None, Some(Path::new("/ws")))
    }

    #[test]
    fn anchored_with_stars() {
        let p = pat(&["git", "**", "push", "**", "--force*", "**"]);
        assert!(m(&p, "git push --force"));
        assert!(m(
            &p,
            "/usr/bin/git -C x push origin --force-with-lease=origin/main"
        ));
        assert!(!m(&p, "git push origin main"));
        assert!(!m(&p, "git commit -m -f"));
        assert!(!m(&p, "gitx push --force"));
        let exact = pat(&["ls"]);
        assert!(m(&exact, "ls"));
        assert!(!m(&exact, "ls -l"));
        assert!(pat(&["**"]).matches(&[], None, None));
        assert!(!pat(&["ls"]).matches(&[], None, None));
    }

    #[test]
    fn program_by_exe_basename() {
        let p = pat(&["git", "**"]);
        assert!(p.matches(&args("g status"), Some(Path::new("/usr/bin/git")), None));
        let full = pat(&["/usr/bin/git", "**"]);
        assert!(full.matches(&args("git x"), Some(Path::new("/usr/bin/git")), None));
        assert!(full.matches(&args("./git x"), None, Some(Path::new("/usr/bin"))));
    }

    #[test]
    fn path_elements_resolve_against_cwd() {
        let p = pat(&["rm", "**", "/ws", "**"]);
        assert!(m(&p, "rm -rf ."));
        assert!(m(&p, "rm -rf /ws/"));
        assert!(m(&p, "rm -rf ../ws/./"));
        assert!(!m(&p, "rm -rf build"));
        assert!(!m(&p, "rm -rf /ws2"));
        let star = pat(&["cat", "/ws/*"]);
        assert!(m(&star, "cat a"));
        assert!(!m(&star, "cat a/b"));
    }

    #[test]
    fn non_utf8_does_not_panic() {
        use std::os::unix::ffi::OsStringExt;
        let p = pat(&["rm", "**", "/ws", "**"]);
        let argv = vec![
            OsString::from("rm"),
            OsString::from_vec(vec![0xff, b'/', 0x80]),
        ];
        assert!(!p.matches(&argv, None, Some(Path::new("/ws"))));
    }

    #[test]
    fn many_stars_stay_fast() {
        let p = pat(&["a", "**", "b", "**", "b", "**", "b", "**", "c"]);
        let long = format!("a {}", "b ".repeat(5000));
        assert!(!m(&p, &long));
    }
}
