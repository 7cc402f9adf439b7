//! guard as a library: the `embed` example (a program that embeds guard) built and run, and
//! what a run promises about the processes it starts.
//!
//! The library starts runs from a single-threaded process only (it forks), so these tests run
//! it in its own process, the example, never in the test process.

use std::path::PathBuf;
use std::process::Command;

use crate::util::{populate, Workspace};

/// Build the `embed` example with the profile this test binary was built with, and return its
/// path (next to the test binary's `deps/`).
fn embed_example() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let mut build = Command::new(env!("CARGO"));
    build.args([
        "build",
        "--quiet",
        "--example",
        "embed",
        "--manifest-path",
        concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
    ]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build --example embed");
    assert!(status.success(), "cargo build --example embed failed");
    let bin = profile_dir.join("examples").join("embed");
    assert!(bin.is_file(), "{} was not built", bin.display());
    bin
}

#[test]
fn the_embed_example_runs_a_command_and_lists_the_refused_calls_from_the_audit_log() {
    let out = Command::new(embed_example())
        .output()
        .expect("run the embed example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    // The workspace write went through, and the command carried on after the refusals.
    assert!(stdout.contains("workspace: greeting.txt"), "{stdout}");
    assert!(stdout.contains("carried on"), "{stdout}");
    assert!(stdout.contains("outcome: Exited, status 0"), "{stdout}");
    // The sandbox's init tells how the command ended before it exits, and the run ends
    // meanwhile: `wait` still reaps it before it returns.
    assert!(stdout.contains("children left: none"), "{stdout}");
    // Both writes outside the write roots are named, from the audit log, with their rule.
    for refused in [
        "refused: openat create /etc/guard-embed-example (EACCES, rule fs.write-roots)",
        "refused: mkdir create /usr/guard-embed-example (EACCES, rule fs.write-roots)",
    ] {
        assert!(stdout.contains(refused), "missing {refused:?} in\n{stdout}");
    }
    let denied: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("decisions: "))
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|d| d.strip_suffix(" denied"))
        .and_then(|n| n.parse().ok())
        .expect("a decisions line");
    assert_eq!(
        denied,
        stdout
            .lines()
            .filter(|l| l.starts_with("refused: "))
            .count() as u64,
        "the outcome's deny count matches the refusals in the log:\n{stdout}"
    );
    assert!(!std::path::Path::new("/etc/guard-embed-example").exists());
    assert!(!std::path::Path::new("/usr/guard-embed-example").exists());
}

#[test]
fn the_embed_example_passes_the_commands_status_through() {
    let out = Command::new(embed_example())
        .args(["strict", "--", "sh", "-c", "echo made > made.txt; exit 7"])
        .output()
        .expect("run the embed example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{stdout}");
    assert!(stdout.contains("outcome: Exited, status 7"), "{stdout}");
    assert!(stdout.contains("children left: none"), "{stdout}");
    assert!(stdout.contains("workspace: made.txt"), "{stdout}");
}

/// The kernel's Landlock ABI, from `guard doctor --json`.
fn landlock_abi(w: &Workspace) -> u64 {
    let out = w.guard().args(["doctor", "--json"]).output();
    let v: serde_json::Value = serde_json::from_str(&out.stdout()).expect("doctor --json");
    v["landlock_abi"].as_u64().unwrap_or(0)
}

#[test]
fn the_command_cannot_kill_the_sandboxs_init() {
    // The init reaps the tree and ends it when guard dies; a command that could kill it would
    // orphan its own processes. With Landlock signal scoping (ABI 6) the command runs in a
    // nested domain that cannot signal the init.
    let w = Workspace::new();
    if landlock_abi(&w) < 6 {
        eprintln!("skipped: needs Landlock ABI 6 (signal scoping); this kernel has less");
        return;
    }
    // The init's own layer only scopes signals; the command enforces the run's ruleset in a
    // domain nested in it (docs/launch.md, steps 11 and 16). Nested, the command can neither
    // signal the init nor read its memory or environment (a ptrace access); and the run's
    // rules hold for it: /etc/shadow is root's, which the command (root without
    // capabilities) reads by ownership but for Landlock (`fs.hide`; reads are not judged).
    let script = "cat /proc/$PPID/environ > /dev/null; echo \"environ=$?\"; \
                  cat /etc/shadow > /dev/null; echo \"shadow=$?\"; \
                  kill -KILL $PPID; echo \"kill=$?\"; echo alive > after.txt";
    let out = w.exec(&["agent"]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert!(
        out.stdout().contains("kill=1"),
        "the kill must fail: {}",
        out.stdout()
    );
    assert!(
        out.stdout().contains("environ=1") && out.stderr().contains("Permission denied"),
        "the init's environment must be out of reach: {} / {}",
        out.stdout(),
        out.stderr()
    );
    if nix::unistd::geteuid().is_root() && std::path::Path::new("/etc/shadow").exists() {
        assert!(
            out.stdout().contains("shadow=1")
                && out.stderr().contains("/etc/shadow: Permission denied"),
            "the run's ruleset must confine the command: {} / {}",
            out.stdout(),
            out.stderr()
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.ws.join("after.txt")).expect("the command ran on"),
        "alive\n"
    );
    let start = w
        .audit()
        .into_iter()
        .find(|e| e["type"] == "run-start")
        .expect("run-start");
    assert!(
        start["enforced"]
            .to_string()
            .contains("landlock-scope-signal"),
        "{}",
        start["enforced"]
    );

    // The same with the ABI capped below 6: the kill reaches the init (SIGKILL, 137), which is
    // why the cap is reported as degraded.
    let capped = w
        .exec(&["agent"])
        .env("GUARD_LANDLOCK_ABI", "5")
        .run(&["sh", "-c", script]);
    assert_eq!(capped.code(), 128 + libc::SIGKILL, "{}", capped.stderr());
}

#[test]
fn past_runs_are_listed_diffed_and_rolled_back_through_the_library() {
    // Operations on past runs need no fork: the test process calls the library directly on
    // runs made by the guard binary.
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 50, 7);
    w.write("kept.txt", "kept\n");
    let before = w.state();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "rm -rf tree; echo new > new.txt; echo more >> kept.txt",
        ])
        .expect_code(0);
    let history = guard::History::at(&w.state);
    let runs = history.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = history
        .find(Some(&runs[0].id[..8]))
        .expect("a unique prefix finds the run");
    assert_eq!(run.meta.as_ref().map(|m| m.state.as_str()), Some("ended"));

    let diff = history.diff(&run).expect("diff");
    assert_eq!(diff.added, vec![std::path::PathBuf::from("new.txt")]);
    assert_eq!(diff.modified, vec![std::path::PathBuf::from("kept.txt")]);
    assert!(
        diff.deleted.iter().any(|p| p.starts_with("tree")),
        "{diff:?}"
    );

    // A file the run touched changed afterwards: refused with the list, unless forced.
    w.write("kept.txt", "edited after the run\n");
    match history.rollback(&run, None, false, &mut |_, _| {}) {
        Err(guard::run::HistoryError::Conflicts { conflicts, .. }) => {
            assert!(
                conflicts.iter().any(|c| c.path.ends_with("kept.txt")),
                "{conflicts:?}"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let rolled = history
        .rollback(&run, None, true, &mut |_, _| {})
        .expect("forced rollback");
    assert!(rolled.problems.is_empty(), "{:?}", rolled.problems);
    before.assert_restored(&w.ws, "History::rollback");
    assert_eq!(rolled.digest_after.as_deref(), Some(before.digest.as_str()));
    assert_eq!(
        history.find(None).expect("newest").meta.map(|m| m.state),
        Some("rolled-back".to_string())
    );
    let events = w.events("rollback");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["digest_after"].as_str(),
        Some(before.digest.as_str())
    );
}

/// A child that fails while it sets the sandbox up (here: it cannot enter the command's working
/// directory) ends the run before anything runs, and the error names the directory.
#[test]
fn a_child_that_cannot_enter_the_working_directory_fails_the_run_and_names_it() {
    let missing = std::env::temp_dir().join(format!("guard-no-such-dir-{}", std::process::id()));
    let out = Command::new(embed_example())
        .arg("--cwd")
        .arg(&missing)
        .args(["agent", "--", "sh", "-c", "echo ran"])
        .output()
        .expect("run the embed example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(125),
        "--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "cannot start the command in {}",
            missing.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("No such file or directory"), "{stderr}");
    assert!(!stdout.contains("ran"), "the command ran: {stdout}");
}
