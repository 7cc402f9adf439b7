//! The kernel's name rules under guard: `tests/fidelity/names.py` makes one call per rule
//! (trailing slashes, O_NOFOLLOW, O_DIRECTORY, O_EXCL on symlinks, O_TMPFILE, O_PATH,
//! AT_EMPTY_PATH, RENAME_NOREPLACE/EXCHANGE/WHITEOUT, linkat AT_SYMLINK_FOLLOW, `.` and `..`,
//! ENAMETOOLONG, ELOOP, openat2's resolve flags, EEXIST and ENOENT before the write-root
//! boundary, directories the caller may not search, descriptors it does not have) and prints
//! each result and the tree it left. Bare and under guard, with the same
//! credentials, the two outputs must be the same, line for line: as root without capabilities
//! (what guard leaves a root command) and as the unprivileged user running guard itself.

use std::path::Path;

use crate::fidelity::{args, run_bare, run_guarded, Roots};
use crate::util::{is_root, tool, Out, Workspace, AS_UNPRIVILEGED, UNPRIV_USER};

fn script() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fidelity/names.py"
    ))
}

/// Lines that differ between the two outputs.
fn differences(bare: &Out, guarded: &Out) -> Vec<String> {
    let (b, g) = (bare.stdout(), guarded.stdout());
    let (b, g): (Vec<&str>, Vec<&str>) = (b.lines().collect(), g.lines().collect());
    let mut out = Vec::new();
    for i in 0..b.len().max(g.len()) {
        let (x, y) = (b.get(i).copied(), g.get(i).copied());
        if x != y {
            out.push(format!("bare:  {x:?}\nguard: {y:?}"));
        }
    }
    out
}

fn compare(w: &Workspace) {
    // The system's interpreter where there is one: every user can run it.
    let system = Path::new("/usr/bin/python3");
    let py = match system
        .exists()
        .then(|| system.to_path_buf())
        .or_else(|| tool("python3"))
    {
        Some(p) => p,
        None => {
            eprintln!("skipped: python3 is not installed");
            return;
        }
    };
    // The interpreter's installation and the script must be readable under guard.
    let install = std::fs::canonicalize(&py)
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| Path::new("/usr").to_path_buf());
    let scripts = script().parent().expect("tests/fidelity");
    let argv = args([py.as_os_str(), script().as_os_str()]);
    let bare_dir = w.root.join("bare");
    std::fs::create_dir_all(&bare_dir).expect("mkdir");
    let guard_dir = w.ws.join("names");
    std::fs::create_dir_all(&guard_dir).expect("mkdir");
    if w.unprivileged {
        for d in [&bare_dir, &guard_dir] {
            let status = std::process::Command::new("chown")
                .arg(format!("{UNPRIV_USER}:"))
                .arg(d)
                .status()
                .expect("chown");
            assert!(status.success());
        }
    }
    let bare = if w.unprivileged {
        let mut v = args(AS_UNPRIVILEGED);
        v.extend(argv.iter().cloned());
        run_bare(&v, &bare_dir, true)
    } else {
        run_bare(&argv, &bare_dir, false)
    };
    assert_eq!(bare.code(), 0, "bare: {}", bare.stderr());
    let read: [&Path; 3] = [&install, scripts, Path::new("/usr")];
    let roots = Roots {
        read: &read,
        ..Roots::default()
    };
    let guarded = run_guarded(w, &argv, &guard_dir, roots, false);
    assert_eq!(guarded.code(), 0, "guard: {}", guarded.stderr());
    let diff = differences(&bare, &guarded);
    assert!(
        diff.is_empty(),
        "{} line(s) differ\n{}\n--- guard's stderr\n{}",
        diff.len(),
        diff.join("\n"),
        guarded.stderr()
    );
    // Nothing of guard's on the command's stderr, nothing refused in the audit log: every
    // errno here is the kernel's own answer, not guard's refusal.
    assert_eq!(
        guarded.stderr(),
        bare.stderr(),
        "stderr, bare and under guard"
    );
    let refusals: Vec<String> = w.refusals().iter().map(|r| r.to_string()).collect();
    assert!(
        refusals.is_empty(),
        "refused by guard:\n{}",
        refusals.join("\n")
    );
    assert!(bare.stdout().contains("mkdir /usr: EEXIST"));
    // The caller (without capabilities) meets the permissions of the directories on the way.
    assert!(bare
        .stdout()
        .contains("unlink p/q/r/x (p/q not searchable): EACCES"));
    assert!(bare
        .stdout()
        .contains("unlink p/q/r/s/t/new (p/q/r/s not searchable): EACCES"));
}

#[test]
fn name_rules_are_the_kernels_as_root_without_capabilities() {
    compare(&Workspace::new());
}

#[test]
fn name_rules_are_the_kernels_for_an_unprivileged_guard() {
    if !is_root() {
        // Already unprivileged: the test above is that case.
        eprintln!("skipped: runs as the unprivileged user only when the tests run as root");
        return;
    }
    compare(&Workspace::unprivileged());
}
