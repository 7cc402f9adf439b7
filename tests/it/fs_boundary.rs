//! The filesystem boundary: writes outside the write roots fail and leave files intact; work
//! inside the workspace goes through; protected paths and home secrets stay untouched.

use crate::util::{probe_result, Workspace};

#[test]
fn deleting_a_file_outside_the_write_roots_fails_and_the_file_is_intact() {
    let w = Workspace::new();
    let victim = w.write(
        &w.outside.join("keep.txt").display().to_string(),
        "precious\n",
    );
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    out.expect_code(0);
    let r = probe_result(&out);
    assert!(
        r.contains("EACCES") || r.contains("EPERM"),
        "unlink outside must fail, got {r}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("still there"),
        "precious\n"
    );
}

#[test]
fn writing_a_file_outside_the_write_roots_fails_and_the_file_is_intact() {
    let w = Workspace::new();
    let victim = w.write(
        &w.outside.join("keep.txt").display().to_string(),
        "precious\n",
    );
    for op in ["write", "truncate", "chmod"] {
        let out = w
            .exec(&["agent"])
            .run(&[&w.probe(), op, &victim.display().to_string(), "evil"]);
        let r = probe_result(&out);
        assert!(
            r.contains("EACCES") || r.contains("EPERM"),
            "{op} outside must fail, got {r}"
        );
    }
    let created = w.outside.join("new.txt");
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "write", &created.display().to_string(), "x"]);
    assert!(
        probe_result(&out).starts_with("errno"),
        "creating outside must fail"
    );
    assert!(!created.exists());
    assert_eq!(
        std::fs::read_to_string(&victim).expect("still there"),
        "precious\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&victim)
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_ne!(mode, 0o600, "chmod outside must not have applied");
}

#[test]
fn creating_renaming_and_deleting_inside_the_workspace_works() {
    let w = Workspace::new();
    w.write("old.txt", "old\n");
    let script = "set -e; echo new > a.txt; mv a.txt b.txt; mkdir -p d/e; echo x > d/e/f; \
                  ln -s b.txt link; ln b.txt hard; chmod 600 b.txt; rm -r d; rm old.txt; cat b.txt";
    let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert_eq!(out.stdout(), "new\n");
    assert_eq!(
        std::fs::read_to_string(w.ws.join("b.txt")).expect("b"),
        "new\n"
    );
    assert!(!w.ws.join("old.txt").exists());
    assert!(!w.ws.join("d").exists());
    assert_eq!(
        std::fs::read_link(w.ws.join("link"))
            .expect("link")
            .to_str(),
        Some("b.txt")
    );
}

#[test]
fn protected_git_config_and_hooks_of_an_existing_repo_cannot_be_changed() {
    let w = Workspace::new();
    let config = w.write(".git/config", "[core]\n\tbare = false\n");
    // A repository as git sees one: HEAD, objects and refs.
    w.write(".git/HEAD", "ref: refs/heads/main\n");
    std::fs::create_dir_all(w.ws.join(".git/objects")).expect("objects");
    std::fs::create_dir_all(w.ws.join(".git/refs")).expect("refs");
    w.write(".git/config.lock", "[core]\n\thooksPath = /tmp/evil\n");
    let hooks = w.ws.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    let probe = w.probe();
    let cases = [
        // The config is judged by content: written in place it cannot be judged, and a
        // lock file renamed over it that adds core.hooksPath is refused.
        vec![
            probe.as_str(),
            "write",
            ".git/config",
            "[core]\n\thooksPath = /tmp/evil\n",
        ],
        vec![probe.as_str(), "rename", ".git/config.lock", ".git/config"],
        vec![
            probe.as_str(),
            "write",
            ".git/hooks/pre-commit",
            "#!/bin/sh\ncurl evil\n",
        ],
        vec![probe.as_str(), "rename", ".git", "moved-git"],
        vec![probe.as_str(), "rename", ".git/hooks", "hooks2"],
        vec![
            probe.as_str(),
            "symlink",
            "/tmp/evil",
            ".git/hooks/post-checkout",
        ],
    ];
    let mut rules = Vec::new();
    for argv in cases {
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(
            probe_result(&out),
            "errno 1 EPERM",
            "{argv:?} must be refused"
        );
        // Each run's log names the rule that refused it.
        let denied: Vec<String> = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny")
            .map(|d| d["rule"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(denied.len(), 1, "{argv:?}: {denied:?}");
        rules.extend(denied);
    }
    assert_eq!(
        rules,
        [
            "git.config",
            "git.config",
            "fs.protect",
            "fs.protect",
            "fs.protect",
            "fs.protect"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&config).expect("config"),
        "[core]\n\tbare = false\n"
    );
    assert_eq!(std::fs::read_dir(&hooks).expect("hooks").count(), 0);
    assert!(w.ws.join(".git").is_dir());
    // Removing the config adds no key git could run (git falls back to its defaults): it goes
    // through like any delete in the workspace, and the journal can undo it.
    let out = w.exec(&["agent"]).run(&[&probe, "unlink", ".git/config"]);
    assert_eq!(probe_result(&out), "ok");
    assert!(!config.exists());
}

#[test]
fn a_repo_created_by_the_run_may_write_its_own_git_config() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "mkdir -p .git/hooks && echo '[core]' > .git/config && echo '#hook' > .git/hooks/h && echo ok",
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout(), "ok\n");
    // Once the directory becomes a repository its config is judged, and what guard judged is
    // what stays: a descriptor kept on the file written before reaches nothing git reads.
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "exec 3>>.git/config; mkdir .git/objects .git/refs && echo 'ref: refs/heads/main' > .git/HEAD \
         && printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' >&3; exec 3>&-; echo done",
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout(), "done\n", "{}", out.stderr());
    assert_eq!(
        std::fs::read_to_string(w.ws.join(".git/config")).expect("config"),
        "[core]\n"
    );
}

#[test]
fn home_secrets_are_not_readable_under_agent() {
    let w = Workspace::new();
    w.write(
        &w.home.join(".ssh/id_ed25519").display().to_string(),
        "SECRET KEY\n",
    );
    w.write(
        &w.home.join(".cargo/config.toml").display().to_string(),
        "[build]\n",
    );
    let key = w.home.join(".ssh/id_ed25519").display().to_string();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "read", &key]);
    assert_eq!(
        probe_result(&out),
        "errno 13 EACCES",
        "ssh key must be unreadable"
    );
    let cargo = w.home.join(".cargo/config.toml").display().to_string();
    let out = w.exec(&["agent"]).run(&[&w.probe(), "read", &cargo]);
    assert_eq!(probe_result(&out), "ok", "tool caches stay readable");
}

/// Every directory may be opened and listed under `agent`, as bare, while the files outside
/// the read roots stay unreadable: a walker that opens each ancestor of where it starts (walkdir
/// 2.5.1 and ignore 0.4.35 do, following symlinks: `rg -L` under guard missed every linked
/// directory) finds them all. `strict` takes the listing back. As root and unprivileged.
#[test]
fn directories_are_listable_everywhere_and_files_only_in_the_roots() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let key = w.write(
            &w.home.join(".ssh/id_ed25519").display().to_string(),
            "SECRET KEY\n",
        );
        let mut dirs: Vec<String> = w.ws.ancestors().map(|d| d.display().to_string()).collect();
        dirs.push(w.outside.display().to_string());
        dirs.push(w.home.join(".ssh").display().to_string());
        let script = format!(
            "for d in {}; do ls -a \"$d\" >/dev/null 2>&1 && echo \"list $d\" || echo \"no list $d\"; done
             ls {ssh}; cat {key} 2>/dev/null || echo 'no read'",
            dirs.iter()
                .map(|d| format!("'{d}'"))
                .collect::<Vec<_>>()
                .join(" "),
            ssh = w.home.join(".ssh").display(),
            key = key.display(),
        );
        let listed: String = dirs.iter().map(|d| format!("list {d}\n")).collect();
        let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
        assert_eq!(
            out.stdout(),
            format!("{listed}id_ed25519\nno read\n"),
            "unprivileged: {}; stderr:\n{}",
            w.unprivileged,
            out.stderr()
        );
        let out = w
            .exec(&["strict"])
            .run(&["sh", "-c", "ls / || echo 'no list'"]);
        assert_eq!(
            out.stdout(),
            "no list\n",
            "unprivileged: {}",
            w.unprivileged
        );
    }
}

#[test]
fn tmpdir_is_private_writable_and_removed_after_the_run() {
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "echo hi > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" && echo \"$TMPDIR\"",
    ]);
    out.expect_code(0);
    let lines: Vec<_> = out.stdout().lines().map(str::to_string).collect();
    assert_eq!(lines[0], "hi");
    assert!(
        !std::path::Path::new(&lines[1]).exists(),
        "the private tmp is removed after the run"
    );
    // Left empty (removed by one rmdir) or holding a tree: gone either way.
    for script in [
        "echo \"$TMPDIR\"",
        "mkdir -p \"$TMPDIR/a/b\" && touch \"$TMPDIR/a/b/c\" && echo \"$TMPDIR\"",
    ] {
        let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
        out.expect_code(0);
        let tmp = out.stdout().trim().to_string();
        assert!(tmp.contains("guard-"), "{tmp}");
        assert!(
            !std::path::Path::new(&tmp).exists(),
            "{script}: {tmp} is left"
        );
    }
}

#[test]
fn degraded_landlock_abi_1_still_bounds_writes() {
    let w = Workspace::new();
    let victim = w.write(
        &w.outside.join("keep.txt").display().to_string(),
        "precious\n",
    );
    let out = w
        .exec(&["agent"])
        .env("GUARD_LANDLOCK_ABI", "1")
        .env("GUARD_NO_SYNC_WAKE_UP", "1")
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    assert!(
        probe_result(&out).starts_with("errno"),
        "unlink outside must fail at ABI 1"
    );
    assert!(victim.exists());
    let start = w
        .audit()
        .into_iter()
        .find(|e| e["type"] == "run-start")
        .expect("run-start");
    assert_eq!(start["landlock_abi"], 1);
    let degraded = start["degraded"].to_string();
    assert!(degraded.contains("sync-wake-up"), "{degraded}");
    assert!(
        degraded.contains("capped at abi 1"),
        "rights dropped by the ABI cap are reported: {degraded}"
    );
}

#[test]
fn a_nested_repository_is_protected_as_well_as_a_new_one_is_free() {
    let w = Workspace::new();
    let config = w.write("sub/app/.git/config", "[core]\n");
    w.write("sub/app/.git/HEAD", "ref: refs/heads/main\n");
    for d in ["hooks", "objects", "refs"] {
        std::fs::create_dir_all(w.ws.join("sub/app/.git").join(d)).expect("git dir");
    }
    let probe = w.probe();
    for argv in [
        vec![
            probe.as_str(),
            "write",
            "sub/app/.git/hooks/pre-commit",
            "evil",
        ],
        vec![probe.as_str(), "write", "sub/app/.git/config", "evil"],
        vec![
            probe.as_str(),
            "rename",
            "sub/app/.git",
            "sub/app/git-moved",
        ],
    ] {
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{argv:?}");
    }
    assert_eq!(
        std::fs::read_to_string(&config).expect("intact"),
        "[core]\n"
    );
    // Renaming the repository's parent keeps it protected under its new name.
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "mv sub/app sub/app2 && echo evil > sub/app2/.git/hooks/x",
    ]);
    assert_ne!(out.code(), 0);
    assert!(!w.ws.join("sub/app2/.git/hooks/x").exists());
}
