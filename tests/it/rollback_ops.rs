//! A rollback after the run is an operation: all or nothing, refused with the list when the
//! user's newer work is in the way, revertible (`guard undo`, the undo of an undo redoes it),
//! and, when guard is killed in the middle of it, `guard recover` leaves the workspace as it
//! was before the rollback or as it was after, never a mix.

use std::os::unix::fs::MetadataExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{lacks, populate, tool, Rng, TreeState, Workspace};

fn git_home(w: &Workspace) {
    w.write(
        &w.home.join(".gitconfig").display().to_string(),
        "[user]\n\tname = Guard Test\n\temail = test@example.invalid\n[init]\n\tdefaultBranch = main\n[safe]\n\tdirectory = *\n",
    );
}

/// The human's side: a shell in the workspace, outside guard, with the test's home.
fn human(w: &Workspace, script: &str) -> String {
    w.sh(script)
}

#[test]
fn git_status_after_an_agent_commit_does_not_block_the_rollback_and_the_repository_checks_out() {
    if lacks(&["git"]) {
        return;
    }
    let w = Workspace::new();
    git_home(&w);
    populate(&w.ws.join("src"), 120, 31);
    w.write("untouched.txt", "the human touches this one\n");
    human(&w, "git init -q && git add -A && git commit -qm base");
    let before = w.state();
    // The agent commits under guard.
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "set -e; echo agent >> src/d0/f00010.txt; echo new > new.txt; rm -rf src/d1; \
             git add -A; git commit -qm 'agent work'",
        ])
        .expect_code(0);
    // The human looks: git status refreshes the index (a stat change forces it to rewrite it).
    let index = w.ws.join(".git/index");
    let ino_before = std::fs::metadata(&index).expect("index").ino();
    human(
        &w,
        "touch untouched.txt; git status --porcelain > /dev/null",
    );
    assert_ne!(
        std::fs::metadata(&index).expect("index").ino(),
        ino_before,
        "git status rewrote .git/index (the case this test is about)"
    );
    let looked_at = w.state();

    let out = w.guard().arg("rollback").output();
    out.expect_code(0);
    assert!(
        out.stderr().contains(".git/index") && out.stderr().contains("git's cache"),
        "the rollback says it restored git's index: {}",
        out.stderr()
    );
    before.assert_restored(&w.ws, "rollback after git status");
    human(
        &w,
        "git fsck --strict --no-progress && git status --porcelain > /dev/null",
    );
    assert_eq!(human(&w, "git log -1 --format=%s").trim(), "base");

    // The agent's work comes back with an undo, then the human really edits a file the run
    // touched: the rollback refuses, naming it, and changes nothing.
    w.guard().arg("undo").output().expect_code(0);
    looked_at.assert_restored(
        &w.ws,
        "undo of the rollback, the index git status wrote included",
    );
    human(
        &w,
        "git fsck --no-progress && git status --porcelain > /dev/null",
    );
    w.write("new.txt", "the human's own work\n");
    let edited = w.state();
    let out = w.guard().arg("rollback").output();
    assert_eq!(out.code(), 1, "refused\n{}", out.stderr());
    assert!(
        out.stderr().contains("new.txt") && out.stderr().contains("refusing"),
        "the refusal names the path: {}",
        out.stderr()
    );
    edited.assert_restored(&w.ws, "a refused rollback changes nothing");
}

#[test]
fn undo_reverts_a_rollback_exactly_and_undo_again_redoes_it() {
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 300, 32);
    w.write("conf.ini", "level = 1\n");
    let before = w.state();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "rm -rf tree/d0 tree/d2; mv tree/d3 moved; sed -i s/1/2/ conf.ini; \
             chmod 700 tree/d4; mkdir -p made/x; echo x > made/x/f; ln -s conf.ini link",
        ])
        .expect_code(0);
    let after_run = w.state();

    let dry = w.guard().args(["rollback", "--dry-run"]).output();
    dry.expect_code(0);
    assert!(
        dry.stdout().contains("restore tree/d0/") && dry.stdout().contains("would go ahead"),
        "{}",
        dry.stdout()
    );
    after_run.assert_restored(&w.ws, "a dry run changes nothing");

    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "rollback");
    let out = w.guard().arg("undo").output();
    out.expect_code(0);
    after_run.assert_restored(&w.ws, "undo of the rollback");
    w.guard().arg("undo").output().expect_code(0);
    before.assert_restored(&w.ws, "undo of the undo");
    // Nothing left to roll back: the run is rolled back.
    let out = w.guard().arg("rollback").output();
    out.expect_code(0);
    assert!(
        out.stdout().contains(": 0 change(s) undone"),
        "{}",
        out.stdout()
    );
}

/// `guard undo` of a run that was never rolled back says there is nothing to undo, and what
/// to run instead, and changes nothing: it used to report that the journal had failed ("the
/// journal of run ... failed", caused by "nothing to undo").
#[test]
fn undo_with_no_rollback_in_effect_says_so_and_changes_nothing() {
    let w = Workspace::new();
    w.write("conf.ini", "level = 1\n");
    w.exec(&["agent"])
        .run(&["sh", "-c", "sed -i s/1/2/ conf.ini"])
        .expect_code(0);
    let after_run = w.state();
    let out = w.guard().arg("undo").output();
    assert_eq!(out.code(), 125, "{}", out.stderr());
    let err = out.stderr();
    assert!(
        err.contains("nothing to undo: no rollback of this run is in effect")
            && err.contains("hint: `guard log ")
            && err.contains("`guard rollback ")
            && !err.contains("failed"),
        "{err}"
    );
    after_run.assert_restored(&w.ws, "a refused undo changes nothing");
}

/// The run each kill iteration rolls back: removals, renames, edits, new files.
const KILL_WORKLOAD: &str = "rm -rf tree/d0 tree/d1 tree/d2 tree/d3; mv tree/d4 moved; \
    for f in tree/d5/*.txt; do echo edited >> \"$f\"; done; mkdir -p new/a/b; \
    i=0; while [ $i -lt 200 ]; do echo $i > new/a/b/$i; i=$((i+1)); done";

#[test]
fn a_rollback_killed_at_random_points_is_recovered_to_one_side_never_a_mix() {
    const KILLS: u64 = 20;
    let seed = 0x05EE_D0B5;
    eprintln!("kill points from seed {seed:#x}");
    let mut rng = Rng::new(seed);
    let w = Workspace::new();
    populate(&w.ws.join("tree"), 1500, 33);
    let pre = TreeState::of(&w.ws);
    let mut span = Duration::ZERO;
    let mut reverted = 0;
    for i in 0..KILLS {
        w.exec(&["agent"])
            .run(&["sh", "-c", KILL_WORKLOAD])
            .expect_code(0);
        let post = TreeState::of(&w.ws);
        if i == 0 {
            // How long a whole rollback takes here: the kills land across that span.
            let t = Instant::now();
            w.guard().arg("rollback").output().expect_code(0);
            span = t.elapsed();
            pre.assert_restored(&w.ws, "calibration rollback");
            w.guard().arg("undo").output().expect_code(0);
            post.assert_restored(&w.ws, "calibration undo");
        }
        let delay = Duration::from_micros(rng.below(span.as_micros() as u64 + 1));
        let story = format!("kill {i}: guard rollback killed after {delay:?} (span {span:?})");
        let mut g = w.guard();
        g.cmd
            .arg("rollback")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = g.cmd.spawn().expect("spawn guard rollback");
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().expect("reap");

        let out = w.guard().arg("recover").arg("-w").arg(&w.ws).output();
        out.expect_code(0);
        if out.stdout().contains("reverted an interrupted rollback") {
            reverted += 1;
        }
        let now = TreeState::of(&w.ws);
        if now.digest == post.digest {
            // Not rolled back (killed before it began, or reverted): roll back in full.
            w.guard().arg("rollback").output().expect_code(0);
        } else if now.digest != pre.digest {
            pre.assert_restored(&w.ws, &format!("{story}: neither side"));
        }
        pre.assert_restored(&w.ws, &story);
    }
    eprintln!("{reverted} of {KILLS} kills interrupted a rollback that recover reverted");
    assert!(
        reverted >= 3,
        "only {reverted} of {KILLS} kills landed in the middle of a rollback"
    );
}

/// A rollback remakes the directories a run removed and sets their metadata once their
/// entries are back, at the end; a later step of the same rollback may move such a directory
/// (the run renamed a directory above it before removing it) or take it away again (the run
/// had made it). Both stopped the rollback at that last step ("cannot open the directory of
/// src2/sub"), reverted it, and left the run's changes in place: `mv src src2 && rm -r
/// src2/sub`, a directory moved into a new one that is then removed, and git's own `worktree
/// add` followed by `worktree remove`. Each is rolled back to the tree it started from, as
/// root and as an unprivileged user.
#[test]
fn directories_a_rollback_remakes_then_moves_or_removes_again_roll_back_exactly() {
    let cases = [
        ("a renamed parent", "mv src src2 && rm -r src2/sub"),
        (
            "a new parent, removed",
            "mkdir n && mv src/sub n/sub && echo x > n/new && rm -r n",
        ),
        (
            "a renamed grandparent, twice",
            "mv src s1 && mv s1/sub s1/sub2 && rm -r s1/sub2/deep && mv s1 s2",
        ),
        (
            "two directories swapped (RENAME_EXCHANGE)",
            "$PROBE exchange src other && rm -r other/sub",
        ),
        // Where the run made a directory, another is moved later: what the journal knows of
        // it by its old path is not newer work in the directory the run made.
        (
            "a directory moved where the run made and removed one",
            "mkdir n && mv src/keep.txt n/ && rm -rf n && mkdir -p other/x && mv other n",
        ),
        (
            "a directory moved where the run made one's parent",
            "mkdir -p src/sub/n1 && cp -r src/sub other/n1 && mv src/sub s2 && mv other src/sub",
        ),
        // A rename the kernel refuses (a directory into itself), journaled with the directory
        // it would have replaced, which is then removed and made again by the rollback.
        (
            "a refused rename over a directory later removed",
            "mv src/sub src/src && { mv src src/ 2>/dev/null; rm -rf src; }",
        ),
        // A deleted hard link comes back as a link of the name its inode was renamed to,
        // where that name is now: under a directory renamed since, or the copy restored for
        // another deleted name of it.
        (
            "a hard link deleted after the other name was renamed",
            "ln src/keep.txt y && mv src/keep.txt z && rm y",
        ),
        (
            "a hard link deleted after the other name's directory was renamed",
            "ln src/keep.txt y && mv src/keep.txt src/k2 && mv src s3 && rm y",
        ),
        // The same when the kernel refused a rename of that directory (into itself): the
        // journal wrote it before the call, and the other name never moved.
        (
            "a hard link deleted after a refused rename of the other name's directory",
            "ln src/keep.txt y && mv y other/y2 && { mv other other/ 2>/dev/null; rm -rf src; }",
        ),
        (
            "two names of one file deleted, one renamed into a directory removed",
            "ln src/keep.txt k && mkdir n && mv k n/k && rm -rf n && ln src/keep.txt l && \
             rm src/keep.txt",
        ),
        // A rename over an empty directory removes it, and the rollback makes it again: the
        // older rename that had moved it there finds the new one (found by a random session
        // with `RENAME_EXCHANGE` among its operations).
        (
            "a directory the run moved, then replaced by a rename over it",
            "mkdir src/e && mv src/e other/ && mkdir src/e && mv src/e other/",
        ),
        (
            "an old empty directory moved, then replaced by a rename over it",
            "mv other/empty src/ && mkdir other/empty && mv other/empty src/",
        ),
    ];
    for unprivileged in [false, true] {
        for (what, script) in cases {
            let w = if unprivileged {
                Workspace::unprivileged()
            } else {
                Workspace::new()
            };
            let script = script.replace("$PROBE", &w.probe());
            let who = if unprivileged { "unprivileged" } else { "root" };
            populate(&w.ws.join("src/sub/deep"), 20, 5);
            populate(&w.ws.join("src/sub"), 10, 6);
            w.write("src/keep.txt", "kept\n");
            w.write("other/o", "the other directory\n");
            w.sh("mkdir other/empty");
            w.sh("chmod 751 src/sub; chmod 700 src/sub/deep");
            if unprivileged {
                w.write("seed.txt", "owned by the user who runs guard\n");
            }
            let before = w.state();
            w.exec(&["agent"])
                .run(&["sh", "-c", &script])
                .expect_code(0);
            let out = w.guard().arg("rollback").output();
            out.expect_code(0);
            before.assert_restored(&w.ws, &format!("{who}, {what}: `{script}`"));
        }
    }
    if tool("git").is_none() {
        eprintln!("skipped the git case: git is not installed");
        return;
    }
    let w = Workspace::new();
    git_home(&w);
    populate(&w.ws.join("repo/src"), 30, 7);
    human(
        &w,
        "cd repo && git init -q && git add -A && git commit -qm base",
    );
    let before = w.state();
    w.exec(&["agent"])
        .run(&[
            "sh",
            "-c",
            "cd repo && git worktree add -q ../wt && git worktree remove ../wt",
        ])
        .expect_code(0);
    w.guard().arg("rollback").output().expect_code(0);
    before.assert_restored(&w.ws, "git worktree add, then remove");
}

/// A file with a second hard link that the run never names (made before it): deleted,
/// replaced by a rename, or moved into a directory then removed, after a write through it or
/// not. The rollback used to bring it back as a copy, a second file: the other name kept what
/// the run had written, and the two names were no longer one file. Found by random sessions
/// rolled back to a command's checkpoint (`ln c z` early, `dd of=c ...; rm -f c` after it).
/// Now both names are one inode again, holding the content from before the run; `guard undo`
/// gives the run's end, a second rollback the start again. As root and as an unprivileged
/// user.
#[test]
fn a_deleted_hard_link_the_run_never_named_comes_back_as_that_link() {
    let write = "printf X | dd of=c conv=notrunc bs=1 seek=2 status=none";
    let cases = [
        ("deleted", "rm c".to_string()),
        ("written through, then deleted", format!("{write} && rm c")),
        (
            "written through, then replaced by a rename",
            format!("{write} && echo new > x && mv x c"),
        ),
        (
            "written through, moved into a directory, removed with it",
            format!("{write} && mkdir d && mv c d/ && rm -rf d"),
        ),
        (
            "deleted while the other name's directory was moved away and on",
            "mv s s2 && rm c && mv s2 s3".to_string(),
        ),
        // The rollback finds c2's other name first, then moves s back, then looks for c's.
        (
            "two deleted, the other names' directory moved in between",
            "rm c && mv s s2 && rm c2".to_string(),
        ),
    ];
    for unprivileged in [false, true] {
        for (what, script) in &cases {
            let w = if unprivileged {
                Workspace::unprivileged()
            } else {
                Workspace::new()
            };
            let who = if unprivileged { "unprivileged" } else { "root" };
            let context = format!("{who}, {what}: `{script}`");
            w.write("c", "linked file\n");
            w.write("c2", "another linked file\n");
            w.write("s/other", "another file\n");
            w.sh("ln c s/z && ln c2 s/z2");
            if unprivileged {
                w.write("seed.txt", "owned by the user who runs guard\n");
            }
            let one_file = |w: &Workspace, when: &str| {
                for (a, b) in [("c", "s/z"), ("c2", "s/z2")] {
                    let m = |n: &str| std::fs::symlink_metadata(w.ws.join(n)).expect(n);
                    let (a_, b_) = (m(a), m(b));
                    assert_eq!(
                        (a_.ino(), a_.nlink(), b_.nlink()),
                        (b_.ino(), 2, 2),
                        "{context}: {when}, {a} and {b} are not one file"
                    );
                }
            };
            let before = w.state();
            w.exec(&["agent"]).run(&["sh", "-c", script]).expect_code(0);
            let after = w.state();
            w.guard().arg("rollback").output().expect_code(0);
            before.assert_restored(&w.ws, &context);
            one_file(&w, "after the rollback");
            w.guard().arg("undo").output().expect_code(0);
            after.assert_restored(&w.ws, &format!("{context}, undone"));
            w.guard().arg("rollback").output().expect_code(0);
            before.assert_restored(&w.ws, &format!("{context}, rolled back again"));
            one_file(&w, "after the second rollback");
        }
    }
}

/// A hard link the run made is taken away by the rollback without leaving the file a second
/// link: it was moved into the run's store, where it stayed, and `stat` then counted 2 links
/// where bare has 1 (and `cp -a`, `tar` or `rsync -H` took the file for a hard-linked one).
/// `guard undo` makes the link again, a second rollback takes it away again. As root and as
/// an unprivileged user.
#[test]
fn a_hard_link_the_run_made_leaves_no_second_link_after_the_rollback() {
    for unprivileged in [false, true] {
        let w = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        let who = if unprivileged { "unprivileged" } else { "root" };
        w.write("f", "one file\n");
        let links = |w: &Workspace| {
            std::fs::symlink_metadata(w.ws.join("f"))
                .expect("f")
                .nlink()
        };
        let before = w.state();
        w.exec(&["agent"])
            .run(&["sh", "-c", "ln f g && mkdir d && ln f d/h"])
            .expect_code(0);
        assert_eq!(links(&w), 3, "{who}: the run's links");
        w.guard().arg("rollback").output().expect_code(0);
        before.assert_restored(&w.ws, who);
        assert_eq!(links(&w), 1, "{who}: the rollback left a link of f behind");
        w.guard().arg("undo").output().expect_code(0);
        assert_eq!(links(&w), 3, "{who}: the undo made the links again");
        w.guard().arg("rollback").output().expect_code(0);
        before.assert_restored(&w.ws, &format!("{who}, rolled back again"));
        assert_eq!(
            links(&w),
            1,
            "{who}: the second rollback left a link of f behind"
        );
    }
}

/// One shell command of [`random_shell_sessions_roll_back_exactly`]'s sessions, drawn from
/// `rng` over a small tree whose names collide often: directories made, removed, renamed into
/// each other, into new ones and into themselves (the kernel refuses that, after the journal
/// wrote the entry), files written, appended, copied, truncated, chmodded, symlinked, hard
/// linked, and two entries swapped (`RENAME_EXCHANGE`, through the probe: `$PROBE`), files
/// edited in place (`sed -i`, `dd conv=notrunc`), their times set, trees copied with `cp -a`.
/// Many fail
/// (the name is gone, the target is a directory): the session goes on, as an agent's would.
fn random_command(rng: &mut Rng) -> String {
    const DIRS: [&str; 5] = ["a", "a/b", "c", "c/d", "e"];
    const FILES: [&str; 5] = ["a/f1", "a/b/f2", "c/f3", "c/d/f4", "g"];
    const NAMES: [&str; 8] = ["x", "y", "z", "a", "c", "e", "n1", "n2"];
    fn pick(rng: &mut Rng, list: &[&'static str]) -> &'static str {
        list[rng.below(list.len() as u64) as usize]
    }
    let dir = pick(rng, &["a", "a/b", "c", "c/d", "e", "."]);
    let name = pick(rng, &NAMES);
    let target = if dir == "." {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    };
    let src = if rng.below(2) == 0 {
        pick(rng, &DIRS)
    } else {
        pick(rng, &FILES)
    };
    let n = rng.below(1000);
    match rng.below(20) {
        0 => format!("mkdir -p {target}"),
        1 => format!("rm -rf {src}"),
        2 => format!("mv {src} {target}"),
        3 => format!("echo {n} > {target}"),
        4 => format!("echo more >> {src}"),
        5 => format!("cp -r {src} {target}"),
        6 => format!("ln -s {src} {target}"),
        7 => format!("chmod {} {src}", pick(rng, &["700", "755", "600", "644"])),
        8 => format!("rmdir {src}"),
        9 => format!("mv {src} {}/", pick(rng, &DIRS)),
        10 => format!("truncate -s {} {src}", n % 3),
        11 => format!("rm -f {src}"),
        12 => format!("ln {src} {target}"),
        13 => {
            let with = pick(rng, &[DIRS.as_slice(), FILES.as_slice()].concat());
            format!("$PROBE exchange {src} {with}")
        }
        14 => format!("touch -d 2001-01-0{} {src}", 1 + n % 9),
        15 => format!("sed -i s/f/F/ {src}"),
        16 => format!(
            "dd of={src} conv=notrunc bs=1 seek={} count=1 if=/dev/zero",
            n % 4
        ),
        17 => format!("cp -a {src} {target}"),
        18 => format!("mv -T {src} {target}"),
        _ => format!("mkdir {target} && mv {src} {target}/ && rm -rf {target}"),
    }
}

/// Random shell sessions of 40 commands on a small tree (see [`random_command`]), each run
/// under guard and rolled back with `guard rollback`, which must give the tree it started from
/// (names, types, modes, contents). The generator found the cases of
/// `directories_a_rollback_remakes_then_moves_or_removes_again_roll_back_exactly` and the
/// preflight's mistaking a directory moved onto a path where the run had made (and removed)
/// another for newer work, and the hard-link cases; 56 of 80 such sessions failed before those
/// fixes. As root, and a few sessions as an unprivileged user.
#[test]
fn random_shell_sessions_roll_back_exactly() {
    let nomd = "name = \"no-mass-delete\"\n[transaction]\nmass-delete = { action = \"allow\" }\n";
    for seed in 0..48u64 {
        let unprivileged = seed % 8 == 7;
        let w = if unprivileged {
            Workspace::unprivileged()
        } else {
            Workspace::new()
        };
        for f in ["a/f1", "a/b/f2", "c/f3", "c/d/f4", "g"] {
            w.write(f, &format!("{f}\n"));
        }
        w.sh("mkdir -p e && chmod 751 a/b");
        if unprivileged {
            w.write("seed.txt", "owned by the user who runs guard\n");
        }
        let profile = w.profile_file("nomd", nomd);
        let before = w.state();
        let mut rng = Rng::new(1000 + seed);
        let script: Vec<String> = (0..40)
            .map(|_| format!("{} 2>/dev/null", random_command(&mut rng)))
            .collect();
        let script = format!("{}\ntrue", script.join("\n")).replace("$PROBE", &w.probe());
        w.exec(&["agent", &profile])
            .run(&["sh", "-c", &script])
            .expect_code(0);
        let out = w.guard().arg("rollback").output();
        assert!(
            out.code() == 0,
            "seed {seed}: the rollback failed: {}\n--- session\n{script}",
            out.stderr()
        );
        before.assert_restored(&w.ws, &format!("seed {seed}\n--- session\n{script}\n---"));
    }
}
