//! Path handling shared by profile resolution and the supervisor: lexical normalisation,
//! `{variable}` expansion and the literal prefix ("anchor") of a path glob.
//!
//! Everything here is lexical and does no I/O. [`normalize`] is idempotent and never fails;
//! the supervisor applies it to every path it decodes, so the policy and the requests agree on
//! one spelling of each path.

use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::model::Vars;

/// Lexically normalises `path`: drops `.` components, duplicate and trailing slashes, and
/// resolves `..` against the preceding component (`/..` stays `/`; a relative path keeps the
/// leading `..` it cannot resolve). An empty result is `.` for a relative path.
///
/// Symlinks are not consulted: `a/link/..` becomes `a`. Callers that need the kernel's view
/// resolve the path with openat2 first and normalise the result.
pub fn normalize(path: &Path) -> PathBuf {
    if is_normal(path.as_os_str().as_bytes()) {
        return path.to_path_buf();
    }
    walk(path)
}

/// [`normalize`] component by component, for a path [`is_normal`] does not pass.
fn walk(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    // Number of `Normal` components in `out` that a `..` may pop.
    let mut depth = 0usize;
    for comp in path.components() {
        match comp {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth > 0 {
                    out.pop();
                    depth -= 1;
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            Component::Normal(name) => {
                out.push(name);
                depth += 1;
            }
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether `path` is what [`normalize`] makes of it already, as nearly every path a profile
/// names or a caller passes is: one pass over the bytes instead of a component walk and a
/// push per component (a profile's resolution normalises some hundred paths at every start).
fn is_normal(path: &[u8]) -> bool {
    if path == b"/" {
        return true;
    }
    if path.is_empty() {
        return false;
    }
    // A trailing `/` leaves an empty last component.
    let rest = path.strip_prefix(b"/").unwrap_or(path);
    rest.split(|&b| b == b'/')
        .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// What went wrong while expanding one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandError {
    /// `{name}` is not one of the known variables.
    Unknown(String),
    /// The variable's value is not valid UTF-8, so it cannot take part in a pattern.
    NotUtf8(&'static str),
}

/// Whether the expanded text is a glob (variable values are then escaped) or a plain path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expand {
    Glob,
    Plain,
}

/// Expands `{workspace}`, `{home}`, `{tmp}` and `{state}` in `entry`.
///
/// Returns `Ok(None)` when the entry uses `{home}` and there is no home: such entries are
/// dropped. Braces that do not hold a plain identifier (`{a,b}`) are glob alternations and are
/// left alone.
pub fn expand(entry: &str, vars: &Vars, kind: Expand) -> Result<Option<String>, ExpandError> {
    let mut out = String::with_capacity(entry.len() + 32);
    let mut rest = entry;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}');
        let name = close.map(|c| &after[..c]);
        match name {
            Some(name) if is_identifier(name) => {
                let value = match name {
                    "workspace" => Some(vars.workspace.as_path()),
                    "home" => match vars.home.as_deref() {
                        Some(h) => Some(h),
                        None => return Ok(None),
                    },
                    "tmp" => Some(vars.tmp.as_path()),
                    "state" => Some(vars.state.as_path()),
                    _ => None,
                };
                let value = value.ok_or_else(|| ExpandError::Unknown(name.to_string()))?;
                let text = value
                    .to_str()
                    .ok_or(ExpandError::NotUtf8(static_name(name)))?;
                match kind {
                    Expand::Glob => out.push_str(&globset::escape(text)),
                    Expand::Plain => out.push_str(text),
                }
                rest = &after[name.len() + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(Some(out))
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn static_name(name: &str) -> &'static str {
    match name {
        "workspace" => "workspace",
        "home" => "home",
        "tmp" => "tmp",
        _ => "state",
    }
}

/// The names a profile may use, for hints.
pub const VARIABLES: &str = "{workspace}, {home}, {tmp}, {state}";

/// Normalises an absolute path glob component-wise, keeping glob syntax intact.
pub fn normalize_glob(pattern: &str) -> String {
    if is_normal(pattern.as_bytes()) {
        return pattern.to_owned();
    }
    walk(Path::new(pattern)).to_string_lossy().into_owned()
}

/// The longest run of leading components of `pattern` that contain no glob syntax, unescaped:
/// `/ws/.git/hooks/**` -> `/ws/.git/hooks`, `/ws/.git/config` -> `/ws/.git/config`,
/// `/ws/a[*]b/*` -> `/ws/a*b`.
pub fn glob_anchor(pattern: &str) -> PathBuf {
    let mut anchor = PathBuf::from("/");
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        match unescape_literal(comp) {
            Some(lit) => anchor.push(lit),
            None => break,
        }
    }
    anchor
}

/// `Some(text)` when `comp` is literal once `\x` and single-character classes `[x]` are
/// unescaped; `None` when it holds real glob syntax.
fn unescape_literal(comp: &str) -> Option<String> {
    let chars: Vec<char> = comp.chars().collect();
    let mut out = String::with_capacity(comp.len());
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                out.push(chars[i + 1]);
                i += 2;
            }
            '[' if i + 2 < chars.len()
                && chars[i + 2] == ']'
                && !matches!(chars[i + 1], '!' | '^') =>
            {
                out.push(chars[i + 1]);
                i += 3;
            }
            '*' | '?' | '[' | ']' | '{' | '}' | '\\' => return None,
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortcut_for_normal_paths_changes_no_result() {
        let parts = [
            "", "/", "a", "b c", ".", "..", "...", ".a", "a.", "*", "**", "\\x",
        ];
        let mut paths = vec![String::new()];
        for a in parts {
            for b in parts {
                for c in parts {
                    paths.push(format!("{a}/{b}/{c}"));
                    paths.push(format!("/{a}/{b}{c}"));
                    paths.push(format!("{a}{b}/{c}/"));
                    paths.push(format!("{a}{b}{c}"));
                }
            }
        }
        let mut shortcut = 0;
        for p in &paths {
            // The component walk alone, without the shortcut.
            let expected = walk(Path::new(p)).to_string_lossy().into_owned();
            assert_eq!(normalize(Path::new(p)), PathBuf::from(&expected), "{p:?}");
            assert_eq!(normalize_glob(p), expected, "{p:?}");
            shortcut += usize::from(is_normal(p.as_bytes()));
            if is_normal(p.as_bytes()) {
                assert_eq!(&expected, p, "{p:?} is normal");
            }
        }
        assert!(shortcut > 100, "{shortcut} paths took the shortcut");
    }

    fn vars() -> Vars {
        Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/tmp/guard-1".into(),
            state: "/state".into(),
        }
    }

    #[test]
    fn normalize_cases() {
        let cases = [
            ("/a/b/../c/./d/", "/a/c/d"),
            ("//a///b", "/a/b"),
            ("/..", "/"),
            ("/../a/..", "/"),
            ("a/../../b", "../b"),
            ("", "."),
            (".", "."),
            ("./", "."),
            ("a/..", "."),
            ("/ws/.", "/ws"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(Path::new(input)), PathBuf::from(want), "{input}");
        }
    }

    #[test]
    fn normalize_is_idempotent() {
        let inputs = [
            "/a/b/../c/./d/",
            "a/../../b",
            "../..",
            "./a/./b/",
            "/x/y/z/../../..",
            "a//b/../..",
            "",
            "..",
            "/",
            "x/./../y/../../z",
        ];
        for input in inputs {
            let once = normalize(Path::new(input));
            assert_eq!(normalize(&once), once, "{input}");
        }
    }

    #[test]
    fn expand_known_unknown_and_missing_home() {
        let v = vars();
        assert_eq!(
            expand("{workspace}/.git/**", &v, Expand::Glob).unwrap(),
            Some("/ws/.git/**".into())
        );
        assert_eq!(
            expand("/x/{a,b}", &v, Expand::Glob).unwrap(),
            Some("/x/{a,b}".into())
        );
        assert_eq!(
            expand("{foo}/x", &v, Expand::Plain),
            Err(ExpandError::Unknown("foo".into()))
        );
        let no_home = Vars { home: None, ..v };
        assert_eq!(
            expand("{home}/.cargo", &no_home, Expand::Plain).unwrap(),
            None
        );
    }

    #[test]
    fn expand_escapes_glob_syntax_in_values() {
        let v = Vars {
            workspace: "/w[1]".into(),
            ..vars()
        };
        let g = expand("{workspace}/**", &v, Expand::Glob).unwrap().unwrap();
        assert_eq!(g, "/w[[]1[]]/**");
        assert_eq!(glob_anchor(&g), PathBuf::from("/w[1]"));
    }

    #[test]
    fn anchors() {
        assert_eq!(
            glob_anchor("/ws/.git/hooks/**"),
            PathBuf::from("/ws/.git/hooks")
        );
        assert_eq!(
            glob_anchor("/ws/.git/config"),
            PathBuf::from("/ws/.git/config")
        );
        assert_eq!(glob_anchor("/ws/*.key"), PathBuf::from("/ws"));
        assert_eq!(glob_anchor("/**"), PathBuf::from("/"));
    }
}
