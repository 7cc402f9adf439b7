//! `guard diff --stat`, `--patch` and `--json` on a real run: the counts are the lines the run
//! changed, the patch applied with `patch -p1` to the workspace as it was before the run gives
//! the workspace after it, binary files are named, and the JSON carries the same.

use std::process::Command;

use crate::util::{snapshot, tool, Workspace};

const SCRIPT: &str = "printf 'one\\nTWO\\nthree\\nfour\\n' > text.txt; rm gone.txt; \
     rm -rf tree; printf 'new\\nfile\\n' > added.txt; printf '\\001\\000changed' > blob.bin";

fn prepare(w: &Workspace) {
    w.write("text.txt", "one\ntwo\nthree\n");
    w.write("gone.txt", "bye\n");
    w.write("tree/sub/deep.txt", "deep\n");
    std::fs::write(w.ws.join("blob.bin"), b"\x00\x01binary").expect("write");
}

#[test]
fn diff_stat_counts_the_lines_each_file_changed() {
    let w = Workspace::new();
    prepare(&w);
    w.exec(&["agent"]).run(&["sh", "-c", SCRIPT]).expect_code(0);
    let out = w.guard().args(["diff", "--stat"]).output();
    out.expect_code(0);
    let stat = out.stdout();
    let row = |name: &str| {
        stat.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{stat}"))
            .to_string()
    };
    assert!(row("text.txt").ends_with("3 ++-"), "{stat}");
    assert!(row("added.txt").ends_with("2 ++"), "{stat}");
    assert!(row("gone.txt").ends_with("1 -"), "{stat}");
    assert!(
        row("tree/sub/deep.txt").ends_with("1 -"),
        "a deleted tree, file by file: {stat}"
    );
    assert!(row("blob.bin").contains("Bin 8 -> 9 bytes"), "{stat}");
    assert!(
        stat.contains("5 file(s) changed, 4 insertion(s)(+), 3 deletion(s)(-)"),
        "{stat}"
    );
}

#[test]
fn diff_patch_redoes_the_run_on_the_workspace_as_it_was() {
    let Some(patch) = tool("patch") else {
        eprintln!("skipped: patch(1) is not installed");
        return;
    };
    let w = Workspace::new();
    prepare(&w);
    let before = w.root.join("before");
    let status = Command::new("cp")
        .arg("-a")
        .arg(&w.ws)
        .arg(&before)
        .status()
        .expect("cp");
    assert!(status.success());
    w.exec(&["agent"]).run(&["sh", "-c", SCRIPT]).expect_code(0);
    let out = w.guard().args(["diff", "--patch"]).output();
    out.expect_code(0);
    let text = out.stdout();
    assert!(
        text.contains(
            "--- a/text.txt\n+++ b/text.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n three\n+four\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Binary files a/blob.bin and b/blob.bin differ"),
        "{text}"
    );
    std::fs::write(w.root.join("run.patch"), &text).expect("write patch");
    let applied = Command::new(patch)
        .args(["-p1", "-s", "-E", "-i"])
        .arg(w.root.join("run.patch"))
        .current_dir(&before)
        .output()
        .expect("patch runs");
    assert!(
        applied.status.success(),
        "patch -p1 failed: {}\n{}",
        String::from_utf8_lossy(&applied.stdout),
        String::from_utf8_lossy(&applied.stderr)
    );
    // Everything but the binary file (named, not patched) is as the run left it.
    std::fs::copy(w.ws.join("blob.bin"), before.join("blob.bin")).expect("copy the binary");
    let (mut a, mut b) = (snapshot(&before), snapshot(&w.ws));
    // `rm -rf tree` left nothing; patch -E removes the emptied files, not their directories.
    a.retain(|p, _| !p.starts_with("tree"));
    b.retain(|p, _| !p.starts_with("tree"));
    assert_eq!(a, b);
}

#[test]
fn diff_json_lists_paths_and_with_stat_each_files_counts() {
    let w = Workspace::new();
    prepare(&w);
    w.exec(&["agent"]).run(&["sh", "-c", SCRIPT]).expect_code(0);
    let out = w.guard().args(["diff", "--json"]).output();
    out.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(out.stdout().trim()).expect("one JSON object");
    assert_eq!(v["added"], serde_json::json!(["added.txt"]));
    assert_eq!(v["modified"], serde_json::json!(["blob.bin", "text.txt"]));
    assert!(v["deleted"]
        .as_array()
        .is_some_and(|d| d.contains(&"gone.txt".into())));
    assert!(v.get("files").is_none(), "counts only when asked for");

    let out = w
        .guard()
        .args(["diff", "--json", "--stat", "--patch"])
        .output();
    out.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(out.stdout().trim()).expect("one JSON object");
    let files = v["files"].as_array().expect("files");
    let text = files
        .iter()
        .find(|f| f["path"] == "text.txt")
        .expect("text.txt");
    assert_eq!(
        (text["insertions"].as_u64(), text["deletions"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(text["patch"].as_str().is_some_and(|p| p.contains("+TWO")));
    let blob = files
        .iter()
        .find(|f| f["path"] == "blob.bin")
        .expect("blob");
    assert_eq!(blob["binary"], true);
}
