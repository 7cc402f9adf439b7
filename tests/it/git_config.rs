//! git's config judged by content (issue 9 part 4), in a repository that existed before the
//! run and in one the run creates: each key that can run a program or send git elsewhere is
//! refused however it is written (`git config`, an edited `config.lock` renamed over the
//! config, an append in place, a repository assembled by hand and reached through a `.git`
//! file), and afterwards git run outside the sandbox runs nothing (each key would have
//! created a marker). Benign changes (remotes, upstreams, branches, submodules, user.*) go
//! through. Hooks are refused in new repositories as in old ones.

use std::path::Path;
use std::process::Command;

use crate::util::{tool, Workspace};

fn ready() -> bool {
    if tool("git").is_none() {
        eprintln!("skipped: git is not installed");
        return false;
    }
    true
}

fn setup(w: &Workspace) {
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n[protocol \"file\"]\n\tallow = always\n",
    );
    w.sh("git init -q old && cd old && echo one > a.txt && git add a.txt && git commit -qm one");
}

/// git outside the sandbox, as the user would run it later; its output does not matter.
fn git_outside(w: &Workspace, dir: &Path, args: &[&str]) {
    let _ = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("HOME", &w.home)
        .env_remove("GIT_EDITOR")
        .env_remove("VISUAL")
        // Below core.editor in git's order: what runs when the key is not there.
        .env("EDITOR", "true")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(std::process::Stdio::null())
        .output();
}

/// One dangerous key: its config section text, and what the user would run later.
struct Key {
    key: &'static str,
    /// The config text that sets it (`MARK` is replaced by the marker's path).
    text: &'static str,
    /// `git config` arguments that set it.
    set: &'static [&'static str],
    later: &'static [&'static str],
}

const KEYS: &[Key] = &[
    Key {
        key: "core.fsmonitor",
        text: "[core]\n\tfsmonitor = touch MARK\n",
        set: &["core.fsmonitor", "touch MARK"],
        later: &["status"],
    },
    Key {
        key: "alias.st",
        text: "[alias]\n\tst = !touch MARK\n",
        set: &["alias.st", "!touch MARK"],
        later: &["st"],
    },
    Key {
        key: "core.editor",
        text: "[core]\n\teditor = touch MARK\n",
        set: &["core.editor", "touch MARK"],
        later: &["commit", "--allow-empty"],
    },
    Key {
        key: "core.hooksPath",
        text: "[core]\n\thooksPath = /tmp\n",
        set: &["core.hooksPath", "/tmp"],
        later: &["status"],
    },
    Key {
        key: "diff.external",
        text: "[diff]\n\texternal = touch MARK\n",
        set: &["diff.external", "touch MARK"],
        later: &["diff"],
    },
    Key {
        key: "include.path",
        text: "[include]\n\tpath = /tmp/x\n",
        set: &["include.path", "/tmp/x"],
        later: &["status"],
    },
    Key {
        key: "filter.x.clean",
        text: "[filter \"x\"]\n\tclean = touch MARK\n",
        set: &["filter.x.clean", "touch MARK"],
        later: &["add", "-A"],
    },
    Key {
        key: "url.https://evil.invalid/.insteadOf",
        text: "[url \"https://evil.invalid/\"]\n\tinsteadOf = https://github.com/\n",
        set: &["url.https://evil.invalid/.insteadOf", "https://github.com/"],
        later: &["status"],
    },
    Key {
        key: "credential.helper",
        text: "[credential]\n\thelper = !touch MARK\n",
        set: &["credential.helper", "!touch MARK"],
        later: &["status"],
    },
    Key {
        key: "core.sshCommand",
        text: "[core]\n\tsshCommand = touch MARK\n",
        set: &["core.sshCommand", "touch MARK"],
        later: &["status"],
    },
    Key {
        key: "core.pager",
        text: "[core]\n\tpager = touch MARK\n",
        set: &["core.pager", "touch MARK"],
        // git pages only to a terminal: nothing here would run it even if it were set.
        later: &["status"],
    },
    Key {
        key: "core.askPass",
        text: "[core]\n\taskPass = touch MARK\n",
        set: &["core.askPass", "touch MARK"],
        later: &["status"],
    },
    Key {
        key: "diff.x.textconv",
        text: "[diff \"x\"]\n\ttextconv = touch MARK\n",
        set: &["diff.x.textconv", "touch MARK"],
        later: &["diff"],
    },
    Key {
        key: "merge.x.driver",
        text: "[merge \"x\"]\n\tdriver = touch MARK\n",
        set: &["merge.x.driver", "touch MARK"],
        later: &["status"],
    },
    Key {
        key: "includeIf.gitdir:/.path",
        text: "[includeIf \"gitdir:/\"]\n\tpath = /tmp/x\n",
        set: &["includeIf.gitdir:/.path", "/tmp/x"],
        later: &["status"],
    },
    Key {
        key: "gpg.program",
        text: "[gpg]\n\tprogram = touch MARK\n",
        set: &["gpg.program", "touch MARK"],
        // Run without a shell, with gpg's arguments: `touch` would not make the marker.
        later: &["status"],
    },
    Key {
        key: "remote.origin.uploadpack",
        text: "[remote \"origin\"]\n\tuploadpack = touch MARK\n",
        set: &["remote.origin.uploadpack", "touch MARK"],
        later: &["status"],
    },
    Key {
        key: "protocol.ext.allow",
        text: "[protocol \"ext\"]\n\tallow = always\n",
        set: &["protocol.ext.allow", "always"],
        later: &["status"],
    },
];

/// Single-quoted for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn dangerous_keys_are_refused_in_old_and_new_repositories_however_written() {
    if !ready() {
        return;
    }
    let w = Workspace::new();
    setup(&w);
    let marker = w.outside.join("MARKER");
    let m = marker.display().to_string();
    for k in KEYS {
        let text = k.text.replace("MARK", &m);
        let set: Vec<String> = k
            .set
            .iter()
            .map(|s| quote(&s.replace("MARK", &m)))
            .collect();
        let old_config = std::fs::read(w.ws.join("old/.git/config")).expect("old config");
        w.write("key.txt", &text);
        let script = format!(
            r#"
attempt() {{ label=$1; shift; "$@" >/dev/null 2>&1; echo "rc=$? $label"; }}
git init -q new && (cd new && echo one > a.txt && git add a.txt && git commit -qm one)
for r in old new; do
  printf '*.txt filter=x diff=x merge=x\n' > $r/.gitattributes
  attempt "$r git config" git -C $r config {set}
  attempt "$r config.lock" sh -c "cp $r/.git/config $r/.git/config.lock && cat key.txt >> $r/.git/config.lock && mv $r/.git/config.lock $r/.git/config"
  rm -f $r/.git/config.lock
  attempt "$r in place" sh -c "cat key.txt >> $r/.git/config"
done
# A repository assembled by hand, config first, reached through a .git file.
mkdir -p evil1.git src1
cat key.txt > evil1.git/config
attempt "evil1 objects" mkdir evil1.git/objects
attempt "evil1 refs" mkdir evil1.git/refs
attempt "evil1 HEAD" sh -c "echo 'ref: refs/heads/main' > evil1.git/HEAD"
echo 'gitdir: ../evil1.git' > src1/.git
# The same with the markers first: then the config itself is refused.
mkdir -p evil2.git/objects evil2.git/refs src2
echo 'ref: refs/heads/main' > evil2.git/HEAD
attempt "evil2 config" sh -c "cat key.txt > evil2.git/config"
printf '[core]\n\tbare = false\n' > evil2.git/config.lock
attempt "evil2 config.lock" sh -c "cat key.txt >> evil2.git/config.lock && mv evil2.git/config.lock evil2.git/config"
echo 'gitdir: ../evil2.git' > src2/.git
"#,
            set = set.join(" "),
        );
        let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
        let lines: Vec<String> = out
            .stdout()
            .lines()
            .filter(|l| l.starts_with("rc="))
            .map(str::to_string)
            .collect();
        assert_eq!(
            lines.len(),
            11,
            "{}: {}\n{}",
            k.key,
            out.stdout(),
            out.stderr()
        );
        for l in &lines {
            // The markers are refused only once the directory would be a repository: the
            // first of evil1's may pass.
            if l.ends_with("evil1 objects") {
                continue;
            }
            assert!(!l.starts_with("rc=0 "), "{}: `{l}` went through", k.key);
        }
        assert_eq!(
            std::fs::read(w.ws.join("old/.git/config")).expect("old config"),
            old_config,
            "{}: the old repository's config changed",
            k.key
        );
        let denied = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny" && d["rule"] == "git.config")
            .count();
        assert!(denied >= 4, "{}: the refusals are logged", k.key);
        let named = w.decisions().into_iter().any(|d| {
            d["rule"] == "git.config"
                && d["reason"]
                    .as_str()
                    .is_some_and(|r| r.to_lowercase().contains(&k.key.to_lowercase()))
        });
        assert!(named, "{}: a refusal names the key", k.key);
        // Later, outside the sandbox: nothing runs.
        for dir in ["old", "new", "src1", "src2"] {
            let d = w.ws.join(dir);
            std::fs::write(d.join("a.txt"), "changed\n").ok();
            git_outside(&w, &d, k.later);
            assert!(
                !marker.exists(),
                "{}: `git {}` in {dir} ran the key",
                k.key,
                k.later.join(" ")
            );
        }
        w.sh("rm -rf new evil1.git evil2.git src1 src2 key.txt old/.gitattributes && git -C old checkout -q -- . && git -C old reset -q");
    }
}

#[test]
fn benign_config_changes_go_through_in_old_and_new_repositories() {
    if !ready() {
        return;
    }
    let w = Workspace::new();
    setup(&w);
    w.sh("git init -q --bare remote.git && git init -q sub && cd sub && echo s > s.txt && git add s.txt && git commit -qm s");
    let script = r#"
set -e
git init -q new && (cd new && echo one > a.txt && git add a.txt && git commit -qm one)
for r in old new; do
  cd $r
  git remote add origin ../remote.git
  git push -q -u origin main:$r-main
  git config user.email someone@example.invalid
  git config branch.main.rebase true
  git checkout -q -b feature origin/$r-main
  git branch --set-upstream-to=origin/$r-main
  git checkout -q main
  git branch -q -D feature
  git submodule -q add "$PWD/../sub" sub
  git commit -qm "add sub"
  git remote set-url --push origin ../remote.git
  cd ..
done
echo done
"#;
    let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert!(out.stdout().contains("done"));
    for r in ["old", "new"] {
        let get = |k: &str| {
            let o = Command::new("git")
                .arg("-C")
                .arg(w.ws.join(r))
                .args(["config", "--get", k])
                .env("HOME", &w.home)
                .output()
                .expect("git config");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        assert_eq!(get("remote.origin.url"), "../remote.git", "{r}");
        assert_eq!(get("branch.main.rebase"), "true", "{r}");
        assert!(!get("submodule.sub.url").is_empty(), "{r}");
        assert!(
            w.ws.join(r).join(".git/modules/sub/config").is_file(),
            "{r}"
        );
    }
    let refused = w
        .refusals()
        .into_iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>();
    assert!(refused.is_empty(), "nothing refused: {refused:?}");
}

#[test]
fn hooks_are_refused_in_new_repositories_as_in_old_ones() {
    if !ready() {
        return;
    }
    let w = Workspace::new();
    setup(&w);
    let marker = w.outside.join("MARKER");
    let hook = format!("#!/bin/sh\ntouch {}\n", marker.display());
    std::fs::write(w.ws.join("hook.sh"), &hook).expect("write");
    let script = format!(
        r#"
# guard-probe exits 0 and prints `errno N NAME` when its call fails.
attempt() {{ label=$1; shift; out=$("$@" 2>&1); rc=$?; case $out in *errno*) rc=1;; esac; echo "rc=$rc $label"; }}
chmod +x hook.sh
git init -q new
ls new/.git/hooks/*.sample >/dev/null && echo samples
for r in old new; do
  h=$r/.git/hooks
  attempt "$r cp" cp hook.sh $h/pre-commit
  attempt "$r creat" {probe} creat-mode $h/post-checkout 755
  attempt "$r write+chmod" sh -c "cat hook.sh > $h/post-commit && chmod +x $h/post-commit"
  attempt "$r sample" mv $h/pre-push.sample $h/pre-push
  attempt "$r symlink" ln -s ../../../hook.sh $h/pre-rebase
  attempt "$r link" ln hook.sh $h/commit-msg
done
mkdir -p evil.git/hooks evil.git/objects
cp hook.sh evil.git/hooks/post-checkout
attempt "assembled" mkdir evil.git/refs
"#,
        probe = w.probe()
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    assert!(
        out.stdout().contains("samples"),
        "git init still installs its samples"
    );
    let stdout = out.stdout();
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rc=")).collect();
    assert_eq!(lines.len(), 13, "{}\n{}", out.stdout(), out.stderr());
    for l in lines {
        assert!(!l.starts_with("rc=0 "), "`{l}` went through");
    }
    for r in ["old", "new"] {
        let d = w.ws.join(r);
        git_outside(&w, &d, &["commit", "--allow-empty", "-m", "x"]);
        git_outside(&w, &d, &["checkout", "-q", "-b", "y"]);
        assert!(!marker.exists(), "a hook ran in {r}");
    }
    assert!(w
        .decisions()
        .iter()
        .any(|d| d["rule"] == "git.hook" && d["verdict"] == "deny"));
}
