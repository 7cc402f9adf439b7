//! Small, fd-relative file-system steps the journal is built from: stat, rename, link, unlink,
//! open, mkdir, metadata restore, directory listing and content hashing. Every path argument is
//! one directory entry name under a directory fd, so no symlink in a parent can redirect a step.
//! Copies (sparse-aware, whole trees) live in `copy.rs`.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{FchmodatFlags, Mode, SFlag, UtimensatFlags};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags};
use sha2::{Digest as _, Sha256};

use super::log::{Kind, Stat};
use crate::sys;

pub use crate::sys::fs::cstr;

/// fstatat(AT_SYMLINK_NOFOLLOW); `None` when the entry does not exist.
pub fn stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<Stat>> {
    match nix::sys::stat::fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(Stat::from_nix(&st))),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// fstat(2) of an open descriptor.
pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<Stat> {
    Ok(Stat::from_nix(&nix::sys::stat::fstat(fd.as_raw_fd())?))
}

/// fstatat(AT_SYMLINK_NOFOLLOW), the raw result (with ctime), `None` when absent.
pub fn raw_stat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<libc::stat>> {
    match nix::sys::stat::fstatat(Some(dir.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub fn rename_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
    flags: RenameFlags,
) -> io::Result<()> {
    nix::fcntl::renameat2(
        Some(from_dir.as_raw_fd()),
        from,
        Some(to_dir.as_raw_fd()),
        to,
        flags,
    )
    .map_err(io::Error::from)
}

/// linkat(2) without following a final symlink.
pub fn link_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
) -> io::Result<()> {
    nix::unistd::linkat(
        Some(from_dir.as_raw_fd()),
        from,
        Some(to_dir.as_raw_fd()),
        to,
        AtFlags::empty(),
    )
    .map_err(io::Error::from)
}

pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr, is_dir: bool) -> io::Result<()> {
    let flag = if is_dir {
        UnlinkatFlags::RemoveDir
    } else {
        UnlinkatFlags::NoRemoveDir
    };
    nix::unistd::unlinkat(Some(dir.as_raw_fd()), name, flag).map_err(io::Error::from)
}

/// openat(2) relative to `dir`, always with O_CLOEXEC | O_NOFOLLOW; a read leaves the file's
/// access time ([`sys::fs::open_unseen`]).
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
    let name = cstr(name)?;
    sys::fs::open_unseen(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW, |flags| {
        let bits = u64::try_from(flags.bits()).unwrap_or_default();
        sys::process::openat2(dir, &name, bits, u64::from(mode), 0)
    })
}

/// The directory `rel` names beneath `root` (O_PATH), refusing symlinks and `..` escapes on the
/// way: journal paths were recorded as real directories.
pub fn open_dir_beneath(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let rel: &OsStr = if rel.as_os_str().is_empty() {
        OsStr::new(".")
    } else {
        rel.as_os_str()
    };
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    sys::process::openat2(
        root,
        &cstr(rel)?,
        u64::try_from(flags.bits()).unwrap_or_default(),
        0,
        resolve,
    )
}

/// A workspace-relative path split into (parent directory fd, final name).
pub fn parent_of(root: BorrowedFd<'_>, rel: &Path) -> io::Result<(OwnedFd, OsString)> {
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?
        .to_owned();
    let parent = rel.parent().unwrap_or(Path::new(""));
    Ok((open_dir_beneath(root, parent)?, name))
}

/// The names in the directory `dir/name` (without `.` and `..`).
pub fn list_dir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<OsString>> {
    sys::fs::list_names(Some(dir), name)
}

/// [`list_dir`] with the type each entry is listed with (`None` where the filesystem gives
/// none): a hint that can be out of date, never a stat. The directory's access time stays.
pub fn list_dir_typed(
    dir: BorrowedFd<'_>,
    name: &OsStr,
) -> io::Result<Vec<(OsString, Option<nix::dir::Type>)>> {
    sys::fs::list_dir(Some(dir), name)
}

/// Sets owner (when different), permission bits (not on symlinks) and times of `dir/name`. An
/// owner only root may give (EPERM for an unprivileged guard) is left as it is: such a restore
/// cannot be exact, and everything else still is.
pub fn set_meta_at(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat) -> io::Result<()> {
    let raw = Some(dir.as_raw_fd());
    if let Some(now) = stat_at(dir, name)? {
        if now.uid != st.uid || now.gid != st.gid {
            let chown = nix::unistd::fchownat(
                raw,
                name,
                Some(Uid::from_raw(st.uid)),
                Some(Gid::from_raw(st.gid)),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            );
            match chown {
                Err(nix::errno::Errno::EPERM) if !nix::unistd::geteuid().is_root() => {
                    tracing::warn!("cannot give {:?} back to uid {}", name, st.uid);
                }
                other => other?,
            }
        }
    }
    if st.kind != Kind::Symlink {
        nix::sys::stat::fchmodat(
            raw,
            name,
            Mode::from_bits_truncate(st.mode),
            FchmodatFlags::FollowSymlink,
        )?;
    }
    nix::sys::stat::utimensat(
        raw,
        name,
        &TimeSpec::new(st.atime[0], st.atime[1]),
        &TimeSpec::new(st.mtime[0], st.mtime[1]),
        UtimensatFlags::NoFollowSymlink,
    )?;
    Ok(())
}

pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    nix::sys::stat::mkdirat(Some(dir.as_raw_fd()), name, Mode::from_bits_truncate(mode))
        .map_err(io::Error::from)
}

/// Sets the permission bits of `dir/name` (a directory guard made: no symlink to follow).
pub fn chmod_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    nix::sys::stat::fchmodat(
        Some(dir.as_raw_fd()),
        name,
        Mode::from_bits_truncate(mode),
        FchmodatFlags::FollowSymlink,
    )
    .map_err(io::Error::from)
}

pub fn readlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OsString> {
    nix::fcntl::readlinkat(Some(dir.as_raw_fd()), name).map_err(io::Error::from)
}

pub fn symlink_at(target: &OsStr, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    nix::unistd::symlinkat(target, Some(dir.as_raw_fd()), name).map_err(io::Error::from)
}

pub fn mknod_at(dir: BorrowedFd<'_>, name: &OsStr, st: &Stat) -> io::Result<()> {
    let kind = match st.kind {
        Kind::Fifo => SFlag::S_IFIFO,
        Kind::Socket => SFlag::S_IFSOCK,
        Kind::Char => SFlag::S_IFCHR,
        Kind::Block => SFlag::S_IFBLK,
        _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    nix::sys::stat::mknodat(
        Some(dir.as_raw_fd()),
        name,
        kind,
        Mode::from_bits_truncate(st.mode),
        st.rdev,
    )
    .map_err(io::Error::from)
}

/// The sha256 of a file's content from its start, lowercase hex.
pub fn hash_file(file: &File) -> io::Result<String> {
    hash_file_sized(file, u64::MAX, &mut vec![0u8; 1 << 16])
}

/// [`hash_file`] reading through `buf`, for a file whose descriptor showed `size` bytes: a
/// short read at or past `size` is its end, which saves the read that would return 0 (one
/// system call per file when most files are smaller than `buf`). A file that grew since is
/// read on to its new end; with `u64::MAX`, every file is read until a read returns 0.
pub fn hash_file_sized(file: &File, size: u64, buf: &mut [u8]) -> io::Result<String> {
    use std::os::unix::fs::FileExt as _;
    let mut h = Sha256::new();
    let mut off = 0u64;
    loop {
        let n = file.read_at(buf, off)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        off += n as u64;
        if n < buf.len() && off >= size {
            break;
        }
    }
    Ok(hex(&h.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    // By table: `write!` per byte was a tenth of a workspace digest's time.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}
