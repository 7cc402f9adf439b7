//! The one table of the system calls guard treats specially, per architecture: how the seccomp
//! filter treats each one (trapped to the supervisor, trapped when its flags ask to write,
//! refused with an errno, or refused for some arguments only) and, for a trapped call, where its
//! arguments are (which register holds a path, a directory descriptor, flags, a mode).
//!
//! The filter builder ([`super::seccomp`]) and the supervisor's decoder both read this table and
//! nothing else, so a call cannot be trapped without being decodable. Numbers and names come
//! from the `syscalls` crate's per-architecture tables (generated from the kernel's), so no
//! number is written by hand; both architectures' tables are compiled on every host, which lets
//! the tests check aarch64's rows on an x86_64 machine.

use syscalls::aarch64::Sysno as Aarch64;
use syscalls::x86_64::Sysno as X86_64;

/// One system call guard treats specially.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Syscall {
    /// Its number on this table's architecture.
    pub nr: i64,
    pub name: &'static str,
    pub treatment: Treatment,
}

/// What the seccomp filter does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// Trapped to the supervisor whatever its arguments (exec and connect only when the filter
    /// spec traps them); the supervisor decodes it by its [`Shape`].
    Trap(Shape),
    /// Trapped only when the flags in the register named by the shape's
    /// [`OpenFlags::Arg`] ask to write (open, openat), so reads never pay a round trip.
    TrapWhenWriting(Shape),
    /// Trapped only when the destination pointer in the register named by the shape's
    /// [`Shape::SendTo`] `addr` is not NULL (sendto): a send without one goes to the socket's
    /// peer, which only a judged connect (or accept of a judged listen) can have set.
    TrapWhenAddressed(Shape),
    /// Refused with this errno whatever its arguments (part of the deny list).
    Deny(i32),
    /// Refused for some arguments only (part of the deny list).
    Conditional(Condition),
}

/// The calls refused only for some arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// seccomp(SECCOMP_SET_MODE_FILTER) with NEW_LISTENER: EPERM (a second listener would let
    /// the program answer its own trapped calls).
    NewListener,
    /// clone with a namespace flag: EPERM.
    Namespaces,
    /// ioctl TIOCSTI or TIOCLINUX: EPERM (no typing into the controlling terminal).
    TerminalInjection,
}

/// Where a trapped call keeps its arguments: register indices. A `dirfd` of `None` marks the
/// legacy calls that take none (their paths start at the cwd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// unlink, rmdir, unlinkat; `flags`: unlinkat's flags (AT_REMOVEDIR); `rmdir`: the legacy
    /// rmdir.
    Unlink {
        dirfd: Option<usize>,
        path: usize,
        flags: Option<usize>,
        rmdir: bool,
    },
    Rename {
        from: (Option<usize>, usize),
        to: (Option<usize>, usize),
        flags: Option<usize>,
    },
    Link {
        from: (Option<usize>, usize),
        to: (Option<usize>, usize),
        flags: Option<usize>,
    },
    Symlink {
        target: usize,
        dirfd: Option<usize>,
        path: usize,
    },
    Mkdir {
        dirfd: Option<usize>,
        path: usize,
        mode: usize,
    },
    Mknod {
        dirfd: Option<usize>,
        path: usize,
        mode: usize,
        dev: usize,
    },
    /// chmod, fchmodat(2) and fchmod (`path: None`: the descriptor in `dirfd` itself).
    Chmod {
        dirfd: Option<usize>,
        path: Option<usize>,
        mode: usize,
        follow: Follow,
        empty: Empty,
    },
    /// chown, lchown, fchownat and fchown. The gid is in the register after `uid`.
    Chown {
        dirfd: Option<usize>,
        path: Option<usize>,
        uid: usize,
        follow: Follow,
        empty: Empty,
    },
    Truncate {
        path: usize,
        len: usize,
    },
    /// The times and extended attribute calls, path-based or on a descriptor (`path: None`),
    /// performed by the supervisor with the arguments `args` names.
    Meta {
        dirfd: Option<usize>,
        path: Option<usize>,
        follow: Follow,
        empty: Empty,
        /// A NULL path names the descriptor itself (utimensat, futimesat).
        null_is_fd: bool,
        args: MetaArgs,
    },
    Open {
        dirfd: Option<usize>,
        path: usize,
        flags: OpenFlags,
        mode: Option<usize>,
    },
    Exec {
        dirfd: Option<usize>,
        path: usize,
        argv: usize,
        flags: Option<usize>,
    },
    Connect {
        sock: usize,
        addr: usize,
        len: usize,
    },
    /// sendto(sock, buf, len, flags, addr, addrlen).
    SendTo {
        sock: usize,
        buf: usize,
        len: usize,
        flags: usize,
        addr: usize,
        addrlen: usize,
    },
    /// sendmsg(sock, msg, flags): everything else is in the `struct msghdr`.
    SendMsg {
        sock: usize,
        msg: usize,
        flags: usize,
    },
    /// sendmmsg(sock, vec, vlen, flags).
    SendMmsg {
        sock: usize,
        vec: usize,
        vlen: usize,
        flags: usize,
    },
    /// bind(sock, addr, len).
    Bind {
        sock: usize,
        addr: usize,
        len: usize,
    },
    /// listen(sock, backlog).
    Listen {
        sock: usize,
        backlog: usize,
    },
    /// A call that changes the caller's credentials (the set*id family, setgroups, capset) or
    /// its umask (`umask`: the register with the new mask). Nothing is judged: the supervisor
    /// notes the change (its cache of callers' credentials) and lets the call through.
    Credentials {
        umask: Option<usize>,
    },
    /// chdir(path) or fchdir(fd): the caller changes its working directory. Nothing is
    /// judged (Landlock and the kernel check it): the supervisor notes that working
    /// directories it knows may change (`supervisor::base`) and lets the call through.
    Cwd,
}

/// When an empty path names the descriptor itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Empty {
    /// Never: an empty path is ENOENT.
    Never,
    /// When the flags register at this index has AT_EMPTY_PATH.
    Flagged(usize),
}

/// Where the arguments of a times or xattr call are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaArgs {
    /// utime: a `struct utimbuf` (NULL: now).
    Utimbuf(usize),
    /// utimes, futimesat: two `struct timeval` (NULL: now).
    Timeval(usize),
    /// utimensat: two `struct timespec` (NULL: now).
    Timespec(usize),
    /// setxattr, lsetxattr, fsetxattr: name, value, size, flags.
    SetXattr {
        name: usize,
        value: usize,
        size: usize,
        flags: usize,
    },
    /// setxattrat: name, a `struct xattr_args` and its size.
    SetXattrAt {
        name: usize,
        args: usize,
        size: usize,
    },
    /// removexattr, lremovexattr, fremovexattr, removexattrat.
    RemoveXattr { name: usize },
}

/// Whether a call follows a final symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Always,
    Never,
    /// Follow unless the flags argument at this index has AT_SYMLINK_NOFOLLOW.
    UnlessFlagged(usize),
}

/// Where an open call's flags are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFlags {
    /// In this register.
    Arg(usize),
    /// creat: always O_CREAT | O_WRONLY | O_TRUNC.
    Creat,
    /// openat2: in the `struct open_how` this register points to.
    How(usize),
}

/// One row; `$s` is a `Sysno` of the table's architecture.
macro_rules! row {
    ($s:expr, $t:expr) => {
        Syscall {
            nr: $s.id() as i64,
            name: $s.name(),
            treatment: $t,
        }
    };
}

/// The rows every architecture has, in the order the filter tests them, with `legacy` (trapped
/// pre-*at entry points) and `open` (trapped when writing) rows of the architecture spliced in.
macro_rules! table {
    ($S:ident; legacy: [$($legacy:expr,)*]; open: [$($open:expr,)*]) => {
        &[
            row!($S::io_uring_setup, DENY),
            row!($S::io_uring_enter, DENY),
            row!($S::io_uring_register, DENY),
            row!($S::ptrace, DENY),
            row!($S::process_vm_writev, DENY),
            row!($S::process_vm_readv, DENY),
            row!($S::bpf, DENY),
            row!($S::perf_event_open, DENY),
            row!($S::userfaultfd, DENY),
            row!($S::kexec_load, DENY),
            row!($S::kexec_file_load, DENY),
            row!($S::init_module, DENY),
            row!($S::finit_module, DENY),
            row!($S::delete_module, DENY),
            row!($S::mount, DENY),
            row!($S::umount2, DENY),
            row!($S::fsopen, DENY),
            row!($S::fsconfig, DENY),
            row!($S::fsmount, DENY),
            row!($S::fspick, DENY),
            row!($S::move_mount, DENY),
            row!($S::open_tree, DENY),
            row!($S::mount_setattr, DENY),
            row!($S::pivot_root, DENY),
            row!($S::chroot, DENY),
            row!($S::swapon, DENY),
            row!($S::swapoff, DENY),
            row!($S::reboot, DENY),
            row!($S::keyctl, DENY),
            row!($S::add_key, DENY),
            row!($S::request_key, DENY),
            row!($S::open_by_handle_at, DENY),
            row!($S::name_to_handle_at, DENY),
            row!($S::unshare, DENY),
            row!($S::setns, DENY),
            row!($S::acct, DENY),
            row!($S::quotactl, DENY),
            row!($S::quotactl_fd, DENY),
            row!($S::lookup_dcookie, DENY),
            row!($S::open_tree_attr, DENY),
            row!($S::seccomp, Treatment::Conditional(Condition::NewListener)),
            row!($S::clone, Treatment::Conditional(Condition::Namespaces)),
            // Its flags live in memory BPF cannot read; ENOSYS makes glibc fall back to clone.
            row!($S::clone3, Treatment::Deny(libc::ENOSYS)),
            row!($S::ioctl, Treatment::Conditional(Condition::TerminalInjection)),
            row!($S::unlinkat, trap(Shape::Unlink { dirfd: Some(0), path: 1, flags: Some(2), rmdir: false })),
            row!($S::renameat2, trap(Shape::Rename { from: (Some(0), 1), to: (Some(2), 3), flags: Some(4) })),
            row!($S::linkat, trap(Shape::Link { from: (Some(0), 1), to: (Some(2), 3), flags: Some(4) })),
            row!($S::symlinkat, trap(Shape::Symlink { target: 0, dirfd: Some(1), path: 2 })),
            row!($S::mkdirat, trap(Shape::Mkdir { dirfd: Some(0), path: 1, mode: 2 })),
            row!($S::mknodat, trap(Shape::Mknod { dirfd: Some(0), path: 1, mode: 2, dev: 3 })),
            row!($S::fchmodat, trap(Shape::Chmod { dirfd: Some(0), path: Some(1), mode: 2, follow: Follow::Always, empty: Empty::Never })),
            row!($S::fchownat, trap(Shape::Chown { dirfd: Some(0), path: Some(1), uid: 2, follow: Follow::UnlessFlagged(4), empty: Empty::Flagged(4) })),
            row!($S::truncate, trap(Shape::Truncate { path: 0, len: 1 })),
            row!($S::utimensat, trap(Shape::Meta { dirfd: Some(0), path: Some(1), follow: Follow::UnlessFlagged(3), empty: Empty::Flagged(3), null_is_fd: true, args: MetaArgs::Timespec(2) })),
            row!($S::setxattr, trap(xattr(Follow::Always, SETXATTR))),
            row!($S::lsetxattr, trap(xattr(Follow::Never, SETXATTR))),
            row!($S::removexattr, trap(xattr(Follow::Always, REMOVEXATTR))),
            row!($S::lremovexattr, trap(xattr(Follow::Never, REMOVEXATTR))),
            // Metadata through a descriptor: Landlock has no right for these, so only the
            // supervisor judges them, by the object the descriptor refers to.
            row!($S::fchmod, trap(Shape::Chmod { dirfd: Some(0), path: None, mode: 1, follow: Follow::Always, empty: Empty::Never })),
            row!($S::fchown, trap(Shape::Chown { dirfd: Some(0), path: None, uid: 1, follow: Follow::Always, empty: Empty::Never })),
            row!($S::fsetxattr, trap(Shape::Meta { dirfd: Some(0), path: None, follow: Follow::Always, empty: Empty::Never, null_is_fd: false, args: SETXATTR })),
            row!($S::fremovexattr, trap(Shape::Meta { dirfd: Some(0), path: None, follow: Follow::Always, empty: Empty::Never, null_is_fd: false, args: REMOVEXATTR })),
            // Its open flags are in memory, so it is trapped whatever they say; the supervisor
            // has the kernel honour the caller's resolve flags (supervisor/beneath.rs).
            row!($S::openat2, trap(Shape::Open { dirfd: Some(0), path: 1, flags: OpenFlags::How(2), mode: None })),
            row!($S::renameat, trap(Shape::Rename { from: (Some(0), 1), to: (Some(2), 3), flags: None })),
            row!($S::fchmodat2, trap(Shape::Chmod { dirfd: Some(0), path: Some(1), mode: 2, follow: Follow::UnlessFlagged(3), empty: Empty::Flagged(3) })),
            // setxattrat(dfd, path, at_flags, name, args, size), removexattrat(dfd, path,
            // at_flags, name): Linux 6.13.
            row!($S::setxattrat, trap(Shape::Meta { dirfd: Some(0), path: Some(1), follow: Follow::UnlessFlagged(2), empty: Empty::Flagged(2), null_is_fd: false, args: MetaArgs::SetXattrAt { name: 3, args: 4, size: 5 } })),
            row!($S::removexattrat, trap(Shape::Meta { dirfd: Some(0), path: Some(1), follow: Follow::UnlessFlagged(2), empty: Empty::Flagged(2), null_is_fd: false, args: MetaArgs::RemoveXattr { name: 3 } })),
            $($legacy,)*
            row!($S::execve, trap(Shape::Exec { dirfd: None, path: 0, argv: 1, flags: None })),
            row!($S::execveat, trap(Shape::Exec { dirfd: Some(0), path: 1, argv: 2, flags: Some(4) })),
            row!($S::connect, trap(Shape::Connect { sock: 0, addr: 1, len: 2 })),
            row!($S::sendto, Treatment::TrapWhenAddressed(Shape::SendTo { sock: 0, buf: 1, len: 2, flags: 3, addr: 4, addrlen: 5 })),
            row!($S::sendmsg, trap(Shape::SendMsg { sock: 0, msg: 1, flags: 2 })),
            row!($S::sendmmsg, trap(Shape::SendMmsg { sock: 0, vec: 1, vlen: 2, flags: 3 })),
            row!($S::bind, trap(Shape::Bind { sock: 0, addr: 1, len: 2 })),
            row!($S::listen, trap(Shape::Listen { sock: 0, backlog: 1 })),
            row!($S::setuid, trap(CREDENTIALS)),
            row!($S::setgid, trap(CREDENTIALS)),
            row!($S::setreuid, trap(CREDENTIALS)),
            row!($S::setregid, trap(CREDENTIALS)),
            row!($S::setresuid, trap(CREDENTIALS)),
            row!($S::setresgid, trap(CREDENTIALS)),
            row!($S::setfsuid, trap(CREDENTIALS)),
            row!($S::setfsgid, trap(CREDENTIALS)),
            row!($S::setgroups, trap(CREDENTIALS)),
            row!($S::capset, trap(CREDENTIALS)),
            row!($S::umask, trap(Shape::Credentials { umask: Some(0) })),
            row!($S::chdir, trap(Shape::Cwd)),
            row!($S::fchdir, trap(Shape::Cwd)),
            $($open,)*
            row!($S::openat, Treatment::TrapWhenWriting(Shape::Open { dirfd: Some(0), path: 1, flags: OpenFlags::Arg(2), mode: Some(3) })),
        ]
    };
}

const DENY: Treatment = Treatment::Deny(libc::EPERM);
const CREDENTIALS: Shape = Shape::Credentials { umask: None };
const SETXATTR: MetaArgs = MetaArgs::SetXattr {
    name: 1,
    value: 2,
    size: 3,
    flags: 4,
};
const REMOVEXATTR: MetaArgs = MetaArgs::RemoveXattr { name: 1 };

/// A path-based xattr call (the path in register 0).
const fn xattr(follow: Follow, args: MetaArgs) -> Shape {
    Shape::Meta {
        dirfd: None,
        path: Some(0),
        follow,
        empty: Empty::Never,
        null_is_fd: false,
        args,
    }
}

const fn trap(shape: Shape) -> Treatment {
    Treatment::Trap(shape)
}

/// x86_64, with the legacy pre-*at entry points (open, creat, unlink, rename, ...).
#[rustfmt::skip]
pub const X86_64_TABLE: &[Syscall] = table!(X86_64;
    legacy: [
        row!(X86_64::unlink, trap(Shape::Unlink { dirfd: None, path: 0, flags: None, rmdir: false })),
        row!(X86_64::rmdir, trap(Shape::Unlink { dirfd: None, path: 0, flags: None, rmdir: true })),
        row!(X86_64::rename, trap(Shape::Rename { from: (None, 0), to: (None, 1), flags: None })),
        row!(X86_64::link, trap(Shape::Link { from: (None, 0), to: (None, 1), flags: None })),
        row!(X86_64::symlink, trap(Shape::Symlink { target: 0, dirfd: None, path: 1 })),
        row!(X86_64::mkdir, trap(Shape::Mkdir { dirfd: None, path: 0, mode: 1 })),
        row!(X86_64::mknod, trap(Shape::Mknod { dirfd: None, path: 0, mode: 1, dev: 2 })),
        row!(X86_64::chmod, trap(Shape::Chmod { dirfd: None, path: Some(0), mode: 1, follow: Follow::Always, empty: Empty::Never })),
        row!(X86_64::chown, trap(Shape::Chown { dirfd: None, path: Some(0), uid: 1, follow: Follow::Always, empty: Empty::Never })),
        row!(X86_64::lchown, trap(Shape::Chown { dirfd: None, path: Some(0), uid: 1, follow: Follow::Never, empty: Empty::Never })),
        row!(X86_64::utime, trap(Shape::Meta { dirfd: None, path: Some(0), follow: Follow::Always, empty: Empty::Never, null_is_fd: false, args: MetaArgs::Utimbuf(1) })),
        row!(X86_64::utimes, trap(Shape::Meta { dirfd: None, path: Some(0), follow: Follow::Always, empty: Empty::Never, null_is_fd: false, args: MetaArgs::Timeval(1) })),
        row!(X86_64::futimesat, trap(Shape::Meta { dirfd: Some(0), path: Some(1), follow: Follow::Always, empty: Empty::Never, null_is_fd: true, args: MetaArgs::Timeval(2) })),
        row!(X86_64::creat, trap(Shape::Open { dirfd: None, path: 0, flags: OpenFlags::Creat, mode: Some(1) })),
    ];
    open: [
        row!(X86_64::open, Treatment::TrapWhenWriting(Shape::Open { dirfd: None, path: 0, flags: OpenFlags::Arg(1), mode: Some(2) })),
    ]
);

/// aarch64: only the *at forms exist (and renameat, which glibc's rename() uses there).
#[rustfmt::skip]
pub const AARCH64_TABLE: &[Syscall] = table!(Aarch64; legacy: []; open: []);

/// The table of the architecture guard is built for.
#[cfg(target_arch = "x86_64")]
pub const NATIVE: &[Syscall] = X86_64_TABLE;
/// The table of the architecture guard is built for.
#[cfg(target_arch = "aarch64")]
pub const NATIVE: &[Syscall] = AARCH64_TABLE;

impl Syscall {
    /// The argument shape of a call the supervisor receives (trapped, always or when writing).
    pub fn trapped_shape(&self) -> Option<Shape> {
        match self.treatment {
            Treatment::Trap(s)
            | Treatment::TrapWhenWriting(s)
            | Treatment::TrapWhenAddressed(s) => Some(s),
            Treatment::Deny(_) | Treatment::Conditional(_) => None,
        }
    }
}

/// The row of trapped call `nr` in `table`, if the filter can trap it.
pub fn trapped(table: &'static [Syscall], nr: i64) -> Option<&'static Syscall> {
    table
        .iter()
        .find(|s| s.nr == nr && s.trapped_shape().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_names_match_the_kernels() {
        for table in [X86_64_TABLE, AARCH64_TABLE] {
            for (i, a) in table.iter().enumerate() {
                for b in &table[i + 1..] {
                    assert_ne!(a.nr, b.nr, "{} and {}", a.name, b.name);
                }
            }
        }
        let nr = |t: &[Syscall], name: &str| t.iter().find(|s| s.name == name).map(|s| s.nr);
        // A few numbers from the kernel's own tables (arch/x86/entry/syscalls/syscall_64.tbl,
        // include/uapi/asm-generic/unistd.h).
        assert_eq!(nr(X86_64_TABLE, "unlinkat"), Some(263));
        assert_eq!(nr(X86_64_TABLE, "renameat"), Some(264));
        assert_eq!(nr(X86_64_TABLE, "open"), Some(2));
        assert_eq!(nr(AARCH64_TABLE, "renameat"), Some(38));
        assert_eq!(nr(AARCH64_TABLE, "unlinkat"), Some(35));
        assert_eq!(nr(AARCH64_TABLE, "open"), None);
        for t in [X86_64_TABLE, AARCH64_TABLE] {
            assert_eq!(nr(t, "fchmodat2"), Some(452));
            assert_eq!(nr(t, "setxattrat"), Some(463));
            assert_eq!(nr(t, "removexattrat"), Some(466));
            assert_eq!(nr(t, "open_tree_attr"), Some(467));
        }
    }

    #[test]
    fn the_native_table_agrees_with_libc() {
        let nr = |name: &str| NATIVE.iter().find(|s| s.name == name).map(|s| s.nr);
        assert_eq!(nr("unlinkat"), Some(libc::SYS_unlinkat));
        assert_eq!(nr("openat"), Some(libc::SYS_openat));
        assert_eq!(nr("execveat"), Some(libc::SYS_execveat));
        assert_eq!(nr("clone3"), Some(libc::SYS_clone3));
    }

    #[test]
    fn only_sendto_is_trapped_by_its_destination() {
        for table in [X86_64_TABLE, AARCH64_TABLE] {
            for s in table {
                if let Treatment::TrapWhenAddressed(shape) = s.treatment {
                    assert!(matches!(shape, Shape::SendTo { .. }), "{}", s.name);
                }
            }
            let row = table.iter().find(|s| s.name == "sendto").expect("sendto");
            assert!(matches!(row.treatment, Treatment::TrapWhenAddressed(_)));
        }
    }

    #[test]
    fn only_open_calls_are_trapped_by_their_flags() {
        for table in [X86_64_TABLE, AARCH64_TABLE] {
            for s in table {
                if let Treatment::TrapWhenWriting(shape) = s.treatment {
                    assert!(
                        matches!(
                            shape,
                            Shape::Open {
                                flags: OpenFlags::Arg(_),
                                ..
                            }
                        ),
                        "{}",
                        s.name
                    );
                }
            }
        }
    }
}
