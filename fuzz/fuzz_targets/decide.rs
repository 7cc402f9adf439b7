//! `guard::policy::decide` with the built-in `agent` profile on requests built from fuzz bytes.
//!
//! Input layout: byte 0 picks the op, byte 1 is a flag set (which fields are present, `fresh`,
//! `creates`), byte 2 picks a prefix for the paths (a write root, a protected tree, `/`, none);
//! the rest is split on 0xff into path, path2, exe, cwd, argv (split on NUL) and a sockaddr.
//! Paths are normalised first, as the supervisor does before it asks.
//!
//! Properties: never panics; the same request gets the same verdict; allow/risky carry errno 0
//! and deny/kill a non-zero errno; a filesystem mutation with any path outside the write roots
//! is never allowed; a filesystem mutation without a path, a rename/link without a second
//! path, and a connect without an address are denied; writing, chmod-ing or deleting an
//! existing (not `fresh`) protected path is denied.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use guard::policy::{decide, load, normalize, Action, Op, Policy, Request, Vars};
use guard::supervisor::decode_sockaddr;
use libfuzzer_sys::fuzz_target;

const PREFIXES: &[&[u8]] = &[
    b"",
    b"/ws/",
    b"/ws/.git/",
    b"/ws/sub/.git/hooks/",
    b"/home/u/",
    b"/tmp/g/",
    b"/var/g/",
    b"/",
    b"/ws",
    b"/dev/",
];

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| {
        let vars = Vars {
            workspace: "/ws".into(),
            home: Some("/home/u".into()),
            tmp: "/tmp/g".into(),
            state: "/var/g".into(),
        };
        let policy = load(&["agent".into()], &vars).expect("the built-in agent profile loads");
        // The path/address properties below hold because agent's own rules can only refuse
        // more: any rule that is not exec-only denies.
        assert!(policy
            .rules
            .iter()
            .all(|r| r.when == [Op::Exec] || r.action == Action::Deny));
        policy
    })
}

fn path_from(prefix: &[u8], bytes: &[u8]) -> PathBuf {
    let mut raw = prefix.to_vec();
    raw.extend_from_slice(bytes);
    normalize(Path::new(&OsString::from_vec(raw)))
}

fuzz_target!(|data: &[u8]| {
    let [op, flags, prefix, rest @ ..] = data else {
        return;
    };
    let policy = policy();
    let op = Op::ALL[usize::from(*op) % Op::ALL.len()];
    let prefix = PREFIXES[usize::from(*prefix) % PREFIXES.len()];
    let mut fields = rest.split(|&b| b == 0xff);
    let mut next = || fields.next().unwrap_or(&[]);
    let (f_path, f_path2, f_exe, f_cwd, f_argv, f_addr) =
        (next(), next(), next(), next(), next(), next());
    let has = |bit: u8| flags & (1 << bit) != 0;

    let path = has(0).then(|| path_from(prefix, f_path));
    let path2 = has(1).then(|| path_from(prefix, f_path2));
    let exe = has(4).then(|| path_from(b"", f_exe));
    let cwd = has(5).then(|| path_from(prefix, f_cwd));
    let argv: Vec<OsString> = if f_argv.is_empty() {
        Vec::new()
    } else {
        f_argv
            .split(|&b| b == 0)
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect()
    };
    let addr = if has(6) {
        decode_sockaddr(f_addr, 1).ok()
    } else {
        None
    };

    let req = Request {
        path: path.as_deref(),
        path2: path2.as_deref(),
        fresh: has(2),
        creates: has(3),
        argv: &argv,
        exe: exe.as_deref(),
        cwd: cwd.as_deref(),
        addr: addr.as_ref(),
        ..Request::new(op)
    };
    let verdict = decide(policy, &req);
    assert_eq!(verdict, decide(policy, &req), "not deterministic");

    let allowed = matches!(verdict.action, Action::Allow | Action::Risky);
    assert_eq!(
        allowed,
        verdict.errno == 0,
        "errno {} with {:?}",
        verdict.errno,
        verdict
    );

    if op.is_fs_mutation() {
        if path.is_none() {
            assert!(!allowed, "{op:?} without a path: {verdict:?}");
        }
        if matches!(op, Op::Rename | Op::Link) && path2.is_none() {
            assert!(!allowed, "{op:?} without a second path: {verdict:?}");
        }
        let under_roots = |p: &Path| policy.fs.write.iter().any(|root| p.starts_with(root));
        for p in [&path, &path2].into_iter().flatten() {
            if !under_roots(p) {
                assert!(
                    !allowed,
                    "{op:?} {p:?} outside the write roots: {verdict:?}"
                );
            }
        }
        let protected = path
            .as_deref()
            .is_some_and(|p| policy.fs.protect_set().is_match(p));
        if protected && !req.fresh && matches!(op, Op::Write | Op::Chmod | Op::Delete) {
            assert!(!allowed, "{op:?} {path:?} is protected: {verdict:?}");
        }
    }
    if op == Op::Connect && addr.is_none() {
        assert!(!allowed, "connect without an address: {verdict:?}");
    }
});
