//! The seccomp program guard installs in the child, built from a [`FilterSpec`] (pure).
//!
//! In order: foreign architectures and the x32 range are killed; the deny list returns an errno
//! (EPERM, ENOSYS for clone3); the trapped set returns `SECCOMP_RET_USER_NOTIF` for the
//! supervisor; everything else is allowed. Open calls are trapped only when their flags ask to
//! write, so reads never pay a round trip. The semantics are proven by the tests at the bottom
//! with the interpreter in [`super::bpf`].

use super::bpf::{
    off_arg_lo, ret_errno, Assembler, Cond, Dest, SockFilter, OFF_ARCH, OFF_NR, SECCOMP_RET_ALLOW,
    SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
};
use super::ConfineError;
use crate::policy::{Mode, Policy};

/// What the program does besides the architecture check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterSpec {
    /// Trap the judged calls to the supervisor (the filter is then installed with
    /// `SECCOMP_FILTER_FLAG_NEW_LISTENER`). When false, nothing is trapped and the other
    /// `trap_*` fields are ignored.
    pub notify: bool,
    /// Return errors for the calls no agent needs (false in observe mode).
    pub deny_list: bool,
    /// Trap execve and execveat.
    pub trap_exec: bool,
    /// Trap connect.
    pub trap_connect: bool,
}

impl FilterSpec {
    /// The filter for a policy: observe mode keeps every trap but drops the deny list.
    pub fn for_policy(policy: &Policy) -> Self {
        FilterSpec {
            notify: true,
            deny_list: policy.mode == Mode::Enforce,
            trap_exec: true,
            trap_connect: true,
        }
    }
}

/// The native audit architecture (`AUDIT_ARCH_*` of include/uapi/linux/audit.h).
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xC000_00B7;

/// The x32 ABI marks its syscall numbers with this bit (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Not in every libc release; the number is the same on every architecture (unified table).
const SYS_FCHMODAT2: i64 = 452;
/// Linux 6.13; same number everywhere (unified table); not yet in the libc crate.
const SYS_SETXATTRAT: i64 = 463;
const SYS_REMOVEXATTRAT: i64 = 466;
/// Linux 6.15; same number everywhere; not yet in the libc crate.
const SYS_OPEN_TREE_ATTR: i64 = 467;

const SECCOMP_SET_MODE_FILTER: u32 = 1;
const SECCOMP_FILTER_FLAG_NEW_LISTENER: u32 = 1 << 3;

/// Namespace flags refused in clone(2)'s flags (arg0; all in the low 32 bits). CLONE_NEWTIME
/// (0x80) is left out: in clone(2) that bit belongs to the exit signal (CSIGNAL), so clone cannot
/// ask for a time namespace (only clone3 and unshare can, and both are refused).
const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u32;

/// Open flags that make an open judged (O_TMPFILE includes O_WRONLY or O_RDWR).
const OPEN_WRITE_FLAGS: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

macro_rules! sys {
    ($($name:ident),* $(,)?) => { &[$((libc::$name as i64, strip(stringify!($name)))),*] };
}

/// `SYS_foo` -> `foo`, at compile time.
const fn strip(s: &'static str) -> &'static str {
    match s.as_bytes() {
        [b'S', b'Y', b'S', b'_', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(r) => r,
            Err(_) => s,
        },
        _ => s,
    }
}

/// Calls refused with EPERM outright.
const DENIED_COMMON: &[(i64, &str)] = sys![
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_ptrace,
    SYS_process_vm_writev,
    SYS_process_vm_readv,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_mount,
    SYS_umount2,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_move_mount,
    SYS_open_tree,
    SYS_mount_setattr,
    SYS_pivot_root,
    SYS_chroot,
    SYS_swapon,
    SYS_swapoff,
    SYS_reboot,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_unshare,
    SYS_setns,
    SYS_acct,
    SYS_quotactl,
    SYS_quotactl_fd,
    SYS_lookup_dcookie,
];
const DENIED_EXTRA: &[(i64, &str)] = &[(SYS_OPEN_TREE_ATTR, "open_tree_attr")];

/// Calls refused only for some arguments, or with another errno (see [`build`]).
const CONDITIONAL: &[(i64, &str)] = sys![SYS_seccomp, SYS_clone, SYS_clone3, SYS_ioctl];

/// Path-based mutations, trapped whatever their arguments.
const TRAPPED_COMMON: &[(i64, &str)] = sys![
    SYS_unlinkat,
    SYS_renameat,
    SYS_renameat2,
    SYS_linkat,
    SYS_symlinkat,
    SYS_mkdirat,
    SYS_mknodat,
    SYS_fchmodat,
    SYS_fchownat,
    SYS_truncate,
    SYS_utimensat,
    SYS_setxattr,
    SYS_lsetxattr,
    SYS_removexattr,
    SYS_lremovexattr,
    SYS_openat2,
];
const TRAPPED_EXTRA: &[(i64, &str)] = &[
    (SYS_FCHMODAT2, "fchmodat2"),
    (SYS_SETXATTRAT, "setxattrat"),
    (SYS_REMOVEXATTRAT, "removexattrat"),
];
/// Legacy entry points, x86_64 only (aarch64 has only the *at forms).
#[cfg(target_arch = "x86_64")]
const TRAPPED_LEGACY: &[(i64, &str)] = sys![
    SYS_unlink,
    SYS_rmdir,
    SYS_rename,
    SYS_link,
    SYS_symlink,
    SYS_mkdir,
    SYS_mknod,
    SYS_chmod,
    SYS_chown,
    SYS_lchown,
    SYS_utime,
    SYS_utimes,
    SYS_futimesat,
    SYS_creat,
];
#[cfg(not(target_arch = "x86_64"))]
const TRAPPED_LEGACY: &[(i64, &str)] = &[];
const TRAPPED_EXEC: &[(i64, &str)] = sys![SYS_execve, SYS_execveat];
const TRAPPED_CONNECT: &[(i64, &str)] = sys![SYS_connect];
/// Trapped only when their flags ask to write.
#[cfg(target_arch = "x86_64")]
const TRAPPED_OPEN: &[(i64, &str)] = sys![SYS_open, SYS_openat];
#[cfg(not(target_arch = "x86_64"))]
const TRAPPED_OPEN: &[(i64, &str)] = sys![SYS_openat];

const fn concat<const N: usize>(parts: &[&[(i64, &'static str)]]) -> [(i64, &'static str); N] {
    let mut out = [(0, ""); N];
    let (mut i, mut n) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[n] = parts[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "concat: wrong length");
    out
}

const TRAPPED_PARTS: &[&[(i64, &str)]] = &[
    TRAPPED_COMMON,
    TRAPPED_EXTRA,
    TRAPPED_LEGACY,
    TRAPPED_EXEC,
    TRAPPED_CONNECT,
    TRAPPED_OPEN,
];
const TRAPPED_LEN: usize = TRAPPED_COMMON.len()
    + TRAPPED_EXTRA.len()
    + TRAPPED_LEGACY.len()
    + TRAPPED_EXEC.len()
    + TRAPPED_CONNECT.len()
    + TRAPPED_OPEN.len();
static TRAPPED: [(i64, &str); TRAPPED_LEN] = concat(TRAPPED_PARTS);

const DENIED_PARTS: &[&[(i64, &str)]] = &[DENIED_COMMON, DENIED_EXTRA, CONDITIONAL];
const DENIED_LEN: usize = DENIED_COMMON.len() + DENIED_EXTRA.len() + CONDITIONAL.len();
static DENIED: [(i64, &str); DENIED_LEN] = concat(DENIED_PARTS);

/// Every call the filter may trap to the supervisor (with every `trap_*` enabled), with its
/// name. open/openat are trapped only for write flags.
pub fn trapped_syscalls() -> &'static [(i64, &'static str)] {
    &TRAPPED
}

/// Every call the deny list refuses, outright or for some arguments (seccomp, clone, clone3,
/// ioctl), with its name; for `guard doctor`.
pub fn denied_syscalls() -> &'static [(i64, &'static str)] {
    &DENIED
}

/// The name of a trapped or denied syscall, `"unknown"` for any other number.
pub fn syscall_name(nr: i64) -> &'static str {
    TRAPPED
        .iter()
        .chain(DENIED.iter())
        .find(|(n, _)| *n == nr)
        .map_or("unknown", |(_, name)| name)
}

/// Builds the program for `spec`.
pub fn build(spec: &FilterSpec) -> Result<Vec<SockFilter>, ConfineError> {
    let mut asm = Assembler::new();
    let kill = asm.label();
    let allow = asm.label();
    let eperm = asm.label();
    let notify = asm.label();

    asm.ld_abs(OFF_ARCH);
    asm.jump(Cond::Eq, AUDIT_ARCH_NATIVE, Dest::Next, Dest::Label(kill));
    asm.ld_abs(OFF_NR);
    #[cfg(target_arch = "x86_64")]
    asm.jump(Cond::Ge, X32_SYSCALL_BIT, Dest::Label(kill), Dest::Next);

    // Each block below starts with the syscall number in A and ends with a return; it is entered
    // from the dispatch chain by number.
    let mut blocks: Vec<(i64, fn(&mut Assembler, Labels))> = Vec::new();
    if spec.deny_list {
        for &(nr, _) in DENIED_COMMON.iter().chain(DENIED_EXTRA) {
            asm.jump(Cond::Eq, nr_k(nr), Dest::Label(eperm), Dest::Next);
        }
        blocks.push((libc::SYS_seccomp, seccomp_block));
        blocks.push((libc::SYS_clone, clone_block));
        blocks.push((libc::SYS_clone3, clone3_block));
        blocks.push((libc::SYS_ioctl, ioctl_block));
    }
    if spec.notify {
        let mut trapped: Vec<&[(i64, &str)]> = vec![TRAPPED_COMMON, TRAPPED_EXTRA, TRAPPED_LEGACY];
        if spec.trap_exec {
            trapped.push(TRAPPED_EXEC);
        }
        if spec.trap_connect {
            trapped.push(TRAPPED_CONNECT);
        }
        for &(nr, _) in trapped.into_iter().flatten() {
            asm.jump(Cond::Eq, nr_k(nr), Dest::Label(notify), Dest::Next);
        }
        #[cfg(target_arch = "x86_64")]
        blocks.push((libc::SYS_open, open_block));
        blocks.push((libc::SYS_openat, openat_block));
    }
    let entries: Vec<_> = blocks.iter().map(|_| asm.label()).collect();
    for (&(nr, _), &entry) in blocks.iter().zip(&entries) {
        asm.jump(Cond::Eq, nr_k(nr), Dest::Label(entry), Dest::Next);
    }
    asm.bind(allow);
    asm.ret(SECCOMP_RET_ALLOW);

    let labels = Labels {
        allow,
        eperm,
        notify,
    };
    for (&(_, emit), entry) in blocks.iter().zip(entries) {
        asm.bind(entry);
        emit(&mut asm, labels);
    }
    asm.bind(kill);
    asm.ret(SECCOMP_RET_KILL_PROCESS);
    asm.bind(eperm);
    asm.ret(ret_errno(libc::EPERM));
    asm.bind(notify);
    asm.ret(SECCOMP_RET_USER_NOTIF);
    asm.finish()
}

/// The shared returns the argument blocks jump to.
#[derive(Clone, Copy)]
struct Labels {
    allow: super::bpf::Label,
    eperm: super::bpf::Label,
    notify: super::bpf::Label,
}

/// Syscall numbers are small and non-negative: they fit the 32-bit compare.
fn nr_k(nr: i64) -> u32 {
    u32::try_from(nr).expect("syscall numbers are small and non-negative")
}

/// seccomp(SECCOMP_SET_MODE_FILTER, flags & NEW_LISTENER, ...) -> EPERM: a second listener
/// would let the program answer its own trapped calls. Stricter filters stay allowed.
fn seccomp_block(asm: &mut Assembler, l: Labels) {
    asm.ld_abs(off_arg_lo(0));
    asm.jump(
        Cond::Eq,
        SECCOMP_SET_MODE_FILTER,
        Dest::Next,
        Dest::Label(l.allow),
    );
    asm.ld_abs(off_arg_lo(1));
    asm.jump(
        Cond::Set,
        SECCOMP_FILTER_FLAG_NEW_LISTENER,
        Dest::Label(l.eperm),
        Dest::Label(l.allow),
    );
}

/// clone with a namespace flag -> EPERM; fork-style clones are allowed.
fn clone_block(asm: &mut Assembler, l: Labels) {
    asm.ld_abs(off_arg_lo(0));
    asm.jump(
        Cond::Set,
        CLONE_NAMESPACES,
        Dest::Label(l.eperm),
        Dest::Label(l.allow),
    );
}

/// clone3 -> ENOSYS: its flags live in memory BPF cannot read; glibc then falls back to clone.
fn clone3_block(asm: &mut Assembler, _: Labels) {
    asm.ret(ret_errno(libc::ENOSYS));
}

/// ioctl(fd, TIOCSTI | TIOCLINUX) -> EPERM: no typing into the controlling terminal.
fn ioctl_block(asm: &mut Assembler, l: Labels) {
    asm.ld_abs(off_arg_lo(1));
    asm.jump(
        Cond::Eq,
        libc::TIOCSTI as u32,
        Dest::Label(l.eperm),
        Dest::Next,
    );
    asm.jump(
        Cond::Eq,
        libc::TIOCLINUX as u32,
        Dest::Label(l.eperm),
        Dest::Label(l.allow),
    );
}

/// open(path, flags, mode): trapped when flags ask to write.
#[cfg(target_arch = "x86_64")]
fn open_block(asm: &mut Assembler, l: Labels) {
    write_flags_at(asm, l, 1);
}

/// openat(dirfd, path, flags, mode): trapped when flags ask to write.
fn openat_block(asm: &mut Assembler, l: Labels) {
    write_flags_at(asm, l, 2);
}

fn write_flags_at(asm: &mut Assembler, l: Labels, arg: usize) {
    asm.ld_abs(off_arg_lo(arg));
    asm.jump(
        Cond::Set,
        OPEN_WRITE_FLAGS,
        Dest::Label(l.notify),
        Dest::Label(l.allow),
    );
}
