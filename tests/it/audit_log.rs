//! The audit log and summary: JSONL that parses, run-start/run-end, denials named with their
//! path, the extra --audit-log copy, `guard log` and `guard runs`.

use std::os::unix::fs::PermissionsExt;

use crate::util::{probe_result, Workspace};

#[test]
fn the_audit_log_parses_and_names_the_refused_path() {
    let w = Workspace::new();
    let victim = w.write(&w.outside.join("keep.txt").display().to_string(), "x");
    let extra = w.root.join("extra-audit.jsonl");
    let summary = w.root.join("summary.json");
    let out = w
        .exec(&["agent"])
        .arg("--audit-log")
        .arg(&extra)
        .arg("--summary")
        .arg(&summary)
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    out.expect_code(0);
    assert!(probe_result(&out).starts_with("errno"));
    let events = w.audit();
    assert_eq!(
        events.first().map(|e| e["type"].clone()),
        Some("run-start".into())
    );
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some("run-end".into())
    );
    for e in &events {
        assert_eq!(e["v"], guard::audit::VERSION, "versioned: {e}");
        assert!(e["time"].is_string() && e["run"].is_string(), "{e}");
    }
    let denial = events
        .iter()
        .find(|e| e["type"] == "decision" && e["verdict"] == "deny")
        .expect("a deny decision");
    assert_eq!(denial["path"], victim.display().to_string());
    assert_eq!(denial["syscall"], "unlink");
    assert_eq!(denial["rule"], "fs.write-roots");
    assert!(denial["latency_us"].is_u64());
    assert!(denial["pid"].is_u64() && denial["comm"].is_string());
    let copy = std::fs::read_to_string(&extra).expect("--audit-log copy");
    assert_eq!(
        copy.lines().count(),
        events.len(),
        "the copy has every event"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).expect("summary")).expect("json");
    assert_eq!(s["status"], 0);
    assert!(s["counts"]["deny"].as_u64().unwrap_or(0) >= 1, "{s}");
}

#[test]
fn an_execs_record_names_the_program_the_kernel_runs() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        exec_records_name_the_program(&w);
    }
}

/// Every spelling of one program (through a symlinked directory, with `.`, `..` and `//`,
/// through a final symlink, relative) is recorded as the file the kernel runs; a plain path
/// (no symlink, no dot) is recorded as written. A missing program is recorded as named.
fn exec_records_name_the_program(w: &Workspace) {
    let spellings = [
        "$W/real/prog",
        "$W/link/prog",
        "$W/real/./prog",
        "$W/real//prog",
        "$W/real/sub/../prog",
        "$W/real/alias",
        "./real/prog",
        "$W/real/nope",
    ];
    let script = format!(
        "mkdir -p real/sub && cp {} real/prog && ln -s real link && ln -s prog real/alias; \
         W=$(pwd -P); {}; true",
        crate::util::tool("true").expect("true").display(),
        spellings.join("; ")
    );
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
    let ws = w.ws.canonicalize().expect("workspace");
    let prog = ws.join("real/prog").display().to_string();
    let execs: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec")
        .collect();
    for spelled in spellings {
        let argv0 = spelled.replace("$W", &ws.display().to_string());
        let e = execs
            .iter()
            .find(|e| e["argv"][0].as_str() == Some(argv0.as_str()))
            .unwrap_or_else(|| panic!("no exec record of {argv0}: {execs:?}"));
        let want = if spelled.ends_with("nope") {
            ws.join("real/nope").display().to_string()
        } else {
            prog.clone()
        };
        assert_eq!(e["exe"].as_str(), Some(want.as_str()), "{e}");
        assert_eq!(e["verdict"], "allow", "{e}");
    }
}

#[test]
fn a_program_path_is_proved_again_once_a_symlink_may_have_taken_a_place_on_it() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        proved_program_paths_follow_changes(&w);
    }
}

/// guard keeps, for a moment, that a program path has no symlink on it (a shell loop runs
/// the same programs over and over); a directory on the path moved away and a symlink put
/// in its place, the program itself replaced by a symlink, or by a hard link to a symlink
/// made before, must show in the next exec's record as the file the kernel runs.
fn proved_program_paths_follow_changes(w: &Workspace) {
    let t = crate::util::tool("true").expect("true");
    let real_true = t.canonicalize().expect("true's real path");
    let t = t.display();
    let script = format!(
        "W=$(pwd -P); ln -s {t} s; mkdir d && cp {t} d/prog && $W/d/prog && $W/d/prog && \
         mv d d2 && ln -s d2 d && $W/d/prog && rm d2/prog && ln -s {t} d2/prog && $W/d/prog && \
         cp {t} e && $W/e && rm e && ln -P s e && $W/e && echo done"
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    out.expect_code(0);
    assert!(out.stdout().contains("done"), "{}", out.stderr());
    let ws = w.ws.canonicalize().expect("workspace");
    let argv0 = ws.join("d/prog").display().to_string();
    let exes: Vec<String> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec" && d["argv"][0] == argv0.as_str())
        .map(|d| d["exe"].as_str().unwrap_or_default().to_string())
        .collect();
    let copy = ws.join("d/prog").display().to_string();
    let moved = ws.join("d2/prog").display().to_string();
    let real = real_true.display().to_string();
    assert_eq!(exes, [copy.clone(), copy, moved, real.clone()]);
    let e = ws.join("e").display().to_string();
    let linked: Vec<String> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec" && d["argv"][0] == e.as_str())
        .map(|d| d["exe"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(linked, [e, real]);
}

#[test]
fn the_first_call_after_an_exec_names_the_new_program_as_the_kernel_does() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        first_call_after_exec_names_the_new_program(&w);
    }
}

/// guard foretells the name an exec gives its process and takes it once the process's
/// executable is seen to be the program: a long name cut to 15 bytes as the kernel cuts it,
/// a script named by its file but run by its interpreter, and an exec the kernel refused
/// (Landlock: a program outside the read roots) after guard let it through, which leaves
/// the shell its own name.
fn first_call_after_exec_names_the_new_program(w: &Workspace) {
    let touch = crate::util::tool("touch").expect("touch");
    let sh = crate::util::tool("sh").expect("sh");
    let bash = crate::util::tool("bash").expect("bash");
    std::fs::create_dir_all(w.ws.join("bin")).expect("mkdir");
    let long = w.ws.join("bin/a-long-touch-program-name");
    std::fs::copy(&touch, &long).expect("copy touch");
    let run_sh = w.ws.join("bin/run.sh");
    std::fs::write(&run_sh, "#!/bin/sh\necho > by-script\n").expect("script");
    std::fs::set_permissions(&run_sh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let outside = w.outside.join("prog");
    std::fs::copy(crate::util::tool("true").expect("true"), &outside).expect("copy true");
    let script = format!(
        "{long} by-long; ./bin/run.sh; \
         {bash} -c 'shopt -s execfail; exec {outside}; echo > after-refused'; echo done",
        long = long.display(),
        bash = bash.display(),
        outside = outside.display()
    );
    let out = w
        .exec(&["agent"])
        .run(&[sh.to_str().expect("utf8"), "-c", &script]);
    out.expect_code(0);
    assert!(out.stdout().contains("done"), "{}", out.stderr());
    let ws = w.ws.canonicalize().expect("workspace");
    let creates = w.decisions();
    let who = |name: &str| {
        let path = ws.join(name).display().to_string();
        let d = creates
            .iter()
            .find(|d| d["op"] == "create" && d["path"] == path.as_str())
            .unwrap_or_else(|| panic!("no create of {path}: {}", out.stderr()));
        (
            d["comm"].as_str().unwrap_or_default().to_string(),
            d["exe"].as_str().unwrap_or_default().to_string(),
        )
    };
    let real = |p: &std::path::Path| p.canonicalize().expect("real path").display().to_string();
    let long_real = ws
        .join("bin/a-long-touch-program-name")
        .display()
        .to_string();
    assert_eq!(who("by-long"), ("a-long-touch-pr".to_string(), long_real));
    assert_eq!(who("by-script"), ("run.sh".to_string(), real(&sh)));
    assert_eq!(who("after-refused"), ("bash".to_string(), real(&bash)));
}

#[test]
fn an_execs_record_names_its_cwd_and_argv_rules_resolve_against_it() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        exec_cwd_is_recorded_and_judged(&w);
    }
}

/// guard reads an exec's cwd after answering unless a rule may resolve an argument against
/// it: the record names the cwd either way, and the agent profile's `no-rm-workspace`
/// (`{workspace}` as a path element) still sees `..` from a subdirectory as the workspace.
/// `rm` itself refuses to remove `..`, so a rule that missed would leave status 1, not 126.
fn exec_cwd_is_recorded_and_judged(w: &Workspace) {
    std::fs::create_dir_all(w.ws.join("sub/deeper")).expect("mkdir");
    w.write("sub/keep.txt", "kept");
    let t = crate::util::tool("true")
        .expect("true")
        .display()
        .to_string();
    let script = format!("cd sub/deeper && {t}; cd .. && rm -rf ..; echo rm-status $?; {t}");
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    out.expect_code(0);
    assert!(out.stdout().contains("rm-status 126"), "{}", out.stderr());
    assert_eq!(
        std::fs::read_to_string(w.ws.join("sub/keep.txt")).expect("kept"),
        "kept"
    );
    let ws = w.ws.canonicalize().expect("workspace");
    let execs: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["op"] == "exec")
        .collect();
    let cwd_of = |argv0: &str, verdict: &str| {
        execs
            .iter()
            .filter(|e| e["argv"][0] == argv0 && e["verdict"] == verdict)
            .map(|e| e["cwd"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    let sub = ws.join("sub").display().to_string();
    let deeper = ws.join("sub/deeper").display().to_string();
    assert_eq!(cwd_of(&t, "allow"), [deeper, sub.clone()], "{execs:?}");
    assert_eq!(cwd_of("rm", "deny"), [sub], "{execs:?}");
    let rm = execs.iter().find(|e| e["argv"][0] == "rm").expect("rm");
    assert_eq!(rm["rule"], "no-rm-workspace", "{rm}");
}

#[test]
fn guard_log_and_runs_show_the_newest_run() {
    let w = Workspace::new();
    let victim = w.write(&w.outside.join("keep.txt").display().to_string(), "x");
    w.exec(&["agent"])
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    let out = w.guard().args(["log", "--denied"]).output();
    out.expect_code(0);
    assert!(
        out.stdout().contains(&victim.display().to_string()),
        "{}",
        out.stdout()
    );
    assert!(out.stdout().contains("deny"));
    // The one-line listing shortens long commands; the JSON form has the whole argv.
    let runs = w.guard().args(["runs", "--json"]).output();
    runs.expect_code(0);
    assert!(runs.stdout().contains("guard-probe"), "{}", runs.stdout());
}

#[test]
fn non_utf8_paths_are_recorded_losslessly() {
    let w = Workspace::new();
    let script = format!(
        "{} unlink \"$(printf '{}/bad\\377name')\"",
        w.probe(),
        w.outside.display()
    );
    w.exec(&["agent"]).run(&["sh", "-c", &script]);
    let d = w
        .decisions()
        .into_iter()
        .find(|d| d["syscall"] == "unlink")
        .expect("the unlink was judged");
    let b64 = d["path"]["base64"]
        .as_str()
        .expect("non-UTF-8 path is base64");
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    assert!(raw.ends_with(b"/bad\xffname"), "{raw:?}");
}

/// The log is written while the command runs, not only at its end: the record of a create is
/// in the file while the command that made it still waits (the writer's thread starts once the
/// command has exec'd; before, the records wait in its queue).
#[test]
fn the_audit_log_is_written_while_the_command_runs() {
    use std::time::{Duration, Instant};
    for w in [Workspace::new(), Workspace::unprivileged()] {
        // The create comes a moment after the command's start, where no end of the start's
        // own (the queue written once the command has exec'd) writes it.
        let script = "sleep 0.2; echo x > made.txt; while [ ! -e go ]; do sleep 0.02; done";
        let mut g = w.exec(&["agent"]);
        g.args(["--", "sh", "-c", script]);
        g.cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut guard = g.cmd.spawn().expect("spawn guard");
        let made = w.ws.join("made.txt").display().to_string();
        let logged = || {
            let runs = std::fs::read_dir(w.state.join("runs")).ok()?;
            runs.flatten().find_map(|run| {
                let text = std::fs::read_to_string(run.path().join("audit.jsonl")).ok()?;
                text.lines()
                    .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .find(|e| e["type"] == "decision" && e["path"] == made.as_str())
            })
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = None;
        while seen.is_none() && Instant::now() < deadline {
            seen = logged();
            std::thread::sleep(Duration::from_millis(20));
        }
        // The command ends either way, and then so does guard.
        std::fs::write(w.ws.join("go"), "").expect("write go");
        let status = guard.wait().expect("wait for guard");
        let seen = seen.expect("the create's record, in the log while the command ran");
        assert_eq!(seen["verdict"], "allow", "{seen}");
        assert!(status.success(), "{status:?}");
    }
}
