//! The integration-test harness: a [`Workspace`] builder (a temporary workspace, state dir,
//! home and tool dir) and a [`Guard`] command builder that runs the real `guard` binary.
//!
//! The test process itself is never confined: every sandbox lives in a spawned `guard`.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use crate::bins::{bins, guard_bin};

/// The unprivileged account tests drop to when they run as root.
pub const UNPRIV_USER: &str = "nobody";

/// The command-line prefix that runs a program as [`UNPRIV_USER`], with no supplementary
/// groups: how the tests drop from root.
pub const AS_UNPRIVILEGED: [&str; 7] = [
    "setpriv",
    "--reuid",
    UNPRIV_USER,
    "--regid",
    "nogroup",
    "--clear-groups",
    "--",
];

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A temporary test area: `root/ws` (the workspace), `root/state`, `root/home`, `root/bin`
/// (readable and executable under the test profile), `root/outside`. The probe and the copy of
/// guard the unprivileged user runs are shared by every workspace (see [`bins`]).
pub struct Workspace {
    /// Removes the whole area when the test ends.
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub home: PathBuf,
    pub bin: PathBuf,
    pub outside: PathBuf,
    pub profile: PathBuf,
    pub unprivileged: bool,
}

impl Workspace {
    pub fn new() -> Workspace {
        Self::build(false)
    }

    /// Owned by, and run as, the unprivileged user (when the tests run as root).
    pub fn unprivileged() -> Workspace {
        Self::build(is_root())
    }

    fn build(unprivileged: bool) -> Workspace {
        let dir = tempfile::Builder::new()
            .prefix("guard-it-")
            .tempdir()
            .expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical tempdir");
        let sub = |n: &str| {
            let p = root.join(n);
            std::fs::create_dir_all(&p).expect("mkdir");
            p
        };
        let (ws, state, home, bin, outside) = (
            sub("ws"),
            sub("state"),
            sub("home"),
            sub("bin"),
            sub("outside"),
        );
        let profile = root.join("test.toml");
        std::fs::write(
            &profile,
            format!(
                "# Test layer: lets the sandbox run the probe.\nname = \"test\"\n[fs]\nread = [\"{}\", \"{}\"]\n",
                bin.display(),
                bins().dir.display()
            ),
        )
        .expect("write test profile");
        let w = Workspace {
            _dir: dir,
            root,
            ws,
            state,
            home,
            bin,
            outside,
            profile,
            unprivileged,
        };
        if unprivileged {
            std::fs::set_permissions(&w.root, std::fs::Permissions::from_mode(0o755))
                .expect("chmod root");
            let status = Command::new("chown")
                .args(["-R", &format!("{UNPRIV_USER}:")])
                .arg(&w.root)
                .status()
                .expect("chown");
            assert!(status.success(), "chown to {UNPRIV_USER} failed");
        }
        w
    }

    pub fn probe(&self) -> String {
        bins().probe.display().to_string()
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = if Path::new(rel).is_absolute() {
            PathBuf::from(rel)
        } else {
            self.ws.join(rel)
        };
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir parent");
        }
        std::fs::write(&p, content).expect("write file");
        if self.unprivileged {
            let _ = Command::new("chown")
                .args(["-R", &format!("{UNPRIV_USER}:")])
                .arg(&self.root)
                .status();
        }
        p
    }

    /// A `guard exec` under `profiles` (each a name or a path) plus the test layer.
    pub fn exec(&self, profiles: &[&str]) -> Guard {
        let mut g = self.guard();
        g.arg("exec");
        for p in profiles {
            g.arg("-p").arg(p);
        }
        g.arg("-p").arg(&self.profile);
        g.arg("-w").arg(&self.ws);
        g
    }

    /// A bare `guard` command with this workspace's environment.
    pub fn guard(&self) -> Guard {
        let mut cmd = if self.unprivileged {
            let mut c = Command::new(AS_UNPRIVILEGED[0]);
            c.args(&AS_UNPRIVILEGED[1..]);
            // The build directory may be out of its reach: it runs the shared copy.
            c.arg(&bins().guard);
            c
        } else {
            Command::new(guard_bin())
        };
        cmd.current_dir(&self.ws)
            .env("GUARD_STATE_DIR", &self.state)
            .env("HOME", &self.home)
            .env_remove("XDG_STATE_HOME")
            .env("GUARD_LOG", "warn")
            .stdin(Stdio::null());
        Guard { cmd }
    }

    /// The newest run's audit log, one JSON value per line.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        let runs = self.state.join("runs");
        let mut ids: Vec<_> = std::fs::read_dir(&runs)
            .expect("runs dir")
            .flatten()
            .map(|e| e.path())
            .collect();
        // Ids sort by start time only to the second (then by pid): order runs by the
        // microsecond start time their run.json records.
        let started = |dir: &PathBuf| -> String {
            std::fs::read_to_string(dir.join("run.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| v["started"].as_str().map(str::to_string))
                .unwrap_or_default()
        };
        ids.sort_by_key(|d| (started(d), d.clone()));
        let last = ids.last().expect("at least one run");
        let text = std::fs::read_to_string(last.join("audit.jsonl")).expect("audit log");
        text.lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad audit line {l:?}: {e}"))
            })
            .collect()
    }

    /// Decision events of the newest run.
    pub fn decisions(&self) -> Vec<serde_json::Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["type"] == "decision")
            .collect()
    }

    /// The newest run's calls guard could not judge (rule `decode`), one JSON line each: each
    /// refused where bare the kernel would have answered it.
    pub fn undecodable(&self) -> Vec<String> {
        self.refusals()
            .iter()
            .filter(|r| r["rule"] == "decode")
            .map(|r| r.to_string())
            .collect()
    }

    /// The newest run's decisions that did not allow the call, but for the kernel's own
    /// answers to names that do not resolve (rule `resolve`).
    pub fn refusals(&self) -> Vec<serde_json::Value> {
        self.decisions()
            .into_iter()
            .filter(|d| d["verdict"] != "allow" && d["rule"] != "resolve")
            .collect()
    }
}

pub struct Guard {
    pub cmd: Command,
}

impl Guard {
    pub fn arg(&mut self, a: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.arg(a);
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd.args(args);
        self
    }

    pub fn env(&mut self, k: &str, v: impl AsRef<OsStr>) -> &mut Self {
        self.cmd.env(k, v);
        self
    }

    /// Run `-- argv...` and collect the output.
    pub fn run<S: AsRef<OsStr>>(&mut self, argv: &[S]) -> Out {
        self.cmd.arg("--").args(argv);
        Out(self.cmd.output().expect("spawn guard"))
    }

    /// Run without appending anything.
    pub fn output(&mut self) -> Out {
        Out(self.cmd.output().expect("spawn guard"))
    }
}

pub struct Out(pub Output);

impl Out {
    pub fn code(&self) -> i32 {
        self.0.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr).into_owned()
    }
    /// Panic with both streams unless the exit status is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            code,
            "unexpected exit status\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout(),
            self.stderr()
        );
        self
    }
}

/// The probe's verdict line (`ok` or `errno N NAME`), last line of stdout.
pub fn probe_result(out: &Out) -> String {
    out.stdout().lines().last().unwrap_or("").to_string()
}

/// `program` with `args`, then `inner`'s own program and arguments, with `inner`'s environment
/// and directory: a wrapper around a `guard` command line whose last word is `exec "$@"` (a
/// network namespace, a descriptor limit, a timeout).
pub fn wrap<I, S>(program: &str, args: I, inner: &Command) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args)
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(d) = inner.get_current_dir() {
        cmd.current_dir(d);
    }
    cmd
}

/// Whether one of `tools` is missing (the test then skips, and says which).
pub fn lacks(tools: &[&str]) -> bool {
    let missing = tools.iter().find(|t| tool(t).is_none());
    if let Some(t) = missing {
        eprintln!("skipped: {t} is not installed");
    }
    missing.is_some()
}

/// `which`, for tests that need a tool; `None` makes the test skip with a printed reason.
pub fn tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}

/// One line per entry of a tree, for readable failure messages next to
/// [`guard::journal::tree_digest`]: `path -> kind mode content-hash|target`.
pub type Snapshot = std::collections::BTreeMap<PathBuf, String>;

/// Describe every entry under `root` (names relative to it); see [`Snapshot`].
pub fn snapshot(root: &Path) -> Snapshot {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    fn walk(root: &Path, rel: &Path, out: &mut Snapshot) {
        let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
            return;
        };
        for e in rd.flatten() {
            let child = rel.join(e.file_name());
            let abs = root.join(&child);
            let Ok(meta) = std::fs::symlink_metadata(&abs) else {
                continue;
            };
            let ft = meta.file_type();
            let mode = meta.mode() & 0o7777;
            let desc = if ft.is_dir() {
                walk(root, &child, out);
                format!("dir {mode:o}")
            } else if ft.is_symlink() {
                format!(
                    "symlink -> {:?}",
                    std::fs::read_link(&abs).unwrap_or_default()
                )
            } else if ft.is_file() {
                let content = std::fs::read(&abs).unwrap_or_default();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                content.hash(&mut h);
                format!("file {mode:o} {} bytes #{:016x}", content.len(), h.finish())
            } else {
                format!("other {mode:o}")
            };
            out.insert(child, desc);
        }
    }
    let mut out = Snapshot::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// The differences between two snapshots, one line each, at most `limit` lines.
pub fn snapshot_diff(before: &Snapshot, after: &Snapshot, limit: usize) -> String {
    let mut lines = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => lines.push(format!("missing  {}: was {b}", p.display())),
            Some(a) if a != b => lines.push(format!("changed  {}: {b} => {a}", p.display())),
            Some(_) => {}
        }
    }
    for (p, a) in after {
        if !before.contains_key(p) {
            lines.push(format!("extra    {}: {a}", p.display()));
        }
    }
    let n = lines.len();
    lines.truncate(limit);
    if n > limit {
        lines.push(format!("... and {} more", n - limit));
    }
    lines.join("\n")
}

/// The state of a workspace that a rollback must restore: the tree digest (the proof) and a
/// snapshot (to say what differs when it is not restored).
pub struct TreeState {
    pub digest: String,
    pub snapshot: Snapshot,
    /// The hard links, which the digest does not cover: each non-directory with more than
    /// one link, its link count and the names of its inode in the tree.
    pub links: Snapshot,
}

impl TreeState {
    pub fn of(root: &Path) -> TreeState {
        TreeState {
            digest: guard::journal::tree_digest(root, &[]).expect("tree digest"),
            snapshot: snapshot(root),
            links: links(root),
        }
    }

    /// Panic, listing the differences, unless `root` has exactly this state again, hard
    /// links included.
    pub fn assert_restored(&self, root: &Path, context: &str) {
        let now = guard::journal::tree_digest(root, &[]).expect("tree digest");
        if now != self.digest {
            panic!(
                "{context}: the tree digest differs after the rollback\nbefore {}\nafter  {}\n{}",
                self.digest,
                now,
                snapshot_diff(&self.snapshot, &snapshot(root), 40)
            );
        }
        let now = links(root);
        if now != self.links {
            panic!(
                "{context}: the hard links differ after the rollback\n{}",
                snapshot_diff(&self.links, &now, 40)
            );
        }
    }
}

/// Each non-directory under `root` with more than one link: its link count and the names of
/// its inode under `root`.
fn links(root: &Path) -> Snapshot {
    use std::os::unix::fs::MetadataExt;
    fn walk(root: &Path, rel: &Path, found: &mut Vec<(PathBuf, u64, u64)>) {
        let Ok(rd) = std::fs::read_dir(root.join(rel)) else {
            return;
        };
        for e in rd.flatten() {
            let child = rel.join(e.file_name());
            let Ok(meta) = std::fs::symlink_metadata(root.join(&child)) else {
                continue;
            };
            if meta.is_dir() {
                walk(root, &child, found);
            } else if meta.nlink() > 1 {
                found.push((child, meta.ino(), meta.nlink()));
            }
        }
    }
    let mut found = Vec::new();
    walk(root, Path::new(""), &mut found);
    found
        .iter()
        .map(|(path, ino, nlink)| {
            let mut names: Vec<String> = found
                .iter()
                .filter(|(_, i, _)| i == ino)
                .map(|(p, _, _)| p.display().to_string())
                .collect();
            names.sort();
            (path.clone(), format!("{nlink} links: {}", names.join(", ")))
        })
        .collect()
}

/// A small deterministic pseudo-random generator (xorshift64*), for reproducible trees,
/// workloads and delays.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Where [`populate`] puts its file number `i`, relative to the tree's root.
pub fn tree_file(i: usize) -> PathBuf {
    let top = format!("d{}", i % 10);
    let sub = format!("s{}", (i / 10) % 7);
    let dir = if i % 13 == 0 {
        PathBuf::from(&top).join(&sub).join("deep/er/still")
    } else if i % 3 == 0 {
        PathBuf::from(&top)
    } else {
        PathBuf::from(&top).join(&sub)
    };
    let name = match i {
        1 => "name with spaces.txt".to_string(),
        2 => "ünïcödé-файл.txt".to_string(),
        _ => format!("f{i:05}.{}", ["txt", "rs", "bin", "md"][i % 4]),
    };
    dir.join(name)
}

/// Fill `dir` with a varied tree of `files` regular files: nested directories (some deep, some
/// empty, one 0700), contents of many sizes (empty, small, a few of 64 KiB), modes 0600, 0644
/// and 0755, symlinks (to a file, to a directory, dangling, absolute), a hard link, and names
/// with spaces, non-ASCII and non-UTF-8 bytes. Deterministic for a given `seed`.
pub fn populate(dir: &Path, files: usize, seed: u64) {
    use std::os::unix::ffi::OsStrExt;
    let mut rng = Rng::new(seed);
    std::fs::create_dir_all(dir).expect("mkdir tree");
    let mut written = Vec::new();
    for i in 0..files {
        let p = dir.join(tree_file(i));
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let content: Vec<u8> = match rng.below(20) {
            0 => Vec::new(),
            1 => (0..65536u32)
                .map(|k| (k.wrapping_mul(31) ^ i as u32) as u8)
                .collect(),
            _ => format!("file {i} seed {seed}\n")
                .repeat(1 + rng.below(40) as usize)
                .into_bytes(),
        };
        std::fs::write(&p, content).expect("write file");
        let mode = match i % 7 {
            0 => 0o600,
            1 => 0o755,
            _ => 0o644,
        };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        written.push(p);
    }
    let raw = dir.join(std::ffi::OsStr::from_bytes(b"raw-\xff\xfe-name"));
    std::fs::write(&raw, b"not utf-8 name\n").expect("write raw name");
    for e in ["empty", "d1/empty", "d2/s3/empty/nested-empty"] {
        std::fs::create_dir_all(dir.join(e)).expect("mkdir empty");
    }
    std::fs::create_dir_all(dir.join("private")).expect("mkdir private");
    std::fs::write(dir.join("private/key"), "k\n").expect("write");
    std::fs::set_permissions(dir.join("private"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let sym = |target: &str, link: &str| {
        std::os::unix::fs::symlink(target, dir.join(link)).expect("symlink");
    };
    sym("d0", "link-to-dir");
    sym("../d0/s0", "d1/link-to-subdir");
    sym("does/not/exist", "dangling");
    sym("/usr/bin/env", "absolute");
    if let Some(first) = written.iter().find(|p| p.starts_with(dir.join("d3"))) {
        let rel = first.strip_prefix(dir).expect("under dir");
        sym(&format!("../{}", rel.display()), "d4/link-to-file");
        std::fs::hard_link(first, dir.join("d5/hard-link")).expect("hard link");
    }
}

impl Workspace {
    /// The workspace's tree digest and snapshot.
    pub fn state(&self) -> TreeState {
        TreeState::of(&self.ws)
    }

    /// Events of the newest run with this `type`.
    pub fn events(&self, kind: &str) -> Vec<serde_json::Value> {
        self.audit()
            .into_iter()
            .filter(|e| e["type"] == kind)
            .collect()
    }

    /// The id of the checkpoint taken when the command whose line holds `command` started
    /// (the first such), for `guard rollback --to`.
    pub fn checkpoint_of(&self, command: &str) -> String {
        let cp = self
            .events("checkpoint")
            .into_iter()
            .find(|c| c["reason"].as_str().is_some_and(|r| r.contains(command)))
            .unwrap_or_else(|| panic!("no checkpoint for a command with `{command}`"));
        cp["id"].as_str().expect("checkpoint id").to_string()
    }

    /// Write a profile file next to the workspace and return its path, for
    /// `exec(&["agent", &path])`.
    pub fn profile_file(&self, name: &str, text: &str) -> String {
        let p = self.root.join(format!("{name}.toml"));
        std::fs::write(&p, text).expect("write profile");
        p.display().to_string()
    }

    /// Run a setup script with `sh -c` in the workspace, unconfined; panics unless it succeeds.
    pub fn sh(&self, script: &str) -> String {
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .stdin(Stdio::null())
            .output()
            .expect("spawn sh");
        assert!(
            out.status.success(),
            "setup script failed: {script}\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
