//! Calls the supervisor performs itself must behave exactly as the kernel would: the same
//! results, errnos, modes and descriptor flags. Each check runs the same shell script with and
//! without guard and compares the transcripts.

use std::process::Command;

use crate::util::Workspace;

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

#[test]
fn emulated_calls_give_the_same_results_as_the_kernel() {
    let bare = Workspace::new();
    let expected = Command::new("sh")
        .args(["-c", SCRIPT])
        .current_dir(&bare.ws)
        .output()
        .expect("sh");
    let w = Workspace::new();
    let out = w.exec(&["agent"]).run(&["sh", "-c", SCRIPT]);
    assert_eq!(
        out.stdout(),
        transcript(&expected),
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
    let bare = Workspace::new();
    let expected = Command::new("sh")
        .args(["-c", SCRIPT])
        .current_dir(&bare.ws)
        .output()
        .expect("sh");
    let w = Workspace::new();
    let out = w
        .exec(&["agent"])
        .env("GUARD_NO_ADDFD", "1")
        .run(&["sh", "-c", SCRIPT]);
    assert_eq!(
        out.stdout(),
        transcript(&expected),
        "stderr:\n{}",
        out.stderr()
    );
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
