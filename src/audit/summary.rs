//! The run summary (`--summary FILE`, `summary.json` in the run dir): the machine-readable truth
//! for CI, one pretty-printed JSON object, version 1. Promises: [`Summary::write`] replaces the
//! file atomically (a reader sees the old summary or the new one, never a mix), and the denied list
//! is bounded by [`MAX_DENIED`].

use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::event::{Counts, Decision, Outcome};
use super::text::PathText;
use super::time::Timestamp;
use super::AuditError;

/// How many denied calls a summary lists.
pub const MAX_DENIED: usize = 50;
/// Longest `target` text in a [`DeniedEntry`], in characters.
const MAX_TARGET_CHARS: usize = 256;

/// Fields are snake_case. `files_changed` is null until the journal provides it;
/// `digest_before` and `digest_after` are the workspace's digests of a run with `--verify`
/// (at its start, after a rollback during it), null otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Always 1 for this layout.
    pub v: u32,
    /// The run id.
    pub run: String,
    /// The profile name as given.
    pub profile: String,
    /// The absolute workspace path.
    pub workspace: PathText,
    /// The argv of the confined command.
    pub command: Vec<PathText>,
    /// guard's exit status (the command's, 128+N for signal N).
    pub status: i32,
    /// How the run ended.
    pub outcome: Outcome,
    /// When the run started.
    pub started: Timestamp,
    /// When the run ended.
    pub ended: Timestamp,
    /// Wall time of the run, in milliseconds.
    pub duration_ms: u64,
    /// Every decision per verdict, suppressed ones included.
    pub counts: Counts,
    /// Audit events counted but not written.
    pub suppressed: u64,
    /// The first [`MAX_DENIED`] denied calls.
    pub denied: Vec<DeniedEntry>,
    /// Checkpoints the journal took during the run.
    pub checkpoints: u32,
    /// Rollbacks of the workspace during the run.
    pub rollbacks: u32,
    /// Files added, modified, deleted or with changed metadata in the workspace; null without a
    /// journal.
    pub files_changed: Option<u64>,
    /// The workspace tree digest (`sha256:<hex>`) before the command ran; null without a journal.
    pub digest_before: Option<String>,
    /// The workspace tree digest after the run (and after an automatic rollback); null without a
    /// journal.
    pub digest_after: Option<String>,
    /// The head of the audit log's hash chain (the link to its `run-end` line), so that
    /// `guard log --verify` also catches lines cut from the end. Absent in older summaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_chain_head: Option<String>,
}

/// One denied call: `syscall`, `op`, `target` (the path, `path -> path2`, the address, or the
/// argv joined by spaces; escaped for display and cut at 256 characters with `...`) and `rule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeniedEntry {
    /// The system call name.
    pub syscall: String,
    /// The judged operation (`delete`, `write`, `connect`, ...).
    pub op: String,
    /// What the call was about, for reading (see above).
    pub target: String,
    /// The rule that refused the call.
    pub rule: String,
}

impl DeniedEntry {
    /// The entry for a denied decision, its target escaped and cut as described above.
    pub fn from_decision(d: &Decision) -> DeniedEntry {
        let target = match (&d.path, &d.path2, &d.addr, &d.argv) {
            (Some(p), Some(p2), _, _) => format!("{} -> {}", p.display(), p2.display()),
            (_, _, Some(addr), _) => crate::audit::text::escape_for_terminal(addr.as_bytes()),
            (_, _, _, Some(argv)) if !argv.is_empty() => argv
                .iter()
                .map(PathText::display)
                .collect::<Vec<_>>()
                .join(" "),
            (Some(p), _, _, _) => p.display(),
            _ => String::new(),
        };
        DeniedEntry {
            syscall: d.syscall.clone(),
            op: d.op.clone(),
            target: truncate(target, MAX_TARGET_CHARS),
            rule: d.rule.clone(),
        }
    }
}

fn truncate(mut s: String, max_chars: usize) -> String {
    if let Some((cut, _)) = s.char_indices().nth(max_chars) {
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

impl Summary {
    /// Writes the summary as pretty JSON to a temporary file next to `path`, syncs it, and
    /// renames it over `path`.
    ///
    /// # Errors
    ///
    /// [`AuditError::Summary`] when the file cannot be written or renamed (the temporary file is
    /// removed; `path` is untouched).
    pub fn write(&self, path: &Path) -> Result<(), AuditError> {
        let err = |source| AuditError::Summary {
            path: path.to_owned(),
            source,
        };
        let mut json = serde_json::to_vec_pretty(self).map_err(|e| err(e.into()))?;
        json.push(b'\n');
        let tmp = temp_path(path);
        // Atomic against a crash of guard (rename); no fsync: power-loss safety is the
        // journal's business, and an fsync costs milliseconds per run.
        let written = File::create(&tmp).and_then(|mut f| f.write_all(&json));
        if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
            let _ = fs::remove_file(&tmp);
            return Err(err(e));
        }
        Ok(())
    }

    /// Makes the temporary file [`Summary::write`] writes `path`'s summary to, empty, ahead of
    /// time: the write then finds it made (a file made on ext4 is an inode and a directory
    /// entry to allocate, some 15 µs, at a run's end).
    pub fn prepare(path: &Path) {
        let _ = File::create(temp_path(path));
    }

    /// Removes the temporary files [`Summary::prepare`] made beside `path` for a guard that
    /// was killed before its end wrote them (named after that guard's pid, so any pid's).
    pub fn remove_leftovers(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let Some(dir) = path.parent() else {
            return;
        };
        let prefix = temp_prefix(path);
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name().as_bytes().starts_with(prefix.as_bytes()) {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Reads a summary written by [`Summary::write`].
    ///
    /// # Errors
    ///
    /// [`AuditError::Summary`] when the file cannot be read or is not a summary.
    pub fn read(path: &Path) -> Result<Summary, AuditError> {
        let err = |source| AuditError::Summary {
            path: path.to_owned(),
            source,
        };
        let text = fs::read(path).map_err(err)?;
        serde_json::from_slice(&text).map_err(|e| err(e.into()))
    }
}

/// `dir/.name.tmp.<pid>`: same directory (so the rename is atomic), hidden, unique per process.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = temp_prefix(path);
    name.push(std::process::id().to_string());
    path.with_file_name(name)
}

/// `.name.tmp.`, what [`temp_path`] names every process's temporary file of `path` with.
fn temp_prefix(path: &Path) -> std::ffi::OsString {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or("summary".as_ref()));
    name.push(".tmp.");
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::event::{tests::decision, Verdict};

    fn summary() -> Summary {
        Summary {
            v: 1,
            run: "r1".into(),
            profile: "default".into(),
            workspace: PathText::from(b"/ws/\xff".to_vec()),
            command: vec!["make".into(), "test".into()],
            status: 2,
            outcome: Outcome::Exited,
            started: Timestamp::from_unix_micros(1),
            ended: Timestamp::from_unix_micros(2_000_001),
            duration_ms: 2000,
            counts: Counts {
                allow: 5,
                deny: 1,
                risky: 0,
                kill: 0,
                error: 0,
            },
            suppressed: 0,
            denied: vec![DeniedEntry::from_decision(&decision(1, Verdict::Deny))],
            checkpoints: 1,
            rollbacks: 0,
            files_changed: None,
            digest_before: None,
            digest_after: Some("sha256:00".into()),
            audit_chain_head: Some(crate::audit::chain::ANCHOR.into()),
        }
    }

    #[test]
    fn write_replaces_atomically_and_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("summary.json");
        fs::write(&path, "old").expect("seed");
        summary().write(&path).expect("write");
        assert_eq!(Summary::read(&path).expect("read"), summary());
        let names: Vec<_> = fs::read_dir(dir.path()).expect("ls").collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
        let text = fs::read_to_string(&path).expect("text");
        assert!(text.contains("\n  \"files_changed\": null"), "{text}");
    }

    #[test]
    fn write_names_the_path_on_failure() {
        let path = Path::new("/nonexistent-guard-dir/summary.json");
        let err = summary().write(path).expect_err("no such dir");
        assert!(err
            .to_string()
            .contains("/nonexistent-guard-dir/summary.json"));
    }

    #[test]
    fn denied_entry_targets() {
        let mut d = decision(1, Verdict::Deny);
        assert_eq!(DeniedEntry::from_decision(&d).target, "/ws/x");
        d.path2 = Some("/ws/y".into());
        assert_eq!(DeniedEntry::from_decision(&d).target, "/ws/x -> /ws/y");
        d.path = None;
        d.path2 = None;
        d.argv = Some(vec!["curl".into(), "x\u{1b}".into()]);
        assert_eq!(DeniedEntry::from_decision(&d).target, "curl x\\u{1b}");
        d.argv = Some(vec!["é".repeat(300).into()]);
        let target = DeniedEntry::from_decision(&d).target;
        assert_eq!(target.chars().count(), MAX_TARGET_CHARS + 3);
    }
}
