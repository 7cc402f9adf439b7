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
