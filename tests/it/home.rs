//! Home done right per profile: `ci` and `strict` give the command a private, empty HOME (git
//! works with a ~/.gitconfig present, nothing reads the real home); toolchains under the home
//! directory run under every built-in profile and find their homes through the variables the
//! profiles set; `agent` reads git's global config and npm's settings without their tokens;
//! a missing cache directory is created rather than left out.

use std::os::unix::fs::PermissionsExt;

use crate::util::{lacks, Workspace};

fn gitconfig(w: &Workspace) {
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Home Config\n\temail = home@example.invalid\n[init]\n\tdefaultBranch = main\n",
    );
}

#[test]
fn ci_and_strict_give_a_private_empty_home_and_git_works_with_a_gitconfig_present() {
    if lacks(&["git"]) {
        return;
    }
    let w = Workspace::new();
    gitconfig(&w);
    // The user's home is the test's: the command must not read anything in it.
    let script = "set -e; echo \"HOME=$HOME\"; ls -A \"$HOME\" | wc -l; \
                  for v in XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME XDG_STATE_HOME; do \
                  eval d=\\$$v; case \"$d\" in \"$HOME\"/*) echo \"$v inside\";; esac; done; \
                  git init -q repo; cd repo; echo a > a; git add a; \
                  GIT_AUTHOR_NAME=ci GIT_AUTHOR_EMAIL=ci@x GIT_COMMITTER_NAME=ci GIT_COMMITTER_EMAIL=ci@x \
                  git commit -qm one; git log --format=%an; git config --global user.name || echo no-global-name";
    for profile in ["ci", "strict"] {
        let out = w.exec(&[profile]).run(&["sh", "-c", script]);
        out.expect_code(0);
        let stdout = out.stdout();
        let lines: Vec<&str> = stdout.lines().collect();
        assert!(
            lines[0].starts_with("HOME=/") && !lines[0].contains(&*w.home.display().to_string()),
            "{profile}: {stdout}"
        );
        assert!(lines[0].ends_with("/home"), "{profile}: {stdout}");
        assert!(
            lines[1..].iter().filter(|l| l.ends_with(" inside")).count() == 4,
            "{profile}: the XDG directories are in the private home: {stdout}"
        );
        assert!(lines.contains(&"ci"), "{profile}: git committed: {stdout}");
        assert_eq!(lines.last(), Some(&"no-global-name"), "{profile}: {stdout}");
        assert!(
            !out.stderr().contains("unable to access") && !out.stderr().contains("refused"),
            "{profile}: {}",
            out.stderr()
        );
        let refused: Vec<_> = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny")
            .collect();
        assert!(refused.is_empty(), "{profile}: {refused:?}");
        std::fs::remove_dir_all(w.ws.join("repo")).expect("clean");
    }
    // agent reads the user's git config.
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "git init -q repo && cd repo && echo a > a && git add a && git commit -qm one && git log --format=%an",
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout().trim(), "Home Config");
}

/// A fake toolchain installed the way rustup, pyenv and pip --user install theirs: programs
/// under the home directory that find their data through a variable or the home.
fn fake_toolchains(w: &Workspace) {
    let write_exe = |rel: &str, text: &str| {
        let p = w.home.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    write_exe(
        ".cargo/bin/fake-cargo",
        "#!/bin/sh\ncat \"$RUSTUP_HOME/settings.toml\" && echo \"cargo home $CARGO_HOME\" && \
         mkdir -p \"${CARGO_HOME:-$HOME/.cargo}\" && touch \"${CARGO_HOME:-$HOME/.cargo}/.package-cache\" && echo locked\n",
    );
    std::fs::create_dir_all(w.home.join(".rustup")).expect("mkdir");
    std::fs::write(
        w.home.join(".rustup/settings.toml"),
        "default_toolchain = \"fake\"\n",
    )
    .expect("write");
    write_exe(
        ".pyenv/bin/fake-pyenv",
        "#!/bin/sh\necho \"pyenv root $PYENV_ROOT\"\n",
    );
    write_exe(".local/bin/fake-tool", "#!/bin/sh\necho local tool\n");
}

#[test]
fn toolchains_under_home_run_under_every_builtin_profile() {
    let w = Workspace::new();
    fake_toolchains(&w);
    let h = w.home.display().to_string();
    let path = format!("{h}/.cargo/bin:{h}/.pyenv/bin:{h}/.local/bin:/usr/bin:/bin");
    for profile in ["agent", "ci", "strict"] {
        let mut g = w.exec(&[profile]);
        g.env("PATH", &path);
        // Whatever the test runner's toolchain set: the profiles locate the fake ones.
        for var in [
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "CARGO_HOME",
            "PYENV_ROOT",
            "NVM_DIR",
        ] {
            g.cmd.env_remove(var);
        }
        let out = g.run(&["sh", "-c", "fake-cargo; fake-pyenv; fake-tool"]);
        out.expect_code(0);
        let stdout = out.stdout();
        assert!(
            stdout.contains("default_toolchain = \"fake\""),
            "{profile}: {stdout}\n{}",
            out.stderr()
        );
        assert!(
            stdout.contains(&format!("pyenv root {h}/.pyenv")),
            "{profile}: {stdout}"
        );
        assert!(stdout.contains("local tool"), "{profile}: {stdout}");
        assert!(
            stdout.contains("locked"),
            "{profile}: cargo's lock file is writable: {stdout}\n{}",
            out.stderr()
        );
        if profile == "ci" {
            assert!(
                stdout.contains(&format!("cargo home {h}/.cargo")),
                "{stdout}"
            );
        }
        let refused: Vec<_> = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] == "deny")
            .collect();
        assert!(refused.is_empty(), "{profile}: {refused:?}");
    }
    // What cargo runs outside the sandbox stays out of reach.
    let mut g = w.exec(&["ci"]);
    g.env("PATH", &path).cmd.env_remove("CARGO_HOME");
    let out = g.run(&[
        "sh",
        "-c",
        &format!("echo evil > {h}/.cargo/bin/fake-cargo; echo '[build]' > {h}/.cargo/config.toml; echo done"),
    ]);
    out.expect_code(0);
    assert!(!w.home.join(".cargo/config.toml").exists());
    assert!(
        std::fs::read_to_string(w.home.join(".cargo/bin/fake-cargo"))
            .expect("read")
            .starts_with("#!/bin/sh")
    );
    let rules: Vec<String> = w
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny")
        .map(|d| d["rule"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(rules, ["no-cargo-home-programs", "no-cargo-home-programs"]);
}

#[test]
fn agent_reads_npm_settings_without_their_tokens_and_creates_missing_caches() {
    let w = Workspace::new();
    w.write(
        &w.home.join(".npmrc").display().to_string(),
        "registry=http://127.0.0.1:9/\n//127.0.0.1:9/:_authToken=npm_SECRET_TOKEN\nfund=false\n",
    );
    assert!(!w.home.join(".cache").exists());
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "cat \"$NPM_CONFIG_USERCONFIG\"; cat ~/.npmrc 2>/dev/null || echo unreadable; \
         echo cached > ~/.cache/pip/probe && echo pip-cache-writable; \
         echo \"copy=$NPM_CONFIG_USERCONFIG\"",
    ]);
    out.expect_code(0);
    let stdout = out.stdout();
    // The redacted copy lives in the run's private tmp, which goes with it at the end.
    let copy = stdout
        .lines()
        .find_map(|l| l.strip_prefix("copy="))
        .map(std::path::PathBuf::from)
        .expect("the copy's path");
    let tmp = copy.parent().expect("its directory");
    assert!(tmp.starts_with(std::env::temp_dir()), "{}", copy.display());
    assert!(!copy.exists() && !tmp.exists(), "{} is left", tmp.display());
    assert!(stdout.contains("registry=http://127.0.0.1:9/"), "{stdout}");
    assert!(stdout.contains("fund=false"), "{stdout}");
    assert!(!stdout.contains("npm_SECRET_TOKEN"), "{stdout}");
    assert!(stdout.contains("unreadable"), "{stdout}");
    assert!(
        stdout.contains("pip-cache-writable"),
        "{stdout}\n{}",
        out.stderr()
    );
    assert!(w.home.join(".cache/pip/probe").is_file());
}
