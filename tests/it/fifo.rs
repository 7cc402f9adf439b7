//! FIFOs opened under guard behave as bare: an open for reading or writing alone waits for
//! the other end in the kernel, never in guard. guard performs judged write-opens itself, and
//! once waited for a FIFO's reader while holding the journal's lock, so the reader (judged
//! too) never came: `mkfifo p; (sleep 1; cat p) & echo x > p` hung. The FIFO's permissions
//! are still checked with the caller's credentials.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;

use crate::fidelity::{args, run_bare, run_guarded, Roots};
use crate::util::{is_root, tool, Workspace};

/// Writers that come before their reader and after it, a reader that comes before its writer,
/// and an O_RDWR open (which never waits).
const SCRIPT: &str = r#"
mkfifo p
(sleep 1; cat p) & echo reader-came-later > p; wait
cat p & echo reader-came-first > p; wait
(sleep 1; echo writer-came-later > p) & cat p; wait
exec 3<>p; echo read-write >&3; read line <&3; echo "$line"; exec 3>&-
stat -c '%F' p
"#;

/// As uid 65534: a FIFO of root's it may not write (refused as bare), one it may.
const NOBODY: &str = r#"
mkfifo -m 600 private; mkfifo -m 666 public
setpriv --reuid 65534 --regid 65534 --clear-groups -- sh -c '
  (echo nobody-wrote > private) 2>/dev/null || echo private-refused
  cat public & echo nobody-wrote > public; wait'
"#;

fn sh(script: &str) -> Vec<OsString> {
    args(["sh", "-c", script])
}

#[test]
fn a_fifo_opened_for_writing_waits_for_its_reader_not_for_guard() {
    let w = Workspace::new();
    let bare_dir = w.root.join("bare");
    std::fs::create_dir_all(&bare_dir).expect("mkdir bare");
    let bare = run_bare(&sh(SCRIPT), &bare_dir, false);
    let guarded = run_guarded(&w, &sh(SCRIPT), &w.ws, Roots::default(), false);
    assert_eq!(
        bare.stdout(),
        guarded.stdout(),
        "bare and under guard differ\n--- guard's stderr\n{}",
        guarded.stderr()
    );
    for line in [
        "reader-came-later",
        "reader-came-first",
        "writer-came-later",
        "read-write",
        "fifo",
    ] {
        assert!(guarded.stdout().contains(line), "{line} missing");
    }
    // The opens were guard's to judge: they name the FIFO in the audit log.
    let p = w.ws.join("p").display().to_string();
    assert!(
        w.decisions()
            .iter()
            .any(|d| d.to_string().contains(&p) && d.to_string().contains("open")),
        "no judged open of {p}"
    );
}

#[test]
fn a_fifo_is_opened_with_the_callers_credentials() {
    if !is_root() || tool("setpriv").is_none() {
        eprintln!("skipped: switching to uid 65534 needs root and setpriv");
        return;
    }
    let w = Workspace::new();
    for d in [&w.root, &w.ws] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let bare_dir = w.root.join("bare");
    std::fs::create_dir_all(&bare_dir).expect("mkdir bare");
    let bare = run_bare(&sh(NOBODY), &bare_dir, true);
    let guarded = run_guarded(&w, &sh(NOBODY), &w.ws, Roots::default(), true);
    assert_eq!(
        bare.stdout(),
        guarded.stdout(),
        "bare and under guard differ\n--- guard's stderr\n{}",
        guarded.stderr()
    );
    assert_eq!(guarded.stdout(), "private-refused\nnobody-wrote\n");
}
