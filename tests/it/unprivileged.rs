//! The same guarantees for an unprivileged user (CI runs as root; these drop to `nobody`).

use crate::util::{is_root, probe_result, tool, Workspace};

fn ready() -> bool {
    if !is_root() {
        // Already unprivileged: the other tests prove it.
        return true;
    }
    if tool("setpriv").is_none() {
        eprintln!("skip: setpriv is not installed");
        return false;
    }
    true
}

#[test]
fn unprivileged_outside_writes_fail_and_workspace_work_goes_through() {
    if !ready() {
        return;
    }
    let w = Workspace::unprivileged();
    let victim = w.write(
        &w.outside.join("keep.txt").display().to_string(),
        "precious\n",
    );
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "unlink", &victim.display().to_string()]);
    let r = probe_result(&out);
    assert!(
        r.contains("EACCES") || r.contains("EPERM"),
        "got {r}; stderr {}",
        out.stderr()
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("intact"),
        "precious\n"
    );
    let out = w
        .exec(&["agent"])
        .run(&["sh", "-c", "echo a > f && mv f g && rm g && id -u"]);
    out.expect_code(0);
    if is_root() {
        assert_ne!(out.stdout().trim(), "0", "really ran unprivileged");
    }
}

#[test]
fn unprivileged_protected_paths_and_deny_list_hold() {
    if !ready() {
        return;
    }
    let w = Workspace::unprivileged();
    let config = w.write(".git/config", "[core]\n");
    // A repository as git sees one: its config is judged by content, and written in place
    // it cannot be.
    w.write(".git/HEAD", "ref: refs/heads/main\n");
    for d in ["objects", "refs"] {
        std::fs::create_dir_all(w.ws.join(".git").join(d)).expect("repo");
    }
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "write", &config.display().to_string(), "evil"]);
    assert_eq!(probe_result(&out), "errno 1 EPERM");
    assert_eq!(
        std::fs::read_to_string(&config).expect("intact"),
        "[core]\n"
    );
    let out = w.exec(&["agent"]).run(&[&w.probe(), "io_uring_setup"]);
    assert_eq!(probe_result(&out), "errno 1 EPERM");
    let out = w.exec(&["agent"]).run(&["sh", "-c", "exit 3"]);
    out.expect_code(3);
}

#[test]
fn root_under_guard_cannot_write_outside_the_write_roots() {
    if !is_root() {
        eprintln!("skip: not running as root");
        return;
    }
    let w = Workspace::new();
    let victim = w.write(
        &w.outside.join("root-owned.txt").display().to_string(),
        "precious\n",
    );
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "write", &victim.display().to_string(), "evil"]);
    assert!(
        probe_result(&out).starts_with("errno"),
        "root must be bounded too"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("intact"),
        "precious\n"
    );
    let out = w
        .exec(&["agent"])
        .run(&["sh", "-c", "grep CapEff /proc/self/status"]);
    assert!(
        out.stdout().contains("0000000000000000"),
        "capabilities dropped: {}",
        out.stdout()
    );
}

/// A root command (no capabilities) meets the kernel's permission checks in its own
/// directories as root without capabilities would bare, whether guard switches to its
/// credentials or (in a directory the command owns with the owner's bits) does not: an unlink
/// goes through in its own directory, and fails with EACCES in one whose mode refuses the
/// owner writing or searching and with EPERM in another user's sticky directory; a lookup
/// fails with EACCES there too. The files the refused calls name are still there.
#[test]
fn a_root_command_meets_the_permission_checks_of_root_without_capabilities() {
    use std::os::unix::fs::PermissionsExt as _;
    if !is_root() {
        eprintln!("skip: not running as root");
        return;
    }
    let w = Workspace::new();
    let dir = |name: &str, mode: u32, owner: Option<u32>| {
        let f = w.write(&format!("{name}/f"), "keep\n");
        let d = w.ws.join(name);
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&d, Some(uid), Some(uid)).expect("chown");
            std::os::unix::fs::chown(&f, Some(uid), Some(uid)).expect("chown");
        }
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).expect("chmod");
        f
    };
    let own = dir("own", 0o755, None);
    let unwritable = dir("unwritable", 0o555, None);
    let unsearchable = dir("unsearchable", 0o600, None);
    let sticky = dir("sticky", 0o1777, Some(65534));
    let probe = w.probe();
    let script = format!(
        "cd {ws}; {p} unlink own/f; {p} unlink unwritable/f; {p} unlink sticky/f; \
         {p} unlink unsearchable/f; cd unwritable && {p} unlink f",
        ws = w.ws.display(),
        p = probe
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    assert_eq!(out.code(), 0, "{}", out.stderr());
    let stdout = out.stdout();
    let results: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        results,
        [
            "ok",
            "errno 13 EACCES",
            "errno 1 EPERM",
            "errno 13 EACCES",
            "errno 13 EACCES"
        ],
        "{}",
        out.stderr()
    );
    assert!(!own.exists());
    for kept in [&unwritable, &sticky] {
        assert_eq!(std::fs::read_to_string(kept).expect("kept"), "keep\n");
    }
    std::fs::set_permissions(
        w.ws.join("unsearchable"),
        std::fs::Permissions::from_mode(0o700),
    )
    .expect("chmod");
    assert_eq!(
        std::fs::read_to_string(&unsearchable).expect("kept"),
        "keep\n"
    );
}

/// A root command keeps none of root's capabilities in any set, bounding set included (the
/// launcher drops each bounding capability and empties the others in one call), and
/// `--keep-caps` keeps them.
#[test]
fn a_root_command_has_no_capability_in_any_set() {
    if !is_root() {
        eprintln!("skipped: not root (an unprivileged command has none to drop)");
        return;
    }
    let w = Workspace::new();
    let sets = |keep: bool| {
        let mut g = w.exec(&["agent"]);
        if keep {
            g.arg("--keep-caps");
        }
        let out = g.run(&["grep", "^Cap", "/proc/self/status"]);
        out.expect_code(0);
        out.stdout()
    };
    let dropped = sets(false);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            dropped.contains(&format!("{set}:\t0000000000000000")),
            "{set} empty: {dropped}"
        );
    }
    let kept = sets(true);
    assert!(
        !kept.contains("CapEff:\t0000000000000000"),
        "--keep-caps keeps them: {kept}"
    );
}
