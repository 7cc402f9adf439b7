//! Undoing a run after it ended (`guard diff`, `guard rollback`), and restoring a workspace
//! after guard itself died in the middle of a run (`guard recover`).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{populate, Rng, TreeState, Workspace};

#[test]
fn rollback_after_a_successful_run_restores_the_workspace_and_diff_lists_the_changes() {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 300, 21);
    w.write("kept.txt", "kept\n");
    let before = w.state();
    w.exec(&["agent"])
        .run(&["sh", "-c", "rm -rf tree; echo new > new.txt"])
        .expect_code(0);
    assert!(!w.ws.join("tree").exists());
    assert_ne!(
        w.state().digest,
        before.digest,
        "the run changed the workspace"
    );

    let diff = w.guard().arg("diff").output();
    diff.expect_code(0);
    let listing = diff.stdout();
    let lines: Vec<&str> = listing.lines().map(str::trim_end).collect();
    assert!(lines.contains(&"A new.txt"), "{listing}");
    assert!(
        lines.iter().any(|l| l.starts_with("D tree/d0/")),
        "{}",
        diff.stdout()
    );
    assert!(
        !lines.iter().any(|l| l.ends_with(" kept.txt")),
        "{}",
        diff.stdout()
    );

    // --verify digests the whole workspace afterwards (a plain rollback verifies only the
    // paths it restored) and records the digest in the audit log.
    let out = w.guard().args(["rollback", "--verify"]).output();
    out.expect_code(0);
    before.assert_restored(&w.ws, "guard rollback after the run");
    assert!(
        out.stdout().contains(&before.digest),
        "--verify prints the digest: {}",
        out.stdout()
    );
    let rollbacks = w.events("rollback");
    assert_eq!(rollbacks.len(), 1, "{rollbacks:?}");
    assert_eq!(
        rollbacks[0]["digest_after"].as_str(),
        Some(before.digest.as_str()),
        "the rollback event records the restored digest"
    );
}

#[test]
fn rollback_refuses_when_a_touched_file_changed_after_the_run_unless_forced() {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 100, 22);
    w.write("a.txt", "a before\n");
    w.write("b.txt", "b before\n");
    let before = w.state();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "echo 'a by the run' > a.txt; rm b.txt; rm -rf tree/d0; echo c > c.txt",
        ])
        .expect_code(0);
    // The user edits a file the run touched.
    w.write("a.txt", "the user's later work\n");
    let edited = w.state();

    let out = w.guard().arg("rollback").output();
    assert_ne!(out.code(), 0, "must refuse\n{}", out.stderr());
    assert!(
        out.stderr().contains("a.txt"),
        "the refusal names the path: {}",
        out.stderr()
    );
    edited.assert_restored(&w.ws, "a refused rollback changes nothing");

    let out = w.guard().args(["rollback", "--force"]).output();
    out.expect_code(0);
    before.assert_restored(&w.ws, "guard rollback --force");
}

#[test]
fn rollback_to_a_command_checkpoint_keeps_what_came_before_it() {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 50, 23);
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "sh -c 'echo one > one.txt; rm -rf tree/d1'; sh -c 'echo two > two.txt; rm -rf tree/d2'",
        ])
        .expect_code(0);
    let id = w.checkpoint_of("two.txt");
    // What the workspace looked like when the second command started.
    let mid = Workspace::new();
    populate(&mid.ws.join("tree"), 50, 23);
    mid.sh("echo one > one.txt; rm -rf tree/d1");
    let expected = mid.state();
    w.guard()
        .args(["rollback", "--to", &id])
        .output()
        .expect_code(0);
    expected.assert_restored(&w.ws, "guard rollback --to the second command");
}

/// The check before a rollback compares the directory of each path it writes with the seal,
/// which lists a directory among its paths when the log names it. Rolling back only the last
/// command, in a directory an earlier command made, found that directory missing from the
/// seal's directories and refused ("revealed since the run left it"); so did the undo of a
/// rollback whose run had a refused rename of a directory it then wrote in. Both go through
/// now, as root and as an unprivileged user.
#[test]
fn a_rollback_to_a_checkpoint_and_an_undo_write_in_a_directory_the_log_names() {
    for unprivileged in [false, true] {
        let who = if unprivileged { "unprivileged" } else { "root" };
        let w = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        w.exec(&["agent"])
            .run(&[
                "sh",
                "-c",
                "sh -c 'mkdir made; echo a > made/a'; sh -c 'echo b > made/b; mv made/a made/c'",
            ])
            .expect_code(0);
        let id = w.checkpoint_of("made/b");
        let mid = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        mid.sh("mkdir made; echo a > made/a");
        let expected = mid.state();
        let out = w.guard().args(["rollback", "--to", &id]).output();
        out.expect_code(0);
        expected.assert_restored(
            &w.ws,
            &format!("{who}: guard rollback --to the second command"),
        );

        let w = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        w.write("c/f3", "c/f3\n");
        w.write("c/d/f4", "c/d/f4\n");
        let before = w.state();
        // `mv c c/d/` moves a directory into itself: journaled, then refused by the kernel.
        w.exec(&["agent"])
            .run(&["sh", "-c", "mv c c/d/ 2>/dev/null; echo x > c/f3"])
            .expect_code(0);
        let after = w.state();
        w.guard().arg("rollback").output().expect_code(0);
        before.assert_restored(&w.ws, &format!("{who}: the rollback"));
        let out = w.guard().arg("undo").output();
        out.expect_code(0);
        after.assert_restored(&w.ws, &format!("{who}: the undo of the rollback"));
    }
}

/// A rollback to a checkpoint makes the directories the later commands removed again, as new
/// inodes; a rollback of the same run to its start afterwards must follow each removed
/// directory to the one made for it. It read the log, which did not say, and stopped at the
/// undo of an older rename of the directory ("is not what the run renamed there"):
/// `mv c/d e/d2`, then `rm -rf e/d2`, rolled back to the second command and then to the start.
/// Found by a script of random sessions that rolls back to a random command first.
#[test]
fn a_rollback_to_the_start_after_one_to_a_checkpoint_finds_the_directories_it_made() {
    let cases = [
        ("mv src moved", "rm -rf moved"),
        (
            "$PROBE exchange src/keep.txt other",
            "mkdir z && mv src z/ && rm -rf z",
        ),
    ];
    for unprivileged in [false, true] {
        for (first, second) in cases {
            let who = if unprivileged { "unprivileged" } else { "root" };
            let w = if unprivileged {
                Workspace::unprivileged()
            } else {
                Workspace::new()
            };
            let first = first.replace("$PROBE", &w.probe());
            populate(&w.ws.join("src/sub"), 10, 8);
            w.write("src/keep.txt", "kept\n");
            w.write("other/o", "the other directory\n");
            let before = w.state();
            let script = format!("sh -c '{first}'; sh -c '{second}'");
            w.exec(&["agent"])
                .run(&["sh", "-c", &script])
                .expect_code(0);
            let id = w.checkpoint_of(second);
            let story = format!("{who}: `{first}`, then `{second}`");
            w.guard()
                .args(["rollback", "--to", &id])
                .output()
                .expect_code(0);
            let out = w.guard().arg("rollback").output();
            assert_eq!(
                out.code(),
                0,
                "{story}: the rollback to the start after the one to the checkpoint: {}",
                out.stderr()
            );
            before.assert_restored(&w.ws, &story);
        }
    }
}

/// The crash workload: a mix of every kind of change, then appends until guard is killed (so
/// the run never ends on its own).
const CRASH_WORKLOAD: &str = "echo go; rm -rf tree/d0; mv tree/d1 moved; \
    i=0; for f in tree/d2/*/*.txt; do i=$((i+1)); mkdir -p made/$i; mv \"$f\" made/$i/; \
      echo $i > new$i.txt; done; \
    chmod -R go-w tree/d4; sed -i s/file/FILE/ tree/d5/*.rs; \
    for f in tree/d6/*; do [ -f \"$f\" ] && : > \"$f\"; done; \
    cp -r tree/d7 tree/copy; rm -rf tree/d8; ln -sfn moved current; \
    mv -f tree/d9/s1/f00019.md tree/d9/f00009.rs; \
    while :; do echo x >> tail.txt; done";

/// Processes (other than zombies) whose working directory is `dir` or below it.
fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit_once(')')
                        .map(|(_, r)| !r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn recover_after_guard_is_killed_at_random_moments_restores_the_workspace() {
    const ITERATIONS: u64 = 50;
    // The workload's mutating part takes roughly this long under guard on a slow machine;
    // the kill lands anywhere from its first change to the endless tail.
    const SPAN_MS: u64 = 300;
    let mut rng = Rng::new(0xC0FFEE);
    // Iterations in which guard died with changes in place that recover had to undo.
    let mut undone = 0;
    // One workspace for all iterations: each recovery must restore it exactly, so the next
    // iteration starts from the same tree; the runs of earlier iterations stay in the state
    // directory (and must not be recovered twice).
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 300, 100);
    let before = TreeState::of(&w.ws);
    for i in 0..ITERATIONS {
        let delay = Duration::from_millis(rng.below(SPAN_MS));
        let story = format!("iteration {i}: guard killed after {delay:?}");

        let mut g = w.exec(&["agent"]);
        g.cmd
            .arg("--")
            .args(["sh", "-c", CRASH_WORKLOAD])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = g.cmd.spawn().expect("spawn guard");
        // The delay counts from the workload's start, so a slow start-up on a loaded machine
        // does not turn the kill into one that lands before anything happened.
        let mut go = [0u8; 3];
        std::io::Read::read_exact(child.stdout.as_mut().expect("stdout"), &mut go)
            .expect("workload started");
        std::thread::sleep(delay);
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("{story}: guard ended on its own ({status}) before it was killed");
        }
        child.kill().expect("SIGKILL guard");
        child.wait().expect("reap guard");

        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = processes_in(&w.ws);
            if left.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{story}: sandboxed processes outlived guard: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }

        let out = w.guard().arg("recover").arg("-w").arg(&w.ws).output();
        assert_eq!(
            out.code(),
            0,
            "{story}: guard recover failed\n--- stdout\n{}\n--- stderr\n{}",
            out.stdout(),
            out.stderr()
        );
        before.assert_restored(&w.ws, &story);
        if out
            .stdout()
            .lines()
            .any(|l| l.starts_with("recovered run") && !l.contains(": 0 change(s)"))
        {
            undone += 1;
        }
        // The killed guard could not remove its private temporary directory; recover does.
        for id in out
            .stdout()
            .lines()
            .filter_map(|l| l.strip_prefix("recovered run "))
            .filter_map(|l| l.split(':').next())
        {
            let tmp = std::env::temp_dir().join(format!("guard-{id}"));
            assert!(!tmp.exists(), "{story}: {} is left", tmp.display());
        }
        // Recovery is done once: a second pass finds nothing left to do.
        let again = w.guard().arg("recover").arg("-w").arg(&w.ws).output();
        again.expect_code(0);
        assert!(
            again.stdout().contains("no interrupted runs"),
            "{story}: {}",
            again.stdout()
        );
    }
    assert!(
        undone >= ITERATIONS / 2,
        "only {undone} of {ITERATIONS} kills left changes to recover: the kills miss the workload"
    );
}

#[test]
fn the_next_run_on_a_workspace_names_an_interrupted_run() {
    let w = Workspace::new();
    w.write("keep.txt", "v1\n");
    let mut g = w.exec(&["agent"]);
    g.cmd
        .arg("--")
        .args(["sh", "-c", "echo v2 > keep.txt; echo started; sleep 30"])
        .stdout(std::process::Stdio::piped());
    let mut child = g.cmd.spawn().expect("spawn guard");
    let mut first = [0u8; 8];
    std::io::Read::read_exact(child.stdout.as_mut().expect("stdout"), &mut first).expect("started");
    // The files guard makes ahead of its end once the command runs (run.json's and the
    // summary's temporary files): a guard killed now leaves them, until recovery takes or
    // removes them.
    let leftovers = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(w.state.join("runs"))
            .expect("runs")
            .flatten()
            .flat_map(|run| std::fs::read_dir(run.path()).expect("run dir").flatten())
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with('.') && name.contains(".tmp")
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftovers().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().expect("kill -9 guard");
    child.wait().expect("reap");
    assert_eq!(leftovers().len(), 2, "{:?}", leftovers());
    let out = w.exec(&["agent"]).run(&["true"]);
    out.expect_code(0);
    assert!(
        out.stderr().contains("was interrupted") && out.stderr().contains("guard recover"),
        "the next run says so: {}",
        out.stderr()
    );
    let rec = w.guard().args(["recover", "-w"]).arg(&w.ws).output();
    rec.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("keep.txt")).expect("keep"),
        "v1\n"
    );
    assert_eq!(leftovers(), Vec::<std::path::PathBuf>::new());
}

/// The journals of runs beyond the newest `GUARD_KEEP_RUNS` are pruned as runs start, from
/// the index of journals (`$STATE/journals`), and `guard prune` prunes further; every run's
/// audit log stays, and a pruned run can no longer be rolled back.
#[test]
fn old_journals_are_pruned_as_runs_start_and_by_guard_prune() {
    let w = Workspace::new();
    for i in 0..5 {
        w.exec(&["agent"])
            .env("GUARD_KEEP_RUNS", "2")
            .run(&["sh", "-c", &format!("echo {i} > f{i}.txt")])
            .expect_code(0);
    }
    let mut runs: Vec<std::path::PathBuf> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .map(|e| e.expect("entry").path())
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 5);
    let with_journal = |runs: &[std::path::PathBuf]| -> Vec<bool> {
        runs.iter().map(|r| r.join("journal").is_dir()).collect()
    };
    let indexed = || -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(w.state.join("journals"))
            .expect("the index of journals")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        ids.sort();
        ids
    };
    let id = |r: &std::path::PathBuf| r.file_name().unwrap().to_string_lossy().into_owned();
    // The fifth run pruned while it ran: its own journal and the newest other one are kept.
    assert_eq!(with_journal(&runs), [false, false, false, true, true]);
    assert_eq!(indexed(), [id(&runs[3]), id(&runs[4])]);
    assert_eq!(
        std::fs::read_dir(w.state.join("active"))
            .expect("active")
            .count(),
        0
    );
    assert!(runs.iter().all(|r| r.join("audit.jsonl").is_file()));

    let out = w.guard().args(["prune", "--keep", "1"]).output();
    out.expect_code(0);
    assert_eq!(with_journal(&runs), [false, false, false, false, true]);
    assert_eq!(indexed(), [id(&runs[4])]);
    let out = w.guard().args(["rollback", &id(&runs[3])]).output();
    assert_ne!(out.code(), 0, "a pruned run cannot be rolled back");
    assert!(
        out.stderr().contains("no journal"),
        "the refusal says why: {}",
        out.stderr()
    );
    // The newest run is still whole: rolling it back removes only its file.
    w.guard().arg("rollback").output().expect_code(0);
    assert!(!w.ws.join("f4.txt").exists());
    assert!(w.ws.join("f3.txt").exists());
}

#[test]
fn a_run_that_changes_nothing_makes_no_journal_and_rollback_says_so() {
    let w = Workspace::new();
    std::fs::write(w.ws.join("kept.txt"), "as it was\n").expect("write");
    // It reads the workspace and writes only outside it (its private tmp).
    w.exec(&["agent"])
        .run(&["sh", "-c", "cat kept.txt > \"$TMPDIR/copy\""])
        .expect_code(0);
    let runs: Vec<std::path::PathBuf> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert!(run.join("audit.jsonl").is_file() && run.join("summary.json").is_file());
    assert!(
        !run.join("journal").exists(),
        "a run that changed nothing made a journal"
    );
    // Nothing to roll back is no failure: the workspace is as the run found it.
    for dry in [true, false] {
        let mut cmd = w.guard();
        cmd.arg("rollback");
        if dry {
            cmd.arg("--dry-run");
        }
        let out = cmd.output();
        out.expect_code(0);
        assert!(
            out.stdout().contains("nothing to roll back")
                && out.stdout().contains("changed nothing in its workspace"),
            "it says why: {}",
            out.stdout()
        );
    }
    let out = w.guard().arg("diff").output();
    out.expect_code(0);
    assert!(out.stdout().contains("0 change(s)"), "{}", out.stdout());
    assert_eq!(
        std::fs::read_to_string(w.ws.join("kept.txt")).expect("read"),
        "as it was\n"
    );
    // The next run's first change makes its journal, and its rollback undoes it.
    w.exec(&["agent"])
        .run(&["sh", "-c", "rm kept.txt"])
        .expect_code(0);
    w.guard().arg("rollback").output().expect_code(0);
    assert_eq!(
        std::fs::read_to_string(w.ws.join("kept.txt")).expect("read"),
        "as it was\n"
    );
}

/// A run that ends while another looks at it is not taken for interrupted: the other reads its
/// record ("running"), and by the time it looks at the run's guard that guard has exited. The
/// record is read again then (a run records its end before its guard exits). Forced with a
/// debug build's pause between the two looks: the second run's start says nothing of the
/// first, and `guard recover` at the same moment leaves the first run's change in place.
/// Before, the start warned that the run "was interrupted (guard died)", and recover rolled
/// the finished run back.
#[test]
fn a_run_ending_while_another_starts_is_not_taken_for_interrupted() {
    if !cfg!(debug_assertions) {
        eprintln!("skipped: needs a debug build of guard");
        return;
    }
    let w = Workspace::new();
    for (what, second) in [
        ("a start", &["exec", "--", "true"][..]),
        ("recover", &["recover"][..]),
    ] {
        let made = w.ws.join(format!("made-by-{}", what.replace(' ', "-")));
        let mut first = w.exec(&["agent"]);
        first.cmd.args([
            "--",
            "sh",
            "-c",
            &format!("sleep 0.5; : > '{}'", made.display()),
        ]);
        let first = first.cmd.spawn().expect("first run");
        // Reaped as soon as it ends (a zombie's pid still looks alive).
        let first = std::thread::spawn(move || first.wait_with_output());
        // The first run is going (its record says "running") when the second reads it.
        std::thread::sleep(Duration::from_millis(200));
        let mut g = w.guard();
        if second[0] == "recover" {
            g.cmd.args(["recover", "-w"]).arg(&w.ws);
        } else {
            g.cmd.args(["exec", "-w"]).arg(&w.ws).args(&second[1..]);
        }
        let out = g
            .cmd
            .env("GUARD_DEBUG_PAUSE_INTERRUPTED_MS", "1500")
            .output()
            .expect("second");
        let first = first
            .join()
            .expect("the reaping thread")
            .expect("first run ends");
        assert!(first.status.success(), "{what}: the first run failed");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {stderr}");
        assert!(!stderr.contains("interrupted"), "{what}: {stderr}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("recovered run"),
            "{what}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(made.exists(), "{what}: the first run's change was undone");
    }
}
