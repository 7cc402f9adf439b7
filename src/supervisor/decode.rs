//! Decoding a trapped call into a policy [`Request`]: which operation it is, its paths resolved
//! as the caller sees them, its argv and executable, or its socket address.
//!
//! The table in [`shape_of`] names, for every trapped system call, where its arguments are.
//! Anything that cannot be read or makes no sense is an error, and the caller denies the call
//! (fail closed).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::policy::{NetAddr, Op};
use crate::sys::Notif;

use super::memory::{self, PATH_MAX};
use super::resolve::{self, Resolved};

const O_WRITE_FLAGS: u64 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64;

#[derive(Debug, Clone, Copy)]
enum Follow {
    Always,
    Never,
    /// Follow unless the flags argument at this index has AT_SYMLINK_NOFOLLOW.
    UnlessFlagged(usize),
}

#[derive(Debug, Clone, Copy)]
enum OpenFlags {
    Arg(usize),
    Creat,
    /// openat2: flags are the first field of the `struct open_how` at this argument.
    How(usize),
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    Path {
        op: Op,
        dirfd: Option<usize>,
        path: usize,
        follow: Follow,
    },
    /// rename/link: (dirfd, path) of the source, then of the destination.
    Two {
        op: Op,
        from: (Option<usize>, usize),
        to: (Option<usize>, usize),
    },
    Symlink {
        dirfd: Option<usize>,
        new: usize,
    },
    Open {
        dirfd: Option<usize>,
        path: usize,
        flags: OpenFlags,
    },
    Exec {
        dirfd: Option<usize>,
        path: usize,
        argv: usize,
        flags: Option<usize>,
    },
    Connect,
}

/// The argument layout of a trapped system call, and its name.
fn shape_of(nr: i64) -> Option<(&'static str, Shape)> {
    use Follow::*;
    use Op::*;
    let p = |op, dirfd, path, follow| Shape::Path {
        op,
        dirfd,
        path,
        follow,
    };
    let s = match nr {
        libc::SYS_unlinkat => ("unlinkat", p(Delete, Some(0), 1, Never)),
        libc::SYS_renameat2 => (
            "renameat2",
            Shape::Two {
                op: Rename,
                from: (Some(0), 1),
                to: (Some(2), 3),
            },
        ),
        libc::SYS_linkat => (
            "linkat",
            Shape::Two {
                op: Link,
                from: (Some(0), 1),
                to: (Some(2), 3),
            },
        ),
        libc::SYS_symlinkat => (
            "symlinkat",
            Shape::Symlink {
                dirfd: Some(1),
                new: 2,
            },
        ),
        libc::SYS_mkdirat => ("mkdirat", p(Create, Some(0), 1, Never)),
        libc::SYS_mknodat => ("mknodat", p(Create, Some(0), 1, Never)),
        libc::SYS_fchmodat => ("fchmodat", p(Chmod, Some(0), 1, Always)),
        452 => ("fchmodat2", p(Chmod, Some(0), 1, UnlessFlagged(3))),
        libc::SYS_fchownat => ("fchownat", p(Chmod, Some(0), 1, UnlessFlagged(4))),
        libc::SYS_truncate => ("truncate", p(Write, None, 0, Always)),
        libc::SYS_utimensat => ("utimensat", p(Chmod, Some(0), 1, UnlessFlagged(3))),
        libc::SYS_setxattr => ("setxattr", p(Chmod, None, 0, Always)),
        libc::SYS_lsetxattr => ("lsetxattr", p(Chmod, None, 0, Never)),
        libc::SYS_removexattr => ("removexattr", p(Chmod, None, 0, Always)),
        libc::SYS_lremovexattr => ("lremovexattr", p(Chmod, None, 0, Never)),
        // setxattrat(dfd, path, at_flags, name, args, size) and removexattrat(dfd, path,
        // at_flags, name), Linux 6.13; the libc crate has no constants for them yet.
        463 => ("setxattrat", p(Chmod, Some(0), 1, UnlessFlagged(2))),
        466 => ("removexattrat", p(Chmod, Some(0), 1, UnlessFlagged(2))),
        libc::SYS_openat => (
            "openat",
            Shape::Open {
                dirfd: Some(0),
                path: 1,
                flags: OpenFlags::Arg(2),
            },
        ),
        libc::SYS_openat2 => (
            "openat2",
            Shape::Open {
                dirfd: Some(0),
                path: 1,
                flags: OpenFlags::How(2),
            },
        ),
        libc::SYS_execve => (
            "execve",
            Shape::Exec {
                dirfd: None,
                path: 0,
                argv: 1,
                flags: None,
            },
        ),
        libc::SYS_execveat => (
            "execveat",
            Shape::Exec {
                dirfd: Some(0),
                path: 1,
                argv: 2,
                flags: Some(4),
            },
        ),
        libc::SYS_connect => ("connect", Shape::Connect),
        _ => return legacy_shape_of(nr),
    };
    Some(s)
}

/// The pre-*at entry points, which only x86_64 has.
#[cfg(target_arch = "x86_64")]
fn legacy_shape_of(nr: i64) -> Option<(&'static str, Shape)> {
    use Follow::*;
    use Op::*;
    let p = |op, path, follow| Shape::Path {
        op,
        dirfd: None,
        path,
        follow,
    };
    let s = match nr {
        libc::SYS_unlink => ("unlink", p(Delete, 0, Never)),
        libc::SYS_rmdir => ("rmdir", p(Delete, 0, Never)),
        libc::SYS_rename => (
            "rename",
            Shape::Two {
                op: Rename,
                from: (None, 0),
                to: (None, 1),
            },
        ),
        libc::SYS_renameat => (
            "renameat",
            Shape::Two {
                op: Rename,
                from: (Some(0), 1),
                to: (Some(2), 3),
            },
        ),
        libc::SYS_link => (
            "link",
            Shape::Two {
                op: Link,
                from: (None, 0),
                to: (None, 1),
            },
        ),
        libc::SYS_symlink => (
            "symlink",
            Shape::Symlink {
                dirfd: None,
                new: 1,
            },
        ),
        libc::SYS_mkdir => ("mkdir", p(Create, 0, Never)),
        libc::SYS_mknod => ("mknod", p(Create, 0, Never)),
        libc::SYS_chmod => ("chmod", p(Chmod, 0, Always)),
        libc::SYS_chown => ("chown", p(Chmod, 0, Always)),
        libc::SYS_lchown => ("lchown", p(Chmod, 0, Never)),
        libc::SYS_utime => ("utime", p(Chmod, 0, Always)),
        libc::SYS_utimes => ("utimes", p(Chmod, 0, Always)),
        libc::SYS_futimesat => (
            "futimesat",
            Shape::Path {
                op: Chmod,
                dirfd: Some(0),
                path: 1,
                follow: Always,
            },
        ),
        libc::SYS_open => (
            "open",
            Shape::Open {
                dirfd: None,
                path: 0,
                flags: OpenFlags::Arg(1),
            },
        ),
        libc::SYS_creat => (
            "creat",
            Shape::Open {
                dirfd: None,
                path: 0,
                flags: OpenFlags::Creat,
            },
        ),
        _ => return None,
    };
    Some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn legacy_shape_of(_nr: i64) -> Option<(&'static str, Shape)> {
    None
}

/// The name of a trapped system call, for messages.
pub fn syscall_name(nr: i64) -> &'static str {
    shape_of(nr).map(|(n, _)| n).unwrap_or("unknown")
}

/// A decoded call, owning everything the policy [`Request`](crate::policy::Request) borrows.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub syscall: &'static str,
    pub op: Op,
    pub path: Option<PathBuf>,
    pub path2: Option<PathBuf>,
    /// The entry this call would create if it succeeds (used to know what the run made itself).
    pub creates: Option<PathBuf>,
    pub argv: Vec<OsString>,
    pub exe: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub addr: Option<NetAddr>,
}

impl Decoded {
    fn new(syscall: &'static str, op: Op) -> Self {
        Decoded {
            syscall,
            op,
            path: None,
            path2: None,
            creates: None,
            argv: Vec::new(),
            exe: None,
            cwd: None,
            addr: None,
        }
    }
}

/// What the supervisor should do with a notification after decoding.
#[derive(Debug)]
pub enum Decision {
    /// Judge it against the policy.
    Judge(Decoded),
    /// Nothing to judge (an openat2 that only reads): let it run.
    Pass,
}

/// A decoding failure: the call is denied with `errno`.
#[derive(Debug)]
pub struct DecodeError {
    pub syscall: &'static str,
    pub errno: i32,
    pub what: String,
}

fn read_path(n: &Notif, arg: usize) -> io::Result<Vec<u8>> {
    memory::read_cstr(n.pid, n.args[arg], PATH_MAX)
}

fn dirfd_arg(n: &Notif, dirfd: Option<usize>) -> u64 {
    match dirfd {
        Some(i) => n.args[i],
        None => libc::AT_FDCWD as u64,
    }
}

fn path_at(n: &Notif, dirfd: Option<usize>, path: usize, follow: bool) -> io::Result<Resolved> {
    let raw = read_path(n, path)?;
    resolve::resolve(n.pid, dirfd_arg(n, dirfd), &raw, follow)
}

/// Decode notification `n`.
pub fn decode(n: &Notif) -> Result<Decision, DecodeError> {
    let nr = i64::from(n.nr);
    let Some((name, shape)) = shape_of(nr) else {
        return Err(DecodeError {
            syscall: "unknown",
            errno: libc::ENOSYS,
            what: format!("system call {nr} is not one guard judges"),
        });
    };
    let fail = |e: io::Error, what: &str| DecodeError {
        syscall: name,
        errno: e.raw_os_error().unwrap_or(libc::EPERM),
        what: format!("{what}: {e}"),
    };
    let mut d;
    match shape {
        Shape::Path {
            op,
            dirfd,
            path,
            follow,
        } => {
            d = Decoded::new(name, op);
            let raw = read_path(n, path).map_err(|e| fail(e, "cannot read the path"))?;
            let follow = match follow {
                Follow::Always => true,
                Follow::Never => false,
                Follow::UnlessFlagged(i) => n.args[i] & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
            };
            let r = if raw.is_empty() {
                // AT_EMPTY_PATH (or utimensat's NULL path): the call acts on the dirfd itself.
                let fd = dirfd.map(|i| n.args[i] as i32).unwrap_or(-1);
                let p = resolve::caller_fd_path(n.pid, fd)
                    .map_err(|e| fail(e, "cannot resolve the descriptor"))?;
                Resolved {
                    exists: true,
                    path: p,
                }
            } else {
                resolve::resolve(n.pid, dirfd_arg(n, dirfd), &raw, follow)
                    .map_err(|e| fail(e, "cannot resolve the path"))?
            };
            if op == Op::Create && !r.exists {
                d.creates = Some(r.path.clone());
            }
            d.path = Some(r.path);
        }
        Shape::Two { op, from, to } => {
            d = Decoded::new(name, op);
            let a = path_at(n, from.0, from.1, false)
                .map_err(|e| fail(e, "cannot resolve the source"))?;
            let b = path_at(n, to.0, to.1, false)
                .map_err(|e| fail(e, "cannot resolve the destination"))?;
            if !b.exists {
                d.creates = Some(b.path.clone());
            }
            d.path = Some(a.path);
            d.path2 = Some(b.path);
        }
        Shape::Symlink { dirfd, new } => {
            d = Decoded::new(name, Op::Create);
            let r = path_at(n, dirfd, new, false)
                .map_err(|e| fail(e, "cannot resolve the link name"))?;
            if !r.exists {
                d.creates = Some(r.path.clone());
            }
            d.path = Some(r.path);
        }
        Shape::Open { dirfd, path, flags } => {
            let flags = match flags {
                OpenFlags::Arg(i) => n.args[i],
                OpenFlags::Creat => (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
                OpenFlags::How(i) => {
                    let how = memory::read_bytes(n.pid, n.args[i], 8)
                        .map_err(|e| fail(e, "cannot read open_how"))?;
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&how);
                    u64::from_ne_bytes(w)
                }
            };
            if flags & O_WRITE_FLAGS == 0 {
                return Ok(Decision::Pass);
            }
            let creat = flags & libc::O_CREAT as u64 != 0;
            let excl = flags & libc::O_EXCL as u64 != 0;
            let nofollow = flags & libc::O_NOFOLLOW as u64 != 0;
            let r = path_at(n, dirfd, path, !(nofollow || (creat && excl)))
                .map_err(|e| fail(e, "cannot resolve the path"))?;
            let op = if !r.exists && creat {
                Op::Create
            } else {
                Op::Write
            };
            d = Decoded::new(name, op);
            if op == Op::Create {
                d.creates = Some(r.path.clone());
            }
            d.path = Some(r.path);
        }
        Shape::Exec {
            dirfd,
            path,
            argv,
            flags,
        } => {
            d = Decoded::new(name, Op::Exec);
            let raw = read_path(n, path).map_err(|e| fail(e, "cannot read the program path"))?;
            let empty_path = flags.is_some_and(|i| n.args[i] & libc::AT_EMPTY_PATH as u64 != 0);
            let exe = if raw.is_empty() && empty_path {
                let fd = dirfd.map(|i| n.args[i] as i32).unwrap_or(-1);
                resolve::caller_fd_path(n.pid, fd)
                    .map_err(|e| fail(e, "cannot resolve the descriptor"))?
            } else {
                resolve::resolve_existing(n.pid, dirfd_arg(n, dirfd), &raw)
                    .map_err(|e| fail(e, "cannot resolve the program"))?
            };
            let args = memory::read_argv(n.pid, n.args[argv], 16 * 1024, 2 * 1024 * 1024)
                .map_err(|e| fail(e, "cannot read argv"))?;
            d.argv = args.into_iter().map(OsString::from_vec).collect();
            d.exe = Some(exe);
            d.cwd = resolve::caller_cwd(n.pid).ok();
        }
        Shape::Connect => {
            d = Decoded::new(name, Op::Connect);
            let len = (n.args[2] as usize).min(128);
            if len < 2 {
                return Err(fail(
                    io::Error::from_raw_os_error(libc::EINVAL),
                    "address too short",
                ));
            }
            let raw = memory::read_bytes(n.pid, n.args[1], len)
                .map_err(|e| fail(e, "cannot read the address"))?;
            let addr = decode_sockaddr(&raw, n.pid).map_err(|e| fail(e, "bad socket address"))?;
            d.addr = Some(addr);
        }
    }
    Ok(Decision::Judge(d))
}

/// Decode a `struct sockaddr` of `raw.len()` bytes (as given to connect). Unix paths that are
/// relative are resolved against the caller's cwd.
pub fn decode_sockaddr(raw: &[u8], pid: u32) -> io::Result<NetAddr> {
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    let family = u16::from_ne_bytes([
        *raw.first().ok_or_else(einval)?,
        *raw.get(1).ok_or_else(einval)?,
    ]);
    match i32::from(family) {
        libc::AF_UNSPEC => Ok(NetAddr::Unspecified),
        libc::AF_INET => {
            let b = raw.get(2..8).ok_or_else(einval)?;
            let port = u16::from_be_bytes([b[0], b[1]]);
            let ip = std::net::Ipv4Addr::new(b[2], b[3], b[4], b[5]);
            Ok(NetAddr::Inet((ip, port).into()))
        }
        libc::AF_INET6 => {
            let b = raw.get(2..28).ok_or_else(einval)?;
            let port = u16::from_be_bytes([b[0], b[1]]);
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&b[6..22]);
            let ip = std::net::Ipv6Addr::from(octets);
            Ok(NetAddr::Inet((ip, port).into()))
        }
        libc::AF_UNIX => {
            let path = raw.get(2..).unwrap_or(&[]);
            match path.first() {
                None => Ok(NetAddr::Unspecified),
                Some(0) => Ok(NetAddr::Abstract(path[1..].to_vec())),
                Some(_) => {
                    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&path[..end]));
                    let abs = if p.is_absolute() {
                        p.to_path_buf()
                    } else {
                        resolve::caller_cwd(pid)?.join(p)
                    };
                    Ok(NetAddr::Unix(resolve::lexical(&abs)))
                }
            }
        }
        other => Ok(NetAddr::Other(other as u16)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_ipv4_and_ipv6() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&8080u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(
            decode_sockaddr(&v4, 1).expect("v4"),
            NetAddr::Inet("127.0.0.1:8080".parse().expect("addr"))
        );
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&443u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(
            decode_sockaddr(&v6, 1).expect("v6"),
            NetAddr::Inet("[::1]:443".parse().expect("addr"))
        );
    }

    #[test]
    fn decodes_unix_abstract_and_rejects_garbage() {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(b"\0name");
        assert_eq!(
            decode_sockaddr(&a, 1).expect("abstract"),
            NetAddr::Abstract(b"name".to_vec())
        );
        let mut p = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        p.extend_from_slice(b"/run/x.sock\0");
        assert_eq!(
            decode_sockaddr(&p, 1).expect("path"),
            NetAddr::Unix("/run/x.sock".into())
        );
        assert!(decode_sockaddr(&[2], 1).is_err());
        let mut short = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        short.push(1);
        assert!(decode_sockaddr(&short, 1).is_err());
    }
}
