//! Calls the supervisor performs itself must behave exactly as the kernel would: the same
//! results, errnos, modes and descriptor flags. Each check runs the same shell script with and
//! without guard and compares the transcripts.

use std::process::Command;

use crate::util::{Guard, Workspace};

/// A script exercising the emulated calls: umask, O_EXCL, symlinks followed or not, rename over
/// an existing file, errors for the wrong kind of entry, dirfd-relative calls, descriptor
/// re-opens through /proc/self/fd.
const SCRIPT: &str = r#"
umask 027; touch a; stat -c 'a %a' a
mkdir d; stat -c 'd %a' d
umask 022
echo one > f; echo two > g; mv g f; cat f
ln -s f link; echo three >> link; cat f; stat -c '%F' link
set -C; (echo x > f) 2>/dev/null || echo noclobber-refused; set +C
rmdir d; mkdir -p d/e; rmdir d 2>/dev/null || echo rmdir-nonempty-refused
rm d 2>/dev/null || echo rm-dir-refused
rm -r d; ls
mkdir -p t/u/v; touch t/u/v/w; find t -delete; ls
exec 3>>f; echo four >> /proc/self/fd/3; cat f
ln f hard; stat -c '%h' f
chmod 600 f; stat -c '%a' f
truncate -s 2 f; od -c f | head -1
mkfifo pipe; stat -c '%F' pipe
cd /; cd "$OLDPWD"; echo ok > ./rel; cat rel
"#;

fn transcript(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `script` run by `sh -c` under `agent` gives `expected` on stdout, for root and for an
/// unprivileged guard.
fn gives_under_guard(script: &str, expected: &str) {
    gives_under_guard_started(script, expected, |_| {});
}

/// [`gives_under_guard`], with guard's command changed by `start` first.
fn gives_under_guard_started(script: &str, expected: &str, start: impl Fn(&mut Guard)) {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let mut g = w.exec(&["agent"]);
        start(&mut g);
        let out = g.run(&["sh", "-c", script]);
        assert_eq!(
            out.stdout(),
            expected,
            "unprivileged: {}; stderr under guard:\n{}",
            w.unprivileged,
            out.stderr()
        );
    }
}

/// The transcript of `script` run by `sh -c` in a fresh workspace without guard: what guard
/// must reproduce.
fn bare_transcript(script: &str) -> String {
    let bare = Workspace::new();
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(&bare.ws)
        .output()
        .expect("sh");
    transcript(&out)
}

#[test]
fn emulated_calls_give_the_same_results_as_the_kernel() {
    let expected = bare_transcript(SCRIPT);
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&["sh", "-c", SCRIPT]);
    assert_eq!(
        out.stdout(),
        expected,
        "stderr under guard:\n{}",
        out.stderr()
    );
    assert!(out.stdout().contains("noclobber-refused"));
    // Everything above was performed by guard, not continued: the decisions say so by kind.
    let judged = w.decisions().len();
    assert!(judged > 20, "the script's calls were judged: {judged}");
}

#[test]
fn emulation_works_without_addfd_too() {
    // The degraded path for kernels without SECCOMP_IOCTL_NOTIF_ADDFD.
    let expected = bare_transcript(SCRIPT);
    let w = Workspace::new();
    let out = w
        .exec(&["agent"])
        .env("GUARD_NO_ADDFD", "1")
        .run(&["sh", "-c", SCRIPT]);
    assert_eq!(out.stdout(), expected, "stderr:\n{}", out.stderr());
    let start = w
        .audit()
        .into_iter()
        .find(|e| e["type"] == "run-start")
        .expect("run-start");
    assert!(
        start["degraded"].to_string().contains("addfd"),
        "{}",
        start["degraded"]
    );
}

/// guard remembers each thread's working directory between its calls, and traps chdir and
/// fchdir to know when to look again. Two threads sharing their working directory, one moving
/// it between `a` and `b` (chdir, and fchdir every third time) and both making a file after
/// each move (the other thread first, which had made a file where they started, then the
/// mover), make every file where they do bare: in the directory just moved to. A shell that
/// moves and makes files itself (`cd`, `: >`: no new process) does too. As root and
/// unprivileged.
#[test]
fn files_are_made_where_a_thread_or_its_sibling_last_moved() {
    let moves = 12;
    let script = "for i in 1 2 3 4 5 6 7 8; do if [ $((i % 2)) = 0 ]; then cd \"$W/a\"; else cd \"$W/b\"; fi; : > s-$i; done";
    // Where bare would leave everything, relative to the starting directory.
    let mut want = vec!["w-0".to_string()];
    for i in 1..=moves {
        let d = ["a", "b"][i % 2];
        want.push(format!("{d}/m-{i}"));
        want.push(format!("{d}/w-{i}"));
    }
    for i in 1..=8 {
        want.push(format!("{}/s-{i}", ["a", "b"][i % 2]));
    }
    want.sort();
    let made = |top: &std::path::Path| {
        let mut names = Vec::new();
        for (d, prefix) in [
            (top.to_path_buf(), ""),
            (top.join("a"), "a/"),
            (top.join("b"), "b/"),
        ] {
            for e in std::fs::read_dir(&d).expect("read_dir") {
                let name = e.expect("entry").file_name().to_string_lossy().into_owned();
                if name != "a" && name != "b" && name != ".keep" {
                    names.push(format!("{prefix}{name}"));
                }
            }
        }
        names.sort();
        names
    };
    let bare = Workspace::new();
    bare.write("a/.keep", "");
    bare.write("b/.keep", "");
    let status = Command::new(bare.probe())
        .args(["cwd-threads", &moves.to_string()])
        .current_dir(&bare.ws)
        .status()
        .expect("probe");
    assert!(status.success());
    let status = Command::new("sh")
        .args(["-c", script])
        .env("W", &bare.ws)
        .current_dir(&bare.ws)
        .status()
        .expect("sh");
    assert!(status.success());
    assert_eq!(made(&bare.ws), want, "bare");
    for w in [Workspace::new(), Workspace::unprivileged()] {
        w.write("a/.keep", "");
        w.write("b/.keep", "");
        let out = w
            .exec(&["agent"])
            .run(&[&w.probe(), "cwd-threads", &moves.to_string()]);
        assert_eq!(crate::util::probe_result(&out), "ok", "{}", out.stderr());
        let out = w
            .exec(&["agent"])
            .env("W", &w.ws)
            .run(&["sh", "-c", script]);
        out.expect_code(0);
        assert_eq!(made(&w.ws), want, "unprivileged: {}", w.unprivileged);
    }
}

/// guard keeps the directories a command's relative paths start from between calls, and the
/// directories of `dir/name` paths. What a call means must still be decided by where the
/// caller is now: after a `cd`, a relative delete is judged and made in the new directory;
/// after the caller's directory is renamed from outside the sandbox, it is judged by the
/// directory's new path (here, into a place a rule keeps from deletion) and refused, and the
/// file stays; after a `dir` guard has met is swapped for a symlink into that place, `dir/name`
/// is judged where the symlink leads, refused, and both files stay.
#[test]
fn relative_paths_are_judged_where_the_caller_is_now() {
    judged_where_the_caller_is_now(Workspace::new());
}

/// The same for an unprivileged guard (when the tests run as root).
#[test]
fn relative_paths_are_judged_where_an_unprivileged_caller_is_now() {
    judged_where_the_caller_is_now(Workspace::unprivileged());
}

/// A directory guard keeps between calls (it met `d` in `d/f`) is let go before guard removes
/// it: the removal frees it, as bare, and a watcher of it is told `IN_DELETE_SELF` then, not
/// some calls later when the worker would have dropped it. The same for a directory a rename
/// replaces; bare first, for what the kernel does.
#[test]
fn a_removed_directory_is_freed_by_its_removal() {
    removed_directories_are_freed(Workspace::new());
}

/// The same for an unprivileged guard (when the tests run as root).
#[test]
fn a_removed_directory_is_freed_by_its_removal_for_an_unprivileged_guard() {
    removed_directories_are_freed(Workspace::unprivileged());
}

fn removed_directories_are_freed(w: Workspace) {
    let bare = std::process::Command::new(w.probe())
        .args(["watch-rmdir", "bare"])
        .current_dir(&w.ws)
        .output()
        .expect("run the probe bare");
    assert_eq!(String::from_utf8_lossy(&bare.stdout).trim(), "deleted");
    for (op, dir) in [("watch-rmdir", "d"), ("watch-replace", "e")] {
        let out = w.exec(&["agent"]).run(&[&w.probe(), op, dir]);
        assert_eq!(
            out.stdout().trim(),
            "deleted",
            "{op} under guard; stderr:\n{}",
            out.stderr()
        );
        let gone = w
            .decisions()
            .into_iter()
            .any(|d| d["path"] == w.ws.join(dir).display().to_string().as_str());
        assert!(gone, "{op}: guard judged the removal of {dir}");
    }
}

/// Once a slow call has started the standby workers, the receiving worker still stays, between
/// calls, in the directory its last call was about (it goes home only when a standby may have
/// taken a call meanwhile, which none did here), and a directory it stays in is still freed by
/// its removal; for root and for an unprivileged guard. Fails when every worker goes home after
/// each call once standbys exist.
#[test]
fn after_a_slow_call_the_receiving_worker_still_stays_where_it_was() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        stays_after_a_slow_call(w);
    }
}

fn stays_after_a_slow_call(w: Workspace) {
    w.write("d/x", "data\n");
    // Under the pre-image cap, so the write-open below copies it: longer than the 5 ms after
    // which the standbys are started.
    w.sh("head -c 60000000 /dev/zero > big");
    if w.unprivileged {
        w.sh(&format!("chown -R {}: .", crate::util::UNPRIV_USER));
    }
    // Builtins only between `d/ready` and `go`: a judged call elsewhere would move the worker.
    let script = format!(
        r#"
exec 3>>big && exec 3>&-
rm d/x && : > d/ready
while [ ! -e go ]; do :; done
{probe} watch-rmdir e
{probe} watch-replace g
"#,
        probe = w.probe()
    );
    let child = started_until(&w, &["agent"], &script, &w.ws.join("d/ready"));
    let task = format!("/proc/{}/task", child.id());
    let workers: Vec<_> = std::fs::read_dir(&task)
        .expect("guard's threads")
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "guard-superviso")
        })
        .map(|t| std::fs::read_link(t.path().join("cwd")).ok())
        .collect();
    std::fs::write(w.ws.join("go"), "").expect("go");
    let stdout = succeeded(child);
    // The receiving worker, its coordinator and the two standbys.
    assert!(
        workers.len() >= 4,
        "the standbys were not started: {workers:?}"
    );
    assert!(
        workers.contains(&Some(w.ws.join("d"))),
        "no supervisor thread stays in d: {workers:?}"
    );
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["deleted", "deleted"]);
}

/// `script` under guard with `profiles`, started and left running once it has made `ready`
/// (within 30 s); its output is piped.
fn started_until(
    w: &Workspace,
    profiles: &[&str],
    script: &str,
    ready: &std::path::Path,
) -> std::process::Child {
    let child = w
        .exec(profiles)
        .cmd
        .args(["--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn guard");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never got ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child
}

/// The output of a command [`started_until`] returned, once it has exited successfully.
fn succeeded(child: std::process::Child) -> String {
    let out = child.wait_with_output().expect("wait guard");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn judged_where_the_caller_is_now(w: Workspace) {
    for f in [
        "one/x",
        "two/x",
        "work/a",
        "work/b",
        "work/c",
        "free/sub/p",
        "free/sub/q",
        "two/q",
        "flags/.keep",
    ] {
        w.write(f, "data\n");
    }
    let rule = w.profile_file(
        "keep",
        &format!(
            "[[rule]]\nid = \"keep-kept\"\nwhen = \"delete\"\npath = [\"{ws}/two/**\", \"{ws}/kept/**\"]\naction = \"deny\"\n",
            ws = w.ws.display()
        ),
    );
    let flags = w.ws.join("flags");
    let script = format!(
        r#"
cd one && rm x && echo one-removed
cd ../two && {{ rm x 2>/dev/null || echo two-refused; }}
cd ../free && rm sub/p && echo p-removed
cd ../work && rm a && echo a-removed
touch {flags}/ready
i=0; while [ ! -e {flags}/go ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
pwd -P
rm b 2>/dev/null || echo b-refused
cd ../free && {{ rm sub/q 2>/dev/null || echo q-refused; }}
"#,
        flags = flags.display()
    );
    let child = started_until(&w, &["agent", &rule], &script, &flags.join("ready"));
    // The renames happen outside the sandbox: guard sees nothing of them. `free/sub`, whose
    // directory guard has met, becomes a symlink into the protected `two`.
    std::fs::rename(w.ws.join("work"), w.ws.join("kept")).expect("rename work");
    std::fs::rename(w.ws.join("free/sub"), w.ws.join("free/old")).expect("rename sub");
    std::os::unix::fs::symlink("../two", w.ws.join("free/sub")).expect("symlink sub");
    std::fs::write(flags.join("go"), "").expect("go");
    let stdout = succeeded(child);
    let kept = w.ws.join("kept");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "one-removed",
            "two-refused",
            "p-removed",
            "a-removed",
            &kept.display().to_string(),
            "b-refused",
            "q-refused"
        ]
    );
    assert!(!w.ws.join("one/x").exists());
    assert_eq!(
        std::fs::read_to_string(w.ws.join("two/x")).unwrap(),
        "data\n"
    );
    assert!(!kept.join("a").exists());
    assert_eq!(std::fs::read_to_string(kept.join("b")).unwrap(), "data\n");
    assert!(!w.ws.join("free/old/p").exists());
    assert_eq!(
        std::fs::read_to_string(w.ws.join("free/old/q")).unwrap(),
        "data\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.ws.join("two/q")).unwrap(),
        "data\n"
    );
    let denied: Vec<String> = w
        .decisions()
        .into_iter()
        .filter(|d| d["verdict"] == "deny" && d["rule"] == "keep-kept")
        .filter_map(|d| d["path"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        denied,
        [
            w.ws.join("two/x").display().to_string(),
            kept.join("b").display().to_string(),
            w.ws.join("two/q").display().to_string()
        ],
        "the refusals name the paths where the caller was"
    );
}

/// A process keeps its umask through exec: a shell sets one, creates, execs another shell
/// (same process), which creates with that mask, sets another and creates again. Compared
/// with the same script bare, for root and for an unprivileged guard.
#[test]
fn the_umask_a_process_set_outlives_its_exec() {
    const SCRIPT: &str = "umask 077; echo > pre; exec sh -c 'echo > post; umask 022; \
        echo > last; sh -c \"echo > child\"; stat -c \"%n %a\" pre post last child'";
    let expected = bare_transcript(SCRIPT);
    assert_eq!(expected, "pre 600\npost 600\nlast 644\nchild 644\n");
    gives_under_guard(SCRIPT, &expected);
}

/// A process that sets its umask again and again (guard takes each new mask into the record
/// it keeps of the process) creates with the mask of the moment, files and directories alike.
#[test]
fn each_umask_a_process_sets_shapes_its_next_creates() {
    const SCRIPT: &str = "umask 077; echo > a; umask 022; echo > b; mkdir c; umask 027; \
        echo > d; umask 002; mkdir e; echo > f; stat -c '%n %a' a b c d e f";
    let expected = bare_transcript(SCRIPT);
    assert_eq!(expected, "a 600\nb 644\nc 755\nd 640\ne 775\nf 664\n");
    gives_under_guard(SCRIPT, &expected);
}

/// New entries whose mode the umask leaves as it is (git's objects are 0444 under 022) and
/// ones it changes, files and directories, under four masks: the modes bare and under guard
/// are the same (guard takes the caller's umask on only where it changes the mode).
#[test]
fn modes_the_umask_leaves_alone_and_those_it_changes_come_out_as_bare() {
    let w = Workspace::new();
    let mut script = String::new();
    for mask in ["022", "027", "077", "000"] {
        // (A set-id file is the agent profile's to refuse: directories only.)
        for mode in ["444", "640", "666", "700", "4755"] {
            if mode != "4755" {
                script.push_str(&format!(
                    "umask {mask}; {p} create-mode f{mask}-{mode} {mode} >/dev/null; ",
                    p = w.probe()
                ));
            }
            script.push_str(&format!(
                "umask {mask}; {p} mkdir-mode d{mask}-{mode} {mode} >/dev/null; ",
                p = w.probe()
            ));
        }
    }
    script.push_str("stat -c '%n %a' f* d*");
    let expected = bare_transcript(&script);
    assert!(expected.contains("f022-444 444\n") && expected.contains("d077-666 600\n"));
    gives_under_guard(&script, &expected);
}

/// A run whose command starts with a umask of its own (077, set before guard starts) and in
/// which no process calls umask(2): the creates of every process, the shell's and those of the
/// processes it starts, get that mask, as bare. (guard takes it from the command's credentials
/// then, without reading each new process's.) For root and for an unprivileged guard.
#[test]
fn the_umask_a_run_starts_with_shapes_every_processs_creates() {
    const SCRIPT: &str = "echo > a; mkdir d; cp a b; sh -c 'echo > d/c; mkdir d/e'; \
        (echo > f); touch g; stat -c '%n %a' a d b d/c d/e f g";
    let expected = bare_transcript(&format!("umask 077; {SCRIPT}"));
    assert_eq!(
        expected,
        "a 600\nd 700\nb 600\nd/c 600\nd/e 700\nf 600\ng 600\n"
    );
    // guard itself is started with the umask, by a shell outside the run.
    gives_under_guard_started(SCRIPT, &expected, |g| {
        let mut started = Command::new("sh");
        started
            .arg("-c")
            .arg("umask 077; exec \"$0\" \"$@\"")
            .arg(g.cmd.get_program())
            .args(g.cmd.get_args());
        if let Some(dir) = g.cmd.get_current_dir() {
            started.current_dir(dir);
        }
        for (name, value) in g.cmd.get_envs() {
            match value {
                Some(v) => started.env(name, v),
                None => started.env_remove(name),
            };
        }
        started.stdin(std::process::Stdio::null());
        g.cmd = started;
    });
}

/// Links and renames whose two paths lie in one directory (the second looked up where the
/// first walk ended), and a link whose source is a symlink to a file of the same name in
/// another directory, followed (`ln -L`: the name must still land beside the symlink) or not
/// (`ln -P`: a link to the symlink itself). Compared with the same script bare, for root and
/// for an unprivileged guard.
#[test]
fn links_and_renames_within_one_directory_give_the_kernels_results() {
    const SCRIPT: &str = "mkdir a b; echo one > b/f; ln -s ../b/f a/f
ln -L a/f a/g; stat -c '%h' b/f; cat a/g
ln -P a/f a/h; stat -c '%F' a/h
echo two > a/t; mv a/t a/g; cat a/g b/f; stat -c '%h' b/f
mv a/h a/h2; ls a b";
    let expected = bare_transcript(SCRIPT);
    assert_eq!(
        expected,
        "2\none\nsymbolic link\ntwo\none\n1\na:\nf\ng\nh2\n\nb:\nf\n"
    );
    gives_under_guard(SCRIPT, &expected);
}
