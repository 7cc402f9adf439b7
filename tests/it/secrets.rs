//! Secrets (issue 9 part 7): variables that hold credentials are dropped from the command's
//! environment by the names they go by, a profile passes one on by name (`[env] allow`, as an
//! agent profile does for its own key), and what only root may read (`/etc/shadow`,
//! `/etc/gshadow`) stays unreadable to a root command under every profile that confines.

use crate::util::{is_root, probe_result, Workspace};

/// Variables that hold secrets, by the names they go by.
const SECRETS: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "HF_TOKEN",
    "SLACK_BOT_TOKEN",
    "DATABASE_URL",
    "CI_JOB_TOKEN",
    "PYPI_API_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "STRIPE_SECRET_KEY",
    "DB_PASSWORD",
    "GOOGLE_CREDENTIALS",
];

/// The command's environment under `profiles`, with every secret and one plain variable set.
fn env_under(w: &Workspace, profiles: &[&str]) -> Vec<String> {
    let mut g = w.exec(profiles);
    for s in SECRETS {
        g.env(s, format!("secret-value-of-{s}"));
    }
    g.env("GUARD_TEST_PLAIN", "plain");
    let out = g.run(&["env"]);
    out.expect_code(0);
    out.stdout().lines().map(str::to_string).collect()
}

fn has(env: &[String], name: &str) -> bool {
    env.iter().any(|l| l.starts_with(&format!("{name}=")))
}

#[test]
fn secrets_are_dropped_from_the_environment_by_pattern_and_passed_by_name() {
    let w = Workspace::new();
    for profile in ["agent", "ci"] {
        let env = env_under(&w, &[profile]);
        for s in SECRETS {
            assert!(!has(&env, s), "{profile}: {s} reached the command");
        }
        assert!(
            !env.iter().any(|l| l.contains("secret-value-of-")),
            "{profile}: a secret's value reached the command"
        );
        assert!(
            has(&env, "GUARD_TEST_PLAIN"),
            "{profile}: plain variables pass"
        );
    }
    // A profile passes one on by name; the others stay out.
    let layer = w.profile_file("keep-one", "[env]\nallow = [\"OPENAI_API_KEY\"]\n");
    let env = env_under(&w, &["agent", &layer]);
    assert!(env.contains(&"OPENAI_API_KEY=secret-value-of-OPENAI_API_KEY".to_string()));
    for s in SECRETS.iter().filter(|s| **s != "OPENAI_API_KEY") {
        assert!(!has(&env, s), "allow of one passed {s}");
    }
    // An agent's profile keeps its own key, and only its own.
    let env = env_under(&w, &["claude-code"]);
    assert!(has(&env, "ANTHROPIC_API_KEY"), "claude-code keeps its key");
    assert!(!has(&env, "OPENAI_API_KEY"), "claude-code: another key");
    let env = env_under(&w, &["codex"]);
    assert!(has(&env, "OPENAI_API_KEY"), "codex keeps its key");
    assert!(!has(&env, "ANTHROPIC_API_KEY"), "codex: another key");
}

#[test]
fn root_only_secrets_are_unreadable_to_root_under_every_confining_profile() {
    if !is_root() {
        eprintln!("skipped: not root (the files' permissions already keep them from this user)");
        return;
    }
    let w = Workspace::new();
    let probe = w.probe();
    let files: Vec<&str> = ["/etc/shadow", "/etc/gshadow"]
        .into_iter()
        .filter(|f| std::path::Path::new(f).exists())
        .collect();
    if files.is_empty() {
        eprintln!("skipped: this machine has no /etc/shadow nor /etc/gshadow");
        return;
    }
    // Bare, root reads them: the refusal below is guard's.
    for f in &files {
        assert!(std::fs::read(f).is_ok(), "{f} is readable bare");
    }
    for profile in [
        "agent",
        "ci",
        "strict",
        "claude-code",
        "codex",
        "gemini",
        "aider",
    ] {
        for f in &files {
            let out = w.exec(&[profile]).run(&[probe.as_str(), "read", f]);
            assert_eq!(
                probe_result(&out),
                "errno 13 EACCES",
                "{profile}: {f} must be unreadable"
            );
        }
        // The rest of /etc stays readable.
        let out = w
            .exec(&[profile])
            .run(&[probe.as_str(), "read", "/etc/passwd"]);
        assert_eq!(probe_result(&out), "ok", "{profile}: /etc/passwd");
    }
}

/// The raw disks, compressed swap (zram), the consoles' screens (vcs) and the consoles' and
/// serial lines' input (tty0..tty63, ttyS*, console) that root may read by ownership stay out
/// of a root command's reach under the default profile, while /dev's ordinary devices and
/// the command's own terminal stay usable.
#[test]
fn raw_disks_swap_and_consoles_are_unreadable_to_a_root_command() {
    if !is_root() {
        eprintln!("skipped: not root (the devices' permissions already keep them from this user)");
        return;
    }
    let devices: Vec<String> = std::fs::read_dir("/dev")
        .expect("/dev")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            let console = n == "console"
                || n.starts_with("ttyS")
                || n.strip_prefix("tty")
                    .is_some_and(|d| d.starts_with(|c: char| c.is_ascii_digit()));
            console
                || ["vcs", "zram", "vd", "sd", "nvme", "loop"]
                    .iter()
                    .any(|p| n.starts_with(p))
        })
        .map(|n| format!("/dev/{n}"))
        .filter(|p| std::fs::File::open(p).is_ok())
        .collect();
    if devices.is_empty() {
        eprintln!("skipped: no raw disk, zram or console screen device here that root can open");
        return;
    }
    let w = Workspace::new();
    let probe = w.probe();
    for d in &devices {
        let out = w.exec(&["agent"]).run(&[probe.as_str(), "read", d]);
        assert_eq!(
            probe_result(&out),
            "errno 13 EACCES",
            "{d} must be unreadable"
        );
    }
    for ordinary in ["/dev/zero", "/dev/null", "/dev/urandom"] {
        let out = w.exec(&["agent"]).run(&[probe.as_str(), "read", ordinary]);
        assert_eq!(probe_result(&out), "ok", "{ordinary}");
    }
}

/// A guard without capabilities (an ordinary user's) leaves to their permissions the hidden
/// paths its user cannot reach, and hides by Landlock only those the user could read: both
/// stay unreadable to the command, the rest of the root stays readable, and the run's
/// `run-start` says which way each pattern went.
#[test]
fn an_unprivileged_run_hides_by_landlock_only_what_its_user_could_read() {
    let w = Workspace::unprivileged();
    let probe = w.probe();
    let mine = w.write(&w.outside.join("mine.key").display().to_string(), "mine\n");
    let plain = w.write(
        &w.outside.join("plain.txt").display().to_string(),
        "plain\n",
    );
    // Owned by root and readable by root only: out of the unprivileged user's reach. Without
    // root there is no such file to make, and only the Landlock half is checked.
    let roots = w.outside.join("roots.key");
    if is_root() {
        std::fs::write(&roots, "root's\n").expect("write");
        std::fs::set_permissions(&roots, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
    }
    let layer = w.profile_file(
        "hide-two",
        &format!(
            "name = \"hide-two\"\n[fs]\nread = [\"{o}\"]\nhide = [\"{m}\", \"{r}\"]\n",
            o = w.outside.display(),
            m = mine.display(),
            r = roots.display(),
        ),
    );
    let mut script = format!(
        "{probe} read {}; {probe} read {}",
        mine.display(),
        plain.display()
    );
    if is_root() {
        script.push_str(&format!("; {probe} read {}", roots.display()));
    }
    let shadow = std::path::Path::new("/etc/shadow").exists();
    if shadow {
        script.push_str(&format!("; {probe} read /etc/shadow"));
    }
    let out = w.exec(&["agent", &layer]).run(&["sh", "-c", &script]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let stdout = out.stdout();
    let results: Vec<&str> = stdout.lines().collect();
    assert_eq!(results.first(), Some(&"errno 13 EACCES"), "{results:?}");
    assert_eq!(results.get(1), Some(&"ok"), "{results:?}");
    let mut more = results[2..].iter();
    if is_root() {
        assert_eq!(more.next(), Some(&"errno 13 EACCES"), "root's: {results:?}");
    }
    if shadow {
        assert_eq!(
            more.next(),
            Some(&"errno 13 EACCES"),
            "/etc/shadow: {results:?}"
        );
    }
    let start = w
        .audit()
        .into_iter()
        .find(|e| e["type"] == "run-start")
        .expect("run-start");
    let enforced = start["enforced"].to_string();
    assert!(
        enforced.contains("path(s) inside the roots hidden (fs.hide)"),
        "{enforced}"
    );
    if is_root() {
        // The layer's root-only file, and whatever of the base profile's list (/etc/shadow...)
        // this machine has out of the user's reach.
        assert!(
            enforced.contains("fs.hide pattern(s) left to file permissions"),
            "{enforced}"
        );
    }
}

/// The `fs.hide` expansion makes hundreds of Landlock rules; guard adds each as it opens its
/// root, so a run starts, and hides what it must, under an open-file limit far below that
/// (it used to fail with "Too many open files" before the command started).
#[test]
fn a_low_open_file_limit_still_starts_a_run_that_hides_the_secrets() {
    let w = Workspace::new();
    let probe = w.probe();
    let mut g = w.exec(&["agent"]);
    // guard starts with at most 32 open files (set in the forked child before it execs guard,
    // so the test process keeps its own limit).
    // SAFETY: the closure runs between fork and exec and makes one system call, setrlimit,
    // which is async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut g.cmd, || {
            let limit = libc::rlimit {
                rlim_cur: 32,
                rlim_max: 32,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let script = format!(
        "{probe} read /etc/passwd; {probe} read /etc/shadow; echo made > made.txt; ulimit -n",
        probe = probe
    );
    let out = g.run(&["sh", "-c", &script]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let results: Vec<String> = out.stdout().lines().map(str::to_string).collect();
    assert_eq!(
        results.first().map(String::as_str),
        Some("ok"),
        "/etc/passwd: {results:?}"
    );
    if std::path::Path::new("/etc/shadow").exists() {
        assert_eq!(
            results.get(1).map(String::as_str),
            Some("errno 13 EACCES"),
            "/etc/shadow: {results:?}"
        );
    }
    assert_eq!(
        results.last().map(String::as_str),
        Some("32"),
        "the limit guard ran under: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.ws.join("made.txt"))
            .ok()
            .as_deref(),
        Some("made\n")
    );
}

/// The raw disks are hidden too (`/dev/vd*`, `/dev/sd*`, `/dev/loop*`...: a root command could
/// read every secret off them), while `/dev` itself can still be listed and its ordinary
/// devices used: `/dev` is granted entry by entry around them.
#[test]
fn raw_disks_are_unreadable_to_root_while_dev_stays_usable() {
    use std::os::unix::fs::FileTypeExt;
    if !is_root() {
        eprintln!("skipped: not root (the disks' permissions already keep them from this user)");
        return;
    }
    let disk = std::fs::read_dir("/dev")
        .expect("list /dev")
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_block_device()))
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            ["vd", "sd", "loop", "nvme"]
                .iter()
                .any(|d| name.starts_with(d))
                && std::fs::File::open(p).is_ok()
        });
    let Some(disk) = disk else {
        eprintln!("skipped: no block device under /dev that root can open bare");
        return;
    };
    let disk = disk.display().to_string();
    let w = Workspace::new();
    let probe = w.probe();
    let out = w.exec(&["agent"]).run(&[probe.as_str(), "read", &disk]);
    assert_eq!(
        probe_result(&out),
        "errno 13 EACCES",
        "{disk} must be unreadable"
    );
    let name = disk.trim_start_matches("/dev/");
    let out = w.exec(&["agent"]).run(&["ls", "/dev"]);
    out.expect_code(0);
    assert!(
        out.stdout().lines().any(|l| l == name),
        "/dev is listed, {name} among its entries: {}",
        out.stdout()
    );
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "echo x > /dev/null && head -c 4 /dev/zero | wc -c",
    ]);
    out.expect_code(0);
    assert_eq!(out.stdout().trim(), "4", "/dev/null and /dev/zero work");
}

/// A directory that is both a read root and a write root, and holds a hidden path, is granted
/// entry by entry twice, once for each list, and both grants hold whichever of them the start
/// gives to its helper thread (the second root so expanded goes there). As an ordinary user,
/// who expands neither `/etc` nor `/dev`, the expanded roots here are `x` and `y` to read,
/// then `y` to write: the helper takes `y` to read, and `y` must stay writable by Landlock.
/// `GUARD_NO_ADDFD=1` lets the kernel continue the write-open, so Landlock, not guard's own
/// open, decides it.
#[test]
fn a_root_listed_for_reading_and_writing_keeps_both_grants_around_what_it_hides() {
    let w = Workspace::unprivileged();
    let probe = w.probe();
    let (x, y) = (w.outside.join("x"), w.outside.join("y"));
    for d in [&x, &y] {
        w.write(&d.join("secret").display().to_string(), "secret\n");
        w.write(&d.join("plain").display().to_string(), "plain\n");
    }
    let layer = w.profile_file(
        "both",
        &format!(
            "name = \"both\"\n[fs]\nread = [\"{x}\", \"{y}\"]\nwrite = [\"{y}\"]\nhide = [\"{x}/secret\", \"{y}/secret\"]\n",
            x = x.display(),
            y = y.display(),
        ),
    );
    let out = w.exec(&["agent", &layer]).env("GUARD_NO_ADDFD", "1").run(&[
        "sh",
        "-c",
        &format!(
            "{probe} read {xs}; {probe} read {xp}; {probe} read {ys}; {probe} write {yp} new",
            xs = x.join("secret").display(),
            xp = x.join("plain").display(),
            ys = y.join("secret").display(),
            yp = y.join("plain").display(),
        ),
    ]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    assert_eq!(
        out.stdout().lines().collect::<Vec<_>>(),
        ["errno 13 EACCES", "ok", "errno 13 EACCES", "ok"]
    );
    assert_eq!(std::fs::read_to_string(y.join("plain")).unwrap(), "new");
    assert_eq!(
        std::fs::read_to_string(y.join("secret")).unwrap(),
        "secret\n"
    );
}

/// Where the command enforces the run's Landlock ruleset (ABI 6: the init has a layer of its
/// own), guard and its child add the rules at once after the fork, the child the first root
/// `fs.hide` expands entry by entry (`/etc` for root); below that, guard adds them all before
/// the fork. Both give the same ruleset: the same files read and refused, the same listings,
/// and the same report of what is hidden. As root and as an unprivileged user.
#[test]
fn the_rules_guard_and_its_child_add_are_those_guard_adds_alone() {
    for w in [Workspace::new(), Workspace::unprivileged()] {
        let probe = w.probe();
        let mut script = String::new();
        for f in [
            "/etc/passwd",
            "/etc/hostname",
            "/etc/shadow",
            "/etc/gshadow",
            "/dev/null",
        ] {
            script.push_str(&format!("{probe} read {f}; "));
        }
        script.push_str("ls /etc | wc -l; ls /dev | wc -l");
        let mut seen = Vec::new();
        for abi in [None, Some("5")] {
            let mut g = w.exec(&["agent"]);
            if let Some(abi) = abi {
                g.env("GUARD_LANDLOCK_ABI", abi);
            }
            let out = g.run(&["sh", "-c", &script]);
            assert_eq!(out.code(), 0, "{}", out.stderr());
            let start = w
                .audit()
                .into_iter()
                .rfind(|e| e["type"] == "run-start")
                .expect("run-start");
            let fs: Vec<String> = start["enforced"]
                .as_array()
                .expect("enforced")
                .iter()
                .filter_map(|l| l.as_str())
                .filter(|l| l.starts_with("fs:"))
                .map(str::to_string)
                .collect();
            seen.push((out.stdout(), fs));
        }
        assert_eq!(seen[0], seen[1], "unprivileged: {}", w.unprivileged);
        if is_root() && !w.unprivileged {
            assert!(
                seen[0]
                    .1
                    .iter()
                    .any(|l| l.contains("inside the roots hidden")),
                "{:?}",
                seen[0].1
            );
        }
    }
}
