//! git under the agent profile: ordinary work goes through, force pushes in every spelling are
//! refused and the remote keeps its history.

use std::path::Path;
use std::process::Command;

use crate::util::{tool, Workspace};

fn git_available() -> bool {
    if tool("git").is_none() {
        eprintln!("skip: git is not installed");
        return false;
    }
    true
}

fn rev(repo: &Path, rev: &str) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", rev])
        .output()
        .expect("git rev-parse");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn setup_home(w: &Workspace) {
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    );
}

#[test]
fn git_init_add_commit_push_to_a_local_bare_remote_works_under_agent() {
    if !git_available() {
        return;
    }
    let w = Workspace::new();
    setup_home(&w);
    let script = "set -e; git init -q --bare remote.git; git init -q repo; cd repo; \
                  echo hello > a.txt; git add -A; git commit -qm first; \
                  git remote add origin ../remote.git; git push -q origin main; git log --oneline | wc -l";
    let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert_eq!(out.stdout().trim(), "1");
    assert_eq!(
        rev(&w.ws.join("remote.git"), "main"),
        rev(&w.ws.join("repo"), "HEAD")
    );
}

#[test]
fn force_push_in_every_spelling_is_refused_and_the_remote_is_unchanged() {
    if !git_available() {
        return;
    }
    let w = Workspace::new();
    setup_home(&w);
    let setup = "set -e; git init -q --bare remote.git; git init -q repo; cd repo; \
                 echo one > a.txt; git add -A; git commit -qm one; git remote add origin ../remote.git; \
                 git push -q -u origin main; echo two > a.txt; git commit -qam two --amend";
    w.exec(&["agent"]).run(&["sh", "-c", setup]).expect_code(0);
    let remote = w.ws.join("remote.git");
    let before = rev(&remote, "main");
    assert_ne!(
        before,
        rev(&w.ws.join("repo"), "HEAD"),
        "local history was rewritten"
    );
    let spellings = [
        "git push --force origin main",
        "git push -f origin main",
        "git push origin main -f",
        "git push -uf origin main",
        "git push --force-with-lease origin main",
        "git push --force-with-lease=main origin main",
        "git push origin +main",
        "git push origin +HEAD:main",
        "git -C . push --force origin main",
        "env git push -f origin main",
    ];
    for s in spellings {
        let out = w
            .exec(&["agent"])
            .run(&["sh", "-c", &format!("cd repo && {s}")]);
        assert_ne!(out.code(), 0, "`{s}` must fail");
        assert_eq!(
            rev(&remote, "main"),
            before,
            "`{s}` must not change the remote"
        );
        let denied = w.decisions().into_iter().any(|d| {
            d["verdict"] == "deny"
                && d["syscall"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("execve"))
        });
        assert!(denied, "`{s}`: the audit log records the refused exec");
    }
    // An ordinary push of new work still goes through.
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "cd repo && git pull -q --rebase origin main 2>/dev/null; git log -1 --format=%s",
    ]);
    let _ = out;
}

/// `git stash -u` tidies up after itself with `rmdir(".git")` and takes the ENOTEMPTY it gets
/// for granted. In a repository that was there before the run `.git` is protected under
/// `agent`, but the kernel fails that call anyway: guard answers it as bare does, so git's
/// output is bare's, nothing is refused and an `--atomic` run keeps its work. As root and as an
/// unprivileged user.
#[test]
fn git_stash_of_untracked_files_in_an_existing_repository_is_as_bare_under_atomic() {
    if !git_available() {
        return;
    }
    let setup = "set -e; git init -q repo; cd repo; echo one > a.txt; git add a.txt; \
                 git commit -qm first";
    let work = "cd repo && echo wip > u.txt && echo two >> a.txt && git stash -u -q && \
                test ! -e u.txt && git stash pop -q && cat u.txt a.txt && git status --porcelain";
    for w in [Workspace::new(), Workspace::unprivileged()] {
        setup_home(&w);
        let who = if w.unprivileged {
            "unprivileged"
        } else {
            "root"
        };
        // Bare, on a repository made the same way.
        let bare_dir = w.outside.join("bare");
        std::fs::create_dir_all(&bare_dir).expect("mkdir");
        let bare = |script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .current_dir(&bare_dir)
                .env("HOME", &w.home)
                .output()
                .expect("bare sh")
        };
        assert!(bare(setup).status.success(), "{who}: bare setup");
        let bare = bare(work);
        w.sh(setup);
        // Owned by whoever runs guard, as the repository a user works in is.
        w.write("seed.txt", "seed\n");

        let out = w.exec(&["agent"]).arg("--atomic").run(&["sh", "-c", work]);
        out.expect_code(0);
        assert_eq!(
            out.stdout(),
            String::from_utf8_lossy(&bare.stdout),
            "{who}: git's output under guard differs from bare's"
        );
        assert_eq!(
            out.stderr(),
            String::from_utf8_lossy(&bare.stderr),
            "{who}: git's stderr under guard differs from bare's"
        );
        assert_eq!(
            std::fs::read_to_string(w.ws.join("repo/u.txt")).expect("u.txt kept"),
            "wip\n",
            "{who}: the --atomic run's work is kept"
        );
        let decisions = w.decisions();
        assert!(
            decisions.iter().all(|d| d["verdict"] != "deny"),
            "{who}: nothing is refused: {decisions:#?}"
        );
        let git_dir = w.ws.join("repo/.git").display().to_string();
        let tidy = decisions
            .iter()
            .find(|d| d["op"] == "delete" && d["path"] == git_dir.as_str())
            .unwrap_or_else(|| panic!("{who}: git's rmdir of .git is in the audit log"));
        assert_eq!(tidy["verdict"], "error", "{who}: {tidy}");
        assert_eq!(tidy["errno"], "ENOTEMPTY", "{who}: {tidy}");
        assert!(
            tidy["reason"]
                .as_str()
                .is_some_and(|r| r.contains("fs.protect")),
            "{who}: the audit names the rule that had nothing to refuse: {tidy}"
        );
    }
}
