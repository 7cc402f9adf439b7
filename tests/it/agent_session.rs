//! A scripted agent session, bare and under guard, in a repository that existed before the
//! run: edit and commit, branch, remote add and push -u to a bare remote served by
//! `git daemon` on loopback, submodule add, npm install of a local package, pip install into a
//! `.venv` of a local wheel, cargo build of a fresh crate (offline), then the test suites of a
//! crate, a Python project and an npm project. Under `agent` and under `ci` (with a
//! ~/.gitconfig present) it must give what it gives bare, with zero refusals in the audit log.
//! Everything is local: no registry, no internet.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::fidelity_suites::python;
use crate::util::{tool, Out, Workspace};

/// Fixed times, so commits have the same ids on both sides.
const DATE: &str = "2026-12-02T10:00:00Z";

/// `git daemon` serving `base` on a loopback port, with pushes allowed; stopped on drop.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) port: u16,
}

impl Daemon {
    pub(crate) fn start(base: &Path) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Daemon::start_on(base, port)
    }

    /// On a given port (--reuseaddr: the port of a daemon just stopped), so that URLs the
    /// session records (a submodule's, in .gitmodules and so in a commit) are the same.
    fn start_on(base: &Path, port: u16) -> Daemon {
        // git-daemon itself, not `git daemon`: git runs its dashed programs as a child, which
        // a kill of `git` would leave behind, still listening.
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .expect("git --exec-path");
        let exec_path = String::from_utf8_lossy(&exec_path.stdout)
            .trim()
            .to_string();
        let mut child = Command::new(Path::new(&exec_path).join("git-daemon"))
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start git daemon");
        // Ready when it accepts a connection (bounded: it listens within milliseconds).
        for _ in 0..500 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Daemon { child, port };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("git daemon did not listen on port {port}");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sh(dir: &Path, script: &str, env: &[(String, String)]) {
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "setup failed: {script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The tools the session needs, or why the test is skipped.
struct Tools {
    sysroot: PathBuf,
    python: PathBuf,
    python_prefix: PathBuf,
}

fn tools() -> Result<Tools, String> {
    for t in ["git", "npm", "node", "cc"] {
        if tool(t).is_none() {
            return Err(format!("{t} is not installed"));
        }
    }
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|p| p.join("bin/cargo").is_file())
        .ok_or("no rust toolchain (rustc --print sysroot)")?;
    let (python, python_prefix) = python().ok_or("python3 is not installed")?;
    Ok(Tools {
        sysroot,
        python,
        python_prefix,
    })
}

/// Everything the session starts from: the repository, the remotes' source, the local
/// packages, the environment both sides share.
struct Session {
    w: Workspace,
    tools: Tools,
    env: Vec<(String, String)>,
}

impl Session {
    fn new() -> Result<Session, String> {
        let tools = tools()?;
        let w = Workspace::new();
        write(
            &w.home.join(".gitconfig"),
            "[user]\n\tname = Home Config\n\temail = home@example.invalid\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n",
        );
        let path = format!(
            "{}/bin:{}/bin:/usr/local/bin:/usr/bin:/bin",
            tools.sysroot.display(),
            tools.python_prefix.display()
        );
        let mut env: Vec<(String, String)> = [
            ("PATH", path.as_str()),
            ("LANG", "C.UTF-8"),
            ("GIT_AUTHOR_NAME", "Agent"),
            ("GIT_AUTHOR_EMAIL", "agent@example.invalid"),
            ("GIT_COMMITTER_NAME", "Agent"),
            ("GIT_COMMITTER_EMAIL", "agent@example.invalid"),
            ("GIT_AUTHOR_DATE", DATE),
            ("GIT_COMMITTER_DATE", DATE),
            ("CARGO_NET_OFFLINE", "true"),
            ("CARGO_TERM_COLOR", "never"),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
            ("npm_config_update_notifier", "false"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        env.push(("PYTHON".into(), tools.python.display().to_string()));
        env.push(("BIN".into(), w.bin.display().to_string()));
        let s = Session { w, tools, env };
        s.packages();
        Ok(s)
    }

    /// A local npm package and a local wheel in `bin` (readable under guard).
    fn packages(&self) {
        let w = &self.w;
        let src = w.root.join("npm-src/fidsess");
        write(
            &src.join("package.json"),
            r#"{"name":"fidsess","version":"1.0.0","main":"index.js"}"#,
        );
        write(&src.join("index.js"), "module.exports = (x) => x * 2;\n");
        let status = Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(&w.bin)
            .current_dir(&src)
            .env("npm_config_cache", w.root.join("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .stdout(Stdio::null())
            .status()
            .expect("npm pack");
        assert!(status.success(), "npm pack");
        let wheel = r#"
import base64, hashlib, sys, zipfile
files = {
    "sesspkg/__init__.py": "def twice(x):\n    return x * 2\n",
    "sesspkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: sesspkg\nVersion: 1.0\n",
    "sesspkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    d = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={d},{len(text.encode())}")
record.append("sesspkg-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("sesspkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
"#;
        let status = Command::new(&self.tools.python)
            .args(["-c", wheel])
            .arg(w.bin.join("sesspkg-1.0-py3-none-any.whl"))
            .status()
            .expect("write the wheel");
        assert!(status.success(), "wheel");
    }

    /// The state before each side runs: a repository with history, and fresh remotes.
    fn reset(&self) {
        let w = &self.w;
        for d in [w.ws.join("repo"), w.root.join("srv")] {
            if d.exists() {
                std::fs::remove_dir_all(&d).expect("clean");
            }
        }
        let env = &self.env;
        let srv = w.root.join("srv");
        std::fs::create_dir_all(&srv).expect("mkdir srv");
        sh(&srv, "git init -q --bare remote.git && git init -q lib && cd lib && echo lib > lib.txt && git add lib.txt && git commit -qm lib && cd .. && git clone -q --bare lib lib.git", env);
        let repo = w.ws.join("repo");
        std::fs::create_dir_all(&repo).expect("mkdir repo");
        write(&repo.join("README.md"), "# project\n");
        write(
            &repo.join("tiny/Cargo.toml"),
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        write(
            &repo.join("tiny/src/main.rs"),
            "fn main() { println!(\"tiny {}\", tiny_add(2, 3)); }\nfn tiny_add(a: u32, b: u32) -> u32 { a + b }\n#[cfg(test)]\nmod tests { #[test] fn adds() { assert_eq!(super::tiny_add(2, 3), 5); } }\n",
        );
        write(&repo.join(".gitignore"), "target/\nnode_modules/\n.venv/\n");
        sh(
            &repo,
            "git init -q -b main && git add -A && git commit -qm initial",
            env,
        );
    }

    /// The session's script; `git_config` adds the steps that write `.git/config`.
    fn script(&self, port: u16, git_config: bool) -> String {
        let remote = format!("git://127.0.0.1:{port}");
        let config_steps = if git_config {
            format!(
                "git remote add origin {remote}/remote.git\n\
                 git push -q -u origin feature 2>&1\n\
                 git submodule add -q {remote}/lib.git lib 2>&1\n\
                 git commit -qm 'agent: add lib'\n\
                 git remote -v\n\
                 git rev-parse origin/feature\n\
                 git submodule status\n"
            )
        } else {
            String::new()
        };
        format!(
            "set -e\ncd repo\n\
             echo 'a line from the agent' >> README.md\n\
             git add README.md && git commit -qm 'agent: edit README'\n\
             git checkout -q -b feature\n\
             echo feature > feature.txt && git add feature.txt && git commit -qm 'agent: feature'\n\
             {config_steps}\
             mkdir -p web && cd web && echo '{{\"name\":\"web\",\"version\":\"1.0.0\",\"private\":true}}' > package.json\n\
             npm install --no-audit --no-fund --offline --no-progress \"$BIN/fidsess-1.0.0.tgz\" >/dev/null 2>../npm.err\n\
             node -e \"console.log('npm', require('fidsess')(21))\"\n\
             cd ..\n\
             \"$PYTHON\" -m venv .venv\n\
             .venv/bin/pip install -q --no-index --no-cache-dir \"$BIN/sesspkg-1.0-py3-none-any.whl\"\n\
             .venv/bin/python -c 'import sesspkg; print(\"pip\", sesspkg.twice(4))'\n\
             cd tiny && cargo build -q --offline && ./target/debug/tiny && cd ..\n\
             echo '--- history'\n\
             git log --all --format='%H %s'\n\
             git branch -vv --format='%(refname:short) %(upstream:short)'\n\
             git status --porcelain --untracked-files=no\n"
        )
    }

    fn bare(&self, script: &str) -> Out {
        let tmp = self.w.root.join("tmp-bare");
        std::fs::create_dir_all(&tmp).expect("mkdir");
        Out(Command::new("sh")
            .args(["-c", script])
            .current_dir(&self.w.ws)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("HOME", &self.w.home)
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .output()
            .expect("bare session"))
    }

    fn guarded(&self, profile: &str, script: &str) -> Out {
        let w = &self.w;
        let layer = w.profile_file(
            "session",
            &format!(
                "# the toolchains the session uses, wherever the runner keeps them\n[fs]\nread = [{:?}, {:?}]\n",
                self.tools.sysroot.display().to_string(),
                self.tools.python_prefix.display().to_string()
            ),
        );
        let mut g = w.exec(&[profile, &layer]);
        g.cmd.env_clear();
        g.cmd
            .env("GUARD_STATE_DIR", &w.state)
            .env("HOME", &w.home)
            .env("GUARD_LOG", "warn");
        for (k, v) in &self.env {
            g.env(k, v);
        }
        g.run(&["sh", "-c", script])
    }

    /// Run the session bare, then under `profile`; compare and count refusals.
    fn compare(&self, profile: &str, git_config: bool) {
        self.reset();
        let daemon = Daemon::start(&self.w.root.join("srv"));
        let script = self.script(daemon.port, git_config);
        let bare = self.bare(&script);
        assert_eq!(
            bare.code(),
            0,
            "the session fails bare: the test itself is broken here\n{}\n{}",
            bare.stdout(),
            bare.stderr()
        );
        let port = daemon.port;
        drop(daemon);
        self.reset();
        let daemon = Daemon::start_on(&self.w.root.join("srv"), port);
        let script = self.script(daemon.port, git_config);
        let guarded = self.guarded(profile, &script);
        let refused: Vec<_> = self
            .w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny" || d["verdict"] == "kill")
            .collect();
        drop(daemon);
        // The remote's port differs between the two sides; everything else must not.
        let facts = |o: &Out| -> Vec<String> {
            o.stdout()
                .lines()
                .filter(|l| !l.contains("git://"))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            facts(&guarded),
            facts(&bare),
            "{profile}: the session differs under guard\n--- guard's stderr\n{}",
            guarded.stderr()
        );
        assert_eq!(guarded.code(), 0, "{profile}: {}", guarded.stderr());
        assert!(refused.is_empty(), "{profile}: refusals {refused:#?}");
        for line in ["npm 42", "pip 8", "tiny 5"] {
            assert!(
                guarded.stdout().contains(line),
                "{profile}: {}",
                guarded.stdout()
            );
        }
    }
}

#[test]
fn an_agent_session_in_an_existing_repository_runs_as_bare_with_zero_refusals_under_agent_and_ci() {
    let s = match Session::new() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    for profile in ["agent", "ci"] {
        s.compare(profile, false);
    }
}

#[test]
fn the_same_session_with_remote_add_push_u_and_submodule_add_runs_as_bare_with_zero_refusals() {
    let s = match Session::new() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    for profile in ["agent", "ci"] {
        s.compare(profile, true);
    }
}

/// pytest for the Python suite, from a local wheel if the machine has one.
fn pytest_wheels() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = vec!["/opt/wheels".into()];
    if let Some(v) = std::env::var_os("PIP_FIND_LINKS") {
        dirs.extend(std::env::split_paths(&v));
    }
    dirs.into_iter().find(|d| {
        std::fs::read_dir(d).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("pytest-"))
        })
    })
}

#[test]
fn cargo_test_npm_test_and_pytest_pass_as_bare_with_zero_refusals_under_agent_and_ci() {
    let s = match Session::new() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let wheels = pytest_wheels();
    let pytest = match &wheels {
        Some(dir) => format!(
            "\"$PYTHON\" -m venv .venv && .venv/bin/pip install -q --no-index --find-links {} pytest \
             && .venv/bin/python -m pytest -q -p no:cacheprovider test_calc.py 2>&1 | tail -1 | sed 's/ in .*//'\n",
            dir.display()
        ),
        None => {
            eprintln!(
                "pytest part skipped: no pytest wheel in /opt/wheels or PIP_FIND_LINKS (and no network to fetch one)"
            );
            String::new()
        }
    };
    let script = format!(
        "set -e\ncd repo\n\
         cd tiny && cargo test -q --offline 2>&1 | grep '^test result' | sed 's/; finished.*//' && cd ..\n\
         mkdir -p js && cd js && echo '{{\"name\":\"js\",\"version\":\"1.0.0\",\"private\":true,\"scripts\":{{\"test\":\"node test.js\"}}}}' > package.json\n\
         echo \"const a = require('assert'); a.strictEqual(1 + 1, 2); console.log('npm test ok')\" > test.js\n\
         npm test --silent\n\
         cd ..\n\
         mkdir -p py && cd py && printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n\
         printf 'from calc import add\\n\\ndef test_add():\\n    assert add(2, 3) == 5\\n' > test_calc.py\n\
         {pytest}\
         cd ..\n"
    );
    for profile in ["agent", "ci"] {
        s.reset();
        let bare = s.bare(&script);
        assert_eq!(bare.code(), 0, "bare: {}\n{}", bare.stdout(), bare.stderr());
        s.reset();
        let guarded = s.guarded(profile, &script);
        assert_eq!(
            guarded.code(),
            0,
            "{profile}: {}\n{}",
            guarded.stdout(),
            guarded.stderr()
        );
        assert_eq!(
            guarded.stdout(),
            bare.stdout(),
            "{profile}: {}",
            guarded.stderr()
        );
        assert!(
            guarded.stdout().contains("test result: ok. 1 passed"),
            "{}",
            guarded.stdout()
        );
        assert!(
            guarded.stdout().contains("npm test ok"),
            "{}",
            guarded.stdout()
        );
        if wheels.is_some() {
            assert!(
                guarded.stdout().contains("1 passed"),
                "{}",
                guarded.stdout()
            );
        }
        let refused: Vec<_> =
            s.w.decisions()
                .into_iter()
                .filter(|d| d["verdict"] == "deny" || d["verdict"] == "kill")
                .collect();
        assert!(refused.is_empty(), "{profile}: refusals {refused:#?}");
    }
}
