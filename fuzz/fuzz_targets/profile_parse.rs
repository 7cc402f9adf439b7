//! `guard::policy::check` (the loader behind `guard profile check FILE`) on arbitrary bytes
//! written to a profile file in a private directory.
//!
//! Properties: never panics; an error's message is non-empty, starts with a lowercase letter
//! and its first line has no trailing period; bytes that are not UTF-8 are a read error, not a
//! panic; a profile that loads is valid: its fs roots are absolute and normalised, its
//! protect globs absolute, its digest 64 hex digits, its chain names the file, each deny/kill
//! rule carries an errno and an id guard does not reserve, and `decide` answers a handful of requests without panicking, denying
//! a write with no path unless one of the profile's own rules decided.
//!
//! `extends` is followed only inside the private directory (it also holds `other.toml`, which
//! extends `p.toml` back, to exercise cycle detection): a fuzzed `extends = "/dev/zero"` would
//! otherwise read forever. Such inputs are skipped.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use guard::policy::{check, decide, normalize, Action, Op, Request, RuleId, Vars};
use libfuzzer_sys::fuzz_target;

struct Dir {
    _dir: tempfile::TempDir,
    root: PathBuf,
    profile: PathBuf,
}

fn dir() -> &'static Dir {
    static DIR: OnceLock<Dir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("guard-fuzz-profile-")
            .tempdir()
            .expect("a temporary directory");
        let root = normalize(&dir.path().canonicalize().expect("the temp dir resolves"));
        std::fs::write(root.join("other.toml"), "extends = \"p.toml\"\n")
            .expect("write other.toml");
        Dir {
            profile: root.join("p.toml"),
            root,
            _dir: dir,
        }
    })
}

fn vars() -> Vars {
    Vars {
        workspace: "/ws".into(),
        home: Some("/home/u".into()),
        tmp: "/tmp/g".into(),
        state: "/var/g".into(),
    }
}

/// Whether loading `text` only ever reads files inside `root` (built-ins read nothing).
fn stays_inside(text: &str, root: &Path) -> bool {
    let Ok(table) = text.parse::<toml::Table>() else {
        return true;
    };
    let Some(toml::Value::String(parent)) = table.get("extends") else {
        return true;
    };
    if !(parent.contains('/') || parent.ends_with(".toml")) {
        return true;
    }
    normalize(&root.join(parent)).starts_with(root)
}

fuzz_target!(|data: &[u8]| {
    let dir = dir();
    if let Ok(text) = std::str::from_utf8(data) {
        if !stays_inside(text, &dir.root) {
            return;
        }
    }
    std::fs::write(&dir.profile, data).expect("write the profile");
    let vars = vars();
    match check(&dir.profile, &vars) {
        Err(e) => {
            let msg = e.to_string();
            let first = msg.chars().next();
            assert!(first.is_some_and(|c| c.is_lowercase()), "message {msg:?}");
            let line = msg.lines().next().unwrap_or_default();
            assert!(
                !line.ends_with('.'),
                "first line ends with a period: {msg:?}"
            );
        }
        Ok(policy) => {
            assert!(
                std::str::from_utf8(data).is_ok(),
                "non-UTF-8 profile loaded"
            );
            for p in policy.fs.read.iter().chain(&policy.fs.write) {
                assert!(p.is_absolute() && normalize(p) == *p, "fs root {p:?}");
            }
            for g in &policy.fs.protect {
                assert!(g.starts_with('/'), "protect glob {g:?}");
            }
            assert_eq!(policy.digest.len(), 64);
            assert!(policy.digest.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(policy
                .sources
                .first()
                .is_some_and(|s| s.ends_with("p.toml")));
            for rule in &policy.rules {
                assert!(!RuleId::reserved(&rule.id), "reserved rule id {} accepted", rule.id);
                if matches!(rule.action, Action::Deny | Action::Kill) {
                    assert_ne!(rule.errno, 0, "rule {} denies without an errno", rule.id);
                }
            }
            let outside = PathBuf::from("/nowhere/x");
            for op in Op::ALL {
                let bare = decide(&policy, &Request::new(op));
                let by_rule = matches!(&bare.rule, RuleId::Profile(id) if policy.rules.iter().any(|r| r.id == *id));
                if op.is_fs_mutation() && !by_rule && policy.mode == guard::policy::Mode::Enforce {
                    assert_eq!(bare.action, Action::Deny, "{op:?} without a path: {bare:?}");
                }
                decide(
                    &policy,
                    &Request {
                        path: Some(&outside),
                        ..Request::new(op)
                    },
                );
            }
        }
    }
});
