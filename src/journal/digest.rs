//! [`tree_digest`]: one sha256 over a workspace tree, the proof that a rollback restored it.
//!
//! The tree is walked once, relative to directory descriptors (no path is resolved twice).
//! The walk hands each regular file to a few hashing threads as soon as it lists it, so the
//! listing and the hashing overlap; a thread opens the file, takes its mode from the open
//! descriptor (no second lookup of the name) and hashes it. The digest is then computed in
//! name order, so it does not depend on how the work was shared.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use nix::dir::Type;
use nix::fcntl::OFlag;
use sha2::{Digest as _, Sha256};

use super::fsops;
use super::journal::{compile_exclude, excluded};
use super::log::{Kind, Stat};

/// The digest of the tree under `root`: every entry's relative name, type, permission bits
/// (0o7777), file content (sha256) and symlink target, directories included (so empty ones
/// count), in order of name bytes; entries matching an `exclude` glob (or under one) are
/// skipped. Owners, times and hard-link structure are not part of it.
///
/// # Errors
///
/// The first I/O error met while walking or reading the tree.
pub fn tree_digest(root: &Path, exclude: &[String]) -> io::Result<String> {
    let set = compile_exclude(exclude).map_err(io::Error::other)?;
    let root_fd = Arc::new(File::open(root).map(OwnedFd::from)?);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let (tx, rx) = mpsc::channel::<FileRef>();
    let rx = Mutex::new(rx);
    let (items, looked) = std::thread::scope(|s| -> io::Result<_> {
        let rx = &rx;
        let hashers: Vec<_> = (0..threads)
            .map(|_| s.spawn(move || look_at_files(rx)))
            .collect();
        let mut walk = Walk {
            set: &set,
            items: Vec::new(),
            files: 0,
            tx,
        };
        let walked = walk.dir(&root_fd, Path::new(""));
        let Walk {
            items, files, tx, ..
        } = walk;
        // The hashers end when the list does.
        drop(tx);
        let mut looked: Vec<Option<Looked>> = (0..files).map(|_| None).collect();
        let mut failed = None;
        for h in hashers {
            match h.join() {
                Ok(Ok(part)) => part.into_iter().for_each(|(i, l)| looked[i] = Some(l)),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(_) => failed = failed.or(Some(io::Error::other("hashing thread panicked"))),
            }
        }
        walked?;
        failed.map_or(Ok((items, looked)), Err)
    })?;
    let mut h = Sha256::new();
    for item in &items {
        let Item::Entry { rel, what } = item else {
            h.update(b"/end");
            continue;
        };
        let Looked { kind, mode, detail } = match what {
            What::Known(l) => l,
            What::File(i) => looked[*i]
                .as_ref()
                .ok_or_else(|| io::Error::other("a file was listed but not hashed"))?,
        };
        let bytes = rel.as_bytes();
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        h.update(kind);
        h.update(mode.to_le_bytes());
        match detail {
            Detail::Sum(sum) => h.update(sum.as_bytes()),
            Detail::Link(t) => {
                let t = t.as_bytes();
                h.update((t.len() as u64).to_le_bytes());
                h.update(t);
            }
            Detail::Dir => {}
            Detail::Node(rdev) => h.update(rdev.to_le_bytes()),
        }
    }
    Ok(fsops::hex(&h.finalize()))
}

enum Detail {
    /// A file's content, sha256 in hex.
    Sum(String),
    Link(OsString),
    Dir,
    Node(u64),
}

/// An entry's type, permission bits and detail, as the digest takes them in.
struct Looked {
    kind: &'static [u8],
    mode: u32,
    detail: Detail,
}

enum What {
    Known(Looked),
    /// A file handed to the hashers, by its index in the order the walk listed files.
    File(usize),
}

/// What the digest takes in, in order: an entry, or the end of a directory's entries.
enum Item {
    Entry { rel: OsString, what: What },
    End,
}

/// A file to hash: its index, its directory and its name.
type FileRef = (usize, Arc<OwnedFd>, OsString);

struct Walk<'a> {
    set: &'a crate::policy::PathSet,
    items: Vec<Item>,
    /// Files handed to the hashers so far.
    files: usize,
    tx: mpsc::Sender<FileRef>,
}

impl Walk<'_> {
    fn dir(&mut self, dir: &Arc<OwnedFd>, rel: &Path) -> io::Result<()> {
        let mut names = fsops::list_dir_typed(dir.as_fd(), OsStr::new("."))?;
        names.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (name, listed) in names {
            let child = rel.join(&name);
            if excluded(self.set, &child) {
                continue;
            }
            let rel_name = child.clone().into_os_string();
            if listed == Some(Type::File) {
                let what = What::File(self.hand_over(dir, name));
                self.items.push(Item::Entry {
                    rel: rel_name,
                    what,
                });
                continue;
            }
            // A directory is opened (to walk it) and its mode read from the descriptor.
            let sub = match listed {
                Some(Type::Directory) => open_dir(dir.as_fd(), &name)?,
                _ => None,
            };
            let st = match &sub {
                Some(fd) => fsops::fstat(fd.as_fd())?,
                None => fsops::stat_at(dir.as_fd(), &name)?
                    .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?,
            };
            let what = match st.kind {
                Kind::File => What::File(self.hand_over(dir, name.clone())),
                Kind::Dir => What::Known(Looked {
                    kind: b"d",
                    mode: st.mode,
                    detail: Detail::Dir,
                }),
                _ => What::Known(special(dir.as_fd(), &name, &st)?),
            };
            self.items.push(Item::Entry {
                rel: rel_name,
                what,
            });
            if st.kind == Kind::Dir {
                let sub = match sub {
                    Some(fd) => fd,
                    None => open_dir(dir.as_fd(), &name)?
                        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOTDIR))?,
                };
                self.dir(&Arc::new(sub), &child)?;
                self.items.push(Item::End);
            }
        }
        Ok(())
    }

    /// Queues `dir/name` for the hashers; returns its index.
    fn hand_over(&mut self, dir: &Arc<OwnedFd>, name: OsString) -> usize {
        // The receiver outlives the walk, so a send cannot fail while it runs.
        let _ = self.tx.send((self.files, Arc::clone(dir), name));
        self.files += 1;
        self.files - 1
    }
}

/// A symlink (its target) or a special file (its device number; not opened: opening a device
/// can act on it), `st` being its stat.
fn special(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat) -> io::Result<Looked> {
    Ok(Looked {
        kind: if st.kind == Kind::Symlink { b"l" } else { b"o" },
        mode: st.mode,
        detail: if st.kind == Kind::Symlink {
            Detail::Link(fsops::readlink_at(dir, name)?)
        } else {
            Detail::Node(st.rdev)
        },
    })
}

/// `dir/name` opened as a directory, `None` when it is no directory (any more).
fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<OwnedFd>> {
    match fsops::open_at(dir, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A hashing thread: takes files off the list until it is closed.
fn look_at_files(rx: &Mutex<mpsc::Receiver<FileRef>>) -> io::Result<Vec<(usize, Looked)>> {
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::new();
    loop {
        let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((i, dir, name)) = next else {
            return Ok(out);
        };
        out.push((i, look_at_file(dir.as_fd(), &name, &mut buf)?));
    }
}

/// A file the walk listed as regular: opened without following a symlink and without
/// blocking, its type and mode read from the descriptor, its content hashed. What is no
/// regular file by then is taken as it is now, by its name.
fn look_at_file(dir: BorrowedFd<'_>, name: &OsStr, buf: &mut [u8]) -> io::Result<Looked> {
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let file = match fsops::open_at(dir, name, flags, 0) {
        Ok(fd) => File::from(fd),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => {
            // Now a symlink, or a socket.
            let st = fsops::stat_at(dir, name)?
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            return match st.kind {
                Kind::File | Kind::Dir => Err(e),
                _ => special(dir, name, &st),
            };
        }
        Err(e) => return Err(e),
    };
    let st = fsops::fstat(file.as_fd())?;
    match st.kind {
        Kind::File => Ok(Looked {
            kind: b"f",
            mode: st.mode,
            detail: Detail::Sum(fsops::hash_file_sized(&file, st.size, buf)?),
        }),
        // Replaced by a directory while the tree was being walked.
        Kind::Dir => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        _ => special(dir, name, &st),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry as the digest's format says: name length, name, kind, mode (the tests'
    /// own writing of the format, apart from the code under test).
    fn by_hand(h: &mut Sha256, rel: &[u8], kind: &[u8], mode: u32) {
        h.update((rel.len() as u64).to_le_bytes());
        h.update(rel);
        h.update(kind);
        h.update(mode.to_le_bytes());
    }

    #[test]
    fn digest_sees_content_modes_links_and_empty_dirs_but_not_excluded() {
        let ws = tempfile::tempdir().expect("tempdir");
        let root = ws.path();
        std::fs::create_dir_all(root.join("a/empty")).expect("mkdir");
        std::fs::write(root.join("a/f"), b"x").expect("write");
        std::fs::create_dir_all(root.join("target/debug")).expect("mkdir");
        let ex = vec!["target/**".to_string()];
        let d0 = tree_digest(root, &ex).expect("digest");
        std::fs::write(root.join("target/debug/out"), b"y").expect("write");
        assert_eq!(tree_digest(root, &ex).expect("digest"), d0);
        std::fs::remove_dir(root.join("a/empty")).expect("rmdir");
        let d1 = tree_digest(root, &ex).expect("digest");
        assert_ne!(d1, d0);
        std::os::unix::fs::symlink("f", root.join("a/l")).expect("symlink");
        let d2 = tree_digest(root, &ex).expect("digest");
        assert_ne!(d2, d1);
        std::fs::write(root.join("a/f"), b"z").expect("write");
        assert_ne!(tree_digest(root, &ex).expect("digest"), d2);
    }

    #[test]
    fn files_around_the_read_size_and_special_files_digest_by_what_they_are() {
        // Sizes at and around the 64 KiB read, where the short read ends the file; a fifo and
        // a symlink listed among them; the same tree digested by hand must agree.
        let ws = tempfile::tempdir().expect("tempdir");
        let root = ws.path();
        let sizes = [0usize, 1, 65_535, 65_536, 65_537, 200_000];
        let mut h = Sha256::new();
        for (i, n) in sizes.iter().enumerate() {
            let content: Vec<u8> = (0..*n).map(|b| (b * 7 + i) as u8).collect();
            let name = format!("f{i}");
            std::fs::write(root.join(&name), &content).expect("write");
            std::fs::set_permissions(
                root.join(&name),
                std::os::unix::fs::PermissionsExt::from_mode(0o644),
            )
            .expect("chmod");
            by_hand(&mut h, name.as_bytes(), b"f", 0o644);
            h.update(fsops::hex(&Sha256::digest(&content)).as_bytes());
        }
        nix::unistd::mkfifo(
            &root.join("p"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        by_hand(&mut h, b"p", b"o", 0o600);
        h.update(0u64.to_le_bytes());
        std::os::unix::fs::symlink("f0", root.join("s")).expect("symlink");
        by_hand(&mut h, b"s", b"l", 0o777);
        h.update(2u64.to_le_bytes());
        h.update(b"f0");
        assert_eq!(
            tree_digest(root, &[]).expect("digest"),
            fsops::hex(&h.finalize())
        );
    }

    #[test]
    fn the_digest_format_is_unchanged() {
        // A small tree, digested as the format says, by hand.
        let ws = tempfile::tempdir().expect("tempdir");
        let root = ws.path();
        std::fs::create_dir(root.join("d")).expect("mkdir");
        std::fs::write(root.join("d/f"), b"hi").expect("write");
        std::fs::set_permissions(
            root.join("d/f"),
            std::os::unix::fs::PermissionsExt::from_mode(0o640),
        )
        .expect("chmod");
        std::fs::set_permissions(
            root.join("d"),
            std::os::unix::fs::PermissionsExt::from_mode(0o750),
        )
        .expect("chmod");
        let mut h = Sha256::new();
        by_hand(&mut h, b"d", b"d", 0o750);
        by_hand(&mut h, b"d/f", b"f", 0o640);
        h.update(fsops::hex(&Sha256::digest(b"hi")).as_bytes());
        h.update(b"/end");
        assert_eq!(
            tree_digest(root, &[]).expect("digest"),
            fsops::hex(&h.finalize())
        );
    }
}
