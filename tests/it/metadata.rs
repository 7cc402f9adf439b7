//! Metadata through descriptors, and set-id bits (issue 9 part 3): fchmod, fchown, fsetxattr,
//! futimens and their AT_EMPTY_PATH forms are judged by the object the descriptor refers to,
//! performed on a duplicate of it, journaled inside the workspace; set-user-id and
//! set-group-id bits are refused anywhere unless the profile allows them. As root and as the
//! unprivileged user, each refusal is checked on the file itself and in the audit log.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::util::{is_root, probe_result, tool, Workspace};

/// What a refused call must have left alone.
#[derive(Debug, PartialEq, Eq)]
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: i64,
    xattr: bool,
}

fn meta(p: &Path) -> Meta {
    let m = std::fs::symlink_metadata(p).expect("stat");
    let xattr = std::process::Command::new("getfattr")
        .arg("-d")
        .arg(p)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("user.guard"))
        .unwrap_or(false);
    Meta {
        mode: m.mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
        mtime: m.mtime(),
        xattr,
    }
}

fn denied_with(w: &Workspace, path: &Path, rule: &str) -> bool {
    let p = path.display().to_string();
    w.decisions().iter().any(|d| {
        d["verdict"] == "deny" && d["rule"] == rule && d["path"].as_str() == Some(p.as_str())
    })
}

/// The descriptor operations of the probe, with their arguments after the path.
fn descriptor_ops() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("fchmod", vec!["777"]),
        ("fchmodat-empty", vec!["777"]),
        ("fchown", vec!["-1", "-1"]),
        ("fchownat-empty", vec!["-1", "-1"]),
        ("fsetxattr", vec!["user.guard", "x"]),
        ("futimens", vec![]),
        ("utimensat-empty", vec![]),
    ]
}

fn outside_the_roots(w: &Workspace) {
    // A file the sandbox can read (the test profile's read root) but not write.
    let victim = w.write(&w.bin.join("victim.txt").display().to_string(), "keep\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let before = meta(&victim);
    for (op, rest) in descriptor_ops() {
        let mut argv = vec![w.probe(), op.to_string(), victim.display().to_string()];
        argv.extend(rest.iter().map(|s| s.to_string()));
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(
            probe_result(&out),
            "errno 13 EACCES",
            "{op} on a file outside the write roots\n{}",
            out.stderr()
        );
        assert_eq!(meta(&victim), before, "{op} changed the file outside");
        assert!(
            denied_with(w, &victim, "fs.write-roots"),
            "{op}: the audit log names the object"
        );
    }
}

#[test]
fn metadata_through_a_descriptor_outside_the_write_roots_is_refused() {
    outside_the_roots(&Workspace::new());
}

#[test]
fn metadata_through_a_descriptor_outside_the_write_roots_is_refused_unprivileged() {
    if !is_root() || tool("setpriv").is_none() {
        eprintln!("skipped: needs root and setpriv to run as the unprivileged user");
        return;
    }
    // The file belongs to the unprivileged user: bare, every one of these calls succeeds.
    outside_the_roots(&Workspace::unprivileged());
}

fn protected(w: &Workspace) {
    let hook = w.write(".git/hooks/pre-push", "#!/bin/sh\n");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let before = meta(&hook);
    for (op, rest) in descriptor_ops() {
        let mut argv = vec![w.probe(), op.to_string(), hook.display().to_string()];
        argv.extend(rest.iter().map(|s| s.to_string()));
        let out = w.exec(&["agent"]).run(&argv);
        assert_eq!(
            probe_result(&out),
            "errno 1 EPERM",
            "{op} on a protected file"
        );
        assert_eq!(meta(&hook), before, "{op} changed the protected file");
        assert!(denied_with(w, &hook, "fs.protect"), "{op}: logged");
    }
}

#[test]
fn metadata_through_a_descriptor_of_a_protected_file_is_refused() {
    protected(&Workspace::new());
}

#[test]
fn metadata_through_a_descriptor_of_a_protected_file_is_refused_unprivileged() {
    if !is_root() || tool("setpriv").is_none() {
        eprintln!("skipped: needs root and setpriv to run as the unprivileged user");
        return;
    }
    protected(&Workspace::unprivileged());
}

fn set_id(w: &Workspace) {
    let file = w.write("prog", "#!/bin/sh\n");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let f = file.display().to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        ("fchmod", f.clone(), "4755"),
        ("fchmod", f.clone(), "2755"),
        ("fchmodat-empty", f.clone(), "6755"),
        ("chmod-mode", f.clone(), "4755"),
        ("chmod-mode", f.clone(), "2711"),
    ];
    for (op, path, mode) in &cases {
        let out = w.exec(&["agent"]).run(&[&w.probe(), *op, path, *mode]);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{op} {mode}");
        assert_eq!(meta(&file).mode, 0o755, "{op} {mode} left set-id bits");
        assert!(denied_with(w, &file, "fs.setid"), "{op} {mode}: logged");
    }
    // New files with set-id bits, in the workspace and in the private tmp.
    for (op, name, mode) in [
        ("creat-mode", "new-suid", "4755"),
        ("mknod-mode", "new-sgid", "2755"),
    ] {
        let out =
            w.exec(&["agent"])
                .run(&[&w.probe(), op, &w.ws.join(name).display().to_string(), mode]);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{op} {mode}");
        assert!(!w.ws.join(name).exists(), "{op} created {name}");
        let out = w.exec(&["agent"]).run(&[
            "sh",
            "-c",
            &format!("{} {op} \"$TMPDIR/{name}\" {mode}", w.probe()),
        ]);
        assert_eq!(probe_result(&out), "errno 1 EPERM", "{op} {mode} in tmp");
    }
    // File capabilities grant privileges the same way.
    let out = w
        .exec(&["agent"])
        .run(&[&w.probe(), "setxattr", &f, "security.capability", "x"]);
    assert_eq!(probe_result(&out), "errno 1 EPERM", "security.capability");
    // A set-group-id directory only passes its group on: allowed. So is a plain mode.
    let dir = w.ws.join("shared");
    std::fs::create_dir(&dir).expect("mkdir");
    if w.unprivileged {
        let _ = std::process::Command::new("chown")
            .args([crate::util::UNPRIV_USER])
            .arg(&dir)
            .status();
    }
    let out =
        w.exec(&["agent"])
            .run(&[&w.probe(), "chmod-mode", &dir.display().to_string(), "2775"]);
    assert_eq!(probe_result(&out), "ok");
    let out = w.exec(&["agent"]).run(&[&w.probe(), "fchmod", &f, "700"]);
    assert_eq!(probe_result(&out), "ok");
    assert_eq!(meta(&file).mode, 0o700);
    // The profile can allow them.
    let allow = w.profile_file("allow-setid", "[fs]\nallow-setid = true\n");
    let out = w
        .exec(&["agent", &allow])
        .run(&[&w.probe(), "fchmod", &f, "4755"]);
    assert_eq!(probe_result(&out), "ok");
    assert_eq!(meta(&file).mode, 0o4755);
}

#[test]
fn set_id_bits_are_refused_anywhere() {
    set_id(&Workspace::new());
}

#[test]
fn set_id_bits_are_refused_anywhere_unprivileged() {
    if !is_root() || tool("setpriv").is_none() {
        eprintln!("skipped: needs root and setpriv to run as the unprivileged user");
        return;
    }
    set_id(&Workspace::unprivileged());
}

/// `cp /bin/sh x; chown root x; chmod u+s x`: the chmod is refused; and a chown of a set-id
/// file that existed before the run leaves no set-id bit, because the kernel clears it.
#[test]
fn no_setuid_shell_is_left_in_the_workspace() {
    if !is_root() {
        eprintln!("skipped: the chown to root needs root");
        return;
    }
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&[
        "sh",
        "-c",
        "cp /bin/sh x && chown root x; chmod u+s x; echo chmod=$?",
    ]);
    assert!(out.stdout().contains("chmod=1"), "{}", out.stdout());
    assert_eq!(meta(&w.ws.join("x")).mode & 0o7000, 0);
    let old = w.ws.join("old-suid");
    std::fs::copy("/bin/true", &old).expect("copy");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    let out = w.exec(&["agent"]).run(&["chown", "0:0", "old-suid"]);
    out.expect_code(0);
    assert_eq!(meta(&old).mode, 0o755, "the kernel cleared set-user-id");
}

#[test]
fn a_descriptor_swapped_during_the_call_never_changes_the_outside_file() {
    let w = Workspace::new();
    let victim = w.write(&w.bin.join("victim.txt").display().to_string(), "keep\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let allowed = w.write("allowed.txt", "x\n");
    let out = w.exec(&["agent"]).run(&[
        &w.probe(),
        "fdmeta-race",
        "3000",
        &allowed.display().to_string(),
        &victim.display().to_string(),
    ]);
    out.expect_code(0);
    let line = out.stdout();
    eprintln!("{line}");
    assert!(
        !line.contains("ok=0 "),
        "the allowed side must win sometimes: {line}"
    );
    assert_eq!(meta(&victim).mode, 0o644, "the outside file's mode changed");
}

#[test]
fn metadata_changes_through_descriptors_are_rolled_back() {
    let w = Workspace::new();
    let f = w.write("data.txt", "x\n");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let before = meta(&f);
    let script = format!(
        "{probe} fchmod {p} 600 && {probe} futimens {p}",
        probe = w.probe(),
        p = f.display()
    );
    let out = w.exec(&["agent"]).run(&["sh", "-c", &script]);
    assert_eq!(out.stdout().lines().collect::<Vec<_>>(), ["ok", "ok"]);
    assert_ne!(meta(&f), before);
    w.guard().arg("rollback").output().expect_code(0);
    let after = meta(&f);
    assert_eq!((after.mode, after.mtime), (before.mode, before.mtime));
}
