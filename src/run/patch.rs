//! The content of `guard diff --stat` and `--patch`: each changed file of a run compared with
//! its pre-image in the journal ([`History::patch`]), as a unified diff for text files (the
//! lines are compared with Myers' O(ND) algorithm; three lines of context, as git and diff -u
//! show) and by name for binary ones. A file is binary when its first 8000 bytes hold a NUL
//! byte (git's test) or it is not UTF-8.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::history::{History, HistoryError, RunRecord};
use crate::journal::PreImage;

/// What [`Content::Other`] says of a directory.
const DIRECTORY: &str = "a directory";

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// One side of a file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// No file there (created by the run, or deleted by it).
    Absent,
    /// Text, whole.
    Text(String),
    /// Content that is not text, with its size in bytes.
    Binary(u64),
    /// Not a regular file (a directory, a symlink, a device).
    Other(&'static str),
    /// Not known: the journal kept no copy, or it cannot be read (why).
    Unknown(String),
}

/// One changed file: before (its pre-image) and after (the workspace now).
#[derive(Debug, Clone)]
pub struct FilePatch {
    /// Relative to the workspace.
    pub path: PathBuf,
    /// Before the run: its pre-image.
    pub old: Content,
    /// Now, in the workspace.
    pub new: Content,
}

impl FilePatch {
    /// Lines added and removed, when both sides are text or absent.
    pub fn counts(&self) -> Option<(usize, usize)> {
        let (a, b) = (lines_of(&self.old)?, lines_of(&self.new)?);
        let mut added = 0;
        let mut removed = 0;
        for op in edit_script(&a, &b) {
            match op {
                Edit::Insert(_) => added += 1,
                Edit::Delete(_) => removed += 1,
                Edit::Keep(..) => {}
            }
        }
        Some((added, removed))
    }

    /// The unified diff (`--- a/PATH`, `+++ b/PATH`, hunks), or one line saying why there is
    /// none (`Binary files a/x and b/x differ`, as git says it).
    pub fn unified(&self) -> String {
        let name = self.path.to_string_lossy();
        let (a_name, b_name) = (
            side_name("a", &name, &self.old),
            side_name("b", &name, &self.new),
        );
        let (Some(a), Some(b)) = (lines_of(&self.old), lines_of(&self.new)) else {
            return match (&self.old, &self.new) {
                (Content::Unknown(why), _) | (_, Content::Unknown(why)) => {
                    format!("{name}: content not shown: {why}\n")
                }
                (Content::Other(kind), _) | (_, Content::Other(kind)) => {
                    format!("{name}: {kind}, not shown\n")
                }
                _ => format!("Binary files {a_name} and {b_name} differ\n"),
            };
        };
        let script = edit_script(&a, &b);
        if !script.iter().any(|e| !matches!(e, Edit::Keep(..))) {
            return String::new();
        }
        let mut out = format!("--- {a_name}\n+++ {b_name}\n");
        for (start, hunk) in hunks(&script) {
            let old_len = hunk
                .iter()
                .filter(|e| !matches!(e, Edit::Insert(_)))
                .count();
            let new_len = hunk
                .iter()
                .filter(|e| !matches!(e, Edit::Delete(_)))
                .count();
            // As diff -u writes ranges: an empty side names the line before it.
            let range = |start: usize, len: usize| match len {
                0 => format!("{start},0"),
                1 => format!("{}", start + 1),
                _ => format!("{},{len}", start + 1),
            };
            let _ = writeln!(
                out,
                "@@ -{} +{} @@",
                range(start.0, old_len),
                range(start.1, new_len)
            );
            for e in hunk {
                let (mark, line) = match *e {
                    Edit::Keep(i, _) => (' ', a[i]),
                    Edit::Delete(i) => ('-', a[i]),
                    Edit::Insert(j) => ('+', b[j]),
                };
                out.push(mark);
                out.push_str(line.strip_suffix('\n').unwrap_or(line));
                out.push('\n');
                if !line.ends_with('\n') {
                    out.push_str("\\ No newline at end of file\n");
                }
            }
        }
        out
    }
}

fn side_name(side: &str, name: &str, c: &Content) -> String {
    match c {
        Content::Absent => "/dev/null".to_string(),
        _ => format!("{side}/{name}"),
    }
}

/// The lines of a side (each with its newline), when it is text or absent.
fn lines_of(c: &Content) -> Option<Vec<&str>> {
    match c {
        Content::Absent => Some(Vec::new()),
        Content::Text(t) => Some(t.split_inclusive('\n').collect()),
        _ => None,
    }
}

/// One step of an edit script: keep old line `i` (new line `j`), delete old line `i`, insert
/// new line `j`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Keep(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// The shortest edit script from `a` to `b` (Myers 1986, the greedy forward algorithm with
/// the trace kept for the walk back).
fn edit_script(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    let offset = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'outer: for d in 0..=max as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let idx = (k + offset) as usize;
            let mut x = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) {
                v[idx + 1]
            } else {
                v[idx - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx] = x;
            if x >= n && y >= m {
                trace.push(v.clone());
                break 'outer;
            }
            k += 2;
        }
    }
    // Walk back through the trace from (n, m).
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..trace.len() as isize - 1).rev() {
        let v = &trace[d as usize];
        let k = x - y;
        let idx = (k + offset) as usize;
        let prev_k = if k == -d || (k != d && v[idx - 1] < v[idx + 1]) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = v[(prev_k + offset) as usize];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            edits.push(Edit::Keep(x as usize, y as usize));
        }
        if x == prev_x {
            y -= 1;
            edits.push(Edit::Insert(y as usize));
        } else {
            x -= 1;
            edits.push(Edit::Delete(x as usize));
        }
        x = prev_x;
        y = prev_y;
    }
    while x > 0 && y > 0 {
        x -= 1;
        y -= 1;
        edits.push(Edit::Keep(x as usize, y as usize));
    }
    edits.reverse();
    edits
}

/// The edit script cut into hunks: each change with up to [`CONTEXT`] kept lines around it,
/// changes closer than twice that sharing one hunk; each with the (old, new) line numbers,
/// 0-based, where it starts.
fn hunks(script: &[Edit]) -> Vec<((usize, usize), &[Edit])> {
    let mut at = Vec::with_capacity(script.len());
    let (mut i, mut j) = (0, 0);
    for e in script {
        at.push((i, j));
        match e {
            Edit::Keep(..) => {
                i += 1;
                j += 1;
            }
            Edit::Delete(_) => i += 1,
            Edit::Insert(_) => j += 1,
        }
    }
    let changed: Vec<usize> = script
        .iter()
        .enumerate()
        .filter(|(_, e)| !matches!(e, Edit::Keep(..)))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k + 1 < changed.len() && changed[k + 1] <= end + 2 * CONTEXT + 1 {
            k += 1;
            end = changed[k];
        }
        let end = (end + CONTEXT + 1).min(script.len());
        out.push((at[start], &script[start..end]));
        k += 1;
    }
    out
}

/// A side of the patch read from `path` (`None`: nothing there).
fn content_at(path: Option<&Path>) -> Content {
    let Some(path) = path else {
        return Content::Absent;
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Content::Absent,
        Err(e) => return Content::Unknown(format!("cannot read {}: {e}", path.display())),
    };
    let ft = meta.file_type();
    if ft.is_dir() {
        return Content::Other(DIRECTORY);
    }
    if ft.is_symlink() {
        return Content::Other("a symlink");
    }
    if !ft.is_file() {
        return Content::Other("a special file");
    }
    match std::fs::read(path) {
        Ok(bytes) => {
            let nul = bytes[..bytes.len().min(8000)].contains(&0);
            match String::from_utf8(bytes) {
                Ok(text) if !nul => Content::Text(text),
                Ok(text) => Content::Binary(text.len() as u64),
                Err(e) => Content::Binary(e.into_bytes().len() as u64),
            }
        }
        Err(e) => Content::Unknown(format!("cannot read {}: {e}", path.display())),
    }
}

impl History {
    /// Every file `run` added, modified or deleted, with its content before (from the
    /// journal) and now (from the workspace). A deleted directory is listed file by file.
    pub fn patch(&self, run: &RunRecord) -> Result<Vec<FilePatch>, HistoryError> {
        let j = match run.journal() {
            Err(HistoryError::NothingChanged { .. }) => return Ok(Vec::new()),
            j => j?,
        };
        let start = run.start(&j)?;
        let diff = j.diff(start).map_err(|e| run.journal_error(e))?;
        let ws = j.workspace().to_path_buf();
        let mut out = Vec::new();
        let mut rels: Vec<&PathBuf> = diff
            .added
            .iter()
            .chain(&diff.modified)
            .chain(&diff.deleted)
            .collect();
        rels.sort();
        for rel in rels {
            let before = j.pre_image(start, rel).map_err(|e| run.journal_error(e))?;
            let now = ws.join(rel);
            match before {
                PreImage::Stored(stored) if stored.is_dir() && !now.exists() => {
                    for (sub, file) in files_under(&stored) {
                        out.push(FilePatch {
                            path: rel.join(sub),
                            old: content_at(Some(&file)),
                            new: Content::Absent,
                        });
                    }
                }
                before => {
                    let old = match before {
                        PreImage::Unchanged => content_at(Some(&now)),
                        PreImage::Absent => Content::Absent,
                        PreImage::Stored(p) => content_at(Some(&p)),
                        PreImage::NotKept(why) => Content::Unknown(why),
                    };
                    let new = content_at(Some(&now));
                    // Directories made or removed have no content; their files are listed.
                    let no_file =
                        |c: &Content| matches!(c, Content::Absent | Content::Other(DIRECTORY));
                    if no_file(&old) && no_file(&new) {
                        continue;
                    }
                    out.push(FilePatch {
                        path: rel.clone(),
                        old,
                        new,
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The non-directory entries under `root`, relative to it, sorted.
fn files_under(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            let sub = rel.join(e.file_name());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(sub);
            } else {
                out.push((sub.clone(), root.join(sub)));
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(old: &str, new: &str) -> FilePatch {
        FilePatch {
            path: "f.txt".into(),
            old: Content::Text(old.into()),
            new: Content::Text(new.into()),
        }
    }

    #[test]
    fn the_edit_script_is_a_shortest_one_and_reproduces_the_new_side() {
        let cases = [
            ("", ""),
            ("a\n", ""),
            ("", "a\n"),
            ("a\nb\nc\n", "a\nc\n"),
            ("a\nb\nc\na\nb\nb\na\n", "c\nb\na\nb\na\nc\n"),
            ("x\n", "y\n"),
        ];
        for (old, new) in cases {
            let (a, b): (Vec<&str>, Vec<&str>) = (
                old.split_inclusive('\n').collect(),
                new.split_inclusive('\n').collect(),
            );
            let script = edit_script(&a, &b);
            let rebuilt: Vec<&str> = script
                .iter()
                .filter_map(|e| match *e {
                    Edit::Keep(i, _) => Some(a[i]),
                    Edit::Insert(j) => Some(b[j]),
                    Edit::Delete(_) => None,
                })
                .collect();
            assert_eq!(rebuilt, b, "{old:?} -> {new:?}");
            let kept: Vec<&str> = script
                .iter()
                .filter_map(|e| match *e {
                    Edit::Keep(i, _) | Edit::Delete(i) => Some(a[i]),
                    Edit::Insert(_) => None,
                })
                .collect();
            assert_eq!(kept, a, "{old:?} -> {new:?}");
        }
        // Myers' example: D = 5.
        let a: Vec<&str> = "ABCABBA".split("").filter(|s| !s.is_empty()).collect();
        let b: Vec<&str> = "CBABAC".split("").filter(|s| !s.is_empty()).collect();
        let changes = edit_script(&a, &b)
            .iter()
            .filter(|e| !matches!(e, Edit::Keep(..)))
            .count();
        assert_eq!(changes, 5);
    }

    #[test]
    fn unified_diff_as_diff_u_writes_it() {
        // Checked against `diff -u` of the same files.
        let old: String = (1..=10).map(|i| format!("{i}\n")).collect();
        let new = old.replace("5\n", "five\n") + "11";
        assert_eq!(
            patch(&old, &new).unified(),
            "--- a/f.txt\n+++ b/f.txt\n@@ -2,9 +2,10 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n\
             \x209\n 10\n+11\n\\ No newline at end of file\n"
        );
        assert_eq!(patch(&old, &new).counts(), Some((2, 1)));
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new = old
            .replacen("3\n", "", 1)
            .replacen("18\n", "18\neighteen\n", 1);
        assert_eq!(
            patch(&old, &new).unified(),
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,6 +1,5 @@\n 1\n 2\n-3\n 4\n 5\n 6\n\
             @@ -16,5 +15,6 @@\n 16\n 17\n 18\n+eighteen\n 19\n 20\n"
        );
        let added = FilePatch {
            path: "n.txt".into(),
            old: Content::Absent,
            new: Content::Text("x\ny\n".into()),
        };
        assert_eq!(
            added.unified(),
            "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
        let binary = FilePatch {
            path: "b.bin".into(),
            old: Content::Binary(3),
            new: Content::Absent,
        };
        assert_eq!(
            binary.unified(),
            "Binary files a/b.bin and /dev/null differ\n"
        );
        assert_eq!(binary.counts(), None);
        assert_eq!(patch("same\n", "same\n").unified(), "");
    }
}
