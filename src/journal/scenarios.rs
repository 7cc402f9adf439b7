//! End-to-end journal scenarios: mutate a varied tree through the hooks exactly as the
//! supervisor does, roll back, and prove the tree digest is what it was.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::os::fd::AsFd as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::fsops::stat_at;
use super::log::Op;
use super::*;
use crate::audit::PathText;
use crate::policy::{OnDeny, OnFailure, TransactionPolicy};

fn policy(exclude: &[&str], max: u64) -> TransactionPolicy {
    TransactionPolicy {
        on_deny: OnDeny::Errno,
        on_failure: OnFailure::Keep,
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        max_preimage_bytes: max,
        oversize: crate::policy::Oversize::Record,
        fsync: false,
        mass_delete: Default::default(),
    }
}

struct Env {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    run: PathBuf,
    exclude: Vec<String>,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let run = tmp.path().join("run");
    fs::create_dir_all(&ws).expect("mkdir ws");
    fs::create_dir_all(&run).expect("mkdir run");
    let ws = ws.canonicalize().expect("canonical");
    Env {
        _tmp: tmp,
        ws,
        run,
        exclude: vec!["target/**".into()],
    }
}

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Files, nested and empty directories, symlinks, a hard link, modes 0600/0755, a non-UTF-8
/// name and an excluded directory.
fn varied_tree(ws: &Path) {
    for d in ["src/nested/deep", "empty", "docs", "target/debug"] {
        fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    fs::write(ws.join("README"), b"hello\n").expect("write");
    fs::write(ws.join("src/main.rs"), b"fn main() {}\n").expect("write");
    fs::write(ws.join("src/nested/deep/data.bin"), vec![7u8; 70_000]).expect("write");
    fs::write(ws.join("secret"), b"s3cret").expect("write");
    chmod(&ws.join("secret"), 0o600);
    fs::write(ws.join("run.sh"), b"#!/bin/sh\n").expect("write");
    chmod(&ws.join("run.sh"), 0o755);
    std::os::unix::fs::symlink("README", ws.join("link")).expect("symlink");
    std::os::unix::fs::symlink("src/nested", ws.join("dirlink")).expect("symlink");
    fs::hard_link(ws.join("README"), ws.join("docs/readme-hard")).expect("link");
    let odd: OsString = std::os::unix::ffi::OsStringExt::from_vec(b"odd-\xff".to_vec());
    fs::write(ws.join(odd), b"bytes").expect("write");
    fs::write(ws.join("target/debug/out"), b"artifact").expect("write");
}

fn parent(abs: &Path) -> (File, OsString) {
    let dir = File::open(abs.parent().expect("parent")).expect("open parent");
    (dir, abs.file_name().expect("name").to_owned())
}

fn del(j: &mut Journal, abs: &Path) -> std::io::Result<()> {
    let (d, n) = parent(abs);
    j.delete_file(d.as_fd(), &n, abs)
}

fn rmd(j: &mut Journal, abs: &Path) -> std::io::Result<()> {
    let (d, n) = parent(abs);
    j.remove_dir(d.as_fd(), &n, abs, Looked::Not)
}

fn ren(j: &mut Journal, a: &Path, b: &Path, flags: u32) -> std::io::Result<()> {
    let (da, na) = parent(a);
    let (db, nb) = parent(b);
    j.rename(
        da.as_fd(),
        &na,
        a,
        db.as_fd(),
        &nb,
        b,
        flags,
        [Looked::Not; 2],
    )
}

fn create(j: &mut Journal, abs: &Path, content: &[u8]) {
    j.will_create(abs).expect("will_create");
    fs::write(abs, content).expect("create");
}

fn write(j: &mut Journal, abs: &Path, content: &[u8]) -> Saved {
    let (d, n) = parent(abs);
    let saved = j
        .will_write(d.as_fd(), &n, abs, Looked::Not)
        .expect("will_write");
    fs::write(abs, content).expect("write");
    saved
}

fn meta(j: &mut Journal, abs: &Path, mode: u32) {
    let (d, n) = parent(abs);
    j.will_change_meta(d.as_fd(), &n, abs, Looked::Not)
        .expect("will_change_meta");
    chmod(abs, mode);
}

fn digest(e: &Env) -> String {
    tree_digest(&e.ws, &e.exclude).expect("digest")
}

/// Every kind of mutation, in one checkpoint.
fn mutate_everything(j: &mut Journal, ws: &Path) {
    create(j, &ws.join("new.txt"), b"new");
    j.will_create(&ws.join("newdir")).expect("will_create");
    fs::create_dir(ws.join("newdir")).expect("mkdir");
    create(j, &ws.join("newdir/inner"), b"inner");
    j.will_create(&ws.join("newlink")).expect("will_create");
    std::os::unix::fs::symlink("nowhere", ws.join("newlink")).expect("symlink");
    assert_eq!(write(j, &ws.join("README"), b"changed"), Saved::Saved);
    // The hard link is the same inode: already saved.
    assert_eq!(
        write(j, &ws.join("docs/readme-hard"), b"again"),
        Saved::AlreadySaved
    );
    // Truncate.
    let (d, n) = parent(&ws.join("src/main.rs"));
    j.will_write(d.as_fd(), &n, &ws.join("src/main.rs"), Looked::Not)
        .expect("will_write");
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(ws.join("src/main.rs"))
        .expect("truncate");
    del(j, &ws.join("secret")).expect("delete");
    del(j, &ws.join("src/nested/deep/data.bin")).expect("delete");
    rmd(j, &ws.join("src/nested/deep")).expect("rmdir");
    rmd(j, &ws.join("empty")).expect("rmdir");
    // Rename over an existing file.
    ren(j, &ws.join("run.sh"), &ws.join("new.txt"), 0).expect("rename over");
    ren(j, &ws.join("new.txt"), &ws.join("docs/readme-hard"), 0).expect("rename over link");
    meta(j, &ws.join("docs"), 0o700);
    meta(j, &ws.join("docs"), 0o750);
    // Symlink replacement via rename.
    j.will_create(&ws.join(".link.tmp")).expect("will_create");
    std::os::unix::fs::symlink("src/main.rs", ws.join(".link.tmp")).expect("symlink");
    ren(j, &ws.join(".link.tmp"), &ws.join("link"), 0).expect("replace symlink");
    ren(
        j,
        &ws.join("dirlink"),
        &ws.join("newlink"),
        libc::RENAME_EXCHANGE,
    )
    .expect("exchange");
    // A directory renamed, then changed inside.
    ren(j, &ws.join("src"), &ws.join("src2"), 0).expect("rename dir");
    create(j, &ws.join("src2/added.rs"), b"//");
    // Excluded paths are not journaled.
    fs::write(ws.join("target/debug/out"), b"rebuilt").expect("write");
}

#[test]
fn every_mutation_rolls_back_to_the_same_digest() {
    for force_copy in [false, true] {
        let e = env();
        varied_tree(&e.ws);
        let before = digest(&e);
        let pol = policy(&["target/**"], 1 << 20);
        let mut j = Journal::create_inner(&e.run, &e.ws, &pol, false, force_copy).expect("create");
        if force_copy {
            assert_eq!(j.mode(), StoreMode::Copy);
        } else {
            assert!(matches!(j.mode(), StoreMode::Move));
        }
        let cp = j.checkpoint("run start", Some(1)).expect("checkpoint");
        mutate_everything(&mut j, &e.ws);
        assert_ne!(digest(&e), before);
        let mut calls = 0;
        let report = j.rollback(cp, &mut |_, _| calls += 1).expect("rollback");
        assert!(
            report.problems.is_empty(),
            "{force_copy}: {:?}",
            report.problems
        );
        assert!(report.verified > 0);
        assert_eq!(calls, report.entries_undone);
        assert_eq!(digest(&e), before, "copy mode: {force_copy}");
        // Inode exactness of the hard link after a move-mode restore.
        let a = fs::metadata(e.ws.join("README")).expect("stat");
        let b = fs::metadata(e.ws.join("docs/readme-hard")).expect("stat");
        if !force_copy {
            use std::os::unix::fs::MetadataExt as _;
            assert_eq!(a.ino(), b.ino());
        }
        // Idempotent: a second rollback undoes nothing.
        let again = j.rollback(cp, &mut |_, _| {}).expect("rollback again");
        assert_eq!(again.entries_undone, 0);
        assert_eq!(digest(&e), before);
        // And a reopened journal agrees.
        let mut j = Journal::open(&e.run).expect("open");
        assert_eq!(
            j.rollback(cp, &mut |_, _| {}).expect("rb").entries_undone,
            0
        );
        assert_eq!(digest(&e), before);
    }
}

#[test]
fn a_journal_reaches_the_disk_with_the_first_change_and_not_before() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let dir = e.run.join("journal");
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let start = j.checkpoint("run start", None).expect("checkpoint");
    j.checkpoint("a command", Some(7)).expect("checkpoint");
    // Checkpoints, a seal and a rollback with nothing to undo make no file.
    j.seal().expect("seal");
    let report = j.rollback(start, &mut |_, _| {}).expect("rollback");
    assert_eq!(report.entries_undone, 0);
    assert!(
        !j.on_disk() && !dir.exists(),
        "a journal with no change made files"
    );
    // What an earlier attempt that failed half-way (a full disk) would leave: part of a log.
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("log.jsonl"), "{\"seq\":1,\"op\":\"checkpo").expect("torn log");
    // The first change brings the journal to the disk: its checkpoints first, then the change.
    del(&mut j, &e.ws.join("README")).expect("delete");
    assert!(j.on_disk());
    assert!(dir.join("journal.json").is_file() && dir.join("store").is_dir());
    drop(j);
    let mut j = Journal::open(&e.run).expect("open");
    let checkpoints: Vec<_> = j
        .checkpoints()
        .into_iter()
        .map(|(_, reason, changes)| (reason, changes))
        .collect();
    assert_eq!(
        checkpoints,
        [("run start".to_string(), 0), ("a command".to_string(), 0)]
    );
    j.rollback(start, &mut |_, _| {}).expect("rollback");
    assert_eq!(digest(&e), before);
}

/// A crash between making a store object and journaling its entry leaves an object named by
/// the next seq. The rollback of the crashed run (`guard recover`) makes objects of its own
/// under the next seqs: it must clear such a leftover, not stop at it (found by
/// `recover_after_guard_is_killed_at_random_moments_restores_the_workspace`).
#[test]
fn a_leftover_object_of_a_crash_does_not_stop_the_rollback() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let start = j.checkpoint("run start", None).expect("checkpoint");
    create(&mut j, &e.ws.join("made"), b"made by the run");
    j.will_create(&e.ws.join("current")).expect("will_create");
    std::os::unix::fs::symlink("src", e.ws.join("current")).expect("symlink");
    del(&mut j, &e.ws.join("README")).expect("delete");
    // The crash: no seal; an object the next entry would have named.
    let next = j.next_seq();
    let store = e.run.join("journal/store");
    let names: Vec<String> = (next..next + 4).map(|seq| j.object_name(seq)).collect();
    drop(j);
    for name in names {
        let object = store.join(name);
        fs::create_dir_all(object.parent().expect("in the store")).expect("bucket");
        fs::write(object, b"left by a crash").expect("leftover");
    }
    let mut j = Journal::open(&e.run).expect("open");
    let report = j.rollback(start, &mut |_, _| {}).expect("rollback");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(digest(&e), before);
}

/// A keep (`sed -i`'s rename over a file: the file about to be replaced is linked into the
/// store) cut short by a crash before its entry reached the log leaves a hard link to the
/// live file in the store. The rollback of the crashed run drops it: the file is left with
/// one link, as the run found it (found by
/// `recover_after_guard_is_killed_at_random_moments_restores_the_workspace`, 1 start in 4).
#[test]
fn a_kept_link_the_log_never_named_is_dropped_by_the_rollback() {
    use std::os::unix::fs::MetadataExt as _;
    let e = env();
    varied_tree(&e.ws);
    let victim = e.ws.join("src/kept.rs");
    fs::write(&victim, b"fn main() {}\n").expect("write");
    let links = || fs::symlink_metadata(&victim).expect("stat").nlink();
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let start = j.checkpoint("run start", None).expect("checkpoint");
    del(&mut j, &e.ws.join("README")).expect("delete");
    let (d, n) = parent(&victim);
    let st = stat_at(d.as_fd(), &n).expect("stat").expect("there");
    let seq = j.next_seq();
    assert_eq!(
        j.keep(d.as_fd(), &n, (&st, None), seq).expect("keep"),
        None,
        "kept as a link"
    );
    assert_eq!(links(), 2);
    // The crash: the entry is never logged.
    drop(j);
    let mut j = Journal::open(&e.run).expect("open");
    // A dry run changes nothing, in the store either.
    let dry = RollbackOptions {
        force: true,
        dry_run: true,
    };
    j.rollback_with(start, &dry, &mut |_, _| {})
        .expect("dry run");
    assert_eq!(links(), 2, "a dry run removed the object");
    let report = j.rollback(start, &mut |_, _| {}).expect("rollback");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(links(), 1, "the store keeps no link to the restored file");
    assert!(!e
        .run
        .join("journal/store")
        .join(j.object_name(seq))
        .exists());
    assert_eq!(digest(&e), before);
}

/// A rename over a file (`mv -f a b`) cut short by a crash after its entry reached the log and
/// before the kernel's rename: `b` was linked into the store, the entry names it, `a` and `b`
/// are where they were. The rollback of the crashed run finds the rename never happened and
/// drops the link: `b` is left with one link, as the run found it (found by
/// `recover_after_guard_is_killed_at_random_moments_restores_the_workspace`, 1 start in 40).
#[test]
fn a_rename_the_log_names_but_the_kernel_never_did_leaves_no_link_in_the_store() {
    use std::os::unix::fs::MetadataExt as _;
    let e = env();
    varied_tree(&e.ws);
    let (from, to) = (e.ws.join("src/moved.md"), e.ws.join("src/main.rs"));
    fs::write(&from, b"# moved\n").expect("write");
    let links = || fs::symlink_metadata(&to).expect("stat").nlink();
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let start = j.checkpoint("run start", None).expect("checkpoint");
    del(&mut j, &e.ws.join("README")).expect("delete");
    let (d, n) = parent(&to);
    let src = stat_at(d.as_fd(), OsStr::new("moved.md"))
        .expect("stat")
        .expect("there");
    let dst = stat_at(d.as_fd(), &n).expect("stat").expect("there");
    let seq = j.next_seq();
    assert_eq!(
        j.keep(d.as_fd(), &n, (&dst, None), seq).expect("keep"),
        None,
        "kept as a link"
    );
    j.append(Op::Renamed {
        from: PathText::from("src/moved.md"),
        to: PathText::from("src/main.rs"),
        src: src.id(),
        replaced: Some(dst),
        boundary: None,
    })
    .expect("append");
    assert_eq!(links(), 2);
    // The crash: the rename is never made.
    drop(j);
    let mut j = Journal::open(&e.run).expect("open");
    let report = j.rollback(start, &mut |_, _| {}).expect("rollback");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(
        links(),
        1,
        "the store keeps a link to the file never replaced"
    );
    assert_eq!(digest(&e), before);
}

#[test]
fn a_checkpoint_reaches_the_log_with_the_next_change_or_the_seal() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let log = e.run.join("journal/log.jsonl");
    let lines = || fs::read_to_string(&log).expect("log").lines().count();
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let start = j.checkpoint("run start", None).expect("checkpoint");
    del(&mut j, &e.ws.join("README")).expect("delete");
    let n = lines();
    let a = j.checkpoint("command a", Some(1)).expect("checkpoint");
    let b = j.checkpoint("command b", Some(2)).expect("checkpoint");
    assert_eq!(lines(), n, "a checkpoint alone writes nothing");
    del(&mut j, &e.ws.join("secret")).expect("delete");
    assert_eq!(lines(), n + 3, "two checkpoints and the change, together");
    let c = j.checkpoint("command c", Some(3)).expect("checkpoint");
    assert_eq!(lines(), n + 3);
    j.seal().expect("seal");
    assert!(
        lines() > n + 4,
        "the seal writes the last checkpoint, then itself"
    );
    drop(j);
    let mut j = Journal::open(&e.run).expect("open");
    assert_eq!(
        j.checkpoints(),
        [
            (start, "run start".to_string(), 0),
            (a, "command a".to_string(), 1),
            (b, "command b".to_string(), 1),
            (c, "command c".to_string(), 2),
        ]
    );
    assert!(start.0 < a.0 && a.0 < b.0 && b.0 < c.0);
    // The next checkpoint of the reopened journal follows the last one.
    let d = j.checkpoint("command d", Some(4)).expect("checkpoint");
    assert_eq!(d.0, c.0 + 1);
    j.rollback(b, &mut |_, _| {}).expect("rollback to b");
    assert!(e.ws.join("secret").exists() && !e.ws.join("README").exists());
    j.rollback(start, &mut |_, _| {})
        .expect("rollback to the start");
    assert_eq!(digest(&e), before);
}

#[test]
fn errors_leave_no_entry_that_undoes_anything() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    let errno = |r: std::io::Result<()>| r.expect_err("fails").raw_os_error();
    assert_eq!(
        errno(del(&mut j, &e.ws.join("missing"))),
        Some(libc::ENOENT)
    );
    assert_eq!(errno(del(&mut j, &e.ws.join("docs"))), Some(libc::EISDIR));
    assert_eq!(errno(rmd(&mut j, &e.ws.join("src"))), Some(libc::ENOTEMPTY));
    assert_eq!(
        errno(rmd(&mut j, &e.ws.join("README"))),
        Some(libc::ENOTDIR)
    );
    let noreplace = libc::RENAME_NOREPLACE;
    let r = ren(
        &mut j,
        &e.ws.join("README"),
        &e.ws.join("secret"),
        noreplace,
    );
    assert_eq!(errno(r), Some(libc::EEXIST));
    let r = ren(&mut j, &e.ws.join("README"), &e.ws.join("docs"), 0);
    assert_eq!(errno(r), Some(libc::EISDIR));
    let r = ren(&mut j, &e.ws.join("docs"), &e.ws.join("src"), 0);
    assert_eq!(errno(r), Some(libc::ENOTEMPTY));
    let r = ren(&mut j, &e.ws.join("src"), &e.ws.join("src/nested/x"), 0);
    assert_eq!(errno(r), Some(libc::EINVAL));
    assert!(matches!(
        j.will_create(&e.ws.join("README")),
        Err(JournalError::Exists { .. })
    ));
    assert_eq!(digest(&e), before);
    // After the run, a rollback checks what it finds: the entries of calls the kernel refused
    // undo nothing, and are no conflicts.
    j.seal().expect("seal");
    let report = j
        .rollback_with(cp, &RollbackOptions::default(), &mut |_, _| {})
        .expect("rollback");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(digest(&e), before);
}

#[test]
fn entries_of_refused_calls_undo_nothing() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    // The hooks write their entries, then the kernel refuses the calls: a directory into its
    // own subdirectory, over a non-empty directory, an exchange with its own child, a file
    // from outside over an immutable file.
    let r = ren(
        &mut j,
        &e.ws.join("src"),
        &e.ws.join("src/nested/inside"),
        0,
    );
    assert_eq!(r.expect_err("refused").raw_os_error(), Some(libc::EINVAL));
    let r = ren(&mut j, &e.ws.join("docs"), &e.ws.join("src"), 0);
    assert_eq!(
        r.expect_err("refused").raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    let immutable = std::process::Command::new("chattr")
        .arg("+i")
        .arg(e.ws.join("secret"))
        .status()
        .is_ok_and(|s| s.success());
    if immutable {
        let outside = e.run.join("outside-file");
        fs::write(&outside, b"o").expect("write");
        let r = ren(&mut j, &outside, &e.ws.join("secret"), 0);
        assert_eq!(r.expect_err("refused").raw_os_error(), Some(libc::EPERM));
        let r = del(&mut j, &e.ws.join("secret"));
        assert_eq!(r.expect_err("refused").raw_os_error(), Some(libc::EPERM));
    } else {
        eprintln!("skipped the immutable file: chattr +i does not work here");
    }
    let x = libc::RENAME_EXCHANGE;
    let r = ren(
        &mut j,
        &e.ws.join("docs"),
        &e.ws.join("docs/readme-hard"),
        x,
    );
    assert_eq!(r.expect_err("refused").raw_os_error(), Some(libc::EINVAL));
    j.seal().expect("seal");
    assert_eq!(digest(&e), before);
    let report = j
        .rollback_with(cp, &RollbackOptions::default(), &mut |_, _| {})
        .expect("rollback");
    if immutable {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(e.ws.join("secret"))
            .status();
    }
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(digest(&e), before);
}

#[test]
fn the_store_keeps_objects_in_directories_of_a_bucket_each_and_reads_a_flat_one() {
    for flat in [false, true] {
        let e = env();
        varied_tree(&e.ws);
        for f in 0..150 {
            fs::write(e.ws.join(format!("f{f:03}")), format!("{f}")).expect("write");
        }
        let before = digest(&e);
        let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
        if flat {
            // As a journal written before buckets: its header has no `bucket`.
            j.header.bucket = 0;
        }
        let cp = j.checkpoint("start", None).expect("checkpoint");
        for f in 0..150 {
            del(&mut j, &e.ws.join(format!("f{f:03}"))).expect("delete");
        }
        drop(j);
        let store = e.run.join("journal/store");
        let mut names: Vec<String> = fs::read_dir(&store)
            .expect("store")
            .map(|d| d.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_by_key(|n| n.parse::<u64>().expect("a number"));
        if flat {
            assert_eq!(names.len(), 150, "{names:?}");
            let header = e.run.join("journal/journal.json");
            let mut h: serde_json::Value =
                serde_json::from_slice(&fs::read(&header).expect("header")).expect("json");
            assert_eq!(h["bucket"], 0);
            h.as_object_mut().expect("an object").remove("bucket");
            fs::write(&header, serde_json::to_vec(&h).expect("json")).expect("header");
        } else {
            // Seqs 2..=151 (after the checkpoint): buckets 0, 1 and 2 of 64 each.
            assert_eq!(names, ["0", "1", "2"]);
            for name in &names {
                let meta = fs::metadata(store.join(name)).expect("bucket");
                assert!(meta.is_dir());
                assert_eq!(meta.permissions().mode() & 0o7777, super::keep::STORE_MODE);
            }
            assert_eq!(fs::read_dir(store.join("1")).expect("bucket").count(), 64);
        }
        let mut j = Journal::open(&e.run).expect("open");
        let report = j.rollback(cp, &mut |_, _| {}).expect("rollback");
        assert_eq!(report.entries_undone, 150);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(digest(&e), before);
    }
}

#[test]
fn two_thousand_files_removed_one_by_one_come_back() {
    let e = env();
    for d in 0..40 {
        let dir = e.ws.join(format!("d{d:02}"));
        fs::create_dir(&dir).expect("mkdir");
        for f in 0..50 {
            fs::write(dir.join(format!("f{f:02}")), format!("{d}/{f}")).expect("write");
        }
    }
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    for d in 0..40 {
        let dir = e.ws.join(format!("d{d:02}"));
        for f in 0..50 {
            del(&mut j, &dir.join(format!("f{f:02}"))).expect("delete");
        }
        rmd(&mut j, &dir).expect("rmdir");
    }
    assert_eq!(fs::read_dir(&e.ws).expect("ls").count(), 0);
    let report = j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert_eq!(report.entries_undone, 2040);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(digest(&e), before);
}

#[test]
fn an_interrupted_rollback_is_reverted_then_a_new_one_completes() {
    for force_copy in [false, true] {
        for k in [1, 5, 11, 17] {
            let e = env();
            varied_tree(&e.ws);
            let before = digest(&e);
            let pol = policy(&["target/**"], 1 << 20);
            let mut j =
                Journal::create_inner(&e.run, &e.ws, &pol, false, force_copy).expect("create");
            let cp = j.checkpoint("start", None).expect("checkpoint");
            mutate_everything(&mut j, &e.ws);
            let after_run = digest(&e);
            let listing = |root: &Path| {
                let out = std::process::Command::new("sh")
                    .arg("-c")
                    .arg("find . -printf '%p %M %s %l\\n' | sort")
                    .current_dir(root)
                    .output()
                    .expect("find");
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let run_listing = listing(&e.ws);
            super::rollback::crash_point::set(k);
            let partial = j.rollback(cp, &mut |_, _| {}).expect("partial");
            super::rollback::crash_point::set(0);
            assert_eq!(partial.entries_undone, k);
            drop(j);
            let mut j = Journal::open(&e.run).expect("open");
            assert!(matches!(
                j.rollback(cp, &mut |_, _| {}),
                Err(JournalError::Interrupted { .. })
            ));
            let problems = j.revert_interrupted().expect("revert").expect("was open");
            assert!(problems.is_empty(), "k={k}: {problems:?}");
            if digest(&e) != after_run {
                let log = fs::read_to_string(e.run.join("journal/log.jsonl")).expect("log");
                eprintln!(
                    "{}",
                    log.lines().rev().take(14).collect::<Vec<_>>().join("\n")
                );
                let now = listing(&e.ws);
                for l in run_listing.lines() {
                    if !now.contains(l) {
                        eprintln!("- {l}");
                    }
                }
                for l in now.lines() {
                    if !run_listing.contains(l) {
                        eprintln!("+ {l}");
                    }
                }
            }
            assert_eq!(digest(&e), after_run, "k={k} copy={force_copy}: reverted");
            let report = j.rollback(cp, &mut |_, _| {}).expect("rollback");
            assert!(report.problems.is_empty(), "k={k}: {:?}", report.problems);
            assert_eq!(digest(&e), before, "k={k} copy={force_copy}");
        }
    }
}

#[test]
fn a_rollback_is_undone_and_redone_exactly() {
    for force_copy in [false, true] {
        let e = env();
        varied_tree(&e.ws);
        let before = digest(&e);
        let pol = policy(&["target/**"], 1 << 20);
        let mut j = Journal::create_inner(&e.run, &e.ws, &pol, false, force_copy).expect("create");
        let cp = j.checkpoint("start", None).expect("checkpoint");
        mutate_everything(&mut j, &e.ws);
        j.seal().expect("seal");
        let after_run = digest(&e);
        let opts = RollbackOptions::default();
        let r = j
            .rollback_with(cp, &opts, &mut |_, _| {})
            .expect("rollback");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(digest(&e), before);
        let r = j.undo_last(&opts, &mut |_, _| {}).expect("undo");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(
            digest(&e),
            after_run,
            "copy={force_copy}: undo of the rollback"
        );
        let mut j = Journal::open(&e.run).expect("reopen");
        let r = j.undo_last(&opts, &mut |_, _| {}).expect("undo the undo");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(digest(&e), before, "copy={force_copy}: redo");
        // The run's entries are undone again: a rollback has nothing left to do.
        let r = j.rollback_with(cp, &opts, &mut |_, _| {}).expect("again");
        assert_eq!(r.entries_undone, 0);
        assert_eq!(digest(&e), before);
        // Undo, then a new rollback of the run's entries (which name the inodes as the run
        // saw them; in copy mode they came back from the store as copies since).
        j.undo_last(&opts, &mut |_, _| {}).expect("undo");
        assert_eq!(digest(&e), after_run);
        let r = j
            .rollback_with(cp, &opts, &mut |_, _| {})
            .expect("a new rollback");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(
            digest(&e),
            before,
            "copy={force_copy}: rollback after an undo"
        );
    }
}

#[test]
fn a_conflict_refuses_the_whole_rollback_and_force_keeps_what_it_replaces() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    mutate_everything(&mut j, &e.ws);
    j.seal().expect("seal");
    fs::write(e.ws.join("new.txt"), b"the user's later work").expect("edit");
    let edited = digest(&e);
    let opts = RollbackOptions::default();
    match j.rollback_with(cp, &opts, &mut |_, _| {}) {
        Err(JournalError::Conflicts { conflicts }) => {
            let paths: Vec<_> = conflicts.iter().map(|c| c.path.clone()).collect();
            assert_eq!(paths, [PathBuf::from("new.txt")], "{conflicts:?}");
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    assert_eq!(digest(&e), edited, "a refused rollback changes nothing");
    let dry = RollbackOptions {
        dry_run: true,
        ..RollbackOptions::default()
    };
    let plan = j.rollback_with(cp, &dry, &mut |_, _| {}).expect("dry run");
    assert_eq!(plan.conflicts.len(), 1);
    assert!(plan.planned.iter().any(|p| p.what == "restore"));
    assert_eq!(digest(&e), edited, "a dry run changes nothing");
    let force = RollbackOptions {
        force: true,
        ..RollbackOptions::default()
    };
    let r = j.rollback_with(cp, &force, &mut |_, _| {}).expect("forced");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.replaced.len(), 1, "{:?}", r.replaced);
    assert_eq!(digest(&e), before);
    j.undo_last(&opts, &mut |_, _| {}).expect("undo");
    assert_eq!(digest(&e), edited, "the user's work is back");
}

#[test]
fn rollback_to_a_later_checkpoint_keeps_earlier_work() {
    let e = env();
    varied_tree(&e.ws);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let first = j.checkpoint("start", None).expect("checkpoint");
    write(&mut j, &e.ws.join("README"), b"one");
    let second = j.checkpoint("cmd 2", Some(7)).expect("checkpoint");
    let mid = digest(&e);
    // A new checkpoint saves the same inode again.
    assert_eq!(write(&mut j, &e.ws.join("README"), b"two"), Saved::Saved);
    del(&mut j, &e.ws.join("secret")).expect("delete");
    let r = j.rollback(second, &mut |_, _| {}).expect("rollback");
    assert_eq!(r.entries_undone, 2);
    assert_eq!(digest(&e), mid);
    assert_eq!(fs::read(e.ws.join("README")).expect("read"), b"one");
    let cps = j.checkpoints();
    assert_eq!(cps.len(), 2);
    assert_eq!(
        (cps[1].0, cps[1].1.as_str(), cps[1].2),
        (second, "cmd 2", 1)
    );
    // The run goes on, then everything is rolled back.
    create(&mut j, &e.ws.join("later"), b"x");
    let r = j.rollback(first, &mut |_, _| {}).expect("rollback");
    assert_eq!(r.entries_undone, 2);
    assert_eq!(fs::read(e.ws.join("README")).expect("read"), b"hello\n");
    assert!(!e.ws.join("later").exists());
}

#[test]
fn open_tolerates_a_torn_last_line() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), true).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    create(&mut j, &e.ws.join("n"), b"n");
    drop(j);
    let log = e.run.join("journal/log.jsonl");
    let mut text = fs::read(&log).expect("read");
    text.extend_from_slice(br#"{"seq":3,"op":"created","pa"#);
    fs::write(&log, text).expect("write");
    let mut j = Journal::open(&e.run).expect("open");
    create(&mut j, &e.ws.join("m"), b"m");
    drop(j);
    let mut j = Journal::open(&e.run).expect("open again");
    let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert_eq!(r.entries_undone, 2);
    assert_eq!(digest(&e), before);
}

#[test]
fn a_file_above_the_cap_is_unprotected_and_reported() {
    let e = env();
    varied_tree(&e.ws);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1000), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    let big = e.ws.join("src/nested/deep/data.bin");
    assert_eq!(
        write(&mut j, &big, b"x"),
        Saved::Unprotected { size: 70_000 }
    );
    let (d, n) = parent(&big);
    let again = j
        .will_write(d.as_fd(), &n, &big, Looked::Not)
        .expect("will_write");
    assert_eq!(again, Saved::Unprotected { size: 70_000 });
    let log = fs::read_to_string(j.log_path()).expect("read log");
    assert_eq!(log.matches(r#""op":"unprotected""#).count(), 1, "{log}");
    let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains("without a pre-image"),
        "{:?}",
        r.problems
    );
}

#[test]
fn diff_lists_added_modified_deleted_and_metadata() {
    let e = env();
    varied_tree(&e.ws);
    let mut j =
        Journal::create(&e.run, &e.ws, &policy(&["target/**"], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    create(&mut j, &e.ws.join("added"), b"a");
    create(&mut j, &e.ws.join("temp"), b"t");
    del(&mut j, &e.ws.join("temp")).expect("delete");
    write(&mut j, &e.ws.join("README"), b"m");
    del(&mut j, &e.ws.join("secret")).expect("delete");
    meta(&mut j, &e.ws.join("run.sh"), 0o700);
    let d = j.diff(cp).expect("diff");
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&d.added), ["added"]);
    assert_eq!(paths(&d.modified), ["README"]);
    assert_eq!(paths(&d.deleted), ["secret"]);
    assert_eq!(paths(&d.metadata), ["run.sh"]);
    assert_eq!(d.excluded, ["target/**"]);
}

/// The diff looks each path up from its own directory, not through a symlink: a journaled
/// directory replaced by a symlink (to a directory holding the same names) leaves its
/// journaled entries gone, as the seal sees them, and the files of many directories are
/// each found where they are.
#[test]
fn diff_looks_paths_up_where_the_journal_names_them() {
    let e = env();
    for d in ["a", "b", "c"] {
        fs::create_dir_all(e.ws.join(d)).expect("mkdir");
        for f in ["x", "y"] {
            fs::write(e.ws.join(d).join(f), b"old").expect("write");
        }
    }
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    for d in ["a", "b", "c"] {
        write(&mut j, &e.ws.join(d).join("x"), b"new");
        create(&mut j, &e.ws.join(d).join("z"), b"z");
    }
    del(&mut j, &e.ws.join("c/y")).expect("delete");
    // Outside the journal's view: b becomes a symlink to a directory with the same names.
    fs::rename(e.ws.join("b"), e.ws.join("b.real")).expect("rename");
    std::os::unix::fs::symlink("b.real", e.ws.join("b")).expect("symlink");
    let d = j.diff(cp).expect("diff");
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&d.added), ["a/z", "c/z"]);
    assert_eq!(paths(&d.modified), ["a/x", "c/x"]);
    assert_eq!(paths(&d.deleted), ["b/x", "c/y"]);
}

#[test]
fn conflicts_show_work_done_after_the_run() {
    let e = env();
    varied_tree(&e.ws);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    j.checkpoint("start", None).expect("checkpoint");
    create(&mut j, &e.ws.join("a"), b"a");
    create(&mut j, &e.ws.join("b"), b"b");
    write(&mut j, &e.ws.join("README"), b"m");
    j.seal().expect("seal");
    assert!(j.conflicts().expect("conflicts").is_empty());
    fs::write(e.ws.join("a"), b"edited later").expect("write");
    fs::remove_file(e.ws.join("b")).expect("rm");
    let j = Journal::open(&e.run).expect("open");
    let c = j.conflicts().expect("conflicts");
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.path.display().to_string(), c.what.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("a".to_string(), "changed since the run left it"),
            ("b".to_string(), "deleted since the run left it")
        ]
    );
}

fn fake_run(state: &Path, id: &str, ws: &Path, run_state: &str, pid: u32) -> RunDir {
    let path = state.join("runs").join(id);
    fs::create_dir_all(&path).expect("mkdir run");
    let run = RunDir {
        id: id.to_string(),
        path,
    };
    run.write_meta(&RunMeta {
        v: 1,
        id: id.to_string(),
        workspace: ws.to_path_buf(),
        command: vec!["true".into()],
        profile: "agent".into(),
        started: "2026-01-01T00:00:00Z".into(),
        guard_pid: pid,
        state: run_state.to_string(),
        status: None,
        tmp: None,
    })
    .expect("meta");
    run
}

fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

#[test]
fn recover_rolls_back_an_interrupted_run_only() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let state = e.run.join("state");
    let crashed = fake_run(
        &state,
        "20260101T000000Z-0001",
        &e.ws,
        "running",
        dead_pid(),
    );
    let live = fake_run(
        &state,
        "20260101T000001Z-0002",
        &e.ws,
        "ended",
        std::process::id(),
    );
    for run in [&crashed, &live] {
        let mut j =
            Journal::create(&run.path, &e.ws, &policy(&[], 1 << 20), false).expect("create");
        j.checkpoint("start", None).expect("checkpoint");
        if run.id == crashed.id {
            create(&mut j, &e.ws.join("half-done"), b"x");
            del(&mut j, &e.ws.join("README")).expect("delete");
        }
    }
    let other_ws = e.run.join("elsewhere");
    assert!(recover(&state, Some(&other_ws))
        .expect("recover")
        .is_empty());
    let done = recover(&state, Some(&e.ws)).expect("recover");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].run, crashed.id);
    assert_eq!(done[0].entries_undone, 2);
    assert!(done[0].problems.is_empty(), "{:?}", done[0].problems);
    assert_eq!(digest(&e), before);
    assert_eq!(crashed.read_meta().expect("meta").state, "recovered");
    assert!(recover(&state, None).expect("recover again").is_empty());
}

#[test]
fn prune_keeps_the_newest_and_never_a_running_run() {
    let e = env();
    let state = e.run.join("state");
    let pol = policy(&[], 1 << 20);
    let mut runs = Vec::new();
    for (i, st) in ["ended", "running", "ended", "ended", "ended"]
        .iter()
        .enumerate()
    {
        let run = fake_run(&state, &format!("2026010{i}T000000Z-0001"), &e.ws, st, 1);
        let mut j = Journal::create(&run.path, &e.ws, &pol, false).expect("create");
        j.checkpoint("start", None).expect("checkpoint");
        create(&mut j, &e.ws.join(format!("f{i}")), b"x");
        del(&mut j, &e.ws.join(format!("f{i}"))).expect("delete");
        fs::write(run.audit_log(), b"{}\n").expect("audit");
        runs.push(run);
    }
    let report = prune(&state, 2).expect("prune");
    let ids = |v: &[usize]| v.iter().map(|i| runs[*i].id.clone()).collect::<Vec<_>>();
    assert_eq!(report.kept, ids(&[4, 3, 1]));
    assert_eq!(report.removed, ids(&[2, 0]));
    assert!(!runs[0].path.join("journal").exists());
    assert!(runs[0].audit_log().exists());
    assert!(runs[1].path.join("journal").exists());
}

#[test]
fn covers_respects_the_workspace_and_exclude() {
    let e = env();
    let j = Journal::create(
        &e.run,
        &e.ws,
        &policy(&["target/**", "**/node_modules"], 1),
        false,
    )
    .expect("create");
    assert!(j.covers(&e.ws.join("src/a.rs")));
    assert!(!j.covers(&e.ws));
    assert!(!j.covers(Path::new("/etc/passwd")));
    assert!(!j.covers(&e.ws.join("target")));
    assert!(!j.covers(&e.ws.join("target/debug/x")));
    assert!(!j.covers(&e.ws.join("web/node_modules/pkg/index.js")));
    assert!(j.covers(&e.ws.join("targets")));
}

/// The digest of the whole workspace, excluded paths included.
fn full_digest(e: &Env) -> String {
    tree_digest(&e.ws, &[]).expect("digest")
}

#[test]
fn directories_renamed_across_the_excluded_boundary_come_back_exactly() {
    for force_copy in [false, true] {
        let e = env();
        varied_tree(&e.ws);
        fs::write(e.ws.join("target/debug/big"), vec![1u8; 10_000]).expect("write");
        let before = full_digest(&e);
        let pol = policy(&["target/**"], 1 << 20);
        let mut j = Journal::create_inner(&e.run, &e.ws, &pol, false, force_copy).expect("create");
        let cp = j.checkpoint("start", None).expect("checkpoint");
        let ws = &e.ws;
        // Out of the journal's view: a directory that existed before, then work inside it.
        ren(&mut j, &ws.join("src"), &ws.join("target/src"), 0).expect("into excluded");
        assert!(j.covers(&ws.join("target/src/main.rs")), "adopted");
        assert!(!j.covers(&ws.join("target/debug/out")));
        del(&mut j, &ws.join("target/src/main.rs")).expect("delete in adopted");
        write(
            &mut j,
            &ws.join("target/src/nested/deep/data.bin"),
            b"rewritten",
        );
        // Into the journal's view, then the excluded side is rebuilt (unjournaled).
        ren(&mut j, &ws.join("target/debug"), &ws.join("debug.old"), 0).expect("out of excluded");
        fs::create_dir_all(ws.join("target/debug")).expect("rebuild");
        fs::write(ws.join("target/debug/new-artifact"), b"new").expect("write");
        del(&mut j, &ws.join("debug.old/out")).expect("delete in the moved dir");
        assert_ne!(full_digest(&e), before);
        let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(full_digest(&e), before, "copy mode: {force_copy}");
        // What stood in the way on the excluded side is kept, and comes back with an undo.
        assert!(
            r.replaced
                .iter()
                .any(|c| c.path == Path::new("target/debug")),
            "{:?}",
            r.replaced
        );
        j.seal().expect("seal");
        j.undo_last(&RollbackOptions::default(), &mut |_, _| {})
            .expect("undo");
        assert_eq!(
            fs::read(ws.join("target/debug/new-artifact")).expect("kept"),
            b"new"
        );
    }
}

#[test]
fn a_fresh_directory_renamed_to_an_excluded_path_is_left_there() {
    let e = env();
    varied_tree(&e.ws);
    fs::remove_dir_all(e.ws.join("target")).expect("no target yet");
    let before = digest(&e);
    let pol = policy(&["target/**"], 1 << 20);
    let mut j = Journal::create(&e.run, &e.ws, &pol, false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    // cargo: a temporary directory in the workspace, renamed to `target`.
    let tmp = e.ws.join(".tmpAbC123");
    j.will_create(&tmp).expect("will_create");
    fs::create_dir(&tmp).expect("mkdir");
    create(
        &mut j,
        &tmp.join("CACHEDIR.TAG"),
        b"Signature: 8a477f597d28d172789f06886806bc55",
    );
    ren(&mut j, &tmp, &e.ws.join("target"), 0).expect("rename to target");
    assert!(!j.covers(&e.ws.join("target/debug")), "not adopted");
    fs::create_dir_all(e.ws.join("target/debug")).expect("build output");
    fs::write(e.ws.join("target/debug/app"), b"binary").expect("write");
    let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(digest(&e), before);
    assert!(!tmp.exists());
    assert!(
        e.ws.join("target/debug/app").exists(),
        "excluded output left"
    );
}

#[test]
fn renames_out_of_and_into_the_workspace_and_exchanges_come_back() {
    for force_copy in [false, true] {
        let e = env();
        varied_tree(&e.ws);
        let outside = e.run.join("private-tmp");
        fs::create_dir_all(outside.join("incoming")).expect("mkdir");
        fs::write(outside.join("incoming/f"), b"from outside").expect("write");
        fs::write(outside.join("file"), b"outside file").expect("write");
        fs::write(outside.join("other"), b"another outside file").expect("write");
        let before = full_digest(&e);
        let pol = policy(&["target/**"], 1 << 20);
        let mut j = Journal::create_inner(&e.run, &e.ws, &pol, false, force_copy).expect("create");
        let cp = j.checkpoint("start", None).expect("checkpoint");
        let ws = &e.ws;
        // A directory crossing the workspace's own edge is refused as across filesystems.
        let r = ren(&mut j, &ws.join("src"), &outside.join("src"), 0);
        assert_eq!(r.expect_err("EXDEV").raw_os_error(), Some(libc::EXDEV));
        let r = ren(&mut j, &outside.join("incoming"), &ws.join("incoming"), 0);
        assert_eq!(r.expect_err("EXDEV").raw_os_error(), Some(libc::EXDEV));
        // Files cross it.
        ren(&mut j, &ws.join("secret"), &outside.join("secret"), 0).expect("file out");
        fs::write(outside.join("secret"), b"changed outside").expect("write");
        ren(&mut j, &outside.join("file"), &ws.join("README"), 0).expect("over a file");
        ren(&mut j, &outside.join("other"), &ws.join("brand-new"), 0).expect("file in");
        let x = libc::RENAME_EXCHANGE;
        ren(&mut j, &ws.join("run.sh"), &outside.join("incoming/f"), x).expect("swap out");
        ren(&mut j, &ws.join("docs"), &ws.join("target/debug"), x).expect("swap excluded");
        assert_ne!(full_digest(&e), before);
        let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(full_digest(&e), before, "copy mode: {force_copy}");
    }
}

/// A file guard made since the checkpoint: deleted without a copy, whatever was written to it,
/// and a rollback still restores the tree exactly, through a crash in between (the entry
/// written, the unlink not done) and after a rename (which makes it an ordinary kept file).
#[test]
fn files_made_since_the_checkpoint_are_dropped_and_still_roll_back() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    let made = |j: &mut Journal, abs: &Path| {
        create(j, abs, b"made");
        let f = File::open(abs).expect("open");
        j.made_file(abs, f.as_fd());
    };
    let (a, b, c, d) = (
        e.ws.join("a"),
        e.ws.join("b"),
        e.ws.join("src/c"),
        e.ws.join("src/d"),
    );
    made(&mut j, &a);
    assert_eq!(write(&mut j, &a, b"rewritten"), Saved::AlreadySaved);
    meta(&mut j, &a, 0o600);
    // A second name: its own `created` entry; the inode stays made until its last name goes.
    j.will_create(&b).expect("will_create");
    fs::hard_link(&a, &b).expect("link");
    del(&mut j, &a).expect("delete");
    del(&mut j, &b).expect("delete");
    // Renamed since it was made: kept like any other file.
    made(&mut j, &c);
    ren(&mut j, &c, &d, 0).expect("rename");
    del(&mut j, &d).expect("delete");
    // The entry is written, then a crash before the unlink: the file is still there.
    made(&mut j, &e.ws.join("crash"));
    let ops: Vec<&str> = j
        .entries
        .iter()
        .map(|x| match &x.op {
            Op::Created { .. } => "created",
            Op::Dropped { .. } => "dropped",
            Op::Deleted { .. } => "deleted",
            Op::Renamed { .. } => "renamed",
            Op::Checkpoint { .. } => "checkpoint",
            _ => "other",
        })
        .collect();
    assert_eq!(
        ops,
        [
            "checkpoint",
            "created",
            "created",
            "dropped",
            "dropped",
            "created",
            "renamed",
            "deleted",
            "created"
        ]
    );
    j.append(Op::Dropped {
        path: PathText::from("crash"),
        st: stat_at(j.ws(), OsStr::new("crash"))
            .expect("stat")
            .expect("there"),
    })
    .expect("append");
    drop(j);
    let mut j = Journal::open(&e.run).expect("open");
    j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert_eq!(digest(&e), before);
    // The reopened journal knows no made file: it keeps what it deletes.
    j.checkpoint("again", None).expect("checkpoint");
    assert!(j.made.is_empty());
}

/// The supervisor passes the stat its walk took, before the journal's lock, to a deletion.
/// Another judged call may rename a file the run did not make over the name in between: the
/// stat then still names a made file, but what is deleted must be kept, and a rollback must
/// bring it back. (The walk's stat is trusted only for a file the run did not make.)
#[test]
fn a_stale_stat_of_a_made_file_does_not_drop_the_file_that_replaced_it() {
    let e = env();
    varied_tree(&e.ws);
    let before = digest(&e);
    let mut j = Journal::create(&e.run, &e.ws, &policy(&[], 1 << 20), false).expect("create");
    let cp = j.checkpoint("start", None).expect("checkpoint");
    let made = e.ws.join("made");
    create(&mut j, &made, b"made by the run");
    let f = File::open(&made).expect("open");
    j.made_file(&made, f.as_fd());
    drop(f);
    let (dir, name) = parent(&made);
    let stale = nix::sys::stat::fstatat(
        Some(std::os::fd::AsRawFd::as_raw_fd(&dir)),
        name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .expect("stat");
    // The rename another call made meanwhile (journaled, as it would be).
    ren(&mut j, &e.ws.join("src/main.rs"), &made, 0).expect("rename over");
    j.delete_seen_file(dir.as_fd(), &name, &made, Looked::Seen(&stale))
        .expect("delete");
    assert!(!made.exists());
    let r = j.rollback(cp, &mut |_, _| {}).expect("rollback");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(digest(&e), before, "src/main.rs is back, byte for byte");
}

/// A prune reads the index of journals, not every run directory: the first one on a state
/// directory without an index makes it (from the runs no older than an older guard's prune
/// mark), runs that end are listed as they end, and a journal not in the index is not looked
/// at.
#[test]
fn prune_reads_the_index_of_journals_not_every_run() {
    let e = env();
    let state = e.run.join("state");
    let pol = policy(&[], 1 << 20);
    let run_with_journal = |i: usize, st: &str| {
        let run = fake_run(&state, &format!("2026020{i}T000000Z-0001"), &e.ws, st, 1);
        let mut j = Journal::create(&run.path, &e.ws, &pol, false).expect("create");
        j.checkpoint("start", None).expect("checkpoint");
        // A journal reaches the disk with the run's first change; its store brings it there
        // just the same.
        j.store().expect("store");
        run
    };
    let indexed = |state: &Path| {
        let mut ids: Vec<String> = fs::read_dir(state.join("journals"))
            .expect("index")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        ids.sort();
        ids
    };
    // A state directory from an older guard: a prune mark, a journal older than it (which
    // the old prune would not have left), and no index.
    let old = run_with_journal(0, "ended");
    let runs: Vec<_> = (1..5).map(|i| run_with_journal(i, "ended")).collect();
    fs::write(state.join("prune-mark"), format!("{}\n", runs[0].id)).expect("mark");
    let report = prune(&state, 2).expect("prune");
    assert_eq!(report.kept, [runs[3].id.clone(), runs[2].id.clone()]);
    assert_eq!(report.removed, [runs[1].id.clone(), runs[0].id.clone()]);
    assert_eq!(indexed(&state), [runs[2].id.clone(), runs[3].id.clone()]);
    assert!(
        !state.join("prune-mark").exists(),
        "the index replaces the mark"
    );
    assert!(
        old.path.join("journal").exists(),
        "older than the mark: not looked at"
    );
    // Runs that end are indexed as they end; a running one is never pruned, and counts among
    // the newest.
    let running = run_with_journal(5, "running");
    running.mark_active(&state).expect("active");
    let newer: Vec<_> = (6..8).map(|i| run_with_journal(i, "ended")).collect();
    newer.iter().for_each(|r| r.mark_inactive(&state));
    let report = prune(&state, 2).expect("prune again");
    assert_eq!(
        report.kept,
        [newer[1].id.clone(), newer[0].id.clone(), running.id.clone()]
    );
    assert_eq!(report.removed, [runs[3].id.clone(), runs[2].id.clone()]);
    assert_eq!(indexed(&state), [newer[0].id.clone(), newer[1].id.clone()]);
    // A journal removed by hand leaves the index at the next prune.
    fs::remove_dir_all(newer[0].path.join("journal")).expect("rm journal");
    let report = prune(&state, 2).expect("prune after a removal");
    assert_eq!(report.kept, [newer[1].id.clone(), running.id.clone()]);
    assert_eq!(indexed(&state), [newer[1].id.clone()]);
    // Without an index or a mark, every run is looked at.
    fs::remove_dir_all(state.join("journals")).expect("rm index");
    let report = prune(&state, 2).expect("prune without an index");
    assert_eq!(report.removed, std::slice::from_ref(&old.id));
}
