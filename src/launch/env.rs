//! Environment sanitisation: the command sees only the variables the profile keeps, without the
//! ones it drops (credentials, agent sockets, loader hooks) unless it allows them by name, plus
//! the ones guard sets.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::policy::EnvPolicy;

fn set_of(patterns: &[String]) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        // Patterns were validated with the profile; an invalid one matches nothing.
        if let Ok(g) = Glob::new(p) {
            b.add(g);
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

/// Filter `vars` through `policy`, then apply `policy.set` and `extra` (guard's own variables,
/// such as TMPDIR). Returns `NAME=value` strings for execve, and the kept names in order.
pub fn sanitize_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    policy: &EnvPolicy,
    extra: &[(String, OsString)],
) -> Vec<CString> {
    let keep = set_of(&policy.keep);
    let drop = set_of(&policy.drop);
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
}
