//! Metadata calls performed by the supervisor: times and extended attributes on a path, and
//! every metadata call made through a descriptor (fchmod, fchown, fsetxattr, fremovexattr,
//! futimens and the AT_EMPTY_PATH forms). Landlock has no right for any of them, so the
//! supervisor is the only judge here, and it must act on what it judged:
//!
//! - a descriptor is judged by the object it refers to: guard takes a duplicate of the
//!   caller's descriptor (pidfd_getfd), reads the object's real path and kind from the
//!   duplicate, and performs the call on that duplicate, in the same form the caller used
//!   (so an O_PATH descriptor fails with the kernel's own EBADF where the form needs more);
//! - a path is judged on the pinned [`Target`] and performed on it, never continued: the
//!   kernel would read the path again, and a thread could point it elsewhere in between.
//!
//! Arguments in the caller's memory (times, xattr names and values) are read once, by the
//! read stage, and what guard performs is exactly what it read.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use super::decode::{BlockPtr, TimesArg};
use super::read::Memory;
use super::target::{self, Kind, Target};
use crate::sys;

/// The object a caller's descriptor refers to, held through guard's own duplicate.
#[derive(Debug)]
pub struct FdTarget {
    /// guard's duplicate of the caller's descriptor (or an O_PATH descriptor of its cwd, for
    /// AT_FDCWD with an empty path).
    pub fd: OwnedFd,
    /// Where the object is, as the kernel names it (`/proc/self/fd/N` of the duplicate).
    pub path: PathBuf,
    pub kind: Option<Kind>,
    /// The object has no name anywhere (a pipe, a socket, a memfd, an unlinked file): no
    /// path rule applies to it.
    pub unnamed: bool,
    /// The caller used the `*at(fd, "", AT_EMPTY_PATH)` form, which works on O_PATH
    /// descriptors; the plain forms (fchmod, fsetxattr, futimens) do not.
    pub at_empty_path: bool,
}

/// One metadata change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaOp {
    Chmod {
        mode: u32,
    },
    Chown {
        uid: u32,
        gid: u32,
    },
    /// `None`: both times now.
    Times(Option<[(i64, i64); 2]>),
    SetXattr {
        name: CString,
        value: Vec<u8>,
        flags: u32,
    },
    RemoveXattr {
        name: CString,
    },
}

impl MetaOp {
    /// Whether the change would leave a set-user-id or set-group-id object behind (or file
    /// capabilities, which grant privileges on exec the same way), on an object of `kind`.
    /// A set-group-id directory only makes new entries inherit its group: allowed.
    pub fn sets_id(&self, kind: Option<Kind>) -> bool {
        match self {
            MetaOp::Chmod { mode } => sets_id_mode(*mode, kind),
            MetaOp::SetXattr { name, .. } => name.as_bytes() == b"security.capability",
            _ => false,
        }
    }
}

/// Whether `mode` asks for a set-id bit on an object of `kind`.
pub fn sets_id_mode(mode: u32, kind: Option<Kind>) -> bool {
    mode & libc::S_ISUID != 0 || (mode & libc::S_ISGID != 0 && kind != Some(Kind::Dir))
}

fn kind_of_mode(mode: u32) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Other,
    }
}

/// The object behind descriptor `fd` of the caller `pid` (AT_FDCWD: its cwd).
pub fn fd_target(pid: u32, fd: u64, at_empty_path: bool) -> io::Result<FdTarget> {
    let dup = if fd as i32 == libc::AT_FDCWD {
        target::open_base(pid, fd, false)?
    } else {
        let fd = i32::try_from(fd as i64).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let pidfd = sys::process::pidfd_for_caller(pid)?;
        // EBADF: the caller has no such descriptor, the kernel's answer. Anything else (EPERM:
        // a caller guard may not trace) is guard's own failure.
        sys::process::pidfd_getfd(pidfd.as_fd(), fd)?
    };
    let st = nix::sys::stat::fstat(dup.as_raw_fd())?;
    let path = target::fd_path(dup.as_fd())?;
    let named = path.as_os_str().as_encoded_bytes().first() == Some(&b'/') && st.st_nlink > 0;
    Ok(FdTarget {
        fd: dup,
        path,
        kind: Some(kind_of_mode(st.st_mode)),
        unnamed: !named,
        at_empty_path,
    })
}

fn word(b: &[u8], k: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[k * 8..k * 8 + 8]);
    i64::from_ne_bytes(w)
}

/// The times a call asks for, as utimensat takes them; EINVAL where the kernel says so.
pub fn read_times(mem: &mut Memory, t: TimesArg) -> io::Result<MetaOp> {
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    let read = |mem: &mut Memory, p: Option<BlockPtr>| p.map(|p| mem.block(p)).transpose();
    let pairs = match t {
        TimesArg::Utimbuf(p) => read(mem, p)?.map(|b| [(word(&b, 0), 0), (word(&b, 1), 0)]),
        TimesArg::Timeval(p) => match read(mem, p)? {
            Some(b) => {
                let mut out = [(0, 0); 2];
                for (i, slot) in out.iter_mut().enumerate() {
                    let usec = word(&b, 2 * i + 1);
                    if !(0..1_000_000).contains(&usec) {
                        return Err(einval());
                    }
                    *slot = (word(&b, 2 * i), usec * 1000);
                }
                Some(out)
            }
            None => None,
        },
        TimesArg::Timespec(p) => {
            read(mem, p)?.map(|b| [(word(&b, 0), word(&b, 1)), (word(&b, 2), word(&b, 3))])
        }
    };
    Ok(MetaOp::Times(pairs))
}

/// An xattr name as the kernel takes it: 1 to 255 bytes, else ERANGE.
pub fn xattr_name(raw: Vec<u8>) -> io::Result<CString> {
    if raw.is_empty() || raw.len() > 255 {
        return Err(io::Error::from_raw_os_error(libc::ERANGE));
    }
    CString::new(raw).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// The value and flags a setxattrat's `struct xattr_args` points to (read from the caller's
/// memory here: the structure holds a pointer of its own).
pub fn xattr_args(pid: u32, args: &[u8]) -> io::Result<(Vec<u8>, u32)> {
    let mut w = [0u8; 8];
    w.copy_from_slice(&args[0..8]);
    let addr = u64::from_ne_bytes(w);
    let mut h = [0u8; 4];
    h.copy_from_slice(&args[8..12]);
    let size = u32::from_ne_bytes(h) as usize;
    h.copy_from_slice(&args[12..16]);
    let flags = u32::from_ne_bytes(h);
    if size > super::decode::XATTR_SIZE_MAX {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let value = if size == 0 {
        Vec::new()
    } else {
        super::memory::read_bytes(pid, addr, size)?
    };
    Ok((value, flags))
}

fn timespecs(t: &[(i64, i64); 2]) -> [libc::timespec; 2] {
    t.map(|(s, ns)| libc::timespec {
        tv_sec: s,
        tv_nsec: ns,
    })
}

/// Perform `op` on the object behind `on`, in the form the caller used.
pub fn perform_fd(on: &FdTarget, op: &MetaOp) -> io::Result<()> {
    let fd = on.fd.as_fd();
    let empty = c"";
    let at = on.at_empty_path;
    match op {
        MetaOp::Chmod { mode } if at => {
            sys::meta::fchmodat2(fd, empty, *mode & 0o7777, libc::AT_EMPTY_PATH as u32)
        }
        MetaOp::Chmod { mode } => nix::sys::stat::fchmod(
            fd.as_raw_fd(),
            nix::sys::stat::Mode::from_bits_truncate(*mode & 0o7777),
        )
        .map_err(io::Error::from),
        MetaOp::Chown { uid, gid } => {
            let flags = if at { libc::AT_EMPTY_PATH } else { 0 };
            if at {
                sys::meta::fchownat(fd, empty, *uid, *gid, flags)
            } else {
                nix::unistd::fchown(
                    fd.as_raw_fd(),
                    (*uid != u32::MAX).then(|| nix::unistd::Uid::from_raw(*uid)),
                    (*gid != u32::MAX).then(|| nix::unistd::Gid::from_raw(*gid)),
                )
                .map_err(io::Error::from)
            }
        }
        MetaOp::Times(t) => {
            let ts = t.as_ref().map(timespecs);
            if at {
                sys::meta::utimensat(fd, Some(empty), ts.as_ref(), libc::AT_EMPTY_PATH)
            } else {
                sys::meta::utimensat(fd, None, ts.as_ref(), 0)
            }
        }
        MetaOp::SetXattr { name, value, flags } if at => {
            sys::meta::setxattrat(fd, empty, libc::AT_EMPTY_PATH as u32, name, value, *flags)
        }
        MetaOp::SetXattr { name, value, flags } => {
            sys::meta::fsetxattr(fd, name, value, *flags as i32)
        }
        MetaOp::RemoveXattr { name } if at => {
            sys::meta::removexattrat(fd, empty, libc::AT_EMPTY_PATH as u32, name)
        }
        MetaOp::RemoveXattr { name } => sys::meta::fremovexattr(fd, name),
    }
}

/// Perform a times or xattr change on the resolved `at` (its final symlink, if any, was
/// already followed or kept as the call asked).
pub fn perform_at(at: &Target, op: &MetaOp) -> io::Result<()> {
    if at.kind.is_none() {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    let name = CString::new(at.name.as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let parent = at.parent.as_fd();
    let nofollow = libc::AT_SYMLINK_NOFOLLOW;
    match op {
        MetaOp::Times(t) => {
            let ts = t.as_ref().map(timespecs);
            sys::meta::utimensat(parent, Some(&name), ts.as_ref(), nofollow)
        }
        MetaOp::SetXattr { .. } | MetaOp::RemoveXattr { .. } if at.kind == Some(Kind::Symlink) => {
            // The symlink itself: only setxattrat can name it without following it (6.13).
            // Before that, what lsetxattr would allow on a symlink (trusted.* and security.*)
            // needs capabilities the sandbox does not have: EPERM, as user.* gets there.
            let r = match op {
                MetaOp::SetXattr {
                    name: x,
                    value,
                    flags,
                } => sys::meta::setxattrat(parent, &name, nofollow as u32, x, value, *flags),
                MetaOp::RemoveXattr { name: x } => {
                    sys::meta::removexattrat(parent, &name, nofollow as u32, x)
                }
                _ => unreachable!("matched above"),
            };
            match r {
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    Err(io::Error::from_raw_os_error(libc::EPERM))
                }
                r => r,
            }
        }
        MetaOp::SetXattr { .. } | MetaOp::RemoveXattr { .. } => {
            // Through an O_PATH descriptor of the entry and its /proc magic link, which the
            // path-based calls follow to the object itself.
            let fd = sys::fs::openat(
                Some(parent),
                at.name.as_os_str(),
                nix::fcntl::OFlag::O_PATH
                    | nix::fcntl::OFlag::O_NOFOLLOW
                    | nix::fcntl::OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            )?;
            let proc = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            match op {
                MetaOp::SetXattr {
                    name: x,
                    value,
                    flags,
                } => sys::meta::setxattr(&proc, x, value, *flags as i32),
                MetaOp::RemoveXattr { name: x } => sys::meta::removexattr(&proc, x),
                _ => unreachable!("matched above"),
            }
        }
        // chmod and chown on paths are separate acts (emulate.rs).
        MetaOp::Chmod { .. } | MetaOp::Chown { .. } => {
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_id_modes() {
        assert!(sets_id_mode(0o4755, Some(Kind::File)));
        assert!(sets_id_mode(0o2755, Some(Kind::File)));
        assert!(sets_id_mode(0o2755, None));
        assert!(
            !sets_id_mode(0o2775, Some(Kind::Dir)),
            "a set-group-id directory"
        );
        assert!(sets_id_mode(0o4755, Some(Kind::Dir)));
        assert!(!sets_id_mode(0o1777, Some(Kind::Dir)));
        assert!(!sets_id_mode(0o755, Some(Kind::File)));
        let cap = MetaOp::SetXattr {
            name: c"security.capability".into(),
            value: vec![],
            flags: 0,
        };
        assert!(cap.sets_id(Some(Kind::File)));
    }

    #[test]
    fn a_descriptor_is_judged_by_its_object() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = std::fs::canonicalize(dir.path()).expect("canon").join("f");
        std::fs::write(&p, b"x").expect("write");
        let f = std::fs::File::open(&p).expect("open");
        let t = fd_target(std::process::id(), f.as_raw_fd() as u64, false).expect("target");
        assert_eq!(t.path, p);
        assert_eq!(t.kind, Some(Kind::File));
        assert!(!t.unnamed);
        std::fs::remove_file(&p).expect("unlink");
        let t = fd_target(std::process::id(), f.as_raw_fd() as u64, false).expect("target");
        assert!(t.unnamed, "an unlinked file has no name");
        let (r, _w) = nix::unistd::pipe().expect("pipe");
        let t = fd_target(std::process::id(), r.as_raw_fd() as u64, false).expect("pipe");
        assert!(t.unnamed);
        let e = fd_target(std::process::id(), 9999, false).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
