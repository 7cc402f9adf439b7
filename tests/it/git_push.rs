//! Pushes that delete or force-update remote refs, refused however they are spelled (issue 9
//! part 5), against a bare remote served by `git daemon` on loopback: a `+` refspec given
//! through `-c remote.origin.push`, `git send-pack --force`, `push origin :branch`,
//! `push -d`, `--mirror`, `--prune`, `--force`, a `+refspec` and an alias. Each is refused
//! under `agent`, logged, and the remote's refs are exactly what they were; an ordinary push
//! of a new branch still goes through.

use std::path::Path;
use std::process::Command;

use crate::agent_session::Daemon;
use crate::util::{lacks, Workspace};

/// The remote's refs, as `git for-each-ref` lists them.
fn refs(remote: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(remote)
        .args(["for-each-ref", "--format=%(objectname) %(refname)"])
        .output()
        .expect("git for-each-ref");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether git's exec path holds `git-daemon`.
fn has_daemon() -> bool {
    Command::new("git")
        .arg("--exec-path")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .is_some_and(|dir| Path::new(&dir).join("git-daemon").is_file())
}

#[test]
fn destructive_pushes_are_refused_however_spelled_and_the_remote_is_unchanged() {
    if lacks(&["git"]) {
        return;
    }
    if !has_daemon() {
        eprintln!("skipped: git daemon is not installed");
        return;
    }
    let w = Workspace::new();
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    );
    let srv = w.root.join("srv");
    std::fs::create_dir_all(&srv).expect("srv");
    let remote = srv.join("remote.git");
    let daemon = Daemon::start(&srv);
    let url = format!("git://127.0.0.1:{}/remote.git", daemon.port);
    // The remote has main and feature; the clone's main is rewritten, so only a forced push
    // could replace the remote's.
    w.sh(&format!(
        "git init -q --bare {remote} && git init -q repo && cd repo && echo one > a.txt \
         && git add a.txt && git commit -qm one && git checkout -q -b feature && git checkout -q main \
         && git remote add origin {url} && git push -q origin main feature \
         && git commit -q --amend -m rewritten",
        remote = remote.display()
    ));
    let before = refs(&remote);
    assert!(before.contains("refs/heads/feature"), "{before}");
    // Each spelling, and whether only git's own reading of the command and config catches
    // it (`git.push`); the rest are also matched by agent's argv rules, which come first.
    let spellings: &[(&str, bool)] = &[
        (
            "git -c remote.origin.push=+refs/heads/main:refs/heads/main push origin",
            true,
        ),
        ("git send-pack --force URL main", true),
        ("git push origin :feature", true),
        ("git push -d origin feature", true),
        ("git push --delete origin feature", true),
        ("git push --mirror origin", false),
        ("git push --prune origin refs/heads/*:refs/heads/*", true),
        ("git push --force origin main", false),
        ("git push origin +main", false),
        ("git -c alias.up='push --forc' up origin main", true),
    ];
    for (cmd, by_git) in spellings {
        let cmd = cmd.replace("URL", &url);
        let out = w
            .exec(&["agent"])
            .run(&["sh", "-c", &format!("cd repo && {cmd}")]);
        assert_ne!(out.code(), 0, "`{cmd}` went through: {}", out.stderr());
        let refused: Vec<String> = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny" && d["op"] == "exec")
            .map(|d| d["rule"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(refused.len(), 1, "`{cmd}`: the refusal is logged");
        if *by_git {
            assert_eq!(refused[0], "git.push", "`{cmd}`");
        }
        assert_eq!(refs(&remote), before, "`{cmd}` changed the remote");
    }
    // A push that only adds a branch goes through.
    let out = w
        .exec(&["agent"])
        .run(&["sh", "-c", "cd repo && git push -q origin main:other"]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert!(refs(&remote).contains("refs/heads/other"));
    drop(daemon);
}
