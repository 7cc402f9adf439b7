//! [`tree_digest`]: one sha256 over a workspace tree, the proof that a rollback restored it.

use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::fsops;
use super::journal::{compile_exclude, excluded};

/// The digest of the tree under `root`: every entry's relative name, type, permission bits
/// (0o7777), file content (sha256) and symlink target, directories included (so empty ones
/// count), in order of name bytes; entries matching an `exclude` glob (or under one) are
/// skipped. Owners, times and hard-link structure are not part of it.
pub fn tree_digest(root: &Path, exclude: &[String]) -> io::Result<String> {
    let set = compile_exclude(exclude).map_err(io::Error::other)?;
    let mut h = Sha256::new();
    walk(root, Path::new(""), &set, &mut h)?;
    Ok(fsops::hex(&h.finalize()))
}

fn walk(root: &Path, rel: &Path, set: &globset::GlobSet, h: &mut Sha256) -> io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(root.join(rel))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in names {
        let child = rel.join(&name);
        if excluded(set, &child) {
            continue;
        }
        let abs = root.join(&child);
        let meta = std::fs::symlink_metadata(&abs)?;
        let ft = meta.file_type();
        let kind: &[u8] = if ft.is_dir() {
            b"d"
        } else if ft.is_symlink() {
            b"l"
        } else if ft.is_file() {
            b"f"
        } else {
            b"o"
        };
        let bytes = child.as_os_str().as_bytes();
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        h.update(kind);
        h.update((meta.mode() & 0o7777).to_le_bytes());
        if ft.is_file() {
            let content = fsops::hash_file(&std::fs::File::open(&abs)?)?;
            h.update(content.as_bytes());
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&abs)?;
            let t = target.as_os_str().as_bytes();
            h.update((t.len() as u64).to_le_bytes());
            h.update(t);
        } else if ft.is_dir() {
            walk(root, &child, set, h)?;
            h.update(b"/end");
        } else {
            h.update(meta.rdev().to_le_bytes());
        }
    }
    Ok(())
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
}
