//! The integration-test harness: a [`Workspace`] builder (a temporary workspace, state dir,
//! home and tool dir) and a [`Guard`] command builder that runs the real `guard` binary.
//!
//! The test process itself is never confined: every sandbox lives in a spawned `guard`.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const GUARD: &str = env!("CARGO_BIN_EXE_guard");
pub const PROBE: &str = env!("CARGO_BIN_EXE_guard-probe");

/// The unprivileged account tests drop to when they run as root.
pub const UNPRIV_USER: &str = "nobody";

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// A temporary test area: `root/ws` (the workspace), `root/state`, `root/home`, `root/bin`
/// (readable and executable under the test profile, holding the probe), `root/outside`.
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
        std::fs::copy(PROBE, bin.join("guard-probe")).expect("copy probe");
        // The unprivileged user may not be able to reach the build directory: give it a copy.
        std::fs::copy(GUARD, bin.join("guard")).expect("copy guard");
        let profile = root.join("test.toml");
        std::fs::write(
            &profile,
            format!(
                "# Test layer: lets the sandbox run the probe.\nname = \"test\"\n[fs]\nread = [\"{}\"]\n",
                bin.display()
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
        self.bin.join("guard-probe").display().to_string()
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
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                UNPRIV_USER,
                "--regid",
                "nogroup",
                "--clear-groups",
                "--",
            ]);
            c.arg(self.bin.join("guard"));
            c
        } else {
            Command::new(GUARD)
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
        ids.sort();
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

/// `which`, for tests that need a tool; `None` makes the test skip with a printed reason.
pub fn tool(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|c| c.is_file())
    })
}
