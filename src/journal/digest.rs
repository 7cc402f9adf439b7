//! [`tree_digest`]: one sha256 over a workspace tree, the proof that a rollback restored it.
//!
//! The tree is walked once, relative to directory descriptors (no path is resolved twice),
//! and the files' contents are hashed by a few threads at once; the digest is then computed
//! in name order, so it does not depend on how the work was shared.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::fcntl::OFlag;
use sha2::{Digest as _, Sha256};

use super::fsops;
use super::journal::{compile_exclude, excluded};
use super::log::Kind;

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
    let mut items = Vec::new();
    let mut files = Vec::new();
    walk(&root_fd, Path::new(""), &set, &mut items, &mut files)?;
    let sums = hash_all(&files)?;
    let mut h = Sha256::new();
    for item in &items {
        match item {
            Item::Entry {
                rel,
                kind,
                mode,
                detail,
            } => {
                let bytes = rel.as_bytes();
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(bytes);
                h.update(kind);
                h.update(mode.to_le_bytes());
                match detail {
                    Detail::File(i) => h.update(sums[*i].as_bytes()),
                    Detail::Link(t) => {
                        let t = t.as_bytes();
                        h.update((t.len() as u64).to_le_bytes());
                        h.update(t);
                    }
                    Detail::Dir => {}
                    Detail::Node(rdev) => h.update(rdev.to_le_bytes()),
                }
            }
            Item::End => h.update(b"/end"),
        }
    }
    Ok(fsops::hex(&h.finalize()))
}

enum Detail {
    /// Index into the list of files to hash.
    File(usize),
    Link(OsString),
    Dir,
    Node(u64),
}

/// What the digest takes in, in order: an entry, or the end of a directory's entries.
enum Item {
    Entry {
        rel: OsString,
        kind: &'static [u8],
        mode: u32,
        detail: Detail,
    },
    End,
}

/// A file to hash: its directory and name.
type FileRef = (Arc<OwnedFd>, OsString);

fn walk(
    dir: &Arc<OwnedFd>,
    rel: &Path,
    set: &globset::GlobSet,
    items: &mut Vec<Item>,
    files: &mut Vec<FileRef>,
) -> io::Result<()> {
    let mut names = fsops::list_dir(dir.as_fd(), std::ffi::OsStr::new("."))?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in names {
        let child = rel.join(&name);
        if excluded(set, &child) {
            continue;
        }
        let st = fsops::stat_at(dir.as_fd(), &name)?
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
        let (kind, detail): (&'static [u8], Detail) = match st.kind {
            Kind::Dir => (b"d", Detail::Dir),
            Kind::Symlink => (b"l", Detail::Link(fsops::readlink_at(dir.as_fd(), &name)?)),
            Kind::File => {
                files.push((Arc::clone(dir), name.clone()));
                (b"f", Detail::File(files.len() - 1))
            }
            _ => (b"o", Detail::Node(st.rdev)),
        };
        let is_dir = st.kind == Kind::Dir;
        items.push(Item::Entry {
            rel: child.clone().into_os_string(),
            kind,
            mode: st.mode,
            detail,
        });
        if is_dir {
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
            let sub = Arc::new(fsops::open_at(dir.as_fd(), &name, flags, 0)?);
            walk(&sub, &child, set, items, files)?;
            items.push(Item::End);
        }
    }
    Ok(())
}

/// The sha256 (hex) of every file, by a few threads sharing the list.
fn hash_all(files: &[FileRef]) -> io::Result<Vec<String>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let work = || -> io::Result<Vec<(usize, String)>> {
        let mut buf = vec![0u8; 1 << 16];
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((dir, name)) = files.get(i) else {
                return Ok(out);
            };
            let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
            let file = File::from(fsops::open_at(dir.as_fd(), name, flags, 0)?);
            out.push((i, hash(&file, &mut buf)?));
        }
    };
    let parts: Vec<io::Result<Vec<(usize, String)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("hashing thread panicked")))
            })
            .collect()
    });
    let mut sums = vec![String::new(); files.len()];
    for part in parts {
        for (i, sum) in part? {
            sums[i] = sum;
        }
    }
    Ok(sums)
}

fn hash(file: &File, buf: &mut [u8]) -> io::Result<String> {
    let mut h = Sha256::new();
    let mut off = 0u64;
    loop {
        let n = file.read_at(buf, off)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(fsops::hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let entry = |h: &mut Sha256, rel: &[u8], kind: &[u8], mode: u32| {
            h.update((rel.len() as u64).to_le_bytes());
            h.update(rel);
            h.update(kind);
            h.update(mode.to_le_bytes());
        };
        entry(&mut h, b"d", b"d", 0o750);
        entry(&mut h, b"d/f", b"f", 0o640);
        h.update(fsops::hex(&Sha256::digest(b"hi")).as_bytes());
        h.update(b"/end");
        assert_eq!(
            tree_digest(root, &[]).expect("digest"),
            fsops::hex(&h.finalize())
        );
    }
}
