//! The journal refuses nothing the kernel would allow, and loses nothing it cannot restore:
//! directories renamed into and out of excluded paths (`target/`), long names, files guard
//! may only write, files of another user, sparse files and hard links all work under guard as
//! they do bare, and a rollback restores them exactly.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use crate::util::{is_root, probe_result, tool, TreeState, Workspace, UNPRIV_USER};

/// The run directories of the workspace's state, oldest first (run ids sort by time).
fn runs(w: &Workspace) -> Vec<std::path::PathBuf> {
    let mut runs: Vec<_> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs
}

/// The journal's log of the newest run.
fn newest_log(w: &Workspace) -> String {
    let run = runs(w).pop().expect("a run");
    std::fs::read_to_string(run.join("journal/log.jsonl")).expect("log")
}

fn agent_excludes() -> Vec<String> {
    ["target/**", "node_modules/**", ".venv/**"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn mv_target_target_old_is_one_journaled_rename_and_rollback_loses_nothing() {
    let w = Workspace::new();
    w.write("src/main.rs", "fn main() {}\n");
    w.write("target/debug/app", &"binary ".repeat(1000));
    w.write("target/debug/deps/libx.rlib", "rlib\n");
    let before = w.state();
    w.exec(&["agent"])
        .run(&["mv", "target", "target.old"])
        .expect_code(0);
    assert!(w.ws.join("target.old/debug/app").exists() && !w.ws.join("target").exists());
    let log = newest_log(&w);
    assert_eq!(
        log.matches(r#""op":"renamed""#).count(),
        1,
        "one entry for the rename, nothing copied:\n{log}"
    );
    assert!(!log.contains(r#""op":"deleted""#), "{log}");
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of mv target target.old");

    // The same, with target/ rebuilt afterwards (as cargo would): the new target is kept in
    // the journal, the old one comes back.
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "mv target target.old && mkdir -p target/debug && echo rebuilt > target/debug/app",
        ])
        .expect_code(0);
    let after = w.state();
    let out = w.guard().arg("rollback").output();
    out.expect_code(0);
    before.assert_restored(&w.ws, "rollback over a rebuilt target");
    w.guard().arg("undo").output().expect_code(0);
    after.assert_restored(&w.ws, "undo brings the rebuilt target back");
}

#[test]
fn a_temporary_directory_renamed_to_target_works_and_rolls_back() {
    let w = Workspace::new();
    w.write("Cargo.toml", "[package]\nname = \"x\"\n");
    let before = TreeState::of(&w.ws);
    let before_excluding = guard::journal::tree_digest(&w.ws, &agent_excludes()).expect("digest");
    let probe = w.probe();
    // cargo: create a temporary directory in the workspace, fill it, rename it to `target`,
    // all in one command (one checkpoint), then build into target/.
    let cargo_like = format!(
        "mkdir .tmpQx7Zr && echo 'Signature: 8a477f597d28d172789f06886806bc55' > .tmpQx7Zr/CACHEDIR.TAG \
         && {probe} rename .tmpQx7Zr target"
    );
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        &format!("sh -c \"{cargo_like}\" && mkdir -p target/debug && echo out > target/debug/x"),
    ]);
    out.expect_code(0);
    assert_eq!(probe_result(&out), "ok", "no EXDEV: {}", out.stdout());
    assert!(w.ws.join("target/CACHEDIR.TAG").exists());
    w.guard().arg("rollback").output().expect_code(0);
    assert!(!w.ws.join(".tmpQx7Zr").exists());
    assert_eq!(
        guard::journal::tree_digest(&w.ws, &agent_excludes()).expect("digest"),
        before_excluding,
        "the workspace but target/ is as before"
    );
    // Everything outside the excluded target/ is as before; target/ (made by the run, not
    // journaled) stays.
    let mut without_target = before.snapshot.clone();
    without_target.retain(|p, _| !p.starts_with("target"));
    let mut now = crate::util::snapshot(&w.ws);
    now.retain(|p, _| !p.starts_with("target"));
    assert_eq!(now, without_target);
    assert!(w.ws.join("target/debug/x").exists());
}

#[test]
fn cargo_build_of_a_fresh_checkout_works_under_guard_and_rolls_back() {
    let Some(cargo) = tool("cargo") else {
        eprintln!("skipped: cargo is not installed");
        return;
    };
    let (Some(cargo_home), Some(rustup_home)) = (
        std::env::var_os("CARGO_HOME").or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo").into_os_string())
        }),
        std::env::var_os("RUSTUP_HOME").or_else(|| {
            std::env::var_os("HOME").map(|h| Path::new(&h).join(".rustup").into_os_string())
        }),
    ) else {
        eprintln!("skipped: no CARGO_HOME or RUSTUP_HOME");
        return;
    };
    let w = Workspace::new();
    w.write(
        "Cargo.toml",
        "[package]\nname = \"fresh\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    w.write("src/main.rs", "fn main() { println!(\"built\"); }\n");
    let before = w.state();
    let toolchain = w.profile_file(
        "toolchain",
        &format!(
            "name = \"toolchain\"\n[fs]\nread = [\"{}\", \"{}\"]\n",
            Path::new(&cargo_home).display(),
            Path::new(&rustup_home).display()
        ),
    );
    let out = w
        .exec(&["agent", &toolchain])
        .env("CARGO_HOME", &cargo_home)
        .env("RUSTUP_HOME", &rustup_home)
        .env("CARGO_NET_OFFLINE", "true")
        .run(&[
            cargo.to_str().expect("utf-8 path"),
            "build",
            "--offline",
            "-q",
        ]);
    if out.stderr().contains("Permission denied") && out.stderr().contains(".package-cache") {
        eprintln!(
            "skipped: cargo wants to write its home here: {}",
            out.stderr()
        );
        return;
    }
    out.expect_code(0);
    assert!(
        !out.stderr().contains("Invalid cross-device link"),
        "{}",
        out.stderr()
    );
    assert!(w.ws.join("target/debug").is_dir());
    w.guard().arg("rollback").output().expect_code(0);
    let mut want = before.snapshot.clone();
    want.retain(|p, _| !p.starts_with("target"));
    let mut now = crate::util::snapshot(&w.ws);
    now.retain(|p, _| !p.starts_with("target") && !p.starts_with("Cargo.lock"));
    assert_eq!(
        now, want,
        "everything but the excluded target/ is as before"
    );
    assert!(
        !w.ws.join("Cargo.lock").exists(),
        "the lock file the build made is gone"
    );
}

#[test]
fn names_of_255_bytes_are_journaled_and_restored() {
    let w = Workspace::new();
    let long = |c: char| c.to_string().repeat(255);
    let (a, b, d) = (long('a'), long('b'), long('d'));
    w.write(&a, "first\n");
    w.write(&format!("{d}/{a}"), "inside\n");
    let before = w.state();
    let script = format!(
        "set -e; echo changed > {a}; mv {a} {b}; echo new > {a}; rm -rf {d}; mkdir {d}; \
         echo x > {d}/{b}"
    );
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
    assert!(w.ws.join(&b).exists());
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of long names");
}

#[test]
fn write_only_and_mode_000_files_behave_as_bare_and_roll_back() {
    // As the unprivileged user (guard too), on files they own: guard reads the write-only
    // file for its pre-image without the caller's help.
    let w = Workspace::unprivileged();
    w.write("wo", "write only\n");
    w.write("none", "mode 000\n");
    w.write("ro", "read only\n");
    for (f, m) in [("wo", 0o200), ("none", 0o000), ("ro", 0o400)] {
        std::fs::set_permissions(w.ws.join(f), std::fs::Permissions::from_mode(m)).expect("chmod");
    }
    let before = w.state();
    let probe = w.probe();
    let out = w
        .exec(&["agent"])
        .run(&[&probe, "write", "wo", "overwritten"]);
    assert_eq!(
        probe_result(&out),
        "ok",
        "{}\n{}",
        out.stdout(),
        out.stderr()
    );
    let expect = if is_root() && !w.unprivileged {
        "ok"
    } else {
        "errno 13 EACCES"
    };
    for f in ["none", "ro"] {
        let out = w.exec(&["agent"]).run(&[&probe, "write", f, "x"]);
        assert_eq!(probe_result(&out), expect, "{f}: as bare: {}", out.stderr());
    }
    let out = w.exec(&["agent"]).run(&["rm", "-f", "none", "ro"]);
    out.expect_code(0);
    // Roll back every run, newest first.
    for _ in 0..4 {
        w.guard()
            .arg("rollback")
            .arg(newest_unrolled(&w))
            .output()
            .expect_code(0);
    }
    before.assert_restored(&w.ws, "rollback of write-only and mode-000 files");
    assert_eq!(
        std::fs::metadata(w.ws.join("wo")).expect("wo").mode() & 0o7777,
        0o200
    );
}

/// The newest run not rolled back yet.
fn newest_unrolled(w: &Workspace) -> String {
    for r in runs(w).into_iter().rev() {
        let meta = std::fs::read_to_string(r.join("run.json")).expect("run.json");
        if !meta.contains("rolled-back") {
            return r.file_name().expect("id").to_string_lossy().into_owned();
        }
    }
    panic!("every run is rolled back");
}

#[test]
fn another_users_files_are_changed_and_restored_with_their_owner() {
    if !is_root() {
        eprintln!("skipped: needs root to own files as {UNPRIV_USER}");
        return;
    }
    let w = Workspace::new();
    w.write("theirs.txt", "someone else's\n");
    w.write("theirs-dir/inner.txt", "inside\n");
    w.write("gone.txt", "to be deleted\n");
    let status = std::process::Command::new("chown")
        .args(["-R", &format!("{UNPRIV_USER}:")])
        .arg(w.ws.join("theirs.txt"))
        .arg(w.ws.join("theirs-dir"))
        .arg(w.ws.join("gone.txt"))
        .status()
        .expect("chown");
    assert!(status.success());
    let uid = std::fs::metadata(w.ws.join("theirs.txt"))
        .expect("stat")
        .uid();
    let before = w.state();
    // The command keeps root's capabilities: guard acts with the caller's credentials, and
    // without CAP_DAC_OVERRIDE, CAP_FOWNER and CAP_CHOWN the kernel itself would refuse these
    // writes to another user's files (see credentials.rs for that side).
    let mut g = w.exec(&["agent"]);
    g.arg("--keep-caps");
    g.run(&[
        "sh",
        "-c",
        "set -e; echo mine > theirs.txt; rm gone.txt; chmod 600 theirs-dir/inner.txt; \
         mv theirs-dir moved; chown root moved/inner.txt",
    ])
    .expect_code(0);
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of another user's files");
    for f in [
        "theirs.txt",
        "gone.txt",
        "theirs-dir/inner.txt",
        "theirs-dir",
    ] {
        assert_eq!(
            std::fs::metadata(w.ws.join(f)).expect("stat").uid(),
            uid,
            "{f} is theirs again"
        );
    }
}

#[test]
fn sparse_files_keep_their_holes_through_write_and_rollback() {
    let w = Workspace::new();
    let make = |name: &str| {
        let f = std::fs::File::create(w.ws.join(name)).expect("create");
        std::os::unix::fs::FileExt::write_all_at(&f, b"head", 0).expect("write");
        std::os::unix::fs::FileExt::write_all_at(&f, b"tail", 64 << 20).expect("write");
    };
    make("sparse.img");
    make("sparse2.img");
    let blocks = |name: &str| std::fs::metadata(w.ws.join(name)).expect("stat").blocks();
    let (b1, b2) = (blocks("sparse.img"), blocks("sparse2.img"));
    if b1 > 1024 {
        eprintln!("skipped: this filesystem does not keep holes ({b1} blocks)");
        return;
    }
    let before = w.state();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "set -e; printf more >> sparse.img; : > sparse2.img; echo x > sparse2.img",
        ])
        .expect_code(0);
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of sparse files");
    assert!(
        blocks("sparse.img") <= b1 + 8 && blocks("sparse2.img") <= b2 + 8,
        "holes kept: {} and {} blocks, were {b1} and {b2}",
        blocks("sparse.img"),
        blocks("sparse2.img")
    );
    // The pre-images kept their holes too.
    let store_blocks: u64 = walk_blocks(&w.state);
    assert!(store_blocks < 4096, "the store holds {store_blocks} blocks");
}

fn walk_blocks(dir: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let m = e.metadata().expect("stat");
        n += if m.is_dir() {
            walk_blocks(&e.path())
        } else {
            m.blocks()
        };
    }
    n
}

#[test]
fn hard_links_are_restored_as_one_inode_with_its_content() {
    let w = Workspace::new();
    w.write("a", "shared content\n");
    w.write("dir/keep", "k\n");
    std::fs::hard_link(w.ws.join("a"), w.ws.join("b")).expect("link");
    std::fs::hard_link(w.ws.join("a"), w.ws.join("dir/c")).expect("link");
    let before = w.state();
    let ino = std::fs::metadata(w.ws.join("a")).expect("stat").ino();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "set -e; echo changed through b > b; rm a; mv dir/c dir/c2; echo other > dir/c2.new; \
             mv dir/c2.new dir/c2",
        ])
        .expect_code(0);
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of hard links");
    for name in ["a", "b", "dir/c"] {
        let m = std::fs::metadata(w.ws.join(name)).expect("stat");
        assert_eq!(m.ino(), ino, "{name}: the same inode");
        assert_eq!(m.nlink(), 3, "{name}: three names");
    }
    assert_eq!(
        std::fs::read_to_string(w.ws.join("dir/c")).expect("read"),
        "shared content\n"
    );
}

/// A file one command makes and deletes again keeps nothing: no copy of its content, its
/// metadata or the file itself goes to the store (a rollback to the command's checkpoint
/// removes it anyway). A file that existed before, or that the command renamed, is kept as
/// before, and a rollback and its undo are exact either way.
#[test]
fn files_made_and_deleted_by_one_command_keep_nothing_and_roll_back_exactly() {
    let w = Workspace::new();
    w.write("keep.txt", "kept\n");
    w.write("src/lib.rs", "pub fn f() {}\n");
    let before = w.state();
    // The inner shell is one command (a direct child of the run's root): one checkpoint.
    let script = "echo 1 > a && echo 2 >> a && chmod 600 a && ln a b && rm a b \
                  && echo c > c && mv c d && rm d \
                  && echo e > e && : > t && truncate -s 0 t && rm t && rm keep.txt";
    w.exec(&["agent"])
        .run(&["sh", "-c", &format!("sh -c '{script}'")])
        .expect_code(0);
    assert!(w.ws.join("e").exists() && !w.ws.join("keep.txt").exists());
    let log = newest_log(&w);
    let ops_on = |path: &str| -> Vec<String> {
        log.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a log line"))
            .filter(|v| v["path"] == path || v["to"] == path || v["from"] == path)
            .map(|v| v["op"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(ops_on("a"), ["created", "dropped"], "{log}");
    assert_eq!(ops_on("b"), ["created", "dropped"], "{log}");
    assert_eq!(ops_on("t"), ["created", "dropped"], "{log}");
    // Renamed since it was made: its deletion is kept, so the rename can be undone.
    assert_eq!(ops_on("d"), ["renamed", "deleted"], "{log}");
    assert_eq!(ops_on("keep.txt"), ["deleted"], "{log}");
    let after = w.state();
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback of a command that made and deleted files");
    w.guard().arg("undo").output().expect_code(0);
    after.assert_restored(&w.ws, "undo of that rollback");
}

/// A file kept by inode is first checked for other openers with a write lease, and an open
/// elsewhere while the lease is held breaks it: the kernel then signals guard (SIGIO, which
/// guard blocks for good, or SIGURG). Here a process outside the sandbox opens, over and over,
/// the very file that `rm` under guard deletes next, so the supervisor's leases are broken
/// again and again: guard must end normally, every file deleted and the run rolled back to
/// exactly what was there.
#[test]
fn files_opened_from_outside_while_their_deletion_is_kept_end_nothing() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const FILES: usize = 1500;
    for w in [Workspace::new(), Workspace::unprivileged()] {
        for i in 1..FILES {
            std::fs::write(w.ws.join(format!("f{i:05}")), format!("{i}\n")).expect("write");
        }
        // The last through the workspace, which hands them all to the unprivileged user.
        w.write("f00000", "0\n");
        let before = w.state();
        let stop = AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            s.spawn(|| {
                // Opens the lowest-numbered file still there until it is gone, then the next.
                let mut i = 0;
                while i < FILES && !stop.load(Ordering::Relaxed) {
                    if std::fs::File::open(w.ws.join(format!("f{i:05}"))).is_err() {
                        i += 1;
                    }
                }
            });
            let out = w.exec(&["agent"]).run(&["sh", "-c", "rm f*"]);
            stop.store(true, Ordering::Relaxed);
            out
        });
        out.expect_code(0);
        let left = std::fs::read_dir(&w.ws).expect("ws").count();
        assert_eq!(left, 0, "every file deleted");
        w.guard().arg("rollback").output().expect_code(0);
        before.assert_restored(&w.ws, "rollback of rm f* under outside opens");
    }
}

/// The access time of each of `names` under `root`, (seconds, nanoseconds).
fn atimes(root: &Path, names: &[&str]) -> Vec<(String, i64, i64)> {
    names
        .iter()
        .map(|n| {
            let m = std::fs::symlink_metadata(root.join(n)).expect("stat");
            (n.to_string(), m.atime(), m.atime_nsec())
        })
        .collect()
}

/// The files and directories of `root` made for the access-time test: every access time set
/// far in the past, so that any read or listing would move it (relatime moves one older than
/// a day).
fn atime_tree(root: &Path, owner: Option<&str>) {
    for (rel, text) in [
        ("a.txt", "alpha\n"),
        ("b.txt", "beta\n"),
        ("e.txt", "untouched\n"),
        ("d/c.txt", "gamma\n"),
    ] {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text.repeat(500)).expect("write");
    }
    if let Some(user) = owner {
        let status = std::process::Command::new("chown")
            .args(["-R", &format!("{user}:")])
            .arg(root)
            .status()
            .expect("chown");
        assert!(status.success());
    }
    let status = std::process::Command::new("touch")
        .args(["-a", "-h", "-d", "@1000000000"])
        .args(["a.txt", "b.txt", "e.txt", "d", "d/c.txt"].map(|n| root.join(n)))
        .status()
        .expect("touch");
    assert!(status.success());
}

const ATIME_NAMES: [&str; 4] = ["a.txt", "b.txt", "e.txt", "d"];

/// guard's own reads of a command's files (the pre-image of a file opened for appending, the
/// digests of `--verify`, the listings of a rollback) leave their access times where the
/// command's calls leave them bare: nothing the command does here reads a file, so nothing's
/// access time moves. As root and as the unprivileged user (guard too), on files they own.
#[test]
fn guards_reads_leave_the_access_times_the_command_leaves_bare() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let who = if w.unprivileged {
            "unprivileged"
        } else {
            "root"
        };
        let owner = w.unprivileged.then_some(UNPRIV_USER);
        let script = "echo more >> a.txt && rm d/c.txt";
        // Bare, on a twin of the workspace.
        let twin = w.root.join("twin");
        atime_tree(&twin, None);
        let before = atimes(&twin, &ATIME_NAMES);
        let status = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(&twin)
            .status()
            .expect("sh");
        assert!(status.success());
        assert_eq!(
            atimes(&twin, &ATIME_NAMES),
            before,
            "bare moved no access time"
        );

        atime_tree(&w.ws, owner);
        let before = atimes(&w.ws, &ATIME_NAMES);
        // The append makes guard keep a.txt's pre-image: a copy, read from the file.
        w.exec(&["agent"]).run(&["sh", "-c", script]).expect_code(0);
        assert!(
            newest_log(&w).contains("a.txt"),
            "a.txt's pre-image is kept"
        );
        assert_eq!(atimes(&w.ws, &ATIME_NAMES), before, "{who}: guard exec");

        // --atomic --verify digests every file and directory before the command and after
        // its rollback.
        let out = w.exec(&["agent"]).args(["--atomic", "--verify"]).run(&[
            "sh",
            "-c",
            "echo x >> b.txt; exit 3",
        ]);
        assert_eq!(out.code(), 3, "{}", out.stderr());
        assert!(
            out.stderr().contains("rolled the workspace back"),
            "{}",
            out.stderr()
        );
        assert!(!out.stderr().contains("differs"), "{}", out.stderr());
        let now = atimes(&w.ws, &ATIME_NAMES);
        for n in ["a.txt", "e.txt", "d"] {
            let at = |v: &[(String, i64, i64)]| v.iter().find(|a| a.0 == n).cloned();
            assert_eq!(at(&now), at(&before), "{who}: --atomic --verify: {n}");
        }

        // guard rollback --verify of the first run digests the whole workspace afterwards.
        let first = runs(&w)[0].file_name().expect("run id").to_owned();
        w.guard()
            .args(["rollback", "--verify"])
            .arg(&first)
            .output()
            .expect_code(0);
        assert_eq!(
            std::fs::read_to_string(w.ws.join("d/c.txt")).expect("c.txt back"),
            "gamma\n".repeat(500)
        );
        let now = atimes(&w.ws, &ATIME_NAMES);
        for n in ["e.txt", "d"] {
            let at = |v: &[(String, i64, i64)]| v.iter().find(|a| a.0 == n).cloned();
            assert_eq!(at(&now), at(&before), "{who}: guard rollback --verify: {n}");
        }
    }
}
