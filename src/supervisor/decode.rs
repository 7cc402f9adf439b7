//! The decode stage: a notification's system call number and raw registers into a typed
//! [`Call`]: which arguments are paths (with the directory they start from), flags, modes, and
//! which are pointers still to be read. Nothing is read from the caller's memory here and
//! nothing is resolved: decoding looks at registers only.
//!
//! Where each trapped call keeps its arguments comes from the one syscall table
//! ([`crate::confine::syscalls`]), the table the seccomp filter is built from, so every call
//! the filter traps decodes. A call that is not in it, or whose registers make no sense, is a
//! [`Failure`] and is refused (fail closed); later stages fail with the same type.

use std::io;
use std::path::PathBuf;

use crate::confine::syscalls::{self, Empty, Follow, MetaArgs, OpenFlags, Shape, Syscall};
use crate::sys::Notif;

use crate::policy::{Action, Builtin, Op, RuleId, Verdict};

/// A NUL-terminated string in the caller's memory (a path, a symlink's target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrPtr(pub u64);

/// A structure of known size in the caller's memory (`struct open_how`, a socket address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPtr {
    pub addr: u64,
    pub len: usize,
}

/// A NULL-terminated array of string pointers in the caller's memory (an exec's argv).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgvPtr(pub u64);

/// A path argument: the directory a relative path starts from, and the string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathArg {
    /// The directory descriptor as passed (`AT_FDCWD` for the calls that take none).
    pub dirfd: u64,
    /// `None`: no path, the descriptor itself (fchmod, fsetxattr, or the NULL path utimensat
    /// allows).
    pub path: Option<StrPtr>,
    /// AT_EMPTY_PATH: an empty path names the descriptor itself (otherwise it is ENOENT).
    pub empty_path: bool,
}

/// What a times or extended attribute call sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaWhat {
    /// Access and modification times; `None`: now. The structure as the call passes it.
    Times(TimesArg),
    SetXattr {
        name: StrPtr,
        /// `None`: an empty value (size 0).
        value: Option<BlockPtr>,
        flags: u32,
    },
    /// setxattrat: value, size and flags are in a `struct xattr_args`.
    SetXattrAt {
        name: StrPtr,
        args: BlockPtr,
    },
    RemoveXattr {
        name: StrPtr,
    },
}

/// The times argument of utime (`struct utimbuf`), utimes/futimesat (two `timeval`) or
/// utimensat (two `timespec`); `None` for NULL (now).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimesArg {
    Utimbuf(Option<BlockPtr>),
    Timeval(Option<BlockPtr>),
    Timespec(Option<BlockPtr>),
}

impl TimesArg {
    fn ptr(&self) -> Option<BlockPtr> {
        match *self {
            TimesArg::Utimbuf(p) | TimesArg::Timeval(p) | TimesArg::Timespec(p) => p,
        }
    }
}

/// Where an open call's flags are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenHow {
    /// In registers (open, openat, creat).
    Flags { flags: u64, mode: u64 },
    /// In a `struct open_how` (openat2): flags, mode and resolve flags, 8 bytes each.
    InMemory(BlockPtr),
}

/// A trapped call's arguments, typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Args {
    Unlink {
        at: PathArg,
        rmdir: bool,
    },
    Rename {
        from: PathArg,
        to: PathArg,
        flags: u32,
    },
    Link {
        from: PathArg,
        to: PathArg,
        /// AT_SYMLINK_FOLLOW: a final symlink of `from` is followed.
        follow: bool,
        /// AT_EMPTY_PATH: an empty `from` names its descriptor itself.
        empty_path: bool,
    },
    Symlink {
        target: StrPtr,
        at: PathArg,
    },
    Mkdir {
        at: PathArg,
        mode: u32,
    },
    Mknod {
        at: PathArg,
        mode: u32,
        dev: u64,
    },
    Chmod {
        at: PathArg,
        mode: u32,
        follow: bool,
    },
    Chown {
        at: PathArg,
        uid: u32,
        gid: u32,
        follow: bool,
    },
    Truncate {
        at: PathArg,
        len: i64,
    },
    /// The times and xattr calls, performed by the supervisor.
    Meta {
        at: PathArg,
        follow: bool,
        what: MetaWhat,
    },
    Open {
        at: PathArg,
        how: OpenHow,
    },
    /// `empty_path`: AT_EMPTY_PATH, an empty path runs the descriptor itself. `envp` is read
    /// only for the execs that need it (git's), after the read stage.
    Exec {
        at: PathArg,
        argv: ArgvPtr,
        envp: ArgvPtr,
        empty_path: bool,
    },
    Connect {
        sock: i32,
        addr: BlockPtr,
    },
    /// sendto with a destination (without one it is not trapped). `len`: the length asked
    /// for; `buf` covers at most [`PAYLOAD_MAX`] of it. `addr`: `None` for a zero address
    /// length (the kernel then ignores the pointer).
    SendTo {
        sock: i32,
        buf: BlockPtr,
        len: usize,
        flags: i32,
        addr: Option<BlockPtr>,
    },
    /// sendmsg: the `struct msghdr` is read here, what it points to by the resolve stage.
    SendMsg {
        sock: i32,
        msg: BlockPtr,
        flags: i32,
    },
    /// sendmmsg: `vlen` capped at the kernel's UIO_MAXIOV; read by the resolve stage.
    SendMmsg {
        sock: i32,
        vec: u64,
        vlen: u32,
        flags: i32,
    },
    Bind {
        sock: i32,
        addr: BlockPtr,
    },
    Listen {
        sock: i32,
        backlog: i32,
    },
    /// The caller changes its credentials, or its umask (`umask`: the new mask).
    Credentials {
        umask: Option<u32>,
    },
    /// The caller changes its working directory (chdir, fchdir).
    Cwd,
}

/// One trapped call, decoded from its registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub syscall: &'static str,
    pub args: Args,
}

/// What the read stage copies for one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Str(StrPtr),
    Block(BlockPtr),
    Argv(ArgvPtr),
}

impl Call {
    /// Every pointer argument of the call, in argument order; at most three.
    pub fn wants(&self) -> [Option<Want>; 3] {
        let path = |p: &PathArg| p.path.map(Want::Str);
        match &self.args {
            Args::Unlink { at, .. }
            | Args::Mkdir { at, .. }
            | Args::Mknod { at, .. }
            | Args::Chmod { at, .. }
            | Args::Chown { at, .. }
            | Args::Truncate { at, .. } => [path(at), None, None],
            Args::Meta { at, what, .. } => {
                let block = |b: Option<BlockPtr>| b.map(Want::Block);
                match what {
                    MetaWhat::Times(t) => [path(at), block(t.ptr()), None],
                    MetaWhat::SetXattr { name, value, .. } => {
                        [path(at), Some(Want::Str(*name)), block(*value)]
                    }
                    MetaWhat::SetXattrAt { name, args } => {
                        [path(at), Some(Want::Str(*name)), Some(Want::Block(*args))]
                    }
                    MetaWhat::RemoveXattr { name } => [path(at), Some(Want::Str(*name)), None],
                }
            }
            Args::Rename { from, to, .. } | Args::Link { from, to, .. } => {
                [path(from), path(to), None]
            }
            Args::Symlink { target, at } => [Some(Want::Str(*target)), path(at), None],
            Args::Open { at, how } => [
                path(at),
                match how {
                    OpenHow::InMemory(b) => Some(Want::Block(*b)),
                    OpenHow::Flags { .. } => None,
                },
                None,
            ],
            Args::Exec { at, argv, .. } => [path(at), Some(Want::Argv(*argv)), None],
            Args::Connect { addr, .. } | Args::Bind { addr, .. } => {
                [Some(Want::Block(*addr)), None, None]
            }
            Args::SendTo { buf, addr, .. } => [
                (buf.len > 0).then_some(Want::Block(*buf)),
                addr.map(Want::Block),
                None,
            ],
            Args::SendMsg { msg, .. } => [Some(Want::Block(*msg)), None, None],
            Args::SendMmsg { .. } | Args::Listen { .. } => [None, None, None],
            Args::Credentials { .. } | Args::Cwd => [None, None, None],
        }
    }
}

/// Why a call could not be judged: it is refused with `errno`.
#[derive(Debug)]
pub struct Failure {
    pub syscall: &'static str,
    pub errno: i32,
    pub what: String,
    pub kind: FailureKind,
    /// The operation the call asked for and the paths it named, as far as guard got before
    /// it failed (see [`Failure::at`]): for the call's record, so that a failed call is
    /// found by its path in the audit log like any other.
    pub op: Option<Op>,
    pub path: Option<PathBuf>,
    pub path2: Option<PathBuf>,
}

/// Why a call could not be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A path that does not resolve (ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG, or EACCES: a
    /// directory on the way the caller may not search, the walk being made with the caller's
    /// credentials), a descriptor the caller does not have (EBADF), an argument its memory
    /// does not hold (EFAULT: the read stage stops where the kernel's own copy would fault),
    /// a name to create that exists (EEXIST), or a name the kernel refuses for its form alone
    /// (a trailing slash, `.`, `..`: `names::refused`): the call fails with the errno the
    /// kernel itself gives it, not by policy.
    Unresolved,
    /// guard could not read or make sense of the call: refused, fail closed.
    Undecodable,
}

impl Failure {
    /// A failure of `syscall` with `errno`, `what` saying why; what the call was about is
    /// added by [`Failure::at`] and [`Failure::to`].
    pub fn new(syscall: &'static str, errno: i32, what: String, kind: FailureKind) -> Self {
        Failure {
            syscall,
            errno,
            what,
            kind,
            op: None,
            path: None,
            path2: None,
        }
    }

    /// `e` while reading or making sense of an argument.
    pub fn undecodable(syscall: &'static str, e: &io::Error, what: &str) -> Self {
        Self::new(
            syscall,
            e.raw_os_error().unwrap_or(libc::EPERM),
            format!("{what}: {e}"),
            FailureKind::Undecodable,
        )
    }

    /// The failed call was operation `op` on `path` (`None` where the path argument could
    /// not be read).
    pub fn at(mut self, op: Op, path: Option<PathBuf>) -> Self {
        self.op = Some(op);
        self.path = path;
        self
    }

    /// The failed call's second path (the destination of a rename or link).
    pub fn to(mut self, path2: Option<PathBuf>) -> Self {
        self.path2 = path2;
        self
    }

    /// `e` while resolving a path argument (reading it, or walking it), or reading any other
    /// argument from the caller's memory: the kernel's own answer when the path does not
    /// resolve or the memory is not there (EFAULT; a string longer than PATH_MAX is
    /// ENAMETOOLONG, as the kernel's copy says). The walk looks names up with the caller's
    /// credentials, so its EACCES is the caller's own (guard's failure to read the caller's
    /// directory in /proc comes as EPERM, `supervisor::target`). Anything else (ESRCH, EPERM,
    /// ENOMEM) is guard's failure.
    pub fn unresolved(syscall: &'static str, e: &io::Error, what: &str) -> Self {
        let mut f = Self::undecodable(syscall, e, what);
        // EEXIST: a new entry's name is taken, which the kernel reports before any
        // permission check (see `exists` in resolve.rs).
        if matches!(
            f.errno,
            libc::ENOENT
                | libc::ENOTDIR
                | libc::ELOOP
                | libc::ENAMETOOLONG
                | libc::EEXIST
                | libc::EACCES
                | libc::EBADF
                | libc::EFAULT
        ) {
            f.kind = FailureKind::Unresolved;
        }
        f
    }

    /// The verdict on a call that failed before it could be judged.
    pub fn verdict(&self) -> Verdict {
        Verdict {
            action: Action::Deny,
            errno: self.errno,
            rule: RuleId::Builtin(match self.kind {
                FailureKind::Unresolved => Builtin::Resolve,
                FailureKind::Undecodable => Builtin::Decode,
            }),
            reason: Some(self.what.clone()),
        }
    }
}

/// The largest socket address guard reads (`struct sockaddr_storage`).
const SOCKADDR_MAX: usize = 128;
/// The largest extended attribute value (the kernel's XATTR_SIZE_MAX).
pub const XATTR_SIZE_MAX: usize = 65536;
/// `struct xattr_args` of setxattrat: value pointer, size, flags.
const XATTR_ARGS_LEN: usize = 16;
/// The most of one send's payload guard copies: a stream send of more is sent in part (the
/// caller sees a short count, as the kernel may give), a datagram of more fails with EMSGSIZE.
pub const PAYLOAD_MAX: usize = 4 << 20;
/// `struct msghdr` on 64-bit Linux.
pub const MSGHDR_LEN: usize = 56;
/// The kernel's cap on sendmmsg's vector (UIO_MAXIOV).
pub const MMSG_MAX: u32 = 1024;
/// `struct open_how`: flags, mode, resolve (the size openat2 had first; larger sizes only
/// append fields, which guard does not use).
const OPEN_HOW_LEN: usize = 24;

/// Decode notification `n`.
pub fn decode(n: &Notif) -> Result<Call, Failure> {
    decode_in(syscalls::NATIVE, n)
}

/// Decode `n` with the syscall table of one architecture (the tests decode every table).
pub fn decode_in(table: &'static [Syscall], n: &Notif) -> Result<Call, Failure> {
    let nr = i64::from(n.nr);
    let Some((row, shape)) =
        syscalls::trapped(table, nr).and_then(|s| Some((s, s.trapped_shape()?)))
    else {
        return Err(Failure::new(
            "unknown",
            libc::ENOSYS,
            format!("system call {nr} is not one guard judges"),
            FailureKind::Undecodable,
        ));
    };
    let a = |i: usize| n.args[i];
    let a32 = |i: usize| n.args[i] as u32;
    let at = |dirfd: Option<usize>, path: usize| PathArg {
        dirfd: dirfd.map_or(libc::AT_FDCWD as u64, a),
        path: Some(StrPtr(a(path))),
        empty_path: false,
    };
    let flagged = |flags: Option<usize>, bit: i32| flags.is_some_and(|i| a(i) & bit as u64 != 0);
    // A path that may name the descriptor itself: no path register at all (fchmod), a NULL
    // where the call allows one (utimensat), or an empty one with AT_EMPTY_PATH.
    let on = |dirfd: Option<usize>, path: Option<usize>, empty: Empty, null_is_fd: bool| PathArg {
        dirfd: dirfd.map_or(libc::AT_FDCWD as u64, a),
        path: path
            .filter(|&i| !(null_is_fd && a(i) == 0))
            .map(|i| StrPtr(a(i))),
        empty_path: match empty {
            Empty::Never => false,
            Empty::Flagged(i) => flagged(Some(i), libc::AT_EMPTY_PATH),
        },
    };
    let follows = |f: Follow| match f {
        Follow::Always => true,
        Follow::Never => false,
        Follow::UnlessFlagged(i) => a(i) & libc::AT_SYMLINK_NOFOLLOW as u64 == 0,
    };
    let args = match shape {
        Shape::Unlink {
            dirfd,
            path,
            flags,
            rmdir,
        } => Args::Unlink {
            at: at(dirfd, path),
            rmdir: rmdir || flagged(flags, libc::AT_REMOVEDIR),
        },
        Shape::Rename { from, to, flags } => Args::Rename {
            from: at(from.0, from.1),
            to: at(to.0, to.1),
            flags: flags.map_or(0, a32),
        },
        Shape::Link { from, to, flags } => Args::Link {
            from: at(from.0, from.1),
            to: at(to.0, to.1),
            follow: flagged(flags, libc::AT_SYMLINK_FOLLOW),
            empty_path: flagged(flags, libc::AT_EMPTY_PATH),
        },
        Shape::Symlink {
            target,
            dirfd,
            path,
        } => Args::Symlink {
            target: StrPtr(a(target)),
            at: at(dirfd, path),
        },
        Shape::Mkdir { dirfd, path, mode } => Args::Mkdir {
            at: at(dirfd, path),
            mode: a32(mode),
        },
        Shape::Mknod {
            dirfd,
            path,
            mode,
            dev,
        } => Args::Mknod {
            at: at(dirfd, path),
            mode: a32(mode),
            dev: a(dev),
        },
        Shape::Chmod {
            dirfd,
            path,
            mode,
            follow,
            empty,
        } => Args::Chmod {
            at: on(dirfd, path, empty, false),
            mode: a32(mode),
            follow: follows(follow),
        },
        Shape::Chown {
            dirfd,
            path,
            uid,
            follow,
            empty,
        } => Args::Chown {
            at: on(dirfd, path, empty, false),
            uid: a32(uid),
            gid: a32(uid + 1),
            follow: follows(follow),
        },
        Shape::Truncate { path, len } => Args::Truncate {
            at: at(None, path),
            len: a(len) as i64,
        },
        Shape::Meta {
            dirfd,
            path,
            follow,
            empty,
            null_is_fd,
            args,
        } => {
            let block = |i: usize, len: usize| (a(i) != 0).then_some(BlockPtr { addr: a(i), len });
            let what = match args {
                MetaArgs::Utimbuf(i) => MetaWhat::Times(TimesArg::Utimbuf(block(i, 16))),
                MetaArgs::Timeval(i) => MetaWhat::Times(TimesArg::Timeval(block(i, 32))),
                MetaArgs::Timespec(i) => MetaWhat::Times(TimesArg::Timespec(block(i, 32))),
                MetaArgs::SetXattr {
                    name,
                    value,
                    size,
                    flags,
                } => {
                    let len = a(size) as usize;
                    if len > XATTR_SIZE_MAX {
                        return Err(Failure::undecodable(
                            row.name,
                            &io::Error::from_raw_os_error(libc::E2BIG),
                            "extended attribute value too large",
                        ));
                    }
                    MetaWhat::SetXattr {
                        name: StrPtr(a(name)),
                        value: (len > 0).then_some(BlockPtr {
                            addr: a(value),
                            len,
                        }),
                        flags: a32(flags),
                    }
                }
                MetaArgs::SetXattrAt { name, args, size } => {
                    if a(size) as usize != XATTR_ARGS_LEN {
                        return Err(Failure::undecodable(
                            row.name,
                            &io::Error::from_raw_os_error(libc::EINVAL),
                            "struct xattr_args of an unknown size",
                        ));
                    }
                    MetaWhat::SetXattrAt {
                        name: StrPtr(a(name)),
                        args: BlockPtr {
                            addr: a(args),
                            len: XATTR_ARGS_LEN,
                        },
                    }
                }
                MetaArgs::RemoveXattr { name } => MetaWhat::RemoveXattr {
                    name: StrPtr(a(name)),
                },
            };
            Args::Meta {
                at: on(dirfd, path, empty, null_is_fd),
                follow: follows(follow),
                what,
            }
        }
        Shape::Open {
            dirfd,
            path,
            flags,
            mode,
        } => Args::Open {
            at: at(dirfd, path),
            how: match flags {
                OpenFlags::Arg(i) => OpenHow::Flags {
                    flags: a(i),
                    mode: mode.map_or(0, a),
                },
                OpenFlags::Creat => OpenHow::Flags {
                    flags: (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
                    mode: mode.map_or(0, a),
                },
                OpenFlags::How(i) => OpenHow::InMemory(BlockPtr {
                    addr: a(i),
                    len: OPEN_HOW_LEN,
                }),
            },
        },
        Shape::Exec {
            dirfd,
            path,
            argv,
            flags,
        } => Args::Exec {
            at: at(dirfd, path),
            argv: ArgvPtr(a(argv)),
            envp: ArgvPtr(a(argv + 1)),
            empty_path: flagged(flags, libc::AT_EMPTY_PATH),
        },
        Shape::Connect { sock, addr, len } => {
            let len = (a(len) as usize).min(SOCKADDR_MAX);
            if len < 2 {
                return Err(Failure::undecodable(
                    row.name,
                    &io::Error::from_raw_os_error(libc::EINVAL),
                    "address too short",
                ));
            }
            Args::Connect {
                sock: a(sock) as i32,
                addr: BlockPtr { addr: a(addr), len },
            }
        }
        Shape::SendTo {
            sock,
            buf,
            len,
            flags,
            addr,
            addrlen,
        } => {
            let alen = a32(addrlen) as i32;
            if !(0..=SOCKADDR_MAX as i32).contains(&alen) {
                return Err(Failure::undecodable(
                    row.name,
                    &io::Error::from_raw_os_error(libc::EINVAL),
                    "address length out of range",
                ));
            }
            Args::SendTo {
                sock: a(sock) as i32,
                buf: BlockPtr {
                    addr: a(buf),
                    len: (a(len) as usize).min(PAYLOAD_MAX),
                },
                len: a(len) as usize,
                flags: a32(flags) as i32,
                addr: (alen > 0).then(|| BlockPtr {
                    addr: a(addr),
                    len: alen as usize,
                }),
            }
        }
        Shape::SendMsg { sock, msg, flags } => Args::SendMsg {
            sock: a(sock) as i32,
            msg: BlockPtr {
                addr: a(msg),
                len: MSGHDR_LEN,
            },
            flags: a32(flags) as i32,
        },
        Shape::SendMmsg {
            sock,
            vec,
            vlen,
            flags,
        } => Args::SendMmsg {
            sock: a(sock) as i32,
            vec: a(vec),
            vlen: a32(vlen).min(MMSG_MAX),
            flags: a32(flags) as i32,
        },
        Shape::Bind { sock, addr, len } => {
            let alen = a32(len) as i32;
            if !(2..=SOCKADDR_MAX as i32).contains(&alen) {
                return Err(Failure::undecodable(
                    row.name,
                    &io::Error::from_raw_os_error(libc::EINVAL),
                    "address length out of range",
                ));
            }
            Args::Bind {
                sock: a(sock) as i32,
                addr: BlockPtr {
                    addr: a(addr),
                    len: alen as usize,
                },
            }
        }
        Shape::Listen { sock, backlog } => Args::Listen {
            sock: a(sock) as i32,
            backlog: a32(backlog) as i32,
        },
        Shape::Credentials { umask } => Args::Credentials {
            umask: umask.map(a32),
        },
        Shape::Cwd => Args::Cwd,
    };
    Ok(Call {
        syscall: row.name,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::syscalls::{Treatment, AARCH64_TABLE, X86_64_TABLE};

    /// The typed call every trapped system call must decode to, by name: the property the
    /// filter and the decoder share. Written out here on purpose, independently of the table:
    /// a row missing from a table (so the call is neither trapped nor decoded) or decoding to
    /// the wrong kind of call fails `every_trapped_call_decodes`.
    fn expected(name: &str) -> Option<&'static str> {
        Some(match name {
            "unlink" | "unlinkat" | "rmdir" => "unlink",
            "rename" | "renameat" | "renameat2" => "rename",
            "link" | "linkat" => "link",
            "symlink" | "symlinkat" => "symlink",
            "mkdir" | "mkdirat" => "mkdir",
            "mknod" | "mknodat" => "mknod",
            "chmod" | "fchmodat" | "fchmodat2" | "fchmod" => "chmod",
            "chown" | "lchown" | "fchownat" | "fchown" => "chown",
            "truncate" => "truncate",
            "utime" | "utimes" | "futimesat" | "utimensat" | "setxattr" | "lsetxattr"
            | "removexattr" | "lremovexattr" | "setxattrat" | "removexattrat" | "fsetxattr"
            | "fremovexattr" => "meta",
            "open" | "openat" | "openat2" | "creat" => "open",
            "execve" | "execveat" => "exec",
            "connect" => "connect",
            "sendto" | "sendmsg" | "sendmmsg" => "send",
            "bind" | "listen" => "bind",
            "setuid" | "setgid" | "setreuid" | "setregid" | "setresuid" | "setresgid"
            | "setfsuid" | "setfsgid" | "setgroups" | "capset" | "umask" => "credentials",
            "chdir" | "fchdir" => "cwd",
            _ => return None,
        })
    }

    /// Each architecture's trapped calls, by name.
    const X86_64_TRAPPED: &[&str] = &[
        "unlink",
        "unlinkat",
        "rmdir",
        "rename",
        "renameat",
        "renameat2",
        "link",
        "linkat",
        "symlink",
        "symlinkat",
        "mkdir",
        "mkdirat",
        "mknod",
        "mknodat",
        "chmod",
        "fchmodat",
        "fchmodat2",
        "fchmod",
        "chown",
        "lchown",
        "fchownat",
        "fchown",
        "truncate",
        "utime",
        "utimes",
        "futimesat",
        "utimensat",
        "setxattr",
        "lsetxattr",
        "removexattr",
        "lremovexattr",
        "setxattrat",
        "removexattrat",
        "fsetxattr",
        "fremovexattr",
        "open",
        "openat",
        "openat2",
        "creat",
        "execve",
        "execveat",
        "connect",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "bind",
        "listen",
        "setuid",
        "setgid",
        "setreuid",
        "setregid",
        "setresuid",
        "setresgid",
        "setfsuid",
        "setfsgid",
        "setgroups",
        "capset",
        "umask",
        "chdir",
        "fchdir",
    ];
    /// aarch64 has only the *at forms, and renameat (glibc's rename() there).
    const AARCH64_TRAPPED: &[&str] = &[
        "unlinkat",
        "renameat",
        "renameat2",
        "linkat",
        "symlinkat",
        "mkdirat",
        "mknodat",
        "fchmodat",
        "fchmodat2",
        "fchmod",
        "fchownat",
        "fchown",
        "truncate",
        "utimensat",
        "setxattr",
        "lsetxattr",
        "removexattr",
        "lremovexattr",
        "setxattrat",
        "removexattrat",
        "fsetxattr",
        "fremovexattr",
        "openat",
        "openat2",
        "execve",
        "execveat",
        "connect",
        "sendto",
        "sendmsg",
        "sendmmsg",
        "bind",
        "listen",
        "setuid",
        "setgid",
        "setreuid",
        "setregid",
        "setresuid",
        "setresgid",
        "setfsuid",
        "setfsgid",
        "setgroups",
        "capset",
        "umask",
        "chdir",
        "fchdir",
    ];

    fn kind(args: &Args) -> &'static str {
        match args {
            Args::Unlink { .. } => "unlink",
            Args::Rename { .. } => "rename",
            Args::Link { .. } => "link",
            Args::Symlink { .. } => "symlink",
            Args::Mkdir { .. } => "mkdir",
            Args::Mknod { .. } => "mknod",
            Args::Chmod { .. } => "chmod",
            Args::Chown { .. } => "chown",
            Args::Truncate { .. } => "truncate",
            Args::Meta { .. } => "meta",
            Args::Open { .. } => "open",
            Args::Exec { .. } => "exec",
            Args::Connect { .. } => "connect",
            Args::SendTo { .. } | Args::SendMsg { .. } | Args::SendMmsg { .. } => "send",
            Args::Bind { .. } | Args::Listen { .. } => "bind",
            Args::Credentials { .. } => "credentials",
            Args::Cwd => "cwd",
        }
    }

    /// Plausible registers for a call of `shape`: pointers where it takes pointers, AT_FDCWD
    /// for directory descriptors, flags 0 (write flags for an open), a mode, a 16-byte address.
    fn notif(nr: i64, shape: Shape) -> Notif {
        let mut args: [u64; 6] = std::array::from_fn(|i| 0x7f00_0000_1000 * (i as u64 + 1));
        let fdcwd = libc::AT_FDCWD as u64;
        let mut dirfd = |d: Option<usize>| {
            if let Some(i) = d {
                args[i] = fdcwd;
            }
        };
        let mut numbers: Vec<(usize, u64)> = Vec::new();
        match shape {
            Shape::Unlink {
                dirfd: d, flags, ..
            } => {
                dirfd(d);
                numbers.extend(flags.map(|i| (i, 0)));
            }
            Shape::Rename { from, to, flags } | Shape::Link { from, to, flags } => {
                dirfd(from.0);
                dirfd(to.0);
                numbers.extend(flags.map(|i| (i, 0)));
            }
            Shape::Symlink { dirfd: d, .. } => dirfd(d),
            Shape::Mkdir { dirfd: d, mode, .. } => {
                dirfd(d);
                numbers.push((mode, 0o755));
            }
            Shape::Mknod {
                dirfd: d,
                mode,
                dev,
                ..
            } => {
                dirfd(d);
                numbers.extend([(mode, u64::from(libc::S_IFIFO) | 0o644), (dev, 0)]);
            }
            Shape::Chmod {
                dirfd: d,
                mode,
                follow,
                ..
            } => {
                dirfd(d);
                numbers.push((mode, 0o644));
                if let Follow::UnlessFlagged(i) = follow {
                    numbers.push((i, 0));
                }
            }
            Shape::Chown {
                dirfd: d,
                uid,
                follow,
                ..
            } => {
                dirfd(d);
                numbers.extend([(uid, 1000), (uid + 1, 1000)]);
                if let Follow::UnlessFlagged(i) = follow {
                    numbers.push((i, 0));
                }
            }
            Shape::Truncate { len, .. } => numbers.push((len, 0)),
            Shape::Meta {
                dirfd: d,
                follow,
                args: meta,
                ..
            } => {
                dirfd(d);
                if let Follow::UnlessFlagged(i) = follow {
                    numbers.push((i, 0));
                }
                match meta {
                    MetaArgs::SetXattr { size, flags, .. } => {
                        numbers.extend([(size, 4), (flags, 0)]);
                    }
                    MetaArgs::SetXattrAt { size, .. } => numbers.push((size, 16)),
                    _ => {}
                }
            }
            Shape::Open {
                dirfd: d,
                flags,
                mode,
                ..
            } => {
                dirfd(d);
                if let OpenFlags::Arg(i) = flags {
                    numbers.push((i, (libc::O_WRONLY | libc::O_CREAT) as u64));
                }
                numbers.extend(mode.map(|i| (i, 0o644)));
            }
            Shape::Exec {
                dirfd: d, flags, ..
            } => {
                dirfd(d);
                numbers.extend(flags.map(|i| (i, 0)));
            }
            Shape::Connect { sock, len, .. } | Shape::Bind { sock, len, .. } => {
                numbers.extend([(sock, 3), (len, 16)])
            }
            Shape::SendTo {
                sock,
                len,
                flags,
                addrlen,
                ..
            } => numbers.extend([(sock, 3), (len, 10), (flags, 0), (addrlen, 16)]),
            Shape::SendMsg { sock, flags, .. } => numbers.extend([(sock, 3), (flags, 0)]),
            Shape::SendMmsg {
                sock, vlen, flags, ..
            } => numbers.extend([(sock, 3), (vlen, 2), (flags, 0)]),
            Shape::Listen { sock, backlog } => numbers.extend([(sock, 3), (backlog, 5)]),
            Shape::Credentials { umask } => numbers.extend(umask.map(|i| (i, 0o022))),
            Shape::Cwd => {}
        }
        for (i, v) in numbers {
            args[i] = v;
        }
        Notif {
            id: 1,
            pid: 1,
            nr: i32::try_from(nr).expect("small"),
            arch: 0,
            ip: 0,
            args,
        }
    }

    #[test]
    fn every_trapped_call_decodes() {
        for (table, trapped) in [
            (X86_64_TABLE, X86_64_TRAPPED),
            (AARCH64_TABLE, AARCH64_TRAPPED),
        ] {
            let mut seen = Vec::new();
            for row in table {
                let (Treatment::Trap(shape)
                | Treatment::TrapWhenWriting(shape)
                | Treatment::TrapWhenAddressed(shape)) = row.treatment
                else {
                    continue;
                };
                let call = decode_in(table, &notif(row.nr, shape))
                    .unwrap_or_else(|f| panic!("{} does not decode: {f:?}", row.name));
                assert_eq!(call.syscall, row.name);
                assert_eq!(Some(kind(&call.args)), expected(row.name), "{}", row.name);
                // Every path and pointer argument is taken from the registers the shape
                // names, none is read: all of them point into the caller's memory.
                for want in call.wants().into_iter().flatten() {
                    let addr = match want {
                        Want::Str(p) => p.0,
                        Want::Block(b) => b.addr,
                        Want::Argv(a) => a.0,
                    };
                    assert!(addr >= 0x7f00_0000_1000, "{}: {want:?}", row.name);
                }
                seen.push(row.name);
            }
            seen.sort_unstable();
            let mut want: Vec<&str> = trapped.to_vec();
            want.sort_unstable();
            assert_eq!(seen, want, "the calls this table traps");
        }
    }

    #[test]
    fn registers_decode_to_their_meaning() {
        let nr = |name: &str| {
            X86_64_TABLE
                .iter()
                .find(|s| s.name == name)
                .expect("in the table")
        };
        let mut n = notif(0, Shape::Truncate { path: 0, len: 1 });
        // unlinkat(dirfd 5, path, AT_REMOVEDIR)
        n.nr = nr("unlinkat").nr as i32;
        n.args = [5, 0x1000, libc::AT_REMOVEDIR as u64, 0, 0, 0];
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect("decodes").args,
            Args::Unlink {
                at: PathArg {
                    dirfd: 5,
                    path: Some(StrPtr(0x1000)),
                    empty_path: false,
                },
                rmdir: true
            }
        );
        // The legacy calls start at the cwd.
        n.nr = nr("rename").nr as i32;
        n.args = [0x1000, 0x2000, 0, 0, 0, 0];
        let cwd = |p| PathArg {
            dirfd: libc::AT_FDCWD as u64,
            path: Some(StrPtr(p)),
            empty_path: false,
        };
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect("decodes").args,
            Args::Rename {
                from: cwd(0x1000),
                to: cwd(0x2000),
                flags: 0
            }
        );
        // utimensat(fd, NULL, times, 0): the descriptor itself; only the times are read.
        n.nr = nr("utimensat").nr as i32;
        n.args = [4, 0, 0x3000, 0, 0, 0];
        let call = decode_in(X86_64_TABLE, &n).expect("decodes");
        assert_eq!(
            call.wants(),
            [
                None,
                Some(Want::Block(BlockPtr {
                    addr: 0x3000,
                    len: 32
                })),
                None
            ]
        );
        // fchmod(fd, mode): no path at all.
        n.nr = nr("fchmod").nr as i32;
        n.args = [5, 0o4755, 0, 0, 0, 0];
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect("decodes").args,
            Args::Chmod {
                at: PathArg {
                    dirfd: 5,
                    path: None,
                    empty_path: false
                },
                mode: 0o4755,
                follow: true
            }
        );
        // fsetxattr with a value larger than the kernel takes.
        n.nr = nr("fsetxattr").nr as i32;
        n.args = [5, 0x1000, 0x2000, 1 << 20, 0, 0];
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect_err("too large").errno,
            libc::E2BIG
        );
        // fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW)
        n.nr = nr("fchownat").nr as i32;
        n.args = [
            libc::AT_FDCWD as u64,
            0x1000,
            1000,
            u64::from(u32::MAX),
            libc::AT_SYMLINK_NOFOLLOW as u64,
            0,
        ];
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect("decodes").args,
            Args::Chown {
                at: cwd(0x1000),
                uid: 1000,
                gid: u32::MAX,
                follow: false,
            }
        );
        // openat2: the flags are in memory.
        n.nr = nr("openat2").nr as i32;
        n.args = [libc::AT_FDCWD as u64, 0x1000, 0x2000, 24, 0, 0];
        let call = decode_in(X86_64_TABLE, &n).expect("decodes");
        assert_eq!(
            call.wants(),
            [
                Some(Want::Str(StrPtr(0x1000))),
                Some(Want::Block(BlockPtr {
                    addr: 0x2000,
                    len: OPEN_HOW_LEN
                })),
                None
            ]
        );
        // execveat(fd, "", argv, envp, AT_EMPTY_PATH)
        n.nr = nr("execveat").nr as i32;
        n.args = [3, 0x1000, 0x2000, 0x3000, libc::AT_EMPTY_PATH as u64, 0];
        assert_eq!(
            decode_in(X86_64_TABLE, &n).expect("decodes").args,
            Args::Exec {
                at: PathArg {
                    dirfd: 3,
                    path: Some(StrPtr(0x1000)),
                    empty_path: false,
                },
                argv: ArgvPtr(0x2000),
                envp: ArgvPtr(0x3000),
                empty_path: true
            }
        );
    }

    #[test]
    fn a_path_that_does_not_resolve_is_the_kernels_answer_by_type() {
        let e = |errno| io::Error::from_raw_os_error(errno);
        for errno in [
            libc::ENOENT,
            libc::ENOTDIR,
            libc::ELOOP,
            libc::ENAMETOOLONG,
            libc::EACCES,
            libc::EBADF,
            libc::EFAULT,
        ] {
            let f = Failure::unresolved("unlinkat", &e(errno), "cannot resolve the path");
            assert_eq!(f.verdict().rule, RuleId::Builtin(Builtin::Resolve));
            assert_eq!(f.verdict().errno, errno);
            // The same errno while reading anything else is guard's failure, not the kernel's.
            let f = Failure::undecodable("symlinkat", &e(errno), "cannot read the link target");
            assert_eq!(f.verdict().rule, RuleId::Builtin(Builtin::Decode));
        }
        // The caller gone (ESRCH), or guard not let into its memory (EPERM): guard's failure.
        for errno in [libc::ESRCH, libc::EPERM] {
            let f = Failure::unresolved("unlinkat", &e(errno), "cannot resolve the path");
            assert_eq!(f.kind, FailureKind::Undecodable);
            assert_eq!(f.verdict().action, Action::Deny);
        }
    }

    #[test]
    fn garbage_is_refused() {
        let mut n = notif(0, Shape::Truncate { path: 0, len: 1 });
        // A call guard does not trap (read), and one it only denies (ptrace).
        for nr in [libc::SYS_read, libc::SYS_ptrace] {
            n.nr = nr as i32;
            let f = decode(&n).expect_err("not decodable");
            assert_eq!(f.errno, libc::ENOSYS);
        }
        // connect with an address shorter than its family field.
        n.nr = libc::SYS_connect as i32;
        n.args = [3, 0x1000, 1, 0, 0, 0];
        assert_eq!(decode(&n).expect_err("too short").errno, libc::EINVAL);
        // A huge length is capped at sockaddr_storage.
        n.args = [3, 0x1000, 1 << 40, 0, 0, 0];
        assert_eq!(
            decode(&n).expect("decodes").args,
            Args::Connect {
                sock: 3,
                addr: BlockPtr {
                    addr: 0x1000,
                    len: SOCKADDR_MAX
                }
            }
        );
    }
}
