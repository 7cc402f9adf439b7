//! Environment sanitisation: the command sees only the variables the profile keeps, without the
//! ones it drops (credentials, agent sockets, loader hooks) unless it allows them by name, plus
//! the ones guard sets.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::policy::EnvPolicy;

/// Variable-name globs. Patterns of plain characters and single `*`s (every built-in one) are
/// matched here directly, `*` standing for any run of characters as in a glob; only the others
/// are compiled into a [`GlobSet`], which for the base profile's `drop` list alone cost about
/// a third of a millisecond at every start.
struct NameSet {
    plain: Vec<String>,
    globs: Option<GlobSet>,
}

/// Whether `pattern` is plain characters and single `*`s, with nothing else a glob treats
/// specially.
fn is_plain(pattern: &str) -> bool {
    !pattern.contains("**") && !pattern.contains(['?', '[', ']', '{', '}', '\\'])
}

/// Whether `name` matches the plain pattern `pattern`. Allocates nothing: every variable is
/// matched against every pattern of `keep` and `drop` at each start (about forty variables
/// against forty patterns here).
fn plain_match(pattern: &str, name: &str) -> bool {
    let Some((first, tail)) = pattern.split_once('*') else {
        // No `*`: the whole name.
        return pattern == name;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let (middle, last) = tail.rsplit_once('*').unwrap_or(("", tail));
    for part in middle.split('*') {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

impl NameSet {
    fn new(patterns: &[String]) -> NameSet {
        let (plain, other): (Vec<&String>, Vec<&String>) =
            patterns.iter().partition(|p| is_plain(p));
        let globs = (!other.is_empty()).then(|| {
            let mut b = GlobSetBuilder::new();
            for p in other {
                // Patterns were validated with the profile; an invalid one matches nothing.
                if let Ok(g) = Glob::new(p) {
                    b.add(g);
                }
            }
            b.build().unwrap_or_else(|_| GlobSet::empty())
        });
        NameSet {
            plain: plain.into_iter().cloned().collect(),
            globs,
        }
    }

    fn is_match(&self, name: &str) -> bool {
        self.plain.iter().any(|p| plain_match(p, name))
            || self.globs.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// Filter `vars` through `policy`, then apply `policy.set` and `extra` (guard's own variables,
/// such as TMPDIR). Returns `NAME=value` strings for execve, and the kept names in order.
pub fn sanitize_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    policy: &EnvPolicy,
    extra: &[(String, OsString)],
) -> Vec<CString> {
    let keep = NameSet::new(&policy.keep);
    let drop = NameSet::new(&policy.drop);
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in vars {
        let name = k.to_string_lossy();
        let allowed = policy.allow.iter().any(|a| *a == name);
        if keep.is_match(name.as_ref()) && (allowed || !drop.is_match(name.as_ref())) {
            out.push((k, v));
        }
    }
    let mut set = |k: &str, v: OsString| {
        out.retain(|(name, _)| name != k);
        out.push((OsString::from(k), v));
    };
    for (k, v) in &policy.set {
        set(k, OsString::from(v));
    }
    for (k, v) in extra {
        set(k, v.clone());
    }
    out.into_iter()
        .filter_map(|(k, v)| {
            let mut bytes = k.into_vec();
            bytes.push(b'=');
            bytes.extend(v.into_vec());
            CString::new(bytes).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_secrets_keeps_the_rest_and_sets_extra() {
        let policy = EnvPolicy {
            keep: vec!["*".into()],
            drop: vec!["AWS_*".into(), "SSH_AUTH_SOCK".into(), "*_TOKEN".into()],
            allow: vec!["NPM_TOKEN".into()],
            set: vec![("FOO".into(), "bar".into())],
        };
        let vars = [
            ("PATH", "/bin"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("SSH_AUTH_SOCK", "/tmp/s"),
            ("TMPDIR", "/tmp"),
            ("NPM_TOKEN", "n"),
            ("GH_TOKEN", "g"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = sanitize_env(vars, &policy, &[("TMPDIR".into(), "/run/t".into())]);
        let env: Vec<String> = env
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            env,
            ["PATH=/bin", "NPM_TOKEN=n", "FOO=bar", "TMPDIR=/run/t"]
        );
    }

    #[test]
    fn plain_patterns_match_as_globs_do() {
        let patterns = [
            "*",
            "AWS_*",
            "*_TOKEN",
            "*_API_KEY",
            "SSH_AUTH_SOCK",
            "A*B*C",
            "*A*",
            "**",
            "A?C",
            "[AB]*",
            "",
            "AB*AB",
            "*AB*AB",
            "X/*",
            "{A,B}*",
        ];
        let names = [
            "",
            "A",
            "AB",
            "ABC",
            "AXBXC",
            "ABAB",
            "ABABAB",
            "AWS_",
            "AWS_SECRET",
            "GH_TOKEN",
            "_TOKEN",
            "TOKEN",
            "SSH_AUTH_SOCK",
            "SSH_AUTH_SOCKET",
            "X/Y",
            "ACB",
            "BAB",
            "AAB",
        ];
        for p in patterns {
            let glob = Glob::new(p).map(|g| g.compile_matcher());
            let ours = NameSet::new(&[p.to_string()]);
            for n in names {
                let expected = glob.as_ref().is_ok_and(|g| g.is_match(n));
                assert_eq!(ours.is_match(n), expected, "pattern {p:?}, name {n:?}");
            }
        }
    }
}
