//! Decoding a trapped call into a policy [`Request`]: which operation it is, its paths resolved
//! as the caller sees them, its argv and executable, or its socket address.
//!
//! Where each trapped system call keeps its arguments is read from the one syscall table
//! ([`crate::confine::syscalls`]), the table the seccomp filter is built from.
//! Anything that cannot be read or makes no sense is an error, and the caller denies the call
//! (fail closed).

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::policy::{NetAddr, Op};
use crate::sys::Notif;

use super::memory::{self, PATH_MAX};
use super::resolve::{self, Target};
use crate::confine::syscalls::{self, Follow, OpenFlags, Shape as Call};

const O_WRITE_FLAGS: u64 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u64;

/// The address to connect to, as bytes for the kernel: a relative unix socket path is made
/// absolute (guard connects from its own cwd, not the caller's).
fn absolute_unix(raw: &[u8], addr: &NetAddr) -> Vec<u8> {
    if let NetAddr::Unix(p) = addr {
        let bytes = p.as_os_str().as_bytes();
        // sun_path holds 108 bytes including the NUL.
        if bytes.len() < 108 {
            let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
            out.extend_from_slice(bytes);
            out.push(0);
            return out;
        }
    }
    raw.to_vec()
}

/// What the supervisor does with an allowed call: perform it itself on the resolved targets
/// (so the object judged is the object changed, and the journal sees it first), or let the
/// kernel continue it (exec and connect, which cannot be emulated, and metadata-only calls).
#[derive(Debug)]
pub enum Act {
    Continue,
    Unlink(Target),
    Rmdir(Target),
    Rename {
        from: Target,
        to: Target,
        flags: u32,
    },
    Link {
        from: Target,
        to: Target,
    },
    Symlink {
        target: Vec<u8>,
        at: Target,
    },
    Mkdir {
        at: Target,
        mode: u32,
    },
    Mknod {
        at: Target,
        mode: u32,
        dev: u64,
    },
    Chmod {
        at: Target,
        mode: u32,
    },
    Chown {
        at: Target,
        uid: u32,
        gid: u32,
    },
    Truncate {
        at: Target,
        len: i64,
    },
    Open {
        at: Target,
        flags: i32,
        mode: u32,
    },
    /// Record the old metadata, then continue.
    Meta(Target),
    /// Connect the caller's socket (a duplicate fetched with pidfd_getfd) to the address read
    /// once from its memory.
    Connect {
        sock: i32,
        addr: Vec<u8>,
    },
}

/// A decoded call, owning everything the policy [`Request`](crate::policy::Request) borrows.
#[derive(Debug)]
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
    /// exec: the program has no file reachable by path (see `Request::exe_anonymous`).
    pub exe_anonymous: bool,
    pub act: Act,
}

impl Decoded {
    fn new(syscall: &'static str, op: Op, act: Act) -> Self {
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
            exe_anonymous: false,
            act,
        }
    }
}

/// What the supervisor should do with a notification after decoding.
#[derive(Debug)]
pub enum Decision {
    /// Judge it against the policy.
    Judge(Box<Decoded>),
    /// Nothing to judge (an openat2 that only reads): let it run.
    Pass,
}

/// A decoding failure: the call is denied with `errno`.
#[derive(Debug)]
pub struct DecodeError {
    pub syscall: &'static str,
    pub errno: i32,
    pub what: String,
    pub kind: FailureKind,
}

/// Why a call could not be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A path that does not resolve (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG): the call fails with
    /// the errno the kernel itself gives it, not by policy.
    Unresolved,
    /// guard could not read or make sense of the call: refused, fail closed.
    Undecodable,
}

impl DecodeError {
    /// `resolving`: `e` came from resolving a path argument (reading it, or walking it).
    fn new(syscall: &'static str, e: &io::Error, what: &str, resolving: bool) -> Self {
        let errno = e.raw_os_error().unwrap_or(libc::EPERM);
        let natural = matches!(
            errno,
            libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG
        );
        DecodeError {
            syscall,
            errno,
            what: format!("{what}: {e}"),
            kind: if resolving && natural {
                FailureKind::Unresolved
            } else {
                FailureKind::Undecodable
            },
        }
    }
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

fn target_at(n: &Notif, dirfd: Option<usize>, path: usize, follow: bool) -> io::Result<Target> {
    let raw = read_path(n, path)?;
    resolve::target(n.pid, dirfd_arg(n, dirfd), &raw, follow)
}

fn follows(n: &Notif, f: Follow) -> bool {
    match f {
        Follow::Always => true,
        Follow::Never => false,
        Follow::UnlessFlagged(i) => n.args[i] & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
    }
}

/// The target of a metadata call, where an empty path (AT_EMPTY_PATH, or utimensat's NULL)
/// means the descriptor itself.
fn meta_target(
    n: &Notif,
    dirfd: Option<usize>,
    path: usize,
    follow: bool,
    empty_ok: bool,
) -> io::Result<Target> {
    let raw = if empty_ok && n.args[path] == 0 {
        Vec::new()
    } else {
        read_path(n, path)?
    };
    if raw.is_empty() && empty_ok {
        let fd = dirfd.map(|i| n.args[i] as i32).unwrap_or(-1);
        let p = resolve::caller_fd_path(n.pid, fd)?;
        let raw = p.into_os_string().into_vec();
        return resolve::target(n.pid, libc::AT_FDCWD as u64, &raw, false);
    }
    resolve::target(n.pid, dirfd_arg(n, dirfd), &raw, follow)
}

/// Whether the program an exec names through a descriptor (`fd` + AT_EMPTY_PATH, or a
/// /proc/PID/fd path) is the very file found at `exe` on disk.
fn same_file_on_disk(n: &Notif, dirfd: Option<usize>, raw: &[u8], exe: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let object = if raw.is_empty() {
        let fd = dirfd.map(|i| n.args[i] as i32).unwrap_or(-1);
        std::fs::metadata(format!("/proc/{}/fd/{fd}", n.pid))
    } else {
        std::fs::metadata(std::ffi::OsStr::from_bytes(raw))
    };
    match (object, std::fs::metadata(exe)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Decode notification `n`.
pub fn decode(n: &Notif) -> Result<Decision, DecodeError> {
    let nr = i64::from(n.nr);
    let Some((name, call)) =
        syscalls::trapped(syscalls::NATIVE, nr).and_then(|s| Some((s.name, s.trapped_shape()?)))
    else {
        return Err(DecodeError {
            syscall: "unknown",
            errno: libc::ENOSYS,
            what: format!("system call {nr} is not one guard judges"),
            kind: FailureKind::Undecodable,
        });
    };
    let fail = |e: io::Error, what: &str| DecodeError::new(name, &e, what, false);
    // A path that cannot be resolved: the kernel's own answer when it does not resolve.
    let unresolved = |e: io::Error, what: &str| DecodeError::new(name, &e, what, true);
    let arg32 = |i: usize| n.args[i] as u32;
    let d = match call {
        Call::Unlink {
            dirfd,
            path,
            flags,
            rmdir,
        } => {
            let t = target_at(n, dirfd, path, false)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let rmdir = rmdir || flags.is_some_and(|i| n.args[i] & libc::AT_REMOVEDIR as u64 != 0);
            let p = t.path.clone();
            let mut d = Decoded::new(
                name,
                Op::Delete,
                if rmdir { Act::Rmdir(t) } else { Act::Unlink(t) },
            );
            d.path = Some(p);
            d
        }
        Call::Rename { from, to, flags } => {
            let a = target_at(n, from.0, from.1, false)
                .map_err(|e| unresolved(e, "cannot resolve the source"))?;
            let b = target_at(n, to.0, to.1, false)
                .map_err(|e| unresolved(e, "cannot resolve the destination"))?;
            let flags = flags.map(arg32).unwrap_or(0);
            let (pa, pb, new) = (a.path.clone(), b.path.clone(), b.kind.is_none());
            let mut d = Decoded::new(
                name,
                Op::Rename,
                Act::Rename {
                    from: a,
                    to: b,
                    flags,
                },
            );
            d.creates = new.then(|| pb.clone());
            d.path = Some(pa);
            d.path2 = Some(pb);
            d
        }
        Call::Link { from, to, flags } => {
            let follow = flags.is_some_and(|i| n.args[i] & libc::AT_SYMLINK_FOLLOW as u64 != 0);
            let a = target_at(n, from.0, from.1, follow)
                .map_err(|e| unresolved(e, "cannot resolve the source"))?;
            let b = target_at(n, to.0, to.1, false)
                .map_err(|e| unresolved(e, "cannot resolve the link name"))?;
            let (pa, pb, new) = (a.path.clone(), b.path.clone(), b.kind.is_none());
            let mut d = Decoded::new(name, Op::Link, Act::Link { from: a, to: b });
            d.creates = new.then(|| pb.clone());
            d.path = Some(pa);
            d.path2 = Some(pb);
            d
        }
        Call::Symlink {
            target,
            dirfd,
            path,
        } => {
            let content =
                read_path(n, target).map_err(|e| fail(e, "cannot read the link target"))?;
            let t = target_at(n, dirfd, path, false)
                .map_err(|e| unresolved(e, "cannot resolve the link name"))?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut d = Decoded::new(
                name,
                Op::Create,
                Act::Symlink {
                    target: content,
                    at: t,
                },
            );
            d.creates = new.then(|| p.clone());
            d.path = Some(p);
            d
        }
        Call::Mkdir { dirfd, path, mode } => {
            let t = target_at(n, dirfd, path, false)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut d = Decoded::new(
                name,
                Op::Create,
                Act::Mkdir {
                    at: t,
                    mode: arg32(mode),
                },
            );
            d.creates = new.then(|| p.clone());
            d.path = Some(p);
            d
        }
        Call::Mknod {
            dirfd,
            path,
            mode,
            dev,
        } => {
            let t = target_at(n, dirfd, path, false)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let (p, new) = (t.path.clone(), t.kind.is_none());
            let mut d = Decoded::new(
                name,
                Op::Create,
                Act::Mknod {
                    at: t,
                    mode: arg32(mode),
                    dev: n.args[dev],
                },
            );
            d.creates = new.then(|| p.clone());
            d.path = Some(p);
            d
        }
        Call::Chmod {
            dirfd,
            path,
            mode,
            follow,
        } => {
            let t = meta_target(n, dirfd, path, follows(n, follow), false)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let p = t.path.clone();
            let mut d = Decoded::new(
                name,
                Op::Chmod,
                Act::Chmod {
                    at: t,
                    mode: arg32(mode),
                },
            );
            d.path = Some(p);
            d
        }
        Call::Chown {
            dirfd,
            path,
            uid,
            follow,
        } => {
            let t = meta_target(n, dirfd, path, follows(n, follow), dirfd.is_some())
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let p = t.path.clone();
            let (u, g) = (arg32(uid), arg32(uid + 1));
            let mut d = Decoded::new(
                name,
                Op::Chmod,
                Act::Chown {
                    at: t,
                    uid: u,
                    gid: g,
                },
            );
            d.path = Some(p);
            d
        }
        Call::Truncate { path, len } => {
            let t = target_at(n, None, path, true)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let p = t.path.clone();
            let mut d = Decoded::new(
                name,
                Op::Write,
                Act::Truncate {
                    at: t,
                    len: n.args[len] as i64,
                },
            );
            d.path = Some(p);
            d
        }
        Call::Meta {
            dirfd,
            path,
            follow,
            empty_ok,
        } => {
            let t = meta_target(n, dirfd, path, follows(n, follow), empty_ok)
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let p = t.path.clone();
            let mut d = Decoded::new(name, Op::Chmod, Act::Meta(t));
            d.path = Some(p);
            d
        }
        Call::Open {
            dirfd,
            path,
            flags,
            mode,
        } => {
            let (flags, mode, resolve_flags) = match flags {
                OpenFlags::Arg(i) => (n.args[i], mode.map(|m| n.args[m]).unwrap_or(0), 0),
                OpenFlags::Creat => (
                    (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
                    mode.map(|m| n.args[m]).unwrap_or(0),
                    0,
                ),
                OpenFlags::How(i) => {
                    let how = memory::read_bytes(n.pid, n.args[i], 24)
                        .map_err(|e| fail(e, "cannot read open_how"))?;
                    let word = |k: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&how[k * 8..k * 8 + 8]);
                        u64::from_ne_bytes(w)
                    };
                    (word(0), word(1), word(2))
                }
            };
            if flags & O_WRITE_FLAGS == 0 {
                return Ok(Decision::Pass);
            }
            if resolve_flags != 0 {
                // The caller asked openat2 to restrict its own resolution; guard resolves
                // differently, so it cannot honour that: ENOSYS makes callers fall back to openat.
                return Err(fail(
                    io::Error::from_raw_os_error(libc::ENOSYS),
                    "openat2 with resolve flags",
                ));
            }
            let creat = flags & libc::O_CREAT as u64 != 0;
            let excl = flags & libc::O_EXCL as u64 != 0;
            let nofollow = flags & libc::O_NOFOLLOW as u64 != 0;
            let t = target_at(n, dirfd, path, !(nofollow || (creat && excl)))
                .map_err(|e| unresolved(e, "cannot resolve the path"))?;
            let op = if t.kind.is_none() && creat {
                Op::Create
            } else {
                Op::Write
            };
            let p = t.path.clone();
            let mut d = Decoded::new(
                name,
                op,
                Act::Open {
                    at: t,
                    flags: flags as i32,
                    mode: mode as u32,
                },
            );
            if op == Op::Create {
                d.creates = Some(p.clone());
            }
            d.path = Some(p);
            d
        }
        Call::Exec {
            dirfd,
            path,
            argv,
            flags,
        } => {
            let raw = read_path(n, path).map_err(|e| fail(e, "cannot read the program path"))?;
            let empty_path = flags.is_some_and(|i| n.args[i] & libc::AT_EMPTY_PATH as u64 != 0);
            let exe = if raw.is_empty() && empty_path {
                let fd = dirfd.map(|i| n.args[i] as i32).unwrap_or(-1);
                resolve::caller_fd_path(n.pid, fd)
                    .map_err(|e| unresolved(e, "cannot resolve the descriptor"))?
            } else {
                resolve::resolve_existing(n.pid, dirfd_arg(n, dirfd), &raw)
                    .map_err(|e| unresolved(e, "cannot resolve the program"))?
            };
            let args = memory::read_argv(n.pid, n.args[argv], 16 * 1024, 2 * 1024 * 1024)
                .map_err(|e| fail(e, "cannot read argv"))?;
            // A program with no file behind it (memfd_create + fexecve, a deleted file reached
            // through /proc/PID/fd): Landlock's execute right does not cover those.
            let via_fd = (raw.is_empty() && empty_path)
                || raw.starts_with(b"/proc/")
                || raw.starts_with(b"/dev/fd/");
            let anonymous = via_fd && !same_file_on_disk(n, dirfd, &raw, &exe);
            let mut d = Decoded::new(name, Op::Exec, Act::Continue);
            d.argv = args.into_iter().map(OsString::from_vec).collect();
            d.exe = Some(exe);
            d.exe_anonymous = anonymous;
            d.cwd = resolve::caller_cwd(n.pid).ok();
            d
        }
        Call::Connect { sock, addr, len } => {
            let len = (n.args[len] as usize).min(128);
            if len < 2 {
                return Err(fail(
                    io::Error::from_raw_os_error(libc::EINVAL),
                    "address too short",
                ));
            }
            let raw = memory::read_bytes(n.pid, n.args[addr], len)
                .map_err(|e| fail(e, "cannot read the address"))?;
            let addr = decode_sockaddr(&raw, n.pid).map_err(|e| fail(e, "bad socket address"))?;
            let wire = absolute_unix(&raw, &addr);
            let mut d = Decoded::new(
                name,
                Op::Connect,
                Act::Connect {
                    sock: n.args[sock] as i32,
                    addr: wire,
                },
            );
            d.addr = Some(addr);
            d
        }
    };
    Ok(Decision::Judge(Box::new(d)))
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
