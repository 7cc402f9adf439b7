//! Bare versus under guard, with the same credentials: the pieces the fidelity comparisons
//! share (pjdfstest in `pjdfstest.rs`, real test suites and build workflows in
//! `fidelity_suites.rs`).
//!
//! Both sides run the same argv through `env -i` with the same small environment, in the same
//! kind of directory. Without `--keep-caps`, guard leaves a root caller's command no
//! capabilities and sets no_new_privs; [`bare`] does the same with `setpriv`, and
//! [`bare_wrapper_leaves_the_credentials_guard_leaves`] checks that the two agree.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{is_root, lacks, snapshot, Out, Snapshot, Workspace};

/// The environment both sides give the command (`env -i` first, then these).
pub fn clean_env(path: &str, home: &Path, tmp: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec!["env".into(), "-i".into()];
    v.push(format!("PATH={path}").into());
    v.push(format!("HOME={}", home.display()).into());
    v.push(format!("TMPDIR={}", tmp.display()).into());
    v.push("LANG=C.UTF-8".into());
    v.push("LC_ALL=C.UTF-8".into());
    v
}

/// `argv` run bare in `dir` with the credentials guard would leave it: as root, no capabilities
/// in any set and no_new_privs (`keep_caps`: only no_new_privs, as `guard exec --keep-caps`).
pub fn bare(argv: &[OsString], dir: &Path, keep_caps: bool) -> Command {
    let mut c = Command::new("setpriv");
    c.arg("--no-new-privs");
    if is_root() && !keep_caps {
        c.args([
            "--bounding-set",
            "-all",
            "--inh-caps",
            "-all",
            "--ambient-caps",
            "-all",
        ]);
    }
    c.arg("--").args(argv).current_dir(dir).stdin(Stdio::null());
    c
}

/// Run a bare command and collect its output.
pub fn run_bare(argv: &[OsString], dir: &Path, keep_caps: bool) -> Out {
    Out(bare(argv, dir, keep_caps)
        .output()
        .expect("spawn bare command"))
}

/// Extra roots a comparison's test layer adds to `agent`: what the tools it runs need to read
/// (their installation) and, rarely, to write.
#[derive(Default, Clone, Copy)]
pub struct Roots<'a> {
    pub read: &'a [&'a Path],
    pub write: &'a [&'a Path],
    /// `fs.allow-setid`: a suite that sets set-id bits on purpose compares the kernel's
    /// answers, not agent's refusal of them (policy, EPERM as rule `fs.setid`).
    pub allow_setid: bool,
}

/// Run `argv` under `guard exec -p agent` plus the test layer and `roots`, from `dir` inside
/// the workspace.
pub fn run_guarded(
    w: &Workspace,
    argv: &[OsString],
    dir: &Path,
    roots: Roots,
    keep_caps: bool,
) -> Out {
    let layer = w.root.join("fidelity.toml");
    let list = |paths: &[&Path]| -> String {
        paths
            .iter()
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        &layer,
        format!(
            "# Test layer: the tools the comparison runs.\nname = \"fidelity\"\n[fs]\nread = [{}]\nwrite = [{}]\nallow-setid = {}\n",
            list(roots.read),
            list(roots.write),
            roots.allow_setid
        ),
    )
    .expect("write fidelity layer");
    let mut g = w.exec(&["agent", &layer.display().to_string()]);
    if keep_caps {
        g.arg("--keep-caps");
    }
    g.cmd.current_dir(dir);
    g.run(argv)
}

/// The capability and no_new_privs lines of /proc/self/status as a command sees them.
fn credentials(out: &Out) -> String {
    out.stdout()
        .lines()
        .filter(|l| l.starts_with("Cap") || l.starts_with("NoNewPrivs"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn bare_wrapper_leaves_the_credentials_guard_leaves() {
    if lacks(&["setpriv"]) {
        return;
    }
    let w = Workspace::new();
    let argv: Vec<OsString> = ["grep", "-E", "^(Cap|NoNewPrivs)", "/proc/self/status"]
        .iter()
        .map(Into::into)
        .collect();
    for keep_caps in [false, true] {
        let bare = run_bare(&argv, &w.ws, keep_caps);
        let guarded = run_guarded(&w, &argv, &w.ws, Roots::default(), keep_caps);
        guarded.expect_code(0);
        assert!(!credentials(&bare).is_empty(), "{}", bare.stderr());
        assert_eq!(
            credentials(&bare),
            credentials(&guarded),
            "keep_caps={keep_caps}: the bare wrapper and guard leave different credentials"
        );
    }
}

/// A snapshot of `root` with `normalize` applied to each entry (`None` drops it): a build's
/// outputs, compared by name and kind where their content carries times or random names.
pub fn tree(root: &Path, normalize: impl Fn(&Path, &str) -> Option<String>) -> Snapshot {
    snapshot(root)
        .into_iter()
        .filter_map(|(p, d)| normalize(&p, &d).map(|d| (p, d)))
        .collect()
}

/// The entry's kind alone: `file`, `dir`, `symlink`, `other`.
pub fn kind(desc: &str) -> String {
    desc.split(' ').next().unwrap_or("").to_string()
}

/// Where [`report`] and the suites keep raw outputs for a person to read after the test.
pub fn artifacts(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fidelity")
        .join(name);
    std::fs::create_dir_all(&dir).expect("mkdir artifacts");
    dir
}

/// Lines that differ between two keyed results (`bare` / `guard`), grouped under `what`, at
/// most `limit` lines; empty when they agree.
pub fn differences(
    what: &str,
    bare: &BTreeMap<String, String>,
    guard: &BTreeMap<String, String>,
    limit: usize,
) -> String {
    let mut lines = Vec::new();
    for (k, b) in bare {
        match guard.get(k) {
            None => lines.push(format!("  {k}: bare {b}, guard (none)")),
            Some(g) if g != b => lines.push(format!("  {k}: bare {b}, guard {g}")),
            Some(_) => {}
        }
    }
    for (k, g) in guard {
        if !bare.contains_key(k) {
            lines.push(format!("  {k}: bare (none), guard {g}"));
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    let n = lines.len();
    lines.truncate(limit);
    if n > limit {
        lines.push(format!("  ... and {} more", n - limit));
    }
    format!("{what}: {n} differ\n{}\n", lines.join("\n"))
}

/// The directory both sides run in: the workspace itself, as a checkout would be (so the
/// profile's `transaction.exclude` paths, `target/` and the like, apply as they do for a user),
/// and the same path on both sides, so that paths recorded in outputs agree.
pub fn run_dir(w: &Workspace) -> PathBuf {
    w.ws.clone()
}

/// Remove everything inside `dir`, keeping `dir`.
fn clear(dir: &Path) {
    for e in std::fs::read_dir(dir).expect("read run dir").flatten() {
        let p = e.path();
        let gone = if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        gone.unwrap_or_else(|err| panic!("remove {}: {err}", p.display()));
    }
}

/// Run `argv` bare, then under guard (without `--keep-caps`), each time in a fresh
/// [`run_dir`] prepared by `setup`, and `collect` what each side (`bare`, `guard`) left there;
/// the bare side's
/// directory is removed (outside guard) before the guarded side starts.
pub fn both<R>(
    w: &Workspace,
    setup: impl Fn(&Path),
    argv: &[OsString],
    roots: Roots,
    collect: impl Fn(&str, &Path, &Out) -> R,
) -> ((Out, R), (Out, R)) {
    let dir = run_dir(w);
    std::fs::create_dir_all(&dir).expect("mkdir run");
    setup(&dir);
    let bare = run_bare(argv, &dir, false);
    let rb = collect("bare", &dir, &bare);
    clear(&dir);
    setup(&dir);
    let guarded = run_guarded(w, argv, &dir, roots, false);
    let rg = collect("guard", &dir, &guarded);
    ((bare, rb), (guarded, rg))
}

/// A snapshot keyed by display strings, for [`differences`].
pub fn keyed(s: &Snapshot) -> BTreeMap<String, String> {
    s.iter()
        .map(|(p, d)| (p.display().to_string(), d.clone()))
        .collect()
}

/// Convert argv pieces.
pub fn args<I, S>(items: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    items.into_iter().map(Into::into).collect()
}
