//! guard performs the calls it judges with the caller's credentials: a process under guard
//! that switched to an unprivileged user is refused exactly what the kernel refuses it bare
//! (same errno), and what it creates belongs to it. Run as root: the command keeps its
//! capabilities (`--keep-caps`) so that it may switch, then `setpriv` drops to uid 65534.

use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::fidelity::{args, run_bare, run_guarded, Roots};
use crate::util::{is_root, lacks, Workspace};

/// The uid and gid the command switches to.
const NOBODY: u32 = 65534;

/// Root's tree the unprivileged process works in: root-owned 0755 directories with 0644
/// files, a sticky world-writable directory with a file of root's, and a world-writable
/// directory where it may create.
fn setup(dir: &Path) {
    let mkdir = |rel: &str, mode: u32| {
        let p = dir.join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    let file = |rel: &str| {
        let p = dir.join(rel);
        std::fs::write(&p, "root's\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    };
    mkdir("", 0o755);
    mkdir("sub", 0o755);
    mkdir("sub/empty", 0o755);
    file("sub/file");
    mkdir("sticky", 0o1777);
    file("sticky/roots");
    mkdir("open", 0o777);
}

/// Each call by uid 65534, through the probe (`call: ok` or `call: errno N NAME`), then who
/// owns what it created.
fn script(probe: &str) -> String {
    let calls = [
        "unlink sub/file",
        "rename sub/file sub/moved",
        "rename sub/file open/moved",
        "truncate sub/file",
        "write sub/file overwritten",
        "write sub/new created",
        "mkdir sub/newdir",
        "symlink target sub/newlink",
        "link sub/file open/hard",
        "chmod sub/file",
        "rmdir sub/empty",
        "unlink sticky/roots",
        "rename sticky/roots sticky/mine",
        "write open/mine hello",
        "mkdir open/mydir",
        "symlink target open/mylink",
    ];
    let mut s = String::from("cd \"$1\"\n");
    for c in calls {
        s.push_str(&format!("printf '%s: ' '{c}'; {probe} {c}\n"));
    }
    s.push_str("stat -c '%n %u:%g' open/mine open/mydir open/mylink\n");
    s
}

/// argv that runs `script` as uid/gid 65534 with no supplementary groups, in `dir`.
fn as_nobody(script: &str, dir: &Path) -> Vec<OsString> {
    let mut v = args([
        "setpriv",
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
        "--",
        "sh",
        "-c",
    ]);
    v.push(script.into());
    v.push("sh".into());
    v.push(dir.into());
    v
}

#[test]
fn a_process_that_switched_to_nobody_is_refused_what_the_kernel_refuses_it() {
    if !is_root() {
        eprintln!("skipped: switching to uid 65534 needs root");
        return;
    }
    if lacks(&["setpriv"]) {
        return;
    }
    let w = Workspace::new();
    // uid 65534 must reach both sides' directories.
    for d in [&w.root, &w.ws] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let script = script(&w.probe());
    let bare_dir = w.root.join("bare");
    setup(&bare_dir);
    let bare = run_bare(&as_nobody(&script, &bare_dir), &w.root, true);
    let guard_dir = w.ws.join("tree");
    setup(&guard_dir);
    let guarded = run_guarded(
        &w,
        &as_nobody(&script, &guard_dir),
        &w.ws,
        Roots::default(),
        true,
    );
    let lines =
        |o: &crate::util::Out| -> Vec<String> { o.stdout().lines().map(str::to_string).collect() };
    assert_eq!(
        lines(&bare),
        lines(&guarded),
        "bare and under guard differ\n--- guard's stderr\n{}",
        guarded.stderr()
    );
    let out = guarded.stdout();
    for (call, want) in [
        ("unlink sub/file", "EACCES"),
        ("rename sub/file sub/moved", "EACCES"),
        ("truncate sub/file", "EACCES"),
        ("write sub/file overwritten", "EACCES"),
        ("write sub/new created", "EACCES"),
        ("mkdir sub/newdir", "EACCES"),
        ("link sub/file open/hard", "EPERM"),
        ("chmod sub/file", "EPERM"),
        ("unlink sticky/roots", "EPERM"),
        ("write open/mine hello", "ok"),
        ("mkdir open/mydir", "ok"),
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{call}: ")))
            .unwrap_or_else(|| panic!("no line for {call}\n{out}"));
        assert!(line.ends_with(want), "{line}: expected {want}");
    }
    // Root's files are untouched, and what nobody made is nobody's.
    for f in ["sub/file", "sticky/roots"] {
        let p = guard_dir.join(f);
        assert_eq!(
            std::fs::read_to_string(&p).expect("read"),
            "root's\n",
            "{f}"
        );
        assert_eq!(std::fs::metadata(&p).expect("stat").uid(), 0, "{f}");
    }
    for f in ["open/mine", "open/mydir", "open/mylink"] {
        let m = std::fs::symlink_metadata(guard_dir.join(f)).expect("created");
        assert_eq!(
            (m.uid(), m.gid()),
            (NOBODY, NOBODY),
            "{f} belongs to its creator"
        );
    }
    assert!(!guard_dir.join("sub/new").exists());
}
