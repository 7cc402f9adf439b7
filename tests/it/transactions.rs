//! The transactional workspace: whatever a run does inside the workspace, a rollback restores
//! it exactly. The proof is always the same: the tree digest (names, types, content, modes,
//! symlink targets, empty directories) after the rollback equals the digest before the run.

use crate::util::{lacks, populate, tool, tree_file, Out, TreeState, Workspace};

/// The path of [`populate`]'s file `i` in a tree at `tree/`, quoted for sh.
fn f(i: usize) -> String {
    format!("'tree/{}'", tree_file(i).display())
}

/// Run `script` (with `set -e`, ending in `exit 1`) under `guard exec --atomic` and prove the
/// workspace was rolled back to `before`: the script ran to its end, guard said so, the audit
/// log has one rollback event that undid something, and the digest is the pre-run digest.
fn atomic_failure_rolls_back(w: &Workspace, before: &TreeState, story: &str, script: &str) -> Out {
    let script = format!("set -e\n{script}\necho workload-done\nexit 1\n");
    let out = w
        .exec(&["agent"])
        .arg("--atomic")
        .run(&["sh", "-c", &script]);
    if out.code() != 1 {
        let denied: Vec<String> = w
            .decisions()
            .into_iter()
            .filter(|d| d["verdict"] != "allow")
            .map(|d| d.to_string())
            .collect();
        panic!(
            "{story}: exit status {} (expected 1)\n--- denied\n{}\n--- stderr\n{}",
            out.code(),
            denied.join("\n"),
            out.stderr()
        );
    }
    assert!(
        out.stdout().contains("workload-done"),
        "{story}: the workload did not run to its end\n--- stdout\n{}\n--- stderr\n{}",
        out.stdout(),
        out.stderr()
    );
    assert_rolled_back(w, before, story, &out);
    out
}

/// The run's rollback is visible everywhere it should be, and the workspace is `before` again.
fn assert_rolled_back(w: &Workspace, before: &TreeState, story: &str, out: &Out) {
    assert!(
        out.stderr().contains("rolled the workspace back"),
        "{story}: guard does not report the rollback\n--- stderr\n{}",
        out.stderr()
    );
    let rollbacks = w.events("rollback");
    assert_eq!(
        rollbacks.len(),
        1,
        "{story}: one rollback event: {rollbacks:?}"
    );
    assert!(
        rollbacks[0]["entries_undone"].as_u64().unwrap_or(0) > 0,
        "{story}: the rollback undid nothing: {}",
        rollbacks[0]
    );
    before.assert_restored(&w.ws, story);
}

/// Run `script` under `guard exec --atomic` and prove one command deleting most of the
/// workspace is a policy event (`fs.mass-delete`): the run is stopped (120), the refusal is
/// logged, and the workspace is `before` again.
fn mass_delete_stops_and_restores(w: &Workspace, before: &TreeState, story: &str, argv: &[&str]) {
    // The interpreter where the runner keeps it (a toolchain under another home, say).
    let layer = w.profile_file("tools", &format!("[fs]\nread = {:?}\n", read_roots()));
    let out = w.exec(&["agent", &layer]).arg("--atomic").run(argv);
    let refused = w.refusals();
    assert_eq!(
        out.code(),
        120,
        "{story}: the run is stopped\n{refused:?}\n{}",
        out.stderr()
    );
    assert_eq!(refused.len(), 1, "{story}: {refused:?}");
    assert_eq!(refused[0]["rule"], "fs.mass-delete", "{story}");
    assert_rolled_back(w, before, story, &out);
}

/// What the mass-deletion runs read beyond agent: python's installation, where it is.
fn read_roots() -> Vec<String> {
    crate::fidelity_suites::python()
        .map(|(_, prefix)| vec![prefix.display().to_string()])
        .unwrap_or_default()
}

#[test]
fn rm_rf_of_a_2000_file_tree_rolls_back_exactly() {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 2000, 1);
    w.write("keep.txt", "outside the tree\n");
    let before = w.state();
    assert!(before.snapshot.len() > 2000, "{}", before.snapshot.len());
    // Nearly all of the workspace: under --atomic the delete that crosses agent's mass-delete
    // line stops the run, and the journal restores every entry rm removed before it.
    mass_delete_stops_and_restores(&w, &before, "rm -rf tree", &["rm", "-rf", "tree"]);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(newest_run(&w).join("summary.json")).expect("summary"),
    )
    .expect("summary json");
    assert_eq!(summary["rollbacks"], 1, "{summary}");
}

fn newest_run(w: &Workspace) -> std::path::PathBuf {
    let mut runs: Vec<_> = std::fs::read_dir(w.state.join("runs"))
        .expect("runs")
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs.pop().expect("a run")
}

fn git(w: &Workspace, args: &str) -> String {
    w.sh(&format!("git {args}"))
}

#[test]
fn mass_deletion_of_the_workspace_by_any_program_stops_the_run_and_restores_it() {
    let python = crate::fidelity_suites::python();
    let exe = python
        .as_ref()
        .map(|(exe, _)| exe.display().to_string())
        .unwrap_or_default();
    let mut cases: Vec<(&str, Vec<&str>)> = vec![
        ("rm -rf ./*", vec!["sh", "-c", "rm -rf ./* .[!.]*"]),
        ("find . -delete", vec!["find", ".", "-delete"]),
    ];
    let rmtree = "import os, shutil\nfor e in os.listdir('.'):\n    p = os.path.join('.', e)\n    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)\n";
    let whole = "import os, shutil\nshutil.rmtree(os.getcwd())\n";
    match &python {
        Some(_) => {
            cases.push((
                "shutil.rmtree of every entry",
                vec![exe.as_str(), "-c", rmtree],
            ));
            cases.push((
                "shutil.rmtree of the workspace",
                vec![exe.as_str(), "-c", whole],
            ));
        }
        None => eprintln!("skipped (shutil.rmtree cases): python3 is not installed"),
    }
    for (story, argv) in cases {
        let w = tree_workspace(120, 21);
        let before = w.state();
        assert!(before.snapshot.len() > 100, "{}", before.snapshot.len());
        mass_delete_stops_and_restores(&w, &before, story, &argv);
    }
}

/// A mass deletion by a process deep in a command (`xargs rm` under a shell the root
/// started) counts against that command, whose checkpoint the refusal names, not against the
/// run: the deleting process's parents are asked at each delete (through pidfds it holds,
/// `txn::Parents`), and the deletes of entries the command found are all counted.
#[test]
fn a_mass_deletion_deep_in_a_command_counts_against_that_command() {
    let w = tree_workspace(120, 22);
    let before = w.state();
    let argv = [
        "sh",
        "-c",
        "sh -c 'find . -type f | xargs rm -f; true'; true",
    ];
    mass_delete_stops_and_restores(&w, &before, "xargs rm under a command", &argv);
    let refusal = w
        .decisions()
        .into_iter()
        .find(|d| d["rule"] == "fs.mass-delete")
        .expect("the refusal");
    assert_eq!(refusal["comm"], "rm", "{refusal}");
    let reason = refusal["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("this command has deleted") && reason.contains("checkpoint"),
        "counted against the command that started xargs: {refusal}"
    );
}

/// What a command made and deletes again is not the workspace it found: a command (a shell
/// the root started) that writes 150 files and removes them with a child `rm -r` deletes
/// most of what the workspace holds then, and nothing is refused.
#[test]
fn a_command_deleting_what_it_made_is_no_mass_deletion() {
    let w = tree_workspace(40, 23);
    let before = w.state();
    let make_and_remove = "mkdir gen; i=0; while [ $i -lt 150 ]; do echo $i > gen/f$i; \
         i=$((i+1)); done; rm -r gen; true";
    let out = w.exec(&["agent"]).arg("--atomic").run(&[
        "sh",
        "-c",
        &format!("sh -c '{make_and_remove}'; true"),
    ]);
    out.expect_code(0);
    let refused: Vec<_> = w
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] != "allow")
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    assert!(!w.ws.join("gen").exists());
    before.assert_restored(&w.ws, "the tree it found is untouched");
}

#[test]
fn git_reset_hard_and_clean_fdx_roll_back_including_dot_git() {
    if lacks(&["git"]) {
        return;
    }
    let w = Workspace::new();
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    );
    git(&w, "init -q");
    populate(&w.ws.join("src"), 150, 2);
    w.write(".gitignore", "*.log\nbuild/\n");
    git(&w, "add -A && git commit -qm first");
    w.write("src/d0/f00010.txt", "second version\n");
    w.write("NEWS", "news\n");
    git(&w, "add -A && git commit -qm second");
    git(&w, "checkout -qb feature && echo feature > feature.txt && git add feature.txt && git commit -qm feature && git checkout -q main");
    w.write("src/d0/f00010.txt", "uncommitted edit\n");
    w.write("untracked.txt", "untracked\n");
    w.write("untracked-dir/a/b.txt", "untracked in a dir\n");
    w.write("debug.log", "ignored\n");
    w.write("build/out.o", "ignored dir\n");
    let before = w.state();
    assert!(before
        .snapshot
        .keys()
        .any(|p| p.starts_with(".git/objects")));
    atomic_failure_rolls_back(
        &w,
        &before,
        "git reset --hard HEAD~1 && git clean -fdx",
        "git reset -q --hard HEAD~1\ngit clean -qfdx\ntest ! -e debug.log\ntest ! -e NEWS",
    );
    assert_eq!(git(&w, "log -1 --format=%s").trim(), "second");
    assert_eq!(git(&w, "rev-parse --abbrev-ref HEAD").trim(), "main");
    let status = git(&w, "status --porcelain --ignored");
    assert!(status.contains("untracked.txt"), "{status}");
    assert!(status.contains("debug.log"), "{status}");
}

/// A workspace with a varied tree of `files` files under `tree/`.
fn tree_workspace(files: usize, seed: u64) -> Workspace {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), files, seed);
    w
}

/// `--atomic` alone checks each path its rollback restores and digests nothing: the summary
/// and the rollback event carry no digest. With `--verify` the whole workspace is digested
/// before the command and after the rollback, both the tree as it was.
#[test]
fn verify_digests_the_workspace_around_an_atomic_run_and_atomic_alone_does_not() {
    let w = tree_workspace(40, 11);
    let before = w.state();
    let script = format!("rm {} {} && echo x > new.txt && exit 1", f(0), f(1));
    let summary = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(w.root.join(name)).expect("summary");
        serde_json::from_str(&text).expect("summary json")
    };
    for (flags, name) in [
        (&["--atomic"][..], "plain"),
        (&["--atomic", "--verify"], "verify"),
    ] {
        let file = w.root.join(format!("{name}.json"));
        let out = w
            .exec(&["agent"])
            .args(flags)
            .arg("--summary")
            .arg(&file)
            .run(&["sh", "-c", &script]);
        assert_eq!(out.code(), 1, "{name}: {}", out.stderr());
        assert!(
            !out.stderr().contains("differs"),
            "{name}: {}",
            out.stderr()
        );
        assert_rolled_back(&w, &before, name, &out);
        let s = summary(&format!("{name}.json"));
        let event = &w.events("rollback")[0];
        if name == "plain" {
            assert!(s["digest_before"].is_null(), "{s}");
            assert!(s["digest_after"].is_null(), "{s}");
            assert_eq!(event["digest_after"], "", "{event}");
        } else {
            assert_eq!(
                s["digest_before"].as_str(),
                Some(before.digest.as_str()),
                "{s}"
            );
            assert_eq!(
                s["digest_after"].as_str(),
                Some(before.digest.as_str()),
                "{s}"
            );
            assert_eq!(event["digest_after"].as_str(), Some(before.digest.as_str()));
        }
    }
}

#[test]
fn sed_in_place_edits_roll_back() {
    let w = tree_workspace(60, 3);
    w.write("conf.ini", "name = old\nlevel = 1\n");
    let before = w.state();
    atomic_failure_rolls_back(
        &w,
        &before,
        "sed -i",
        &format!(
            "sed -i 's/old/new/; s/1/2/' conf.ini\n\
             sed -i.bak 's/file/FILE/g' {} {}\n\
             find tree/d1 -name '*.txt' -exec sed -i '1d' {{}} +\n\
             grep -q new conf.ini",
            f(10),
            f(3)
        ),
    );
}

#[test]
fn mv_over_existing_files_and_directories_rolls_back() {
    let w = tree_workspace(60, 4);
    w.write("a.txt", "a\n");
    w.write("b.txt", "b\n");
    std::fs::create_dir_all(w.ws.join("emptydir")).expect("mkdir");
    let before = w.state();
    atomic_failure_rolls_back(
        &w,
        &before,
        "mv over existing",
        &format!(
            "mv -f a.txt b.txt\n\
         mv -f {} {}\n\
         mv tree/d2/s2 tree/d9/moved-subdir\n\
         mkdir -p newdir/x && mv -T newdir emptydir\n\
         mv tree/link-to-dir tree/d3/renamed-link\n\
         test ! -e a.txt",
            f(10),
            f(11)
        ),
    );
}

#[test]
fn chmod_of_files_and_directories_rolls_back() {
    let w = tree_workspace(60, 5);
    let before = w.state();
    // Set-id bits are refused outright (fs.setid, tests/it/metadata.rs): the sticky bit on a
    // file stands for a special bit the rollback must restore.
    atomic_failure_rolls_back(
        &w,
        &before,
        "chmod",
        &format!(
            "chmod 000 {}\n\
         chmod 1755 {}\n\
         chmod 1777 tree/d2\n\
         chmod -R go-rwx tree/d3\n\
         chmod 0755 tree/private\n\
         chmod a+x {}",
            f(10),
            f(11),
            f(4)
        ),
    );
}

#[test]
fn symlink_replacement_rolls_back() {
    let w = tree_workspace(60, 6);
    w.write("target-a", "a\n");
    w.write("target-b", "b\n");
    std::os::unix::fs::symlink("target-a", w.ws.join("current")).expect("symlink");
    let before = w.state();
    atomic_failure_rolls_back(
        &w,
        &before,
        "ln -sfn",
        &format!(
            "ln -sfn target-b current\n\
         ln -sfn d9 tree/link-to-dir\n\
         ln -sf target-a {}\n\
         ln -sfn elsewhere tree/dangling\n\
         ln -s target-b brand-new-link\n\
         test \"$(readlink current)\" = target-b",
            f(10)
        ),
    );
}

#[test]
fn truncation_rolls_back() {
    let w = tree_workspace(60, 7);
    w.write("big.txt", &"line\n".repeat(5000));
    w.write("small.txt", "small\n");
    let before = w.state();
    atomic_failure_rolls_back(
        &w,
        &before,
        "truncate",
        &format!(
            "truncate -s 0 big.txt\n\
             : > small.txt\n\
             truncate -s 100000 {}\n\
             truncate -s 3 {}\n\
             : > {}\n\
             test ! -s big.txt",
            f(10),
            f(11),
            f(12)
        ),
    );
}

#[test]
fn a_file_rewritten_through_mmap_rolls_back() {
    let w = tree_workspace(30, 8);
    w.write("mapped.bin", &"0123456789abcdef".repeat(4096));
    let before = w.state();
    let probe = w.probe();
    let out = atomic_failure_rolls_back(
        &w,
        &before,
        "mmap rewrite",
        &format!(
            "{probe} mmap-write mapped.bin XYZ\n{probe} mmap-write {} QQ\n\
             head -c 6 mapped.bin; echo",
            f(10)
        ),
    );
    assert!(
        out.stdout().contains("XYZXYZ"),
        "the mapping rewrote the file during the run: {}",
        out.stdout()
    );
}

#[test]
fn tar_extract_over_existing_files_rolls_back() {
    let w = tree_workspace(60, 9);
    // An archive (readable in the sandbox) holding other contents for the same names, plus
    // new files, directories and a symlink.
    let stage = w.root.join("stage");
    populate(&stage.join("tree"), 60, 99);
    std::fs::create_dir_all(stage.join("tree/new/dir")).expect("mkdir");
    std::fs::write(stage.join("tree/new/dir/file"), "new\n").expect("write");
    let archive = w.bin.join("over.tar");
    let status = std::process::Command::new("tar")
        .arg("cf")
        .arg(&archive)
        .arg("-C")
        .arg(&stage)
        .arg("tree")
        .status()
        .expect("tar cf");
    assert!(status.success());
    let before = w.state();
    atomic_failure_rolls_back(
        &w,
        &before,
        "tar x",
        &format!(
            "tar xf {} --no-same-owner\ntest -e tree/new/dir/file",
            archive.display()
        ),
    );
}

#[test]
fn parallel_make_targets_roll_back() {
    if lacks(&["make"]) {
        return;
    }
    let w = tree_workspace(40, 10);
    let mut makefile = String::from("all: t1 t2 t3 t4 t5 t6 t7 t8 report\n");
    for i in 1..=8 {
        makefile.push_str(&format!(
            "t{i}:\n\tmkdir -p out/t{i}\n\tfor n in 1 2 3 4 5 6 7 8; do echo t{i} $$n > out/t{i}/$$n; done\n\techo rebuilt > existing{i}.txt\n\trm -f tree/d{}/s0/*.md\n",
            i % 10
        ));
    }
    makefile.push_str("report: t1 t2 t3 t4 t5 t6 t7 t8\n\tcat out/*/1 > report.txt\n");
    w.write("Makefile", &makefile);
    for i in 1..=8 {
        w.write(&format!("existing{i}.txt"), &format!("original {i}\n"));
    }
    let before = w.state();
    atomic_failure_rolls_back(&w, &before, "make -j2", "make -s -j2\ntest -s report.txt");
}

/// A profile layered after agent: `on-deny` as given and a deny rule for `secret*` in the
/// workspace.
fn deny_secret_profile(w: &Workspace, on_deny: &str) -> String {
    w.profile_file(
        &format!("deny-secret-{on_deny}"),
        &format!(
            "name = \"deny-secret\"\n\
             [transaction]\non-deny = \"{on_deny}\"\n\
             [[rule]]\nid = \"no-touch-secret\"\nwhen = [\"write\", \"create\"]\n\
             path = [\"{{workspace}}/secret*\"]\naction = \"deny\"\n"
        ),
    )
}

/// How often the on-deny scenarios run: the denied process may exit (and be reaped) at any
/// moment after the denial, so a single run can pass by luck.
const ROUNDS: usize = 5;

#[test]
fn a_denied_call_rolls_back_only_its_command_and_the_agent_carries_on() {
    for round in 0..ROUNDS {
        denied_call_rolls_back_only_its_command(round);
    }
}

fn denied_call_rolls_back_only_its_command(round: usize) {
    let story = format!("on-deny rollback, round {round}");
    let w = tree_workspace(40, 11);
    w.write("gone.txt", "will come back\n");
    let before = w.state();
    let profile = deny_secret_profile(&w, "rollback");
    let script = "echo before > kept.txt; \
                  sh -c \"echo child > child.txt; rm -f gone.txt; rm -rf tree/d1; echo x > secret.txt\"; \
                  echo \"after $?\" > after.txt; echo parent-alive";
    let out = w.exec(&["agent", &profile]).run(&["sh", "-c", script]);
    out.expect_code(0);
    assert!(
        out.stdout().contains("parent-alive"),
        "{story}: {}",
        out.stdout()
    );
    let ws = &w.ws;
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).ok().as_deref(),
        Some("before\n"),
        "{story}: made by the agent before the command: kept"
    );
    assert!(
        !ws.join("secret.txt").exists(),
        "{story}: the denied file was never made"
    );
    let after = std::fs::read_to_string(ws.join("after.txt")).expect("after.txt: made after");
    let status: i32 = after
        .trim()
        .strip_prefix("after ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{story}: after.txt: {after:?}"));
    assert_ne!(status, 0, "{story}: the agent saw its command fail");
    assert!(
        !ws.join("child.txt").exists(),
        "{story}: the command's file is gone (the command exited with {status}; events: {:?})",
        w.events("rollback")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("gone.txt")).ok().as_deref(),
        Some("will come back\n"),
        "{story}: the file the command removed is back"
    );
    // Apart from the agent's own two files, the workspace is as before the run.
    std::fs::remove_file(ws.join("kept.txt")).expect("rm kept");
    std::fs::remove_file(ws.join("after.txt")).expect("rm after");
    before.assert_restored(ws, &story);
    let rollbacks = w.events("rollback");
    assert_eq!(rollbacks.len(), 1, "{story}: {rollbacks:?}");
    let cp = rollbacks[0]["checkpoint"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let checkpoint = w
        .events("checkpoint")
        .into_iter()
        .find(|c| c["id"].as_str() == Some(cp.as_str()))
        .unwrap_or_else(|| panic!("{story}: no checkpoint event with id {cp}"));
    let reason = checkpoint["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("command:") && reason.contains("child.txt"),
        "{story}: the command's own checkpoint was restored: {checkpoint}"
    );
    assert!(w
        .decisions()
        .iter()
        .any(|d| d["verdict"] == "deny" && d["rule"] == "no-touch-secret"));
}

#[test]
fn on_deny_kill_ends_the_run_with_120_and_restores_its_start() {
    let w = tree_workspace(200, 12);
    let before = w.state();
    let profile = deny_secret_profile(&w, "kill");
    let out = w.exec(&["agent", &profile]).run(&[
        "sh",
        "-c",
        "rm -rf tree/d0 tree/d1; echo new > new.txt; mv tree/d2 moved; \
         echo x > secret.txt; echo y > later.txt",
    ]);
    out.expect_code(120);
    assert_rolled_back(&w, &before, "on-deny kill", &out);
}

#[test]
fn on_deny_kill_stops_the_denied_process_before_it_runs_on() {
    // "A denial ends the run": nothing the process does after the denied call should happen,
    // not even output on a descriptor it already holds.
    for round in 0..ROUNDS {
        let w = Workspace::new();
        let profile = deny_secret_profile(&w, "kill");
        let out = w.exec(&["agent", &profile]).run(&[
            "sh",
            "-c",
            "echo x > secret.txt; echo ran-on-after-the-denial",
        ]);
        out.expect_code(120);
        assert!(
            !out.stdout().contains("ran-on-after-the-denial"),
            "round {round}: the denied process ran on after the denial: {}",
            out.stdout()
        );
    }
}

#[test]
fn on_failure_rollback_profile_restores_a_failed_run_and_keeps_a_successful_one() {
    let w = tree_workspace(100, 13);
    let profile = w.profile_file(
        "on-failure",
        "name = \"on-failure\"\n[transaction]\non-failure = \"rollback\"\n",
    );
    let before = w.state();
    let out = w.exec(&["agent", &profile]).run(&[
        "sh",
        "-c",
        "rm -rf tree/d3; echo half > half-done.txt; mv tree/d4 tree/d5/; false",
    ]);
    out.expect_code(1);
    assert_rolled_back(&w, &before, "on-failure rollback of a failed run", &out);

    let out =
        w.exec(&["agent", &profile])
            .run(&["sh", "-c", "rm -rf tree/d3; echo done > done.txt"]);
    out.expect_code(0);
    assert!(w.events("rollback").is_empty(), "a successful run is kept");
    assert!(w.ws.join("done.txt").exists() && !w.ws.join("tree/d3").exists());
}

/// Two judged changes that wait behind a slow one (a large pre-image copied under the
/// transactional lock) walk their paths while it is copied, then take the lock in either
/// order: one creates a file (O_CREAT without O_EXCL, appending), the other renames an original
/// file to that name. When the rename goes first, the create's walk found no such name, which
/// is no longer true: guard must look again (the supervisor's `TX_TURNS`) and open the renamed
/// original as the kernel would, keeping its content first, or a rollback would delete the
/// original as a file the run made. Python's threads make the three calls at once; the
/// journal's order tells which went first.
#[test]
fn changes_queued_behind_a_slow_one_see_what_went_before_them() {
    changes_queued_behind_a_slow_one(&Workspace::new());
}

/// [`changes_queued_behind_a_slow_one_see_what_went_before_them`] for an unprivileged guard.
#[test]
fn changes_queued_behind_a_slow_one_see_what_went_before_them_unprivileged() {
    changes_queued_behind_a_slow_one(&Workspace::unprivileged());
}

fn changes_queued_behind_a_slow_one(w: &Workspace) {
    // The system's interpreter where there is one: every user can run it.
    let system = std::path::Path::new("/usr/bin/python3");
    let Some(python) = system
        .exists()
        .then(|| system.to_path_buf())
        .or_else(|| tool("python3"))
    else {
        eprintln!("skip: python3 is not installed");
        return;
    };
    let install = std::fs::canonicalize(&python)
        .ok()
        .and_then(|p| p.parent()?.parent().map(std::path::Path::to_path_buf))
        .unwrap_or_else(|| "/usr".into());
    const ROUNDS: usize = 5;
    let python_layer = w.profile_file(
        "python",
        &format!(
            "name = \"python\"\n[fs]\nread = [\"{}\"]\n",
            install.display()
        ),
    );
    let mut setup = String::new();
    for i in 0..ROUNDS {
        // Under the 64 MiB pre-image cap, so it is copied, and large enough for the copy to
        // outlast the 5 ms after which the standby workers take calls.
        setup.push_str(&format!(
            "head -c 60000000 /dev/zero > big{i}; echo original {i} > orig{i}\n"
        ));
    }
    if w.unprivileged {
        setup.push_str(&format!("chown -R {}: .\n", crate::util::UNPRIV_USER));
    }
    w.sh(&setup);
    let before = w.state();
    let script = format!(
        r#"
import os, threading, time
for i in range({ROUNDS}):
    slow = threading.Thread(target=lambda: os.close(os.open(f"big{{i}}", os.O_WRONLY | os.O_APPEND)))
    slow.start()
    time.sleep(0.008)
    def append():
        try:
            with open(f"m{{i}}", "a") as f:
                f.write("appended\n")
        except OSError as e:
            print(f"append {{i}} failed: {{e}}", flush=True)
    queued = [threading.Thread(target=lambda: os.rename(f"orig{{i}}", f"m{{i}}")), threading.Thread(target=append)]
    for t in queued:
        t.start()
    for t in [slow] + queued:
        t.join()
    with open(f"m{{i}}") as f:
        assert f.read().startswith("original") == (f"orig{{i}}" not in os.listdir(".")), i
print("workload-done")
raise SystemExit(1)
"#
    );
    let out = w.exec(&["agent", &python_layer]).arg("--atomic").run(&[
        python.as_os_str(),
        "-c".as_ref(),
        script.as_ref(),
    ]);
    assert_eq!(
        out.code(),
        1,
        "--- stdout\n{}\n--- stderr\n{}",
        out.stdout(),
        out.stderr()
    );
    assert!(out.stdout().contains("workload-done"), "{}", out.stderr());
    // An open with O_CREAT of a name that appeared meanwhile opens it, as the kernel does.
    assert!(!out.stdout().contains("failed"), "{}", out.stdout());
    // How often the rename went first: the proof is the digest below, whichever order the
    // lock gave, but a run where it never did proves nothing about that order.
    let decisions = w.decisions();
    let seq = |syscall: &str, name: &str| {
        decisions
            .iter()
            .filter(|d| d["syscall"] == syscall)
            .find(|d| {
                [&d["path"], &d["path2"]]
                    .iter()
                    .any(|p| p.as_str().is_some_and(|p| p.ends_with(name)))
            })
            .and_then(|d| d["seq"].as_u64())
    };
    let renamed_first = (0..ROUNDS)
        .filter(|i| {
            let m = format!("/m{i}");
            matches!((seq("rename", &m), seq("openat", &m)), (Some(r), Some(o)) if r < o)
        })
        .count();
    eprintln!("the rename went first in {renamed_first} of {ROUNDS} rounds");
    before.assert_restored(&w.ws, "changes queued behind a slow pre-image copy");
}

/// A workspace holding a git repository of 200 files committed once, its objects loose: they
/// make up more than half of the workspace's entries. Owned by the workspace's user.
fn repo_of_loose_objects(w: &Workspace) -> TreeState {
    let config = "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n[gc]\n\tauto = 0\n";
    w.write(&w.home.join(".gitconfig").display().to_string(), config);
    w.sh("mkdir src && i=0; while [ $i -lt 200 ]; do echo \"file $i\" > src/f$i.txt; i=$((i+1)); done");
    w.sh("git init -q && git add -A && git commit -qm first");
    // Written again: hands what the setup made to the workspace's user.
    w.write(&w.home.join(".gitconfig").display().to_string(), config);
    let before = w.state();
    let loose = before
        .snapshot
        .keys()
        .filter(|p| {
            let s = p.to_string_lossy();
            s.starts_with(".git/objects/") && !s.contains("/pack") && !s.contains("/info")
        })
        .count();
    assert!(
        loose * 2 > before.snapshot.len(),
        "the loose objects are most of the workspace: {loose} of {}",
        before.snapshot.len()
    );
    before
}

/// git's own maintenance of its object store is no mass deletion: `git gc` packs the loose
/// objects that are most of the workspace and removes them, and under --atomic the run goes
/// on and the history is whole afterwards (root and unprivileged). Before, the removals were
/// counted as any program's and the run was stopped and rolled back.
#[test]
fn git_gc_of_a_repository_of_loose_objects_is_no_mass_deletion() {
    if lacks(&["git"]) {
        return;
    }
    for unprivileged in [false, true] {
        let w = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        repo_of_loose_objects(&w);
        let out = w.exec(&["agent"]).arg("--atomic").run(&["git", "gc", "-q"]);
        let refused = w.refusals();
        assert_eq!(
            out.code(),
            0,
            "unprivileged {unprivileged}: {refused:?}\n{}",
            out.stderr()
        );
        assert!(
            refused.is_empty(),
            "unprivileged {unprivileged}: {refused:?}"
        );
        let counts = git(&w, "count-objects -v");
        assert!(
            counts.lines().any(|l| l == "count: 0") && counts.contains("packs: 1"),
            "unprivileged {unprivileged}: packed, none loose: {counts}"
        );
        git(&w, "fsck --no-progress --no-dangling");
        assert_eq!(git(&w, "log -1 --format=%s").trim(), "first");
        assert_eq!(git(&w, "ls-files").lines().count(), 200);
    }
}

/// The exception is git's alone: `rm` removing the same loose objects is a mass deletion, and
/// --atomic restores them.
#[test]
fn rm_of_a_repositorys_loose_objects_is_a_mass_deletion() {
    if lacks(&["git"]) {
        return;
    }
    let w = Workspace::new();
    let before = repo_of_loose_objects(&w);
    mass_delete_stops_and_restores(
        &w,
        &before,
        "rm of .git/objects/??",
        &["sh", "-c", "rm -rf .git/objects/[0-9a-f][0-9a-f]"],
    );
    git(&w, "fsck --no-progress --no-dangling");
}
