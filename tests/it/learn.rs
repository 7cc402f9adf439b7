//! `guard learn` on three workloads: a shell session, a cargo build and an npm install. Each
//! one needs something its base profile refuses. Under the base alone the workload fails; the
//! profile `guard learn` writes passes `guard profile check`; under the base plus that profile
//! the workload, started again from the same state, succeeds and its audit log holds no
//! refusal. Landlock's refusals (reads, executes) write no audit line: they show as the
//! workload's failure and its "Permission denied". The calls of both runs are asked again of
//! `guard explain`, which must give each the verdict and rule the run recorded
//! ([`explain_agrees`]): at least 50 calls over the three workloads, refusals among them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::learn_agree::{explain_agrees, Agreed};
use crate::util::{lacks, tool, Out, Workspace};

/// The refusals of the newest run: denials and kills, except calls whose path does not
/// resolve (the kernel's own answer, as `guard log --denied` counts them).
fn refusals(w: &Workspace) -> Vec<serde_json::Value> {
    w.decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny" || d["verdict"] == "kill")
        .filter(|d| d["rule"] != "resolve")
        .collect()
}

/// `cp -a from to`, replacing `to`.
fn copy_tree(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(
        status.success(),
        "cp -a {} {}",
        from.display(),
        to.display()
    );
}

/// One workload: its environment and script, and what it prints when it works.
struct Workload<'a> {
    env: Vec<(&'a str, String)>,
    script: &'a str,
    expect: &'a str,
    /// Outputs to remove before the run under the learned profile (the roots the learning run
    /// created stay: Landlock grants nothing beneath a root that is missing when a run starts).
    outputs: Vec<PathBuf>,
}

/// How the workload fared under the base alone.
struct Base {
    out: Out,
    /// The refusals of its audit log.
    refusals: Vec<serde_json::Value>,
}

/// Run `workload` under the base, learn it, check the profile, and run it again under the
/// base plus the learned profile; `guard explain` is asked about the calls of both runs.
/// Returns the learned profile's text, the base run and what explain agreed on.
fn round_trip(w: &Workspace, workload: &Workload<'_>) -> (String, Base, Agreed) {
    let ws_pristine = w.root.join("ws.pristine");
    let home_pristine = w.root.join("home.pristine");
    copy_tree(&w.ws, &ws_pristine);
    copy_tree(&w.home, &home_pristine);
    let reset = || {
        copy_tree(&ws_pristine, &w.ws);
        copy_tree(&home_pristine, &w.home);
    };

    // 1. The base alone refuses something the workload needs.
    let mut g = w.exec(&["agent"]);
    for (k, v) in &workload.env {
        g.env(k, v);
    }
    let out = g.run(&["sh", "-c", workload.script]);
    assert_ne!(
        out.stdout().trim_end(),
        workload.expect,
        "the workload should not work under the base\n{}",
        out.stderr()
    );
    let base = Base {
        out,
        refusals: refusals(w),
    };
    // guard explain, asked about the run's calls, agrees with it.
    let mut agreed = explain_agrees(w, &["agent"], &workload.env, &w.decisions(), PER_RUN);

    // 2. Learn it, from the same state.
    reset();
    let learned = w.root.join("learned.toml");
    let mut g = w.guard();
    g.arg("learn")
        .arg("-o")
        .arg(&learned)
        .args(["-p", "agent", "-p"])
        .arg(&w.profile)
        .arg("-w")
        .arg(&w.ws);
    for (k, v) in &workload.env {
        g.env(k, v);
    }
    let out = g.run(&["sh", "-c", workload.script]);
    out.expect_code(0);
    assert_eq!(out.stdout().trim_end(), workload.expect, "{}", out.stderr());
    let text = std::fs::read_to_string(&learned).expect("the learned profile");
    w.guard()
        .args(["profile", "check"])
        .arg(&learned)
        .output()
        .expect_code(0);

    // 3. The same workload from the same state, under the base and the learned profile.
    copy_tree(&ws_pristine, &w.ws);
    for p in &workload.outputs {
        let _ = std::fs::remove_dir_all(p);
        let _ = std::fs::remove_file(p);
    }
    let learned_spec = learned.display().to_string();
    let mut g = w.exec(&["agent", &learned_spec]);
    for (k, v) in &workload.env {
        g.env(k, v);
    }
    let again = g.run(&["sh", "-c", workload.script]);
    again.expect_code(0);
    assert_eq!(
        again.stdout().trim_end(),
        workload.expect,
        "{}\n--- learned profile\n{text}",
        again.stderr()
    );
    let left = refusals(w);
    assert!(
        left.is_empty(),
        "refusals under the learned profile: {left:#?}\n--- learned profile\n{text}"
    );
    agreed.add(explain_agrees(
        w,
        &["agent", &learned_spec],
        &workload.env,
        &w.decisions(),
        PER_RUN,
    ));
    eprintln!(
        "explain agreed with the runs on {} cases ({} refused), by operation {:?}",
        agreed.cases, agreed.refused, agreed.ops
    );
    (text, base, agreed)
}

/// At most this many of a run's calls are asked of `guard explain`.
const PER_RUN: usize = 40;

#[test]
fn a_learned_profile_lets_a_shell_session_run_with_no_refusal() {
    let w = Workspace::new();
    w.write(&w.home.join(".toolrc").display().to_string(), "setting=1\n");
    w.write(".git/config", "[core]\n");
    w.write(".git/hooks/pre-commit", "#!/bin/sh\n");
    w.write("notes.txt", "notes\n");
    // The base (agent and the test layer) also refuses one command line.
    let mut layer = std::fs::read_to_string(&w.profile).expect("test layer");
    layer.push_str(
        "\n[[rule]]\nid = \"no-stamp\"\nwhen = \"exec\"\nargv = [\"touch\", \"{workspace}/stamp\"]\n\
         action = \"deny\"\nreason = \"a command line the base refuses\"\n",
    );
    std::fs::write(&w.profile, layer).expect("write the test layer");
    // A service on loopback that the session talks to.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    // Reads the home directory (Landlock), writes beneath it (the supervisor's write roots),
    // edits a protected file (protect: a hook, not executable), runs a refused command line (a rule), and works in the
    // workspace: looks around, edits, removes and remakes a scratch file, connects.
    let script = format!(
        "cat \"$HOME/.toolrc\" >/dev/null; cp notes.txt out.txt; \
         ls -la >/dev/null; wc -l notes.txt >/dev/null; sort notes.txt >/dev/null; \
         head -n 1 notes.txt >/dev/null; echo more >> notes.txt; \
         rm -f scratch.txt; echo scratch > scratch.txt; {probe} connect 127.0.0.1:{port} >/dev/null; \
         ls {outside} >/dev/null; \
         mkdir -p \"$HOME/.config/tool\"; echo state > \"$HOME/.config/tool/state\"; \
         printf 'echo hi\\n' >> .git/hooks/pre-commit; touch \"$PWD/stamp\"; \
         test -s \"$HOME/.config/tool/state\" && grep -q hi .git/hooks/pre-commit && \
         test -e stamp && grep -q setting \"$HOME/.toolrc\" && echo done",
        probe = w.probe(),
        outside = w.outside.display(),
    );
    let (text, base, agreed) = round_trip(
        &w,
        &Workload {
            env: Vec::new(),
            script: &script,
            expect: "done",
            outputs: vec![w.home.join(".config/tool")],
        },
    );
    // explain agreed on the session's calls: at least 30 (with the cargo build's 15 and the
    // npm install's 5, the 50 of the proof), refusals among them, every kind of operation.
    assert!(agreed.cases >= 30, "{agreed:?}");
    assert!(agreed.refused >= 3, "{agreed:?}");
    for op in ["exec", "write", "delete", "connect"] {
        assert!(agreed.ops.contains_key(op), "no {op} asked: {agreed:?}");
    }
    drop(listener);
    // Landlock refused the read (no audit line); the supervisor refused the rest.
    assert!(
        base.out.stderr().contains("Permission denied"),
        "{}",
        base.out.stderr()
    );
    let rules: Vec<&str> = base
        .refusals
        .iter()
        .filter_map(|d| d["rule"].as_str())
        .collect();
    assert!(rules.contains(&"fs.write-roots"), "{rules:?}");
    assert!(rules.contains(&"fs.protect"), "{rules:?}");
    assert!(rules.contains(&"no-stamp"), "{rules:?}");
    // Generalised with variables, commented with the call that needed each entry.
    for expected in [
        "\"{home}/.toolrc\"",
        "\"{home}/.config\"",
        "path = [\"{workspace}/.git/hooks/pre-commit\"]",
        "argv = [\"touch\", \"{workspace}/stamp\"]",
        "(refused by no-stamp)",
        "(refused by fs.protect)",
        "(refused by fs.write-roots)",
        "(refused by fs.read)",
    ] {
        assert!(text.contains(expected), "missing {expected}:\n{text}");
    }
    // A directory only listed needs no read root: fs.list grants the listing.
    let outside = w.outside.display().to_string();
    assert!(!text.contains(&outside), "{outside} learned:\n{text}");
}

/// The toolchain's own directory (the sysroot: cargo and rustc, not rustup's proxies).
fn sysroot() -> Option<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.join("bin/cargo").is_file().then_some(p)
}

#[test]
fn a_learned_profile_lets_an_offline_cargo_build_run_with_no_refusal() {
    let Some(sysroot) = sysroot() else {
        eprintln!("skipped: no rust toolchain (rustc --print sysroot)");
        return;
    };
    if tool("cc").is_none() {
        eprintln!("skipped: no C linker (cc)");
        return;
    }
    let w = Workspace::new();
    if sysroot.starts_with(&w.root) || sysroot.starts_with("/usr") {
        eprintln!("skipped: the toolchain is already readable under agent");
        return;
    }
    w.write(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    w.write(
        "src/main.rs",
        "fn main() { println!(\"tiny {}\", 6 * 7); }\n",
    );
    // CARGO_HOME and a shared target directory in the (test) home; the toolchain outside it.
    let target = w.home.join(".cache/cargo-target");
    let (text, base, agreed) = round_trip(
        &w,
        &Workload {
            env: vec![
                ("CARGO_HOME", w.home.join(".cargo").display().to_string()),
                ("CARGO_TARGET_DIR", target.display().to_string()),
                ("CARGO_NET_OFFLINE", "true".into()),
                ("CARGO_TERM_COLOR", "never".into()),
                ("PATH", format!("{}/bin:/usr/bin:/bin", sysroot.display())),
            ],
            script: "cargo build -q && \"$CARGO_TARGET_DIR/debug/tiny\"",
            expect: "tiny 42",
            outputs: vec![target.clone()],
        },
    );
    assert!(agreed.cases >= 15, "{agreed:?}");
    // Landlock refused the toolchain: no audit line, the exec fails.
    assert!(
        base.out.stderr().contains("Permission denied"),
        "{}",
        base.out.stderr()
    );
    let sysroot_text = sysroot.display().to_string();
    assert!(
        text.lines()
            .any(|l| l.trim() == format!("\"{sysroot_text}\",")),
        "the toolchain, as one root:\n{text}"
    );
    assert!(text.contains("\"{home}/.cache\""), "{text}");
}

/// A local npm package packed into a tarball in `w.bin` (readable under the test layer).
fn tarball(w: &Workspace) -> PathBuf {
    let src = w.root.join("npm-src/fid-a");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        src.join("package.json"),
        r#"{"name":"fid-a","version":"1.0.0","main":"index.js"}"#,
    )
    .expect("write");
    std::fs::write(src.join("index.js"), "module.exports = (x) => x * 2;\n").expect("write");
    let status = Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(&w.bin)
        .current_dir(&src)
        .env("npm_config_cache", w.root.join("npm-pack-cache"))
        .env("npm_config_update_notifier", "false")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("npm pack");
    assert!(status.success(), "npm pack");
    w.bin.join("fid-a-1.0.0.tgz")
}

#[test]
fn a_learned_profile_lets_an_npm_install_run_with_no_refusal() {
    if lacks(&["npm", "node"]) {
        return;
    }
    let w = Workspace::new();
    let tgz = tarball(&w);
    w.write(
        "package.json",
        &format!(
            r#"{{"name":"app","version":"1.0.0","dependencies":{{"fid-a":"file:{}"}}}}"#,
            tgz.display()
        ),
    );
    // npm's cache and logs in a cache directory of the user's choosing under the (test) home:
    // agent lets npm write ~/.npm, not this one.
    let cache = w.home.join(".npm-cache");
    let (text, base, agreed) = round_trip(
        &w,
        &Workload {
            env: vec![
                ("npm_config_cache", cache.display().to_string()),
                ("npm_config_update_notifier", "false".into()),
                ("npm_config_audit", "false".into()),
                ("npm_config_fund", "false".into()),
                ("npm_config_offline", "true".into()),
            ],
            script: "npm install --no-progress >/dev/null && \
                     node -e 'console.log(require(\"fid-a\")(21))'",
            expect: "42",
            outputs: vec![cache.join("_cacache"), cache.join("_logs")],
        },
    );
    assert!(
        !base.refusals.is_empty(),
        "the base refuses npm's writes to its cache"
    );
    assert!(text.contains("\"{home}/.npm-cache\""), "{text}");
    assert!(agreed.cases >= 5 && agreed.refused >= 1, "{agreed:?}");
}

/// `mkdir -p` and `create_dir_all` of a tree outside the write roots meet directories that
/// exist: the kernel answers EEXIST before any permission check, and so must guard (a refusal
/// there made npm fail, and no learned profile could remove it).
#[test]
fn making_an_entry_where_one_exists_fails_with_eexist_as_without_guard() {
    let w = Workspace::new();
    w.write(&w.outside.join("file").display().to_string(), "x\n");
    let outside = w.outside.display().to_string();
    let file = w.outside.join("file").display().to_string();
    for (op, path, other) in [
        ("mkdir", outside.as_str(), None),
        ("mkdir", "/etc", None),
        ("symlink", "target", Some(file.as_str())),
        ("link", file.as_str(), Some(file.as_str())),
    ] {
        let mut argv = vec![w.probe(), op.to_string(), path.to_string()];
        argv.extend(other.map(str::to_string));
        let bare = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .expect("probe");
        let bare = String::from_utf8_lossy(&bare.stdout).trim().to_string();
        assert!(bare.contains("EEXIST"), "{op} bare: {bare}");
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(
            crate::util::probe_result(&out),
            bare,
            "{op} {path} under guard"
        );
        assert!(
            refusals(&w).is_empty(),
            "{op}: not a refusal: {:#?}",
            refusals(&w)
        );
    }
}
