//! `guard explain` agrees with what a run does. A table of cases (reads, writes, deletes,
//! connects and execs under agent, base, strict, observe and a profile with rules of every
//! action) is run both ways: `guard explain --json`, then the same operation by the probe under
//! `guard exec` with the same profiles. The errno the probe sees must be explain's, the audit
//! log's decision must carry explain's verdict, errno and rule when explain says the supervisor
//! decides, and the audit log must hold no refusal when explain says Landlock or the kernel
//! does. Each case also states what it expects, so agreement on a wrong answer fails too. When
//! explain says what the refused process is told, the run's stderr has that very line.

use std::net::TcpListener;
use std::path::Path;

use crate::util::{probe_result, Workspace};

/// One case: profiles (besides the test layer), the operation, and what explain must say.
struct Case {
    profile: &'static str,
    op: &'static str,
    /// The path, address or command line (`{ws}`, `{out}`, `{home}`, `{port}`, `{port2}` are
    /// filled in).
    arg: &'static str,
    verdict: &'static str,
    errno: Option<&'static str>,
    layer: &'static str,
}

const fn c(
    profile: &'static str,
    op: &'static str,
    arg: &'static str,
    verdict: &'static str,
    errno: Option<&'static str>,
    layer: &'static str,
) -> Case {
    Case {
        profile,
        op,
        arg,
        verdict,
        errno,
        layer,
    }
}

const EACCES: Option<&str> = Some("EACCES");
const EPERM: Option<&str> = Some("EPERM");
const ENOENT: Option<&str> = Some("ENOENT");
const EISDIR: Option<&str> = Some("EISDIR");
const ENOTEMPTY: Option<&str> = Some("ENOTEMPTY");

const CASES: &[Case] = &[
    // Reads: not trapped; Landlock decides.
    c("agent", "read", "/etc/hostname", "allow", None, "landlock"),
    // Inside a read root but hidden (fs.hide): refused to root as well.
    c("agent", "read", "/etc/shadow", "deny", EACCES, "landlock"),
    c("agent", "read", "{home}/secret", "deny", EACCES, "landlock"),
    c("agent", "read", "{out}/f.txt", "deny", EACCES, "landlock"),
    c("agent", "read", "{ws}/f.txt", "allow", None, "landlock"),
    c(
        "agent",
        "read",
        "{home}/.cargo/config.toml",
        "allow",
        None,
        "landlock",
    ),
    c("base", "read", "{ws}/f.txt", "deny", EACCES, "landlock"),
    c("observe", "read", "{out}/f.txt", "allow", None, "kernel"),
    c(
        "custom",
        "read",
        "{out}/pub/f.txt",
        "allow",
        None,
        "landlock",
    ),
    c("agent", "read", "{ws}/link-out", "deny", EACCES, "landlock"),
    c("agent", "read", "{out}/link-in", "allow", None, "landlock"),
    c("agent", "read", "{ws}/missing", "allow", ENOENT, "kernel"),
    c(
        "strict",
        "read",
        "{home}/.cargo/config.toml",
        "deny",
        EACCES,
        "landlock",
    ),
    c("agent", "read", "{ws}", "allow", None, "landlock"),
    // A directory outside the roots is listed by fs.list (base's `/`), but not under strict.
    c("agent", "read", "{out}", "allow", None, "landlock"),
    c("agent", "read", "{home}", "allow", None, "landlock"),
    c("strict", "read", "{out}", "deny", EACCES, "landlock"),
    // Writes: trapped, judged and performed by the supervisor.
    c(
        "agent",
        "write",
        "{ws}/new.txt",
        "allow",
        None,
        "supervisor",
    ),
    c("agent", "write", "{ws}/f.txt", "allow", None, "supervisor"),
    c("agent", "write", "{out}/x", "deny", EACCES, "supervisor"),
    c(
        "agent",
        "write",
        "{ws}/.git/config",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "agent",
        "write",
        "{ws}/.git/hooks/pre-commit",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "agent",
        "write",
        "{ws}/nodir/x",
        "error",
        ENOENT,
        "supervisor",
    ),
    c(
        "agent",
        "write",
        "/etc/guard-explain-test",
        "deny",
        EACCES,
        "supervisor",
    ),
    c(
        "custom",
        "write",
        "{ws}/db/x.sql",
        "deny",
        Some("EROFS"),
        "supervisor",
    ),
    c(
        "custom",
        "write",
        "{out}/allowed.txt",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "observe",
        "write",
        "{out}/obs.txt",
        "allow",
        None,
        "supervisor",
    ),
    c("base", "write", "{ws}/b.txt", "deny", EACCES, "supervisor"),
    c(
        "agent",
        "write",
        "{home}/.cargo/registry/x",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "agent",
        "write",
        "{ws}/link-out",
        "deny",
        EACCES,
        "supervisor",
    ),
    c(
        "custom",
        "write",
        "{ws}/risky.txt",
        "risky",
        None,
        "supervisor",
    ),
    c("agent", "write", "/dev/null", "allow", None, "supervisor"),
    c(
        "strict",
        "write",
        "{home}/.cargo/registry/y",
        "deny",
        EACCES,
        "supervisor",
    ),
    // Deletes.
    c(
        "agent",
        "delete",
        "{ws}/del1.txt",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "agent",
        "delete",
        "{out}/f2.txt",
        "deny",
        EACCES,
        "supervisor",
    ),
    // A protected directory that holds entries: the kernel fails its removal anyway
    // (ENOTEMPTY, as `git stash -u` expects of `.git`), so there is nothing to refuse. An
    // empty one is refused.
    c(
        "agent",
        "delete",
        "{ws}/.git",
        "error",
        ENOTEMPTY,
        "supervisor",
    ),
    c(
        "agent",
        "delete",
        "{ws}/.git/modules/m/hooks",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "agent",
        "delete",
        "{ws}/.git/hooks/pre-push",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "agent",
        "delete",
        "{ws}/missing.txt",
        "allow",
        ENOENT,
        "supervisor",
    ),
    c(
        "custom",
        "delete",
        "{ws}/keep/k.txt",
        "deny",
        EPERM,
        "supervisor",
    ),
    c("agent", "delete", "{ws}/empty", "allow", None, "supervisor"),
    c(
        "base",
        "delete",
        "{ws}/del2.txt",
        "deny",
        EACCES,
        "supervisor",
    ),
    c(
        "observe",
        "delete",
        "{out}/f3.txt",
        "allow",
        None,
        "supervisor",
    ),
    c("custom", "delete", "{ws}/trap", "kill", EPERM, "supervisor"),
    // A profile rule's refusal of a call the kernel fails anyway: the kernel's errno (nothing
    // to remove; a directory that holds entries), as bare.
    c(
        "custom",
        "delete",
        "{ws}/db/never-there",
        "error",
        ENOENT,
        "supervisor",
    ),
    c(
        "custom",
        "delete",
        "{ws}/db/sub",
        "error",
        ENOTEMPTY,
        "supervisor",
    ),
    // Outside the write roots, the kernel answers first when there is nothing to remove, or
    // when the target of a write is a directory: its own errno, no refusal.
    c(
        "agent",
        "delete",
        "{out}/never-there",
        "error",
        ENOENT,
        "supervisor",
    ),
    c("agent", "write", "{out}", "error", EISDIR, "supervisor"),
    c(
        "agent",
        "delete",
        "{ws}/nodir/x",
        "error",
        ENOENT,
        "supervisor",
    ),
    // Connects.
    c(
        "agent",
        "connect",
        "127.0.0.1:{port}",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "agent",
        "connect",
        "10.255.255.1:80",
        "deny",
        EACCES,
        "supervisor",
    ),
    c(
        "base",
        "connect",
        "127.0.0.1:{port}",
        "deny",
        EACCES,
        "supervisor",
    ),
    c(
        "custom",
        "connect",
        "127.0.0.1:{port2}",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "observe",
        "connect",
        "127.0.0.1:{port}",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "strict",
        "connect",
        "127.0.0.1:{port}",
        "deny",
        EACCES,
        "supervisor",
    ),
    // Execs: judged by the supervisor, continued, then Landlock's execute right.
    c("agent", "exec", "/bin/echo ok", "allow", None, "supervisor"),
    c(
        "agent",
        "exec",
        "/bin/rm -rf {ws}",
        "deny",
        EPERM,
        "supervisor",
    ),
    c("agent", "exec", "{out}/echo ok", "deny", EACCES, "landlock"),
    c(
        "agent",
        "exec",
        "{ws}/script.sh",
        "allow",
        None,
        "supervisor",
    ),
    c("base", "exec", "{ws}/script.sh", "deny", EACCES, "landlock"),
    c(
        "custom",
        "exec",
        "/bin/echo forbidden",
        "deny",
        EPERM,
        "supervisor",
    ),
    c(
        "observe",
        "exec",
        "{out}/echo ok",
        "allow",
        None,
        "supervisor",
    ),
    c(
        "agent",
        "exec",
        "{home}/.cargo/bin/tool ok",
        "allow",
        None,
        "supervisor",
    ),
];

fn setup(w: &Workspace, port2: u16) -> String {
    w.sh(&format!(
        "set -e
        echo text > f.txt; echo a > del1.txt; echo b > del2.txt; mkdir -p empty db/sub keep .git/hooks .git/objects .git/refs .git/modules/m/hooks
        echo s > db/sub/s;         echo k > keep/k.txt; echo t > trap; echo '[core]' > .git/config; echo 'ref: refs/heads/main' > .git/HEAD
        echo hook > .git/hooks/pre-push
        printf '#!/bin/sh\\necho ok\\n' > script.sh; chmod +x script.sh
        ln -s {out}/f.txt link-out
        cd {out}; echo out > f.txt; echo 2 > f2.txt; echo 3 > f3.txt; mkdir -p pub
        echo pub > pub/f.txt; cp /bin/echo echo; ln -s {ws}/f.txt link-in
        cd {home}; echo secret > secret; mkdir -p .cargo/registry .cargo/bin
        echo '[build]' > .cargo/config.toml; cp /bin/echo .cargo/bin/tool",
        out = w.outside.display(),
        ws = w.ws.display(),
        home = w.home.display(),
    ));
    w.profile_file(
        "custom",
        &format!(
            r#"name = "custom"
extends = "agent"
[fs]
read = ["{out}/pub"]

[[rule]]
id = "no-db"
when = ["write", "create", "delete"]
path = "{{workspace}}/db/**"
action = "deny"
errno = "EROFS"

[[rule]]
id = "outside-ok"
when = ["write", "create"]
path = "{out}/allowed.txt"
action = "allow"

[[rule]]
id = "risky-file"
when = ["write", "create"]
path = "{{workspace}}/risky.txt"
action = "risky"

[[rule]]
id = "keep-dir"
when = "delete"
path = "{{workspace}}/keep/**"
action = "deny"

[[rule]]
id = "trap"
when = "delete"
path = "{{workspace}}/trap"
action = "kill"

[[rule]]
id = "no-echo-forbidden"
when = "exec"
argv = ["echo", "forbidden"]
action = "deny"

[[rule]]
id = "no-port"
when = "connect"
addr = ["127.0.0.1:{port2}"]
action = "deny"
"#,
            out = w.outside.display(),
        ),
    )
}

#[test]
fn explain_agrees_with_the_run_on_a_table_of_cases() {
    let w = Workspace::new();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let port2 = other.local_addr().expect("addr").port();
    let custom = setup(&w, port2);
    assert!(CASES.len() >= 50, "{} cases", CASES.len());
    let fill = |s: &str| {
        s.replace("{ws}", &w.ws.display().to_string())
            .replace("{out}", &w.outside.display().to_string())
            .replace("{home}", &w.home.display().to_string())
            .replace("{port2}", &port2.to_string())
            .replace("{port}", &port.to_string())
    };
    let mut failures = Vec::new();
    let mut told_lines = 0;
    for (i, case) in CASES.iter().enumerate() {
        let profile = if case.profile == "custom" {
            custom.as_str()
        } else {
            case.profile
        };
        let arg = fill(case.arg);
        let words: Vec<String> = arg.split(' ').map(str::to_string).collect();
        let label = format!("#{i} {} {} {arg}", case.profile, case.op);

        // Explain, with the same profiles the run gets.
        let mut g = w.guard();
        g.args(["explain", "--json", "-p", profile, "-p"])
            .arg(&w.profile)
            .arg("-w")
            .arg(&w.ws);
        if case.op == "exec" {
            g.arg("--").args(&words);
        } else {
            g.arg(format!("--{}", case.op)).arg(&arg);
        }
        let out = g.output();
        let e: serde_json::Value = match serde_json::from_str(out.stdout().trim()) {
            Ok(v) => v,
            Err(err) => {
                failures.push(format!(
                    "{label}: explain: {err}: {}{}",
                    out.stdout(),
                    out.stderr()
                ));
                continue;
            }
        };
        let said = (
            e["verdict"].as_str().unwrap_or("?"),
            e["errno"].as_str(),
            e["layer"].as_str().unwrap_or("?"),
        );
        if said != (case.verdict, case.errno, case.layer) {
            failures.push(format!(
                "{label}: explain says {said:?}, expected {:?}\n{e}",
                (case.verdict, case.errno, case.layer)
            ));
            continue;
        }

        // The same operation, for real.
        let probe_op = match case.op {
            "delete" if Path::new(&arg).is_dir() => "rmdir",
            "delete" => "unlink",
            op => op,
        };
        let mut argv = vec![w.probe(), probe_op.to_string()];
        if case.op == "exec" {
            argv.push(words[0].clone());
            argv.extend(words.iter().cloned());
        } else {
            argv.push(arg.clone());
        }
        let run = w.exec(&[profile]).run(&argv);
        let got = probe_result(&run);
        let expected_probe = match (e["errno"].as_str(), case.verdict) {
            (_, "kill") => String::new(),
            (Some(name), _) => format!("errno {} ", errno_number(name)),
            (None, _) => "ok".to_string(),
        };
        let probe_agrees = if case.verdict == "kill" {
            run.code() == 120 && got.is_empty()
        } else if expected_probe == "ok" {
            got == "ok"
        } else {
            got.starts_with(&expected_probe)
        };
        if !probe_agrees {
            failures.push(format!(
                "{label}: the run's probe printed {got:?} (exit {}), explain said {}\n{}",
                run.code(),
                e,
                run.stderr()
            ));
            continue;
        }

        // What the refused process was told is what explain says it would be.
        if let Some(told) = e["told"].as_str() {
            told_lines += 1;
            if !run.stderr().lines().any(|l| l == told) {
                failures.push(format!(
                    "{label}: explain says the process is told {told:?}; its stderr:\n{}",
                    run.stderr()
                ));
                continue;
            }
        }

        // The audit log.
        let decisions = w.decisions();
        let ours: Vec<&serde_json::Value> = decisions
            .iter()
            .filter(|d| is_about(d, case.op, &e, &words))
            .collect();
        match said.2 {
            "supervisor" => {
                let Some(d) = ours.first() else {
                    failures.push(format!(
                        "{label}: no decision in the audit log\n{decisions:#?}"
                    ));
                    continue;
                };
                let logged = (
                    d["verdict"].as_str(),
                    d["errno"].as_str(),
                    d["rule"].as_str(),
                );
                let explained = (
                    e["verdict"].as_str(),
                    e["errno"].as_str(),
                    e["rule"].as_str(),
                );
                // A call the kernel fails after guard allowed it: the audit log has no errno.
                let explained = if case.verdict == "allow" {
                    (explained.0, None, explained.2)
                } else {
                    explained
                };
                if logged != explained {
                    failures.push(format!(
                        "{label}: audit {logged:?}, explain {explained:?}\n{d}"
                    ));
                }
            }
            _ => {
                if let Some(d) = ours.iter().find(|d| d["verdict"] != "allow") {
                    failures.push(format!(
                        "{label}: explain says {} decides, but the audit log has a refusal: {d}",
                        said.2
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
    // Refusals by the filesystem boundary, protect, rules, the network and Landlock's exec
    // check each put a line on the refused process's stderr.
    assert!(told_lines >= 10, "{told_lines} told lines compared");
    drop((listener, other));
}

/// Whether decision `d` is the call a case made.
fn is_about(d: &serde_json::Value, op: &str, e: &serde_json::Value, words: &[String]) -> bool {
    let target = e["target"].as_str().unwrap_or("");
    match op {
        "exec" => {
            let argv: Vec<&str> = d["argv"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            d["op"] == "exec" && argv == words.iter().map(String::as_str).collect::<Vec<_>>()
        }
        "connect" => d["op"] == "connect" && d["addr"] == target,
        _ if e["rule"] == "resolve" => d["rule"] == "resolve",
        "write" => (d["op"] == "write" || d["op"] == "create") && d["path"] == target,
        "delete" => d["op"] == "delete" && d["path"] == target,
        _ => d["path"] == target,
    }
}

fn errno_number(name: &str) -> i32 {
    match name {
        "EACCES" => libc::EACCES,
        "EPERM" => libc::EPERM,
        "ENOENT" => libc::ENOENT,
        "EISDIR" => libc::EISDIR,
        "EROFS" => libc::EROFS,
        "ENOTEMPTY" => libc::ENOTEMPTY,
        other => panic!("errno {other} not in the table"),
    }
}
