//! The explanation reaches the agent, and the log has signal: a refused unlink, write, connect
//! and exec each put one line on the refused process's own stderr (a pipe, as an agent's tool
//! runner reads it); a path that does not exist is an `error` outcome, not a denial; a refused
//! exec tried on every `PATH` entry is one decision; `run-end` counts agree with
//! `guard log --denied`.

use std::os::unix::fs::PermissionsExt;

use crate::util::{tool, Out, Workspace};

/// `guard log --denied --json` of the newest run: one line per refused call. The run is
/// named: ids order runs only to the second.
fn denied_lines(w: &Workspace) -> Vec<serde_json::Value> {
    let run = w.audit()[0]["run"].as_str().expect("run id").to_string();
    let out = w.guard().args(["log", "--denied", "--json", &run]).output();
    out.expect_code(0);
    out.stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

fn run_end(w: &Workspace) -> serde_json::Value {
    w.events("run-end").pop().expect("run-end")
}

/// Run `script` under agent with the command's stderr (and stdout) going through a pipe into
/// `name` in the workspace; returns guard's own output and what the pipe carried.
/// The reason the audit log gives for the exec of `program` (empty when it gives none).
fn exec_reason(w: &Workspace, program: &std::path::Path) -> String {
    let exec = w
        .decisions()
        .into_iter()
        .find(|d| d["op"] == "exec" && d["exe"] == program.display().to_string())
        .expect("the exec is in the log");
    exec["reason"].as_str().unwrap_or_default().to_string()
}

fn piped(w: &Workspace, layers: &[&str], name: &str, script: &str) -> (Out, String) {
    let capture = w.ws.join(name);
    let full = format!("({script}) 2>&1 | cat > {}", capture.display());
    let out = w.exec(layers).run(&["sh", "-c", &full]);
    let text = std::fs::read_to_string(&capture).unwrap_or_default();
    (out, text)
}

#[test]
fn refused_unlink_write_connect_and_exec_each_explain_themselves_on_the_callers_stderr() {
    let w = Workspace::new();
    let notes = w.outside.join("notes.txt");
    std::fs::write(&notes, "keep me\n").expect("write notes");
    std::fs::set_permissions(&w.outside, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let probe = w.probe();

    let cases: [(&str, String, String); 3] = [
        (
            "unlink",
            format!("{probe} unlink {}", notes.display()),
            format!(
                "guard: refused delete of {}: outside the write roots (fs.write-roots); to allow, add the directory to [fs] write",
                notes.display()
            ),
        ),
        (
            "write",
            format!("{probe} write {} overwritten", notes.display()),
            format!(
                "guard: refused write to {}: outside the write roots (fs.write-roots); to allow, add the directory to [fs] write",
                notes.display()
            ),
        ),
        (
            "connect",
            // TEST-NET-1: never routed; guard refuses it before anything leaves.
            format!("{probe} connect 192.0.2.1:80"),
            "guard: refused connect to 192.0.2.1:80: the address is not in net.connect (net.connect); to allow, add the host or address and port to [net] connect".to_string(),
        ),
    ];
    for (what, script, expected) in cases {
        let (out, captured) = piped(&w, &["agent"], &format!("{what}.out"), &script);
        out.expect_code(0);
        let line = captured
            .lines()
            .find(|l| l.starts_with("guard: "))
            .unwrap_or_else(|| panic!("{what}: no explanation in the pipe: {captured:?}"));
        assert!(
            line.starts_with(&expected),
            "{what}:\n  got      {line}\n  expected {expected}..."
        );
        assert_eq!(
            captured
                .lines()
                .filter(|l| l.starts_with("guard: "))
                .count(),
            1,
            "{what}: one line: {captured}"
        );
        assert!(
            captured.lines().last().unwrap_or("").starts_with("errno"),
            "{what}: the call failed: {captured}"
        );
        assert!(
            !out.stderr().contains("guard: refused"),
            "{what}: the line went to the process, not to guard's stderr: {}",
            out.stderr()
        );
        assert!(
            out.stderr().contains("guard: 1 call refused"),
            "{what}: guard ends with a summary: {}",
            out.stderr()
        );
        assert_eq!(denied_lines(&w).len(), 1, "{what}");
    }
    assert_eq!(std::fs::read_to_string(&notes).expect("notes"), "keep me\n");

    // An exec refused by a profile rule: the shell that tried it is told.
    if tool("git").is_none() {
        eprintln!("skipped (exec part): git is not installed");
        return;
    }
    let (out, captured) = piped(
        &w,
        &["agent"],
        "exec.out",
        "git push --force origin main; echo \"status $?\"",
    );
    out.expect_code(0);
    let line = captured
        .lines()
        .find(|l| l.starts_with("guard: "))
        .unwrap_or_else(|| panic!("exec: no explanation: {captured:?}"));
    assert!(
        line.starts_with("guard: refused exec of git push --force origin main: force-push rewrites shared history (no-force-push); to allow, "),
        "{line}"
    );
    assert!(captured.contains("status 126"), "{captured}");
}

#[test]
fn explanations_are_off_with_report_denials_none_and_the_log_keeps_the_refusal() {
    let w = Workspace::new();
    let quiet = w.profile_file("quiet", "[report]\ndenials = \"none\"\n");
    let target = w.outside.join("x");
    let (out, captured) = piped(
        &w,
        &["agent", &quiet],
        "quiet.out",
        &format!("{} write {} data", w.probe(), target.display()),
    );
    out.expect_code(0);
    assert!(!captured.contains("guard:"), "{captured}");
    assert!(captured.contains("errno"), "{captured}");
    assert_eq!(denied_lines(&w).len(), 1);
    assert!(!target.exists());
}

#[test]
fn a_path_that_does_not_exist_is_an_error_outcome_not_a_denial() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        error_outcomes_name_their_paths(&w);
    }
}

/// Calls whose path does not resolve (or names an entry that exists, for mkdir) fail with
/// the kernel's errno, are not refusals, and their records name the operation and the path
/// the caller gave, made absolute from where it stood (`..` taken as written).
fn error_outcomes_name_their_paths(w: &Workspace) {
    let script = format!(
        "echo x > no/such/dir/file; rm no/such/file; mkdir no/such/dir; \
         mkdir made; mkdir made; echo z > made/f; \
         {probe} rename made/f gone/x; \
         {probe} link made/f gone/l; cd made && echo y > ../gone/f; true",
        probe = w.probe()
    );
    let (out, captured) = piped(w, &["agent"], "missing.out", &script);
    out.expect_code(0);
    assert!(!captured.contains("guard:"), "not explained: {captured}");
    assert!(!out.stderr().contains("refused"), "{}", out.stderr());
    let errors: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "error")
        .collect();
    assert!(errors.len() >= 5, "{errors:?}");
    for e in &errors {
        assert_eq!(e["rule"], "resolve", "{e}");
    }
    let ws = w.ws.canonicalize().expect("workspace");
    for (op, rel, errno) in [
        ("create", "no/such/dir/file", "ENOENT"),
        ("delete", "no/such/file", "ENOENT"),
        ("create", "no/such/dir", "ENOENT"),
        ("create", "made", "EEXIST"),
        ("create", "gone/f", "ENOENT"),
    ] {
        let path = ws.join(rel);
        assert!(
            errors.iter().any(|e| e["op"] == op
                && e["errno"] == errno
                && e["path"].as_str() == path.to_str()),
            "no {op} record failing with {errno} names {}: {errors:?}",
            path.display()
        );
    }
    // An operator finds the attempts by path.
    let out = w
        .guard()
        .args(["log", "--verdict", "error", "--path", "**/no/such/**"])
        .output();
    out.expect_code(0);
    let listed = out.stdout();
    for rel in ["no/such/dir/file", "no/such/file", "no/such/dir"] {
        let path = ws.join(rel).display().to_string();
        assert!(
            listed.lines().any(|l| l.contains(&format!(" {path} "))),
            "guard log --path does not list {path}: {listed}"
        );
    }
    // A rename or link names both of its paths, the one that does not resolve included.
    for (op, from, to) in [("rename", "made/f", "gone/x"), ("link", "made/f", "gone/l")] {
        let (from, to) = (ws.join(from), ws.join(to));
        assert!(
            errors.iter().any(|e| e["op"] == op
                && e["errno"] == "ENOENT"
                && e["path"].as_str() == from.to_str()
                && e["path2"].as_str() == to.to_str()),
            "no {op} record failing with ENOENT names {} -> {}: {errors:?}",
            from.display(),
            to.display()
        );
    }
    let end = run_end(w);
    assert_eq!(end["counts"]["deny"], 0, "{end}");
    assert_eq!(
        end["counts"]["error"].as_u64(),
        Some(errors.len() as u64),
        "{end}"
    );
    assert!(denied_lines(w).is_empty());
}

#[test]
fn a_refused_exec_tried_on_every_path_entry_is_one_decision_and_one_line() {
    let Some(git) = tool("git") else {
        eprintln!("skipped: git is not installed");
        return;
    };
    let w = Workspace::new();
    // Three directories on PATH that each hold a git: the shell tries them all.
    let mut path = Vec::new();
    for d in ["a", "b", "c"] {
        let dir = w.bin.join(d);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::os::unix::fs::symlink(&git, dir.join("git")).expect("symlink");
        path.push(dir.display().to_string());
    }
    path.push("/usr/bin:/bin".to_string());
    let script = format!(
        "PATH={}; export PATH; git push -f origin main; echo \"status $?\"",
        path.join(":")
    );
    let (out, captured) = piped(&w, &["agent"], "path.out", &script);
    out.expect_code(0);
    assert!(captured.contains("status 126"), "{captured}");
    assert_eq!(
        captured.matches("guard: refused exec").count(),
        1,
        "one explanation: {captured}"
    );
    let execs: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec" && d["verdict"] == "deny")
        .collect();
    assert_eq!(execs.len(), 1, "one decision: {execs:?}");
    let end = run_end(&w);
    assert_eq!(end["counts"]["deny"], 1, "{end}");
    assert_eq!(denied_lines(&w).len(), 1);
    assert!(
        out.stderr()
            .contains("guard: 1 call refused (1 no-force-push-short)"),
        "{}",
        out.stderr()
    );
}

#[test]
fn run_end_counts_agree_with_log_denied() {
    let w = Workspace::new();
    let p = w.probe();
    let o = w.outside.display().to_string();
    // b exists: the delete of a missing name gets the kernel's ENOENT, which is no refusal.
    std::fs::write(w.outside.join("b"), "b").expect("outside file");
    let script = format!(
        "{p} write {o}/a x; {p} write {o}/a x; {p} unlink {o}/b; {p} connect 192.0.2.7:443; \
         {p} write missing/dir/f x; {p} write ok.txt x; true"
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    out.expect_code(0);
    let end = run_end(&w);
    let refused =
        end["counts"]["deny"].as_u64().unwrap_or(0) + end["counts"]["kill"].as_u64().unwrap_or(0);
    assert_eq!(refused, 4, "{end}");
    assert_eq!(denied_lines(&w).len() as u64, refused);
    assert!(
        out.stderr()
            .contains("guard: 4 calls refused (3 fs.write-roots, 1 net.connect)"),
        "{}",
        out.stderr()
    );
}

#[test]
fn an_exec_that_landlock_refuses_is_explained_to_the_shell_and_the_command_gets_a_hint() {
    let w = Workspace::new();
    std::fs::set_permissions(&w.outside, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let tool = w.outside.join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (out, captured) = piped(
        &w,
        &["agent"],
        "landlock.out",
        &format!("{}; echo \"status $?\"", tool.display()),
    );
    out.expect_code(0);
    assert!(
        captured.contains("status 126"),
        "the kernel refused it: {captured}"
    );
    assert!(!captured.contains("ran"), "{captured}");
    let expected = format!(
        "guard: the kernel will refuse exec of {}: outside the read roots (Landlock); to allow, add {} to [fs] read",
        tool.display(),
        w.outside.display()
    );
    assert!(captured.contains(&expected), "{captured}");
    assert!(
        exec_reason(&w, &tool).contains("Landlock refuses it"),
        "{captured}"
    );

    // The run's own command: guard says why it could not be executed.
    let out = w.exec(&["agent"]).run(&[tool.display().to_string()]);
    out.expect_code(126);
    assert!(
        out.stderr().contains(&format!(
            "lies outside the profile's read roots (Landlock refused it); to allow, add {} to [fs] read",
            w.outside.display()
        )),
        "{}",
        out.stderr()
    );
}

#[test]
fn an_explanation_that_would_block_is_skipped_and_counted_and_the_call_is_answered() {
    let w = Workspace::new();
    let target = w.outside.join("x");
    // The probe's stderr is a FIFO that is full (64 KiB, its capacity) and that nobody
    // drains: writing the line would block, so guard must skip it.
    let script = format!(
        "mkfifo full && exec 3<>full && head -c 65536 /dev/zero >&3 && {} write {} data 2>&3; echo \"after $?\"",
        w.probe(),
        target.display()
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    out.expect_code(0);
    assert!(out.stdout().contains("errno 13 EACCES"), "{}", out.stdout());
    assert!(out.stdout().contains("after"), "{}", out.stdout());
    assert!(
        out.stderr().contains(
            "1 call refused (1 fs.write-roots); 0 explained on the refused process's stderr, 1 not"
        ),
        "{}",
        out.stderr()
    );
    assert!(!target.exists());

    // A FIFO with room (no RWF_NOWAIT there either): the line goes through. The shell holds
    // it open for reading and writing, so no open of it waits for a partner, and reads the
    // line back.
    let script = format!(
        "mkfifo open && exec 4<>open && {} write {} data 2>&4; read line <&4; echo \"got: $line\"",
        w.probe(),
        target.display()
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    out.expect_code(0);
    let seen = out.stdout();
    assert!(
        seen.contains("got: guard: refused create of"),
        "{seen:?}\n{}",
        out.stderr()
    );
}

/// A read root named through a symlink grants what the symlink leads to: a program there runs
/// and is not explained as refused (the supervisor compares the program's real path with the
/// roots as written first, and resolves the roots only when that fails).
#[test]
fn a_program_under_a_root_named_through_a_symlink_runs_unexplained() {
    let w = Workspace::new();
    let real = w.root.join("tools-real");
    std::fs::create_dir(&real).expect("mkdir");
    std::fs::set_permissions(&w.root, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let tool = real.join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let link = w.root.join("tools");
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let layer = w.root.join("tools.toml");
    std::fs::write(
        &layer,
        format!("name = \"tools\"\n[fs]\nread = [\"{}\"]\n", link.display()),
    )
    .expect("layer");
    let (out, captured) = piped(
        &w,
        &["agent", layer.to_str().expect("utf-8")],
        "tools.out",
        &format!("{}/tool; echo \"status $?\"", link.display()),
    );
    out.expect_code(0);
    assert!(
        captured.contains("ran") && captured.contains("status 0"),
        "{captured}"
    );
    assert!(!captured.contains("will refuse"), "{captured}");
    assert!(
        !exec_reason(&w, &tool).contains("Landlock refuses it"),
        "{captured}"
    );
}
