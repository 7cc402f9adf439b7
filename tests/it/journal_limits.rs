//! The pre-image size cap: above it a write is either refused or done without a saved copy, and
//! the audit log says which (never silently).

use crate::util::{probe_result, Workspace};

fn profile(w: &Workspace, oversize: &str) -> String {
    let p = w.root.join(format!("cap-{oversize}.toml"));
    std::fs::write(
        &p,
        format!("name = \"cap\"\n[transaction]\nmax-preimage-size = 16\noversize = \"{oversize}\"\nfsync = true\n"),
    )
    .expect("write profile");
    p.display().to_string()
}

#[test]
fn a_write_above_the_cap_is_refused_under_oversize_deny() {
    let w = Workspace::new();
    let big = w.write("big.txt", &"x".repeat(100));
    let p = profile(&w, "deny");
    let out = w
        .exec(&["agent", &p])
        .run(&[&w.probe(), "write", "big.txt", "small"]);
    assert_eq!(
        probe_result(&out),
        "errno 27 OTHER",
        "EFBIG expected: {}",
        out.stdout()
    );
    assert_eq!(
        std::fs::read_to_string(&big).expect("intact"),
        "x".repeat(100)
    );
    let d = w
        .decisions()
        .into_iter()
        .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with("big.txt")))
        .expect("judged");
    assert!(
        d["reason"].as_str().unwrap_or("").contains("refused"),
        "{d}"
    );
}

#[test]
fn a_write_above_the_cap_is_recorded_as_unprotected_under_oversize_record() {
    let w = Workspace::new();
    let big = w.write("big.txt", &"x".repeat(100));
    let small = w.write("small.txt", "tiny");
    let p = profile(&w, "record");
    let out = w.exec(&["agent", &p]).arg("--atomic").run(&[
        "sh",
        "-c",
        "echo changed > big.txt; echo changed > small.txt; exit 1",
    ]);
    assert_eq!(out.code(), 1);
    // The small file was restored; the big one could not be and the log says why.
    assert_eq!(std::fs::read_to_string(&small).expect("small"), "tiny");
    assert_eq!(std::fs::read_to_string(&big).expect("big"), "changed\n");
    let d = w
        .decisions()
        .into_iter()
        .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with("big.txt")))
        .expect("judged");
    assert!(
        d["reason"]
            .as_str()
            .unwrap_or("")
            .contains("without a saved copy"),
        "{d}"
    );
}
