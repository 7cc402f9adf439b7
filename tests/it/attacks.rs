//! Adversarial tests: a sandboxed program that tries hard to change a protected file (the
//! `.git/config` and hooks of a repository that existed before the run) or a file outside the
//! write roots. Races run thousands of attempts and must win zero times; every test checks the
//! victim files byte for byte afterwards, not only the errno the attacker saw.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::util::{probe_result, tool, Out, Workspace};

const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";
const KEEP: &str = "precious outside\n";

/// A workspace with a pre-existing repository (`.git/config`, empty `.git/hooks`) and a file
/// outside the write roots, plus what they looked like, to compare afterwards. The config is
/// protected by a profile layer (`agent` judges a repository's config by content instead: its
/// own tests are in git_config.rs), so every change to it is a refusal to race against.
struct Victims {
    w: Workspace,
    config: PathBuf,
    hooks: PathBuf,
    keep: PathBuf,
    layer: String,
}

impl Victims {
    fn new() -> Victims {
        let w = Workspace::new();
        let config = w.write(".git/config", CONFIG);
        let hooks = w.ws.join(".git/hooks");
        std::fs::create_dir_all(&hooks).expect("hooks");
        let keep = w.write(&w.outside.join("keep.txt").display().to_string(), KEEP);
        for f in [&config, &keep] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        let layer = w.profile_file(
            "protect-config",
            "[fs]\nprotect = [\"{workspace}/.git/config\"]\n",
        );
        Victims {
            w,
            config,
            hooks,
            keep,
            layer,
        }
    }

    /// `guard exec` under agent, the config-protecting layer and the test layer.
    fn exec(&self) -> crate::util::Guard {
        self.w.exec(&["agent", &self.layer])
    }

    fn ws(&self, rel: &str) -> String {
        self.w.ws.join(rel).display().to_string()
    }

    /// Everything the attacks aim at is exactly as it was.
    fn assert_intact(&self, what: &str) {
        let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o7777);
        assert_eq!(
            std::fs::read(&self.config).ok().as_deref(),
            Some(CONFIG.as_bytes()),
            "{what}: .git/config changed"
        );
        assert_eq!(
            mode(&self.config).ok(),
            Some(0o644),
            "{what}: .git/config mode"
        );
        let hooks: Vec<_> = std::fs::read_dir(&self.hooks)
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            self.hooks.is_dir() && hooks.is_empty(),
            "{what}: .git/hooks changed: {hooks:?}"
        );
        assert_eq!(
            std::fs::read(&self.keep).ok().as_deref(),
            Some(KEEP.as_bytes()),
            "{what}: the file outside changed"
        );
        assert_eq!(mode(&self.keep).ok(), Some(0o644), "{what}: outside mode");
        let outside: Vec<_> = std::fs::read_dir(&self.w.outside)
            .expect("outside")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            outside.len(),
            1,
            "{what}: entries appeared outside: {outside:?}"
        );
    }
}

/// `key=N` fields of a probe summary line.
fn fields(line: &str) -> BTreeMap<String, usize> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

fn summary(out: &Out, head: &str) -> BTreeMap<String, usize> {
    let line = out
        .stdout()
        .lines()
        .find(|l| l.starts_with(head))
        .map(str::to_string)
        .unwrap_or_else(|| {
            panic!(
                "no {head:?} line\n--- stdout\n{}\n--- stderr\n{}",
                out.stdout(),
                out.stderr()
            )
        });
    fields(&line)
}

/// A race is real when the allowed side wins at least one attempt in this many. How often it
/// wins depends on how the flipping thread and the supervisor are scheduled (1.8% of 20,000
/// connects on one CI run, which a bar of 2% failed), so the bar sits well below what is seen.
const RACE_WON: usize = 400;

/// Runs `race OP` against the protected target and then the outside one, `attempts` calls in
/// all, and checks that the allowed side really won often (the race was real) while the
/// targets never changed.
fn pointer_swap(op: &str, protected: &str, outside_name: &str, extra: &str) {
    let v = Victims::new();
    let outside = v.w.outside.join(outside_name).display().to_string();
    for (target, n) in [(v.ws(protected), 12_000), (outside, 8_000)] {
        let out = v.exec().run(&[
            v.w.probe(),
            "race".into(),
            op.into(),
            n.to_string(),
            v.ws("allowed.txt"),
            target.clone(),
            v.ws(extra),
        ]);
        out.expect_code(0);
        let f = summary(&out, "race ");
        eprintln!("race {op} -> {target}: {f:?}");
        assert_eq!(f["attempts"], n);
        assert!(
            f["ok"] >= n / RACE_WON,
            "the allowed side must succeed often for the race to be real: {f:?}"
        );
        v.assert_intact(&format!("race {op} -> {target}"));
    }
}

#[test]
fn pointer_swap_unlink_never_reaches_the_protected_or_outside_file() {
    pointer_swap("unlink", ".git/config", "keep.txt", "unused");
}

#[test]
fn pointer_swap_rename_source_never_moves_the_protected_or_outside_file() {
    pointer_swap("rename-src", ".git/config", "keep.txt", "dst");
}

#[test]
fn pointer_swap_rename_destination_never_replaces_the_protected_or_outside_file() {
    pointer_swap("rename-dst", ".git/config", "keep.txt", "src");
}

#[test]
fn pointer_swap_write_open_never_truncates_the_protected_or_outside_file() {
    pointer_swap("write", ".git/config", "keep.txt", "unused");
}

#[test]
fn pointer_swap_link_never_adds_a_hook_or_an_outside_entry() {
    pointer_swap("link", ".git/hooks/pre-commit", "new-link", "src");
}

#[test]
fn pointer_swap_chmod_never_changes_the_protected_or_outside_mode() {
    pointer_swap("chmod", ".git/config", "keep.txt", "unused");
}

/// Accepts on `l` until `stop`, counting connections.
fn counting_listener(
    l: std::net::TcpListener,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut n = 0;
        for c in l.incoming() {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            if c.is_ok() {
                n += 1;
            }
        }
        n
    })
}

#[test]
fn pointer_swap_connect_never_reaches_a_denied_port() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let w = Workspace::new();
    let (la, lb) = (
        std::net::TcpListener::bind("127.0.0.1:0").expect("listener a"),
        std::net::TcpListener::bind("127.0.0.1:0").expect("listener b"),
    );
    let (pa, pb) = (
        la.local_addr().expect("a").port(),
        lb.local_addr().expect("b").port(),
    );
    let layer = w.root.join("deny-port.toml");
    std::fs::write(
        &layer,
        format!(
            "name = \"deny-port\"\n[[rule]]\nid = \"deny-b\"\nwhen = \"connect\"\n\
             addr = [\"127.0.0.1:{pb}\"]\naction = \"deny\"\n"
        ),
    )
    .expect("layer");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (ta, tb) = (
        counting_listener(la, stop.clone()),
        counting_listener(lb, stop.clone()),
    );
    let n = 20_000;
    let out = w.exec(&["agent", &layer.display().to_string()]).run(&[
        w.probe(),
        "race".into(),
        "connect".into(),
        n.to_string(),
        format!("127.0.0.1:{pa}"),
        format!("127.0.0.1:{pb}"),
    ]);
    stop.store(true, Ordering::SeqCst);
    for p in [pa, pb] {
        let _ = std::net::TcpStream::connect(("127.0.0.1", p));
    }
    let (got_a, got_b) = (ta.join().expect("a"), tb.join().expect("b"));
    out.expect_code(0);
    let f = summary(&out, "race connect");
    eprintln!("race connect: {f:?}, allowed listener {got_a}, denied listener {got_b}");
    assert!(
        f["ok"] >= n / RACE_WON,
        "the allowed side must succeed: {f:?}"
    );
    assert!(
        f.get("EPERM").copied().unwrap_or(0) > 0,
        "the denied side is denied: {f:?}"
    );
    assert_eq!(got_b, 0, "connections reached the denied port");
}

/// A layer denying one loopback port under agent (which allows loopback), for the send races.
fn deny_port_layer(w: &Workspace, port: u16) -> String {
    w.profile_file(
        "deny-udp-port",
        &format!(
            "name = \"deny-udp-port\"\n[[rule]]\nid = \"deny-b\"\nwhen = \"connect\"\n\
             addr = [\"127.0.0.1:{port}\"]\naction = \"deny\"\n"
        ),
    )
}

#[test]
fn pointer_flip_of_a_sendto_destination_never_reaches_a_denied_port() {
    use crate::netns::UdpSink;
    let w = Workspace::new();
    let allowed = UdpSink::start(std::net::UdpSocket::bind("127.0.0.1:0").expect("a"));
    let denied = UdpSink::start(std::net::UdpSocket::bind("127.0.0.1:0").expect("b"));
    let layer = deny_port_layer(&w, denied.addr.port());
    let n = 10_000;
    let out = w.exec(&["agent", &layer]).run(&[
        w.probe(),
        "race".into(),
        "sendto".into(),
        n.to_string(),
        allowed.addr.to_string(),
        denied.addr.to_string(),
    ]);
    out.expect_code(0);
    let f = summary(&out, "race sendto");
    let (got_a, got_b) = (allowed.received().len(), denied.received().len());
    eprintln!("race sendto: {f:?}, allowed port {got_a}, denied port {got_b}");
    assert!(
        f["ok"] >= n / RACE_WON,
        "the allowed side must succeed: {f:?}"
    );
    assert!(
        f.get("EPERM").copied().unwrap_or(0) > 0,
        "the denied side is denied: {f:?}"
    );
    assert_eq!(got_b, 0, "datagrams reached the denied port");
}

#[test]
fn pointer_flip_and_descriptor_swap_of_a_sendmsg_never_reach_a_denied_port() {
    use crate::netns::UdpSink;
    let w = Workspace::new();
    let allowed = UdpSink::start(std::net::UdpSocket::bind("127.0.0.1:0").expect("a"));
    let denied = UdpSink::start(std::net::UdpSocket::bind("127.0.0.1:0").expect("b"));
    let layer = deny_port_layer(&w, denied.addr.port());
    let n = 10_000;
    let out = w.exec(&["agent", &layer]).run(&[
        w.probe(),
        "race".into(),
        "sendmsg".into(),
        n.to_string(),
        allowed.addr.to_string(),
        denied.addr.to_string(),
    ]);
    out.expect_code(0);
    let f = summary(&out, "race sendmsg");
    let (got_a, got_b) = (allowed.received().len(), denied.received().len());
    eprintln!("race sendmsg: {f:?}, allowed port {got_a}, denied port {got_b}");
    assert!(
        got_a >= n / RACE_WON,
        "the allowed side must succeed: {f:?}"
    );
    assert!(
        f.get("EPERM").copied().unwrap_or(0) > 0,
        "the denied side is denied: {f:?}"
    );
    assert_eq!(got_b, 0, "datagrams reached the denied port");
}

#[test]
fn racing_dup2_under_a_proc_fd_reopen_never_truncates_the_protected_file() {
    let v = Victims::new();
    let out = v.exec().run(&[
        v.w.probe(),
        "fdrace".into(),
        "20000".into(),
        v.config.display().to_string(),
    ]);
    out.expect_code(0);
    let f = summary(&out, "fdrace");
    eprintln!("fdrace: {f:?}");
    assert!(f["ok"] >= 400, "re-opening the pipe must succeed: {f:?}");
    assert_eq!(f["regular"], 0, "a writable .git/config was handed out");
    v.assert_intact("fdrace");
}

#[test]
fn pipes_of_processes_outside_the_sandbox_cannot_be_reopened() {
    use std::os::fd::AsRawFd;
    let w = Workspace::new();
    let (r, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .expect("pipe");
    let target = format!("/proc/{}/fd/{}", std::process::id(), wr.as_raw_fd());
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "write", &target, "PWNED"]);
    out.expect_code(0);
    let mut got = Vec::new();
    let _ = std::fs::File::from(r).read_to_end(&mut got);
    drop(wr);
    assert!(
        got.is_empty(),
        "the sandbox wrote {:?} into a pipe of the test process",
        String::from_utf8_lossy(&got)
    );
    assert!(probe_result(&out).starts_with("errno"), "{}", out.stdout());
}

#[test]
fn guards_own_pipes_cannot_be_reopened_to_stop_supervision() {
    let v = Victims::new();
    // guard is the parent of the sandbox's init, which is the shell's parent.
    let script = format!(
        "exec {} steal-parent-pipes $(cut -d' ' -f4 /proc/$PPID/stat)",
        v.w.probe()
    );
    let out = v.exec().run(&["sh", "-c", &script]);
    out.expect_code(0);
    let f = out.stdout();
    assert!(
        f.contains("steal opened=0 "),
        "guard's descriptors were reopened: {f}"
    );
    assert!(f.contains("after=ok"), "supervision must go on: {f}");
    v.assert_intact("steal-parent-pipes");
}

#[test]
fn swapping_a_directory_for_a_symlink_never_redirects_a_create() {
    let v = Victims::new();
    for (dir, link) in [
        ("d", v.ws(".git")),
        ("e", v.w.outside.display().to_string()),
    ] {
        let out = v.exec().run(&[
            v.w.probe(),
            "symrace".into(),
            "5000".into(),
            dir.into(),
            link,
        ]);
        out.expect_code(0);
        let f = summary(&out, "symrace");
        eprintln!("symrace {dir}: {f:?}");
        assert!(
            f["flips"] >= 100 && f["ok"] >= 100,
            "the race was real: {f:?}"
        );
        v.assert_intact(&format!("symrace {dir}"));
    }
}

#[test]
fn symlinks_renames_and_hard_links_do_not_reach_protected_files() {
    let attacks = [
        "ln -s .git/hooks h && echo x > h/pre-commit",
        "ln -s .git g && echo x >> g/config",
        "ln -s .git/config c && echo x >> c",
        "ln -s . self && echo x > self/self/.git/hooks/post-checkout",
        "ln -s \"$OUTSIDE\" o && echo x > o/new; echo x >> o/keep.txt",
        "mv .git g2 && echo x >> g2/config",
        "mv .git/hooks h2 && echo x > h2/pre-commit",
        "ln .git/config hard && echo x >> hard",
        "ln sub/app/.git/config hard2 && echo x >> hard2",
        "ln -s /tmp/x .git/hooks/pre-push",
        "mkdir -p x && mv x .git/hooks/x",
        "mv sub sub2 && echo x >> sub2/app/.git/config; echo x > sub2/app/.git/hooks/h",
        "mv sub/app \"$TMPDIR/app\" && echo x >> \"$TMPDIR/app/.git/config\" && mv \"$TMPDIR/app\" sub/app",
        "cp -a sub/app/.git \"$TMPDIR/g\" && echo x >> \"$TMPDIR/g/config\"; rm -rf sub/app/.git; mv \"$TMPDIR/g\" sub/app/.git",
        "mkdir -p sub/app2 && mv sub/app/.git sub/app2/.git; echo x >> sub/app2/.git/config",
    ];
    for a in attacks {
        let v = Victims::new();
        v.w.write("sub/app/.git/config", CONFIG);
        // A repository as git sees one (HEAD, objects, refs), with its hooks directory.
        v.w.write("sub/app/.git/HEAD", "ref: refs/heads/main\n");
        for d in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(v.w.ws.join("sub/app/.git").join(d)).expect("nested repo");
        }
        v.exec().env("OUTSIDE", &v.w.outside).run(&["sh", "-c", a]);
        v.assert_intact(a);
        // The nested repository, wherever a rename may have taken it inside the workspace.
        // Its config is judged by content, not protected as a file: a delete (rm -rf of the
        // repository's unprotected entries) may remove it, but no changed config gets in.
        let mut seen = 0;
        for dir in ["sub/app", "sub2/app", "sub/app2"] {
            let git = v.w.ws.join(dir).join(".git");
            if !git.is_dir() {
                continue;
            }
            seen += 1;
            if let Ok(c) = std::fs::read_to_string(git.join("config")) {
                assert_eq!(c, CONFIG, "{a}: the nested config at {dir} changed");
            }
            let hooks = std::fs::read_dir(git.join("hooks")).map(|d| d.count());
            assert_eq!(hooks.ok(), Some(0), "{a}: nested hooks at {dir}");
        }
        assert_eq!(
            seen, 1,
            "{a}: the nested .git and its hooks are in one place"
        );
    }
}

#[test]
fn the_repository_config_cannot_be_redirected_by_a_new_file_in_dot_git() {
    let Some(git) = tool("git") else {
        eprintln!("skip: git is not installed");
        return;
    };
    let w = Workspace::new();
    let init = std::process::Command::new(&git)
        .args(["init", "-q", "--template="])
        .arg(&w.ws)
        .status()
        .expect("git init");
    assert!(init.success());
    let config = std::fs::read(w.ws.join(".git/config")).expect("config");
    let evil = w.ws.join("evil");
    let script = format!(
        "mkdir -p {e}/objects {e}/refs && printf '[core]\\n\\trepositoryformatversion = 0\\n\\thooksPath = {e}/hooks\\n' > {e}/config \
         && echo {e} > .git/commondir",
        e = evil.display()
    );
    w.exec(&["agent"]).run(&["sh", "-c", &script]);
    assert_eq!(std::fs::read(w.ws.join(".git/config")).ok(), Some(config));
    let out = std::process::Command::new(git)
        .current_dir(&w.ws)
        .env("HOME", &w.home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["config", "--get", "core.hooksPath"])
        .output()
        .expect("git");
    let hooks_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        hooks_path.is_empty(),
        "git now takes its hooks from {hooks_path} (set by the sandbox)"
    );
}

#[test]
fn proc_magic_links_and_dot_dot_do_not_reach_protected_files() {
    let v = Victims::new();
    std::fs::create_dir_all(v.w.ws.join("sub")).expect("sub");
    let keep = v.keep.display().to_string();
    let attacks = [
        "exec 3< .git/config; echo x > /proc/self/fd/3".to_string(),
        "exec 3< .git/config; echo x >> /proc/$$/fd/3".to_string(),
        "exec 3< .git/config; echo x > /dev/fd/3".to_string(),
        format!("exec 3< {keep}; echo x > /proc/self/fd/3"),
        "echo x > /proc/self/cwd/.git/config".to_string(),
        "echo x > /proc/$$/cwd/.git/hooks/pre-commit".to_string(),
        "echo x > /proc/$$/root$PWD/.git/config".to_string(),
        "echo x > /proc/thread-self/root$PWD/.git/config".to_string(),
        "echo x > sub/../.git/config".to_string(),
        "echo x > sub/../../outside/keep.txt".to_string(),
        "echo x > ./sub/./../.git/./hooks/../config".to_string(),
        "cd .git/hooks && echo x > ../config; echo x > ./pre-commit".to_string(),
        "cd sub && echo x > ../../outside/new".to_string(),
    ];
    for a in attacks {
        v.exec().run(&["sh", "-c", &a]);
        v.assert_intact(&a);
    }
}

#[test]
fn long_deep_and_non_utf8_paths_fail_closed() {
    let v = Victims::new();
    let probe = v.w.probe();
    // Longer than PATH_MAX in one argument.
    let long = format!("{}/{}", v.w.ws.display(), "a/".repeat(2100));
    let out = v.exec().run(&[&probe, "write", &long, "x"]);
    assert_eq!(probe_result(&out), "errno 36 ENAMETOOLONG");
    // Deep enough that the absolute path passes PATH_MAX (made outside guard, which refuses
    // to create it), then back up to .git/config.
    let mut dir = nix::fcntl::open(
        &v.w.ws,
        nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .expect("open ws");
    let name = "d".repeat(200);
    for _ in 0..25 {
        nix::sys::stat::mkdirat(
            Some(dir),
            name.as_str(),
            nix::sys::stat::Mode::from_bits_truncate(0o755),
        )
        .expect("mkdirat");
        let next = nix::fcntl::openat(
            Some(dir),
            name.as_str(),
            nix::fcntl::OFlag::O_DIRECTORY,
            nix::sys::stat::Mode::empty(),
        )
        .expect("openat");
        nix::unistd::close(dir).expect("close");
        dir = next;
    }
    nix::unistd::close(dir).expect("close");
    let back = format!("{}.git/config", "../".repeat(25));
    let out = v.exec().run(&[&probe, "deep", "25", &back]);
    out.expect_code(0);
    assert!(out.stdout().contains("deep write E"), "{}", out.stdout());
    let out = v.exec().run(&[&probe, "deep", "25", "f"]);
    out.expect_code(0);
    assert!(out.stdout().starts_with("deep "), "{}", out.stdout());
    // Non-UTF-8 names: a symlinked directory and a hook.
    let bad = std::ffi::OsStr::from_bytes(b"\xff\xfe");
    std::os::unix::fs::symlink(v.w.ws.join(".git"), v.w.ws.join(bad)).expect("symlink");
    for target in [
        [b"\xff\xfe/config".as_slice()].concat(),
        [b".git/hooks/pre-\xffcommit".as_slice()].concat(),
        [b"\xff\xfe/hooks/\xff".as_slice()].concat(),
    ] {
        let out = v.exec().run(&[
            std::ffi::OsStr::new(&probe),
            "write".as_ref(),
            std::ffi::OsStr::from_bytes(&target),
            "x".as_ref(),
        ]);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{target:?}");
    }
    v.assert_intact("long paths");
}

#[test]
fn a_path_running_into_an_unmapped_page_fails_with_efault() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "unterminated"]);
    out.expect_code(0);
    let f = out.stdout();
    let line = f.lines().last().unwrap_or("");
    for part in line.split_whitespace() {
        assert!(
            part.ends_with("=EFAULT") || part.ends_with("=ENAMETOOLONG"),
            "{line}"
        );
    }
    assert_eq!(line.split_whitespace().count(), 3, "{line}");
}

#[test]
fn an_anonymous_memfd_cannot_be_executed() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "memfd-exec"]);
    assert!(!out.stdout().contains("MEMFD-RAN"), "{}", out.stdout());
    assert!(out.stdout().contains("memfd-exec E"), "{}", out.stdout());
}

#[test]
fn the_sandbox_cannot_touch_guard_itself() {
    let v = Victims::new();
    let p = v.w.probe();
    // The shell's parent is the sandbox's init (inside the sandbox); guard is the init's
    // parent.
    let script = format!(
        "G=$(cut -d' ' -f4 /proc/$PPID/stat); echo guard=$G; \
         {p} poke-mem $G; {p} ptrace-attach $G; {p} kill $G; \
         {p} write .git/config PWNED; echo done"
    );
    let out = v.exec().run(&["sh", "-c", &script]);
    out.expect_code(0);
    let s = out.stdout();
    let start =
        v.w.audit()
            .into_iter()
            .find(|e| e["type"] == "run-start")
            .expect("run-start");
    assert!(
        s.contains(&format!("guard={}\n", start["pid"])),
        "the init's parent is guard: {s} / {start}"
    );
    assert!(s.contains("poke-mem open E"), "{s}");
    assert!(s.contains("ptrace-attach EPERM"), "{s}");
    assert!(s.contains("kill EPERM"), "{s}");
    assert!(s.contains("errno 1 EPERM\ndone"), "guard still judges: {s}");
    assert!(v
        .w
        .audit()
        .last()
        .is_some_and(|e| e["type"] == "run-end" && e["outcome"] == "exited"));
    v.assert_intact("guard itself");
}

#[test]
fn tiocsti_cannot_push_input_into_the_terminal() {
    let Some(setsid) = tool("setsid") else {
        eprintln!("skip: no setsid(1) to give guard a controlling terminal");
        return;
    };
    let w = Workspace::new();
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave = std::fs::File::from(pty.slave);
    let mut g = w.exec(&["agent"]);
    let program = g.cmd.get_program().to_os_string();
    let args: Vec<_> = g.cmd.get_args().map(|a| a.to_os_string()).collect();
    g.cmd = {
        let mut c = std::process::Command::new(setsid);
        c.arg("-c").arg(program).args(args);
        c.current_dir(&w.ws)
            .env("GUARD_STATE_DIR", &w.state)
            .env("HOME", &w.home)
            .env("GUARD_LOG", "warn")
            .stdin(slave.try_clone().expect("slave"));
        c
    };
    let out = g.run(&[&w.probe(), "tiocsti"]);
    let line = out.stdout();
    eprintln!("tiocsti: {line}");
    if line.contains("no-tty") {
        eprintln!("skip: guard got no controlling terminal ({line})");
        return;
    }
    // Whatever was pushed now waits in the terminal's input queue.
    let _master = pty.master;
    nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&slave),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .expect("nonblock");
    let mut pending = [0u8; 64];
    let n = (&slave).read(&mut pending).unwrap_or(0);
    assert_eq!(
        n,
        0,
        "input was pushed into the terminal: {:?} ({line})",
        String::from_utf8_lossy(&pending[..n])
    );
    assert!(!line.contains("pushed=11"), "{line}");
}

/// Peak RSS of a running process, from /proc/PID/status.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// 32 threads x 1,000 unlinks: three times the audit writer's burst (10,000 events), while
/// `cargo test` stays quick. Whether any decision is suppressed depends on the speed of the
/// machine (none when the run takes over 11 s: 2,000 written per second after the burst), so
/// only the accounting is asserted here; the full flood asserts the suppression too.
#[test]
fn a_flood_of_judged_calls_is_answered_bounded_and_counted() {
    flood(32, 1_000);
}

/// The full flood, 64 threads x 10,000 unlinks (640,000 judged calls, about a minute here):
/// CI runs it as a second command (`.ci/run`).
#[test]
#[ignore = "slow: the 640k-call flood, run by .ci/run with --ignored"]
fn a_full_flood_of_640k_judged_calls_is_answered_bounded_and_counted() {
    flood(64, 10_000);
}

/// THREADS threads each unlink a missing file CALLS times under `agent`: every call is
/// answered (ENOENT), guard's memory stays bounded, and the audit log accounts for every judged
/// call (written + suppressed = judged).
fn flood(threads: usize, calls: usize) {
    let w = Workspace::new();
    let mut g = w.exec(&["agent"]);
    g.cmd
        .arg("--")
        .args([
            w.probe(),
            "flood".into(),
            threads.to_string(),
            calls.to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = g.cmd.spawn().expect("spawn guard");
    let pid = child.id();
    let mut peak = 0u64;
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::BufReader::new(stdout).read_to_string(&mut s);
        s
    });
    while child.try_wait().expect("try_wait").is_none() {
        if let Some(k) = vm_hwm_kib(pid) {
            peak = peak.max(k);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = child.wait().expect("wait");
    let stdout = reader.join().expect("reader");
    assert_eq!(status.code(), Some(0), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("flood"))
        .unwrap_or_else(|| panic!("no flood line: {stdout}"));
    let f = fields(line);
    let total = threads * calls;
    assert_eq!(f["calls"], total);
    assert_eq!(f.get("ENOENT").copied(), Some(total), "only ENOENT: {line}");
    assert!(peak > 0, "guard's VmHWM was read");
    assert!(peak < 200 * 1024, "guard's peak RSS {peak} KiB");
    let events = w.audit();
    let decisions = events.iter().filter(|e| e["type"] == "decision").count() as u64;
    let suppressed: u64 = events
        .iter()
        .filter(|e| e["type"] == "suppressed")
        .map(|e| e["count"].as_u64().expect("count"))
        .sum();
    let end = events.last().expect("events");
    assert_eq!(end["type"], "run-end");
    // 640,000 calls would have to take over five minutes to stay under the rate.
    if total >= 100_000 {
        assert!(suppressed > 0, "a flood is rate-limited");
    }
    assert_eq!(end["suppressed"].as_u64(), Some(suppressed));
    let counts = &end["counts"];
    let judged: u64 = ["allow", "deny", "risky", "kill", "error"]
        .iter()
        .map(|k| counts[k].as_u64().unwrap_or(0))
        .sum();
    assert!(judged >= total as u64, "every unlink was judged: {counts}");
    assert_eq!(
        decisions + suppressed,
        judged,
        "written + suppressed = judged"
    );
    eprintln!(
        "flood: peak {peak} KiB, {decisions} written, {suppressed} suppressed, {judged} judged"
    );
}
