//! What users of git and ripgrep expect of a command-line tool, on the real binary: a closed
//! pipe ends guard quietly with status 0, `NO_COLOR` wins over everything, completions and man
//! pages come from the same definitions as the parser, `--version` names the commit, `--help`
//! lists the exit statuses, `guard runs` prints one line per run (and JSON), `doctor --json`
//! parses, and `profile check` words its errors for the person who wrote the profile.

use std::os::fd::OwnedFd;
use std::process::Stdio;

use crate::util::Workspace;

/// Runs `g` with stdout on a pipe whose reading end is already closed, as `| head -1` leaves it
/// once head has its line.
fn into_closed_pipe(g: &mut crate::util::Guard) -> std::process::Output {
    let (read, write): (OwnedFd, OwnedFd) = nix::unistd::pipe().expect("pipe");
    drop(read);
    g.cmd
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("spawn")
}

/// Started with its standard descriptors closed (`guard exec -- cmd <&- >&- 2>&-`, a daemon's
/// child), guard opens `/dev/null` on them before anything else, as Rust's runtime start did
/// before guard had a `main` of its own: no file of guard's takes a stream's number, and the
/// command finds its stdin and stderr open on `/dev/null`.
#[test]
fn closed_standard_streams_are_opened_on_dev_null() {
    let w = Workspace::new();
    let mut g = w.exec(&["agent"]);
    // SAFETY: the closure runs between fork and exec and makes only close(2) calls, which are
    // async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut g.cmd, || {
            for fd in 0..3 {
                libc::close(fd);
            }
            Ok(())
        });
    }
    // Its stdout is the file it writes, so only 0 and 2 are asked.
    let script = format!(
        "readlink /proc/self/fd/0 /proc/self/fd/2 > {}/fds.txt",
        w.ws.display()
    );
    let out = g.run(&["sh", "-c", &script]);
    assert_eq!(out.code(), 0, "guard's status");
    let fds = std::fs::read_to_string(w.ws.join("fds.txt")).expect("the command wrote fds.txt");
    let fds: Vec<&str> = fds.lines().collect();
    assert_eq!(fds[0], "/dev/null", "stdin: {fds:?}");
    assert_eq!(fds[1], "/dev/null", "stderr: {fds:?}");
}

#[test]
fn a_closed_stdout_ends_quietly_with_status_0() {
    let w = Workspace::new();
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8; do {} unlink {}/x$i; done",
        w.probe(),
        w.outside.display()
    );
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
    for args in [
        vec!["log"],
        vec!["log", "--json"],
        vec!["runs"],
        vec!["diff"],
        vec!["diff", "--stat", "--patch"],
        vec!["completions", "bash"],
        vec!["man"],
        vec!["profile", "show", "agent"],
    ] {
        let out = into_closed_pipe(w.guard().args(&args));
        assert_eq!(
            out.status.code(),
            Some(0),
            "guard {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.stderr.is_empty(),
            "guard {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn no_color_wins_over_forced_colour() {
    let w = Workspace::new();
    // A diagnostic (a sink that cannot be written) and a usage error, with colour forced.
    let run = |no_color: bool, args: &[&str]| -> String {
        let mut g = w.guard();
        g.env("CLICOLOR_FORCE", "1").args(args);
        if no_color {
            g.env("NO_COLOR", "1");
        } else {
            g.cmd.env_remove("NO_COLOR");
        }
        g.output().stderr()
    };
    let exec = [
        "exec",
        "-p",
        "agent",
        "--audit-log",
        "/dev/full",
        "--",
        "true",
    ];
    let usage = ["--no-such-flag"];
    for args in [&exec[..], &usage[..]] {
        let coloured = run(false, args);
        assert!(coloured.contains('\u{1b}'), "colour forced: {coloured:?}");
        let plain = run(true, args);
        assert!(!plain.contains('\u{1b}'), "NO_COLOR: {plain:?}");
        assert!(!plain.is_empty());
    }
}

#[test]
fn completions_man_pages_version_and_exit_statuses() {
    let w = Workspace::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef guard"),
        ("fish", "complete -c guard"),
    ] {
        let out = w.guard().args(["completions", shell]).output();
        out.expect_code(0);
        assert!(out.stdout().contains(marker), "{shell}: {}", out.stdout());
        assert!(
            out.stdout().contains("audit-log"),
            "{shell} completes exec's flags"
        );
    }
    let dir = w.root.join("man");
    w.guard()
        .args(["man", "-o"])
        .arg(&dir)
        .output()
        .expect_code(0);
    for page in [
        "guard.1",
        "guard-exec.1",
        "guard-log.1",
        "guard-profile-check.1",
    ] {
        let text =
            std::fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is a man page");
    }
    let log_page = std::fs::read_to_string(dir.join("guard-log.1")).expect("page");
    assert!(log_page.contains("verify"), "the page documents --verify");
    // Every page, a subcommand's too, names the guard it documents with its version.
    let version = env!("CARGO_PKG_VERSION");
    for page in [
        "guard.1",
        "guard-diff.1",
        "guard-explain.1",
        "guard-profile-check.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).expect("page");
        let title = text.lines().find(|l| l.starts_with(".TH")).unwrap_or("");
        assert!(
            title.contains(&format!("\"guard {version}")),
            "{page}: {title}"
        );
    }

    let out = w.guard().arg("--version").output();
    out.expect_code(0);
    let version = out.stdout();
    assert!(
        version.starts_with(&format!("guard {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    // Built from this git checkout, the version names the commit.
    if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.git")).exists() {
        assert!(version.contains('('), "{version}");
    }

    let help = w.guard().arg("--help").output();
    help.expect_code(0);
    for status in ["125", "126", "127", "120", "128+N"] {
        assert!(help.stdout().contains(status), "--help lists {status}");
    }
}

#[test]
fn runs_prints_one_line_per_run_and_json() {
    let w = Workspace::new();
    let script = "echo one\n\n  echo two\n".repeat(30);
    w.exec(&["agent"])
        .run(&["sh", "-c", &script])
        .expect_code(0);
    w.exec(&["agent"]).run(&["true"]).expect_code(0);
    let out = w.guard().arg("runs").output();
    out.expect_code(0);
    let stdout = out.stdout();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[1].contains("sh -c echo one echo two"), "{}", lines[1]);
    assert!(lines[1].ends_with("..."), "{}", lines[1]);
    assert!(
        lines.iter().all(|l| l.chars().count() <= 120),
        "{}",
        out.stdout()
    );

    let json = w.guard().args(["runs", "--json"]).output();
    json.expect_code(0);
    let runs: Vec<serde_json::Value> = json
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        runs[1]["command"][2],
        script.as_str(),
        "JSON keeps the command whole"
    );
    assert_eq!(runs[0]["state"], "ended");

    let doctor = w.guard().args(["doctor", "--json"]).output();
    let v: serde_json::Value = serde_json::from_str(&doctor.stdout()).expect("doctor --json");
    assert!(v["kernel"].is_string(), "{v}");
}

#[test]
fn profile_check_words_errors_for_the_author() {
    let w = Workspace::new();
    let check = |name: &str, text: &str| {
        let path = w.profile_file(name, text);
        let out = w.guard().args(["profile", "check", &path]).output();
        out.expect_code(125);
        out.stderr()
    };
    let err = check(
        "wrong-type",
        "name = \"x\"\nextends = \"ci\"\n\n[[rule]]\nid = \"r1\"\nwhen = 5\naction = \"deny\"\n",
    );
    assert!(err.contains("line 6"), "{err}");
    assert!(err.contains("`rule[0].when`"), "{err}");
    assert!(err.contains("expected an operation"), "{err}");
    assert!(err.contains("found integer `5`"), "{err}");
    assert!(
        !err.contains("untagged") && !err.contains("variant"),
        "{err}"
    );

    let err = check(
        "duplicate",
        "extends = \"ci\"\n[[rule]]\nid = \"no-force-push\"\nwhen = \"exec\"\nargv = [\"git\", \"push\"]\naction = \"allow\"\n",
    );
    assert!(
        err.contains("rule id `no-force-push` is already used"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");

    // And the built-in rule it would have cancelled still refuses a force push.
    let ok = w.profile_file("fine", "extends = \"ci\"\n");
    let out = w
        .guard()
        .args(["explain", "-p", &ok, "--", "git", "push", "--force"])
        .output();
    out.expect_code(1);
    assert!(out.stdout().contains("no-force-push"), "{}", out.stdout());
}
