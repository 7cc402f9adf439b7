//! Copies for the store and back: file content (a reflink where the filesystem can, else only
//! the data segments, so holes stay holes), single entries of any kind, whole directory trees,
//! and opening a file whose mode does not let guard read or write it.
//!
//! A pre-image must be readable even when the caller can only write the file (mode 0200) or
//! when its mode is 000. guard reads with its own privileges; when those do not suffice and
//! guard owns the file, it grants the owner the missing permission for the open only and puts
//! the mode back at once (the descriptor keeps its access). The observable effect is the file's
//! ctime, which the caller's write moves anyway.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd};
use std::os::unix::fs::FileExt as _;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FchmodatFlags, Mode};
use nix::unistd::Whence;

use super::fsops::{self, open_at, stat_at};
use super::log::{Kind, Stat};
use crate::sys;

/// Opens `dir/name` (not following a symlink) with `flags`; on EACCES, when guard owns the
/// file, with `grant` added to its mode for the open (see the module doc).
fn open_granting(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlag, grant: u32) -> io::Result<File> {
    match open_at(dir, name, flags, 0) {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {}
        other => return other.map(File::from),
    }
    let pinned = open_at(dir, name, OFlag::O_PATH, 0)?;
    let st = nix::sys::stat::fstat(pinned.as_raw_fd())?;
    let euid = nix::unistd::geteuid();
    if st.st_uid != euid.as_raw() && !euid.is_root() {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    let proc = format!("/proc/self/fd/{}", pinned.as_raw_fd());
    let chmod = |mode: u32| {
        nix::sys::stat::fchmodat(
            None,
            proc.as_str(),
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        )
    };
    let mode = st.st_mode & 0o7777;
    chmod(mode | grant)?;
    // Through the pinned descriptor's magic link (so no O_NOFOLLOW): the same inode.
    let opened =
        sys::fs::openat_unseen(None, proc.as_str(), flags | OFlag::O_CLOEXEC, Mode::empty());
    let restored = chmod(mode);
    let fd = opened?;
    restored?;
    Ok(File::from(fd))
}

/// `dir/name` open for reading (O_NONBLOCK, so a fifo does not block).
pub fn open_readable(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    open_granting(dir, name, flags, 0o400)
}

/// `dir/name` open for writing, truncated.
pub fn open_writable(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<File> {
    let flags = OFlag::O_WRONLY | OFlag::O_TRUNC | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    open_granting(dir, name, flags, 0o200)
}

/// Copies `src`'s content into `dst` (both regular files; `dst` empty): a FICLONE reflink when
/// the filesystem can, else each data segment (SEEK_DATA / SEEK_HOLE) with copy_file_range or
/// read/write, so holes stay holes. Returns whether it reflinked.
pub fn copy_content(src: &File, dst: &File) -> io::Result<bool> {
    if sys::fs::ficlone(dst.as_fd(), src.as_fd()).is_ok() {
        return Ok(true);
    }
    let len = src.metadata()?.len();
    let seek = |off: u64, whence| {
        let off = i64::try_from(off).map_err(|_| Errno::EOVERFLOW)?;
        nix::unistd::lseek(src.as_raw_fd(), off, whence).map(|o| o as u64)
    };
    let mut off = 0u64;
    while off < len {
        let data = match seek(off, Whence::SeekData) {
            Ok(d) => d,
            Err(Errno::ENXIO) => break, // only a hole is left
            Err(_) => off,              // no SEEK_DATA here: copy the rest
        };
        let end = seek(data, Whence::SeekHole).map_or(len, |h| h.min(len));
        if end <= data {
            break;
        }
        copy_range(src, dst, data, end - data)?;
        off = end;
    }
    dst.set_len(len)?;
    Ok(false)
}

/// Copies `n` bytes at offset `off` of `src` to the same offset of `dst`.
fn copy_range(src: &File, dst: &File, off: u64, n: u64) -> io::Result<()> {
    let (mut done, mut in_off, mut out_off) = (0u64, off as i64, off as i64);
    while done < n {
        let chunk = usize::try_from(n - done).unwrap_or(usize::MAX).min(1 << 30);
        match nix::fcntl::copy_file_range(src, Some(&mut in_off), dst, Some(&mut out_off), chunk) {
            Ok(0) => break, // the file shrank meanwhile
            Ok(k) => done += k as u64,
            Err(_) => return copy_range_slow(src, dst, off + done, n - done),
        }
    }
    Ok(())
}

fn copy_range_slow(src: &File, dst: &File, off: u64, n: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 1 << 16];
    let mut done = 0u64;
    while done < n {
        let want = usize::try_from(n - done)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let k = src.read_at(&mut buf[..want], off + done)?;
        if k == 0 {
            break;
        }
        dst.write_all_at(&buf[..k], off + done)?;
        done += k as u64;
    }
    Ok(())
}

/// Copies the entry `sdir/sname` (any kind but a directory) to the new name `ddir/dname` with
/// its metadata. Returns the content's sha256 for a regular file when `hash`.
pub fn copy_entry(
    sdir: BorrowedFd<'_>,
    sname: &OsStr,
    ddir: BorrowedFd<'_>,
    dname: &OsStr,
    st: &Stat,
    fsync: bool,
    hash: bool,
) -> io::Result<Option<String>> {
    let mut sum = None;
    match st.kind {
        Kind::File => {
            let src = open_readable(sdir, sname)?;
            let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
            let dst = File::from(open_at(ddir, dname, flags, 0o600)?);
            copy_content(&src, &dst)?;
            if fsync {
                dst.sync_all()?;
            }
            if hash {
                sum = Some(fsops::hash_file(&src)?);
            }
        }
        Kind::Symlink => fsops::symlink_at(&fsops::readlink_at(sdir, sname)?, ddir, dname)?,
        Kind::Dir => return Err(io::Error::from_raw_os_error(libc::EISDIR)),
        _ => fsops::mknod_at(ddir, dname, st)?,
    }
    fsops::set_meta_at(ddir, dname, st)?;
    Ok(sum)
}

/// Copies `sdir/sname` of any kind, a directory with everything under it, to the new name
/// `ddir/dname`, metadata included. Hard links inside the tree become separate copies.
pub fn copy_tree(
    sdir: BorrowedFd<'_>,
    sname: &OsStr,
    ddir: BorrowedFd<'_>,
    dname: &OsStr,
    fsync: bool,
) -> io::Result<()> {
    let st = stat_at(sdir, sname)?.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    if st.kind != Kind::Dir {
        return copy_entry(sdir, sname, ddir, dname, &st, fsync, false).map(|_| ());
    }
    fsops::mkdir_at(ddir, dname, 0o700)?;
    let names = match fsops::list_dir(sdir, sname) {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let d = open_granting(sdir, sname, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0o500)?;
            fsops::list_dir(d.as_fd(), OsStr::new("."))?
        }
        other => other?,
    };
    let from = open_at(sdir, sname, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
    let to = open_at(ddir, dname, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
    for n in &names {
        copy_tree(from.as_fd(), n, to.as_fd(), n, fsync)?;
    }
    fsops::set_meta_at(ddir, dname, &st)
}

/// Removes `dir/name` of any kind, a directory with everything under it (directories without
/// write permission for guard get it for the removal).
pub fn remove_tree(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let Some(st) = stat_at(dir, name)? else {
        return Ok(());
    };
    if st.kind != Kind::Dir {
        return fsops::unlink_at(dir, name, false);
    }
    if st.mode & 0o700 != 0o700 {
        let mut open = st.clone();
        open.mode |= 0o700;
        nix::sys::stat::fchmodat(
            Some(dir.as_raw_fd()),
            name,
            Mode::from_bits_truncate(open.mode),
            FchmodatFlags::FollowSymlink,
        )?;
    }
    let sub = open_at(dir, name, OFlag::O_PATH | OFlag::O_DIRECTORY, 0)?;
    for n in fsops::list_dir(dir, name)? {
        remove_tree(sub.as_fd(), &n)?;
    }
    fsops::unlink_at(dir, name, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

    #[test]
    fn copies_keep_holes_and_read_write_only_files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let p = tmp.path();
        let sparse = File::create(p.join("sparse")).expect("create");
        sparse.write_all_at(b"head", 0).expect("write");
        sparse.write_all_at(b"tail", 8 << 20).expect("write");
        sparse.set_len(16 << 20).expect("grow");
        std::fs::write(p.join("wo"), b"secret").expect("write");
        std::fs::set_permissions(p.join("wo"), std::fs::Permissions::from_mode(0o200))
            .expect("chmod");
        let dir = File::open(p).expect("open dir");
        let d = dir.as_fd();
        let st = |n: &str| stat_at(d, OsStr::new(n)).expect("stat").expect("exists");
        copy_entry(
            d,
            OsStr::new("sparse"),
            d,
            OsStr::new("copy"),
            &st("sparse"),
            false,
            true,
        )
        .expect("copy sparse");
        let a = std::fs::read(p.join("sparse")).expect("read");
        assert_eq!(a, std::fs::read(p.join("copy")).expect("read copy"));
        let blocks = std::fs::metadata(p.join("copy")).expect("stat").blocks();
        assert!(blocks < 1024, "holes were filled: {blocks} blocks");
        copy_entry(
            d,
            OsStr::new("wo"),
            d,
            OsStr::new("wo2"),
            &st("wo"),
            false,
            false,
        )
        .expect("copy write-only");
        let m = std::fs::metadata(p.join("wo")).expect("stat").mode() & 0o7777;
        assert_eq!(m, 0o200, "the mode is put back");
        let m2 = std::fs::metadata(p.join("wo2")).expect("stat").mode() & 0o7777;
        assert_eq!(m2, 0o200);
        std::fs::create_dir_all(p.join("t/a/b")).expect("mkdir");
        std::fs::write(p.join("t/a/b/f"), b"f").expect("write");
        std::os::unix::fs::symlink("a/b/f", p.join("t/l")).expect("symlink");
        copy_tree(d, OsStr::new("t"), d, OsStr::new("t2"), false).expect("copy tree");
        assert_eq!(std::fs::read(p.join("t2/a/b/f")).expect("read"), b"f");
        assert_eq!(
            std::fs::read_link(p.join("t2/l")).expect("readlink"),
            std::path::Path::new("a/b/f")
        );
        remove_tree(d, OsStr::new("t2")).expect("remove tree");
        assert!(!p.join("t2").exists());
    }
}
