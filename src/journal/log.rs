//! The undo log: one JSON object per line, each append copied whole into a mapped window of
//! the file (see [`LogWriter`]), and read back tolerating a torn last line (a crash in the
//! middle of an append, or the zeros reserved after the last entry). See the module doc of
//! `journal` for the wire format.

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

use nix::sys::stat::FileStat;
use serde::{Deserialize, Serialize};

use crate::audit::PathText;

/// One log line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub seq: u64,
    #[serde(flatten)]
    pub op: Op,
}

/// What an entry records. Paths are relative to the workspace. See the table in the module
/// doc of `journal` for what each one means and how it is undone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub(crate) enum Op {
    Checkpoint {
        id: u32,
        reason: String,
        pid: Option<u32>,
    },
    /// `id`: the inode put there, when known (an undo then removes only that); `obj`: the store
    /// object it came from (an undo puts it back there).
    Created {
        path: PathText,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<FileId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        obj: Option<u64>,
    },
    /// The entry (of any kind, a directory with its tree) is kept as `store/<obj>` (`obj`
    /// defaults to the entry's own seq).
    Deleted {
        path: PathText,
        st: Stat,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        obj: Option<u64>,
    },
    Rmdir {
        path: PathText,
        st: Stat,
    },
    /// A file the run created since the last checkpoint (its inode `st` is one guard made
    /// there, never renamed since) was deleted without a copy: every rollback that undoes this
    /// entry also undoes the file's creation, so there is nothing to put back.
    Dropped {
        path: PathText,
        st: Stat,
    },
    /// `replaced`: what `to` held before; a non-directory was kept as `store/<seq>`, an empty
    /// directory is recreated from its metadata.
    Renamed {
        from: PathText,
        to: PathText,
        src: FileId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaced: Option<Stat>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        boundary: Option<Boundary>,
    },
    /// `adopted`: the excluded one of the two paths, now holding what was journaled.
    Exchanged {
        from: PathText,
        to: PathText,
        from_id: FileId,
        to_id: FileId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adopted: Option<PathText>,
    },
    /// Something from outside the workspace was renamed to `path`.
    Entered {
        path: PathText,
        src: FileId,
    },
    /// The pre-image content is `store/<seq>`.
    Modified {
        path: PathText,
        st: Stat,
    },
    Meta {
        path: PathText,
        st: Stat,
    },
    Unprotected {
        path: PathText,
        size: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// An operation on the journal (a rollback, or the undo of one) starts; the entries after
    /// it, up to the marker that ends it, are its steps.
    Begin {
        kind: OpKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<u64>,
    },
    /// Ends a rollback to checkpoint `to`: run entries with `after < seq < upto` are undone.
    /// `begin`: the seq of its `begin` (absent in journals written before operations).
    RolledBack {
        to: u32,
        after: u64,
        upto: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        begin: Option<u64>,
    },
    /// Ends an undo: the operation that ended at seq `target` is reverted.
    Undone {
        target: u64,
        begin: u64,
    },
    /// The operation that began at `begin` failed or was interrupted; its steps were reverted.
    Aborted {
        begin: u64,
    },
    Sealed {
        paths: u64,
    },
    /// The inode that entry `stored` took out of the workspace as `from` is back as `to`: a
    /// copy put back from a store on another filesystem by the revert of an operation, or a
    /// directory that entry removed (an `rmdir`, a rename over it), made again by a rollback.
    Copied {
        from: FileId,
        to: FileId,
        stored: u64,
    },
}

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum OpKind {
    Rollback,
    Undo,
}

/// How a rename crossed the boundary of what is journaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Boundary {
    /// `from` is excluded: the undo moves the entry back there.
    FromExcluded,
    /// `to` is excluded and is journaled from then on (it holds what was journaled).
    ToAdopted,
    /// `to` is excluded and everything moved there was created since the last checkpoint:
    /// any rollback that undoes the rename also undoes those creations, so the undo leaves it.
    ToLeft,
}

impl Op {
    /// The workspace paths this entry changes.
    pub fn paths(&self) -> Vec<&PathText> {
        match self {
            Op::Created { path, .. }
            | Op::Deleted { path, .. }
            | Op::Rmdir { path, .. }
            | Op::Dropped { path, .. }
            | Op::Entered { path, .. }
            | Op::Modified { path, .. }
            | Op::Meta { path, .. }
            | Op::Unprotected { path, .. } => vec![path],
            Op::Renamed { from, to, .. } | Op::Exchanged { from, to, .. } => vec![from, to],
            Op::Checkpoint { .. }
            | Op::Begin { .. }
            | Op::RolledBack { .. }
            | Op::Undone { .. }
            | Op::Aborted { .. }
            | Op::Sealed { .. }
            | Op::Copied { .. } => vec![],
        }
    }

    pub fn is_change(&self) -> bool {
        !self.paths().is_empty()
    }
}

impl Entry {
    /// The store object this entry's content is kept in.
    pub fn object(&self) -> u64 {
        match &self.op {
            Op::Deleted { obj: Some(o), .. } | Op::Created { obj: Some(o), .. } => *o,
            _ => self.seq,
        }
    }
}

/// An inode's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// The kind of a directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    Char,
    Block,
}

impl Kind {
    pub fn of_mode(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::Char,
            libc::S_IFBLK => Kind::Block,
            _ => Kind::File,
        }
    }
}

/// An entry's metadata at the time it was recorded. Times are `[seconds, nanoseconds]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stat {
    pub kind: Kind,
    /// Permission bits (0o7777).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: [i64; 2],
    pub mtime: [i64; 2],
    pub dev: u64,
    pub ino: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rdev: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Stat {
    pub fn from_nix(st: &FileStat) -> Stat {
        Stat {
            kind: Kind::of_mode(st.st_mode),
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            atime: [st.st_atime, st.st_atime_nsec],
            mtime: [st.st_mtime, st.st_mtime_nsec],
            dev: st.st_dev,
            ino: st.st_ino,
            rdev: st.st_rdev,
        }
    }

    pub fn from_meta(m: &std::fs::Metadata) -> Stat {
        Stat {
            kind: Kind::of_mode(m.mode()),
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            atime: [m.atime(), m.atime_nsec()],
            mtime: [m.mtime(), m.mtime_nsec()],
            dev: m.dev(),
            ino: m.ino(),
            rdev: m.rdev(),
        }
    }

    pub fn id(&self) -> FileId {
        FileId {
            dev: self.dev,
            ino: self.ino,
        }
    }
}

/// The append side of the log. Entries are copied into a window of the file mapped in memory,
/// whose blocks were reserved beforehand ([`crate::sys::mapped::Appender`]): an append is a
/// copy, not a `write(2)` (0.6 µs each here, on the path of every journaled call). The file
/// is then longer than its entries, zeros after them, until the writer is dropped and cuts it
/// to length; a reader meanwhile (or after a crash) finds the zeros where a torn last line
/// would be, and ignores them as one ([`read_log`]). Where no window can be made, entries are
/// written with `pwrite`.
///
/// What reaches the disk, and when, is what a `write(2)` gives: the page cache holds the
/// entries whatever becomes of this process, and `fsync` writes them out (and only then are
/// they on the disk, as before).
pub(crate) struct LogWriter {
    file: File,
    fsync: bool,
    tail: std::sync::Mutex<Tail>,
}

/// Where the entries end, and how appends get there.
struct Tail {
    end: u64,
    appender: crate::sys::mapped::Appender,
}

impl LogWriter {
    pub fn open(path: &Path, fsync: bool) -> io::Result<LogWriter> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        let end = file.metadata()?.len();
        Ok(LogWriter {
            file,
            fsync,
            tail: std::sync::Mutex::new(Tail {
                end,
                appender: Default::default(),
            }),
        })
    }

    fn tail(&self) -> std::sync::MutexGuard<'_, Tail> {
        self.tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends one line per entry in one copy (or one `pwrite`), then fsyncs once when asked.
    /// An append cut short (a crash in the middle) leaves whole lines and at most one torn
    /// last line, which `read_log` ignores.
    pub fn append_all<'e>(&self, entries: impl IntoIterator<Item = &'e Entry>) -> io::Result<()> {
        // Room for an entry with two long paths: serializing into an empty vector grew it
        // five or six times per entry.
        let mut line = Vec::with_capacity(512);
        for entry in entries {
            serde_json::to_writer(&mut line, entry).map_err(io::Error::other)?;
            line.push(b'\n');
        }
        let mut tail = self.tail();
        let end = tail.end;
        tail.appender.write_at(&self.file, &line, end)?;
        tail.end = end + line.len() as u64;
        drop(tail);
        if self.fsync {
            self.file.sync_data()?;
        }
        Ok(())
    }

    /// Cuts the log to `len` (a torn last line, or all of it) so that the next append starts
    /// on a fresh line there.
    pub fn truncate_to(&self, len: u64) -> io::Result<()> {
        let mut tail = self.tail();
        tail.appender.forget();
        self.file.set_len(len)?;
        tail.end = len;
        Ok(())
    }
}

impl Drop for LogWriter {
    /// The log ends where its entries do: the zeros reserved after them go.
    fn drop(&mut self) {
        let tail = self
            .tail
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tail.appender.forget();
        let _ = self.file.set_len(tail.end);
    }
}

/// Every complete entry of the log, and the length of its valid prefix. A last line without
/// its newline (or that does not parse) is a torn append and is ignored; a bad line anywhere
/// else is an error.
pub(crate) fn read_log(path: &Path) -> io::Result<(Vec<Entry>, u64)> {
    let bytes = std::fs::read(path)?;
    let mut entries = Vec::new();
    let mut valid = 0u64;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let (line, complete) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (&rest[..i], true),
            None => (rest, false),
        };
        let advance = line.len() + usize::from(complete);
        let last = advance == rest.len();
        match serde_json::from_slice::<Entry>(line) {
            Ok(e) if complete => entries.push(e),
            Ok(_) => break,
            Err(_) if last => break,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad journal line after seq {}: {e}", entries.len()),
                ))
            }
        }
        valid += advance as u64;
        rest = &rest[advance..];
    }
    Ok((entries, valid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_torn_last_line_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.jsonl");
        let w = LogWriter::open(&path, false).expect("open");
        let e = Entry {
            seq: 1,
            op: Op::Created {
                path: PathText::from(b"a/\xff".as_slice()),
                id: None,
                obj: None,
            },
        };
        w.append_all([&e]).expect("append");
        // While the writer lives, the zeros reserved after the entry read as a torn line.
        let live = std::fs::read(&path).expect("read");
        assert!(
            live.len() > 100 && live[live.len() - 1] == 0,
            "{}",
            live.len()
        );
        let (entries, valid) = read_log(&path).expect("read log");
        assert_eq!(entries.len(), 1);
        drop(w);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(valid, text.len() as u64, "the writer cut the zeros");
        assert!(
            text.starts_with(r#"{"seq":1,"op":"created","path":{"base64":"#),
            "{text}"
        );
        std::fs::write(&path, format!("{text}{{\"seq\":2,\"op\":\"crea")).expect("write");
        let (entries, valid) = read_log(&path).expect("read log");
        assert_eq!(entries.len(), 1);
        assert_eq!(valid, text.len() as u64);
        std::fs::write(&path, format!("{{bad}}\n{text}")).expect("write");
        assert!(read_log(&path).is_err());
    }
}
