//! The seccomp program guard installs in the child, built from a [`FilterSpec`] (pure).
//!
//! In order: foreign architectures and the x32 range are killed; the deny list returns an errno
//! (EPERM, ENOSYS for clone3); the trapped set returns `SECCOMP_RET_USER_NOTIF` for the
//! supervisor; everything else is allowed. Open calls are trapped only when their flags ask to
//! write, so reads never pay a round trip. The semantics are proven by the tests at the bottom
//! with the interpreter in [`super::bpf`]. Which calls are in which set, and how each is
//! tested, is read from the one table in [`super::syscalls`].

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::bpf::{
    off_arg_hi, off_arg_lo, ret_errno, Assembler, Cond, Dest, Label, SockFilter, OFF_ARCH, OFF_NR,
    SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
};
use super::syscalls::{Condition, OpenFlags, Shape, Treatment, NATIVE};
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
    /// Trap the network calls: connect, bind, listen, sendmsg, sendmmsg, and sendto with a
    /// destination.
    pub trap_connect: bool,
    /// Trap the open calls whatever their flags, reads too (`guard learn` records what a
    /// command reads; every open then pays a round trip).
    pub trap_reads: bool,
}

impl FilterSpec {
    /// The filter for a policy: observe mode keeps every trap but drops the deny list.
    pub fn for_policy(policy: &Policy) -> Self {
        FilterSpec {
            notify: true,
            deny_list: policy.mode == Mode::Enforce,
            trap_exec: true,
            trap_connect: true,
            trap_reads: false,
        }
    }
}

/// The native audit architecture (`AUDIT_ARCH_*` of include/uapi/linux/audit.h).
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH_NATIVE: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("guard's seccomp filter supports x86_64 and aarch64 only");

/// The x32 ABI marks its syscall numbers with this bit (`__X32_SYSCALL_BIT`).
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

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

/// Every call the filter may trap to the supervisor (with every `trap_*` enabled), with its
/// name. open/openat are trapped only for write flags.
pub fn trapped_syscalls() -> &'static [(i64, &'static str)] {
    static TRAPPED: OnceLock<Vec<(i64, &'static str)>> = OnceLock::new();
    TRAPPED.get_or_init(|| {
        NATIVE
            .iter()
            .filter(|s| s.trapped_shape().is_some())
            .map(|s| (s.nr, s.name))
            .collect()
    })
}

/// Every call the deny list refuses, outright or for some arguments (seccomp, clone, clone3,
/// ioctl), with its name; for `guard doctor`.
pub fn denied_syscalls() -> &'static [(i64, &'static str)] {
    static DENIED: OnceLock<Vec<(i64, &'static str)>> = OnceLock::new();
    DENIED.get_or_init(|| {
        NATIVE
            .iter()
            .filter(|s| s.trapped_shape().is_none())
            .map(|s| (s.nr, s.name))
            .collect()
    })
}

/// The name of a trapped or denied syscall, `"unknown"` for any other number.
pub fn syscall_name(nr: i64) -> &'static str {
    NATIVE
        .iter()
        .find(|s| s.nr == nr)
        .map_or("unknown", |s| s.name)
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

    // Each syscall number the lists name goes to one target: a shared return or the entry of
    // its block (which starts with the number in A and ends with a return); every other number
    // is allowed. The dispatch is a binary search over the numbers, about eight tests deep,
    // not a chain of one test per listed number: the kernel runs the program for every number
    // when it is installed (to learn which calls it may allow without running it), and every
    // call whose verdict depends on its arguments (an open, an ioctl) runs it again.
    // The first list that names a number wins (no number is in two; a test says so).
    let mut targets: BTreeMap<u32, Label> = BTreeMap::new();
    let mut blocks: Vec<(Label, Block)> = Vec::new();
    let mut block = |asm: &mut Assembler, b: Block| {
        let entry = asm.label();
        blocks.push((entry, b));
        entry
    };
    if spec.deny_list {
        for s in NATIVE {
            let target = match s.treatment {
                Treatment::Deny(libc::EPERM) => eperm,
                Treatment::Deny(errno) => block(&mut asm, Block::Errno(errno)),
                Treatment::Conditional(c) => block(&mut asm, Block::Condition(c)),
                Treatment::Trap(_)
                | Treatment::TrapWhenWriting(_)
                | Treatment::TrapWhenAddressed(_) => continue,
            };
            targets.entry(nr_k(s.nr)).or_insert(target);
        }
    }
    if spec.notify {
        for s in NATIVE {
            let target = match s.treatment {
                Treatment::Trap(shape) => {
                    let wanted = match shape {
                        Shape::Exec { .. } => spec.trap_exec,
                        Shape::Connect { .. }
                        | Shape::SendMsg { .. }
                        | Shape::SendMmsg { .. }
                        | Shape::Bind { .. }
                        | Shape::Listen { .. } => spec.trap_connect,
                        _ => true,
                    };
                    if !wanted {
                        continue;
                    }
                    notify
                }
                Treatment::TrapWhenWriting(_) if spec.trap_reads => notify,
                Treatment::TrapWhenWriting(Shape::Open {
                    flags: OpenFlags::Arg(i),
                    ..
                }) => block(&mut asm, Block::WriteFlags(i)),
                Treatment::TrapWhenWriting(_) => {
                    unreachable!(
                        "the table traps by flags only open calls with flags in a register"
                    )
                }
                Treatment::TrapWhenAddressed(Shape::SendTo { addr, .. }) => {
                    if !spec.trap_connect {
                        continue;
                    }
                    block(&mut asm, Block::Addressed(addr))
                }
                Treatment::TrapWhenAddressed(_) => {
                    unreachable!("the table traps by destination only sendto")
                }
                Treatment::Deny(_) | Treatment::Conditional(_) => continue,
            };
            targets.entry(nr_k(s.nr)).or_insert(target);
        }
    }
    dispatch(&mut asm, &segments(&targets, allow));

    let labels = Labels {
        allow,
        eperm,
        notify,
    };
    for (entry, block) in blocks {
        asm.bind(entry);
        match block {
            Block::Errno(errno) => asm.ret(ret_errno(errno)),
            Block::Condition(Condition::NewListener) => seccomp_block(&mut asm, labels),
            Block::Condition(Condition::Namespaces) => clone_block(&mut asm, labels),
            Block::Condition(Condition::TerminalInjection) => ioctl_block(&mut asm, labels),
            Block::WriteFlags(arg) => write_flags_at(&mut asm, labels, arg),
            Block::Addressed(arg) => addressed_at(&mut asm, labels, arg),
        }
    }
    asm.bind(allow);
    asm.ret(SECCOMP_RET_ALLOW);
    asm.bind(kill);
    asm.ret(SECCOMP_RET_KILL_PROCESS);
    asm.bind(eperm);
    asm.ret(ret_errno(libc::EPERM));
    asm.bind(notify);
    asm.ret(SECCOMP_RET_USER_NOTIF);
    asm.finish()
}

/// The numbers from 0 up as runs that share a target: `(first number, target)`, each run
/// ending where the next begins, the last one at the top. Numbers no list names go to `allow`.
fn segments(targets: &BTreeMap<u32, Label>, allow: Label) -> Vec<(u32, Label)> {
    let mut runs: Vec<(u32, Label)> = Vec::new();
    let mut push = |first: u32, target: Label| {
        if runs.last().is_none_or(|&(_, t)| t != target) {
            runs.push((first, target));
        }
    };
    // The first number no run covers yet.
    let mut next = 0;
    for (&nr, &target) in targets {
        if nr > next {
            push(next, allow);
        }
        push(nr, target);
        next = nr + 1;
    }
    push(next, allow);
    runs
}

/// A binary search over `runs` (the syscall number in A, known to be at least the first run's
/// first number), ending in a jump to the run's target. Jumps go forward only: each half is
/// placed after the test that chooses it.
fn dispatch(asm: &mut Assembler, runs: &[(u32, Label)]) {
    if let [(_, target)] = runs {
        asm.ja(*target);
        return;
    }
    let (low, high) = runs.split_at(runs.len() / 2);
    let high_entry = match high {
        [(_, target)] => *target,
        _ => asm.label(),
    };
    let low_entry = match low {
        [(_, target)] => Dest::Label(*target),
        _ => Dest::Next,
    };
    asm.jump(Cond::Ge, high[0].0, Dest::Label(high_entry), low_entry);
    if low.len() > 1 {
        dispatch(asm, low);
    }
    if high.len() > 1 {
        asm.bind(high_entry);
        dispatch(asm, high);
    }
}

/// The code of one syscall whose verdict depends on its arguments, or that returns an errno
/// other than EPERM.
#[derive(Clone, Copy)]
enum Block {
    Errno(i32),
    Condition(Condition),
    /// Notify when the flags in this argument ask to write.
    WriteFlags(usize),
    /// Notify when the pointer in this argument is not NULL.
    Addressed(usize),
}

/// The shared returns the argument blocks jump to.
#[derive(Clone, Copy)]
struct Labels {
    allow: Label,
    eperm: Label,
    notify: Label,
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

fn write_flags_at(asm: &mut Assembler, l: Labels, arg: usize) {
    asm.ld_abs(off_arg_lo(arg));
    asm.jump(
        Cond::Set,
        OPEN_WRITE_FLAGS,
        Dest::Label(l.notify),
        Dest::Label(l.allow),
    );
}

/// Notify when the 64-bit pointer in argument `arg` is not NULL (either half non-zero).
fn addressed_at(asm: &mut Assembler, l: Labels, arg: usize) {
    asm.ld_abs(off_arg_lo(arg));
    asm.jump(Cond::Eq, 0, Dest::Next, Dest::Label(l.notify));
    asm.ld_abs(off_arg_hi(arg));
    asm.jump(Cond::Eq, 0, Dest::Label(l.allow), Dest::Label(l.notify));
}

#[cfg(test)]
mod tests {
    use super::super::bpf::{run, run_counting, SeccompData, BPF_JA, BPF_JMP, BPF_MAXINSNS};
    use super::*;

    const ENFORCE: FilterSpec = FilterSpec {
        notify: true,
        deny_list: true,
        trap_exec: true,
        trap_connect: true,
        trap_reads: false,
    };
    const EPERM: u32 = ret_errno(libc::EPERM);

    fn call(nr: i64, args: &[u64]) -> SeccompData {
        let mut data = SeccompData {
            nr: i32::try_from(nr).unwrap(),
            arch: AUDIT_ARCH_NATIVE,
            instruction_pointer: 0x7f00_1234_5678,
            args: [0; 6],
        };
        data.args[..args.len()].copy_from_slice(args);
        data
    }

    fn judge(spec: &FilterSpec, nr: i64, args: &[u64]) -> u32 {
        run(&build(spec).unwrap(), &call(nr, args))
    }

    #[test]
    fn foreign_architectures_are_killed() {
        const AUDIT_ARCH_I386: u32 = 0x4000_0003;
        let mut data = call(libc::SYS_read, &[]);
        data.arch = AUDIT_ARCH_I386;
        assert_eq!(
            run(&build(&ENFORCE).unwrap(), &data),
            SECCOMP_RET_KILL_PROCESS
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_numbers_are_killed() {
        let nr = i64::from(X32_SYSCALL_BIT) + libc::SYS_read;
        assert_eq!(judge(&ENFORCE, nr, &[]), SECCOMP_RET_KILL_PROCESS);
    }

    #[test]
    fn openat_is_trapped_only_for_write_flags() {
        let at = |flags: i32| judge(&ENFORCE, libc::SYS_openat, &[0, 0, flags as u64, 0]);
        assert_eq!(at(libc::O_RDONLY), SECCOMP_RET_ALLOW);
        assert_eq!(
            at(libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY),
            SECCOMP_RET_ALLOW
        );
        for flags in [
            libc::O_WRONLY,
            libc::O_RDWR,
            libc::O_CREAT,
            libc::O_TRUNC,
            libc::O_TMPFILE | libc::O_WRONLY,
        ] {
            assert_eq!(at(flags), SECCOMP_RET_USER_NOTIF, "flags {flags:#x}");
        }
        // High garbage in the int register does not turn a read into a write, nor the reverse.
        assert_eq!(
            judge(
                &ENFORCE,
                libc::SYS_openat,
                &[0, 0, 0xffff_ffff_0000_0000, 0]
            ),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            judge(&ENFORCE, libc::SYS_openat2, &[0, 0, 0, 0]),
            SECCOMP_RET_USER_NOTIF
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn legacy_open_is_trapped_only_for_write_flags() {
        let open = |flags: i32| judge(&ENFORCE, libc::SYS_open, &[0, flags as u64]);
        assert_eq!(open(libc::O_RDONLY), SECCOMP_RET_ALLOW);
        assert_eq!(open(libc::O_WRONLY | libc::O_CREAT), SECCOMP_RET_USER_NOTIF);
        assert_eq!(
            judge(&ENFORCE, libc::SYS_creat, &[0, 0o644]),
            SECCOMP_RET_USER_NOTIF
        );
    }

    #[test]
    fn the_deny_list_returns_eperm() {
        for s in NATIVE {
            if s.treatment == Treatment::Deny(libc::EPERM) {
                assert_eq!(judge(&ENFORCE, s.nr, &[]), EPERM, "{}", s.name);
            }
        }
        assert_eq!(judge(&ENFORCE, libc::SYS_io_uring_setup, &[]), EPERM);
    }

    #[test]
    fn seccomp_is_refused_only_with_a_new_listener() {
        let s = |op: u64, flags: u64| judge(&ENFORCE, libc::SYS_seccomp, &[op, flags, 0]);
        let listener = u64::from(SECCOMP_FILTER_FLAG_NEW_LISTENER);
        assert_eq!(s(1, listener), EPERM);
        assert_eq!(s(1, listener | 1), EPERM);
        assert_eq!(s(1, 0), SECCOMP_RET_ALLOW);
        assert_eq!(s(1, 1), SECCOMP_RET_ALLOW); // TSYNC
        assert_eq!(s(0, listener), SECCOMP_RET_ALLOW); // SET_MODE_STRICT ignores flags
        assert_eq!(s(2, 0), SECCOMP_RET_ALLOW); // GET_ACTION_AVAIL
    }

    #[test]
    fn clone_is_refused_only_with_namespace_flags() {
        let fork = (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(judge(&ENFORCE, libc::SYS_clone, &[fork]), SECCOMP_RET_ALLOW);
        assert_eq!(
            judge(&ENFORCE, libc::SYS_clone, &[thread]),
            SECCOMP_RET_ALLOW
        );
        for ns in [
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWNS,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWCGROUP,
        ] {
            assert_eq!(
                judge(&ENFORCE, libc::SYS_clone, &[fork | ns as u64]),
                EPERM,
                "{ns:#x}"
            );
        }
        assert_eq!(
            judge(&ENFORCE, libc::SYS_clone3, &[0, 88]),
            ret_errno(libc::ENOSYS)
        );
    }

    #[test]
    #[allow(clippy::unnecessary_cast)] // libc::Ioctl is c_ulong on glibc, c_int on musl
    fn terminal_injection_is_refused() {
        let ioctl = |cmd: u64| judge(&ENFORCE, libc::SYS_ioctl, &[1, cmd, 0]);
        assert_eq!(ioctl(libc::TIOCSTI as u64), EPERM);
        assert_eq!(ioctl(libc::TIOCLINUX as u64), EPERM);
        assert_eq!(ioctl(libc::TCGETS as u64), SECCOMP_RET_ALLOW);
        assert_eq!(ioctl(libc::FIONREAD as u64), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn sendto_is_trapped_only_with_a_destination() {
        let sendto = |addr: u64| judge(&ENFORCE, libc::SYS_sendto, &[3, 0x1000, 10, 0, addr, 16]);
        assert_eq!(sendto(0), SECCOMP_RET_ALLOW);
        assert_eq!(sendto(0x7f00_0000_1000), SECCOMP_RET_USER_NOTIF);
        // Either half of the pointer counts.
        assert_eq!(sendto(0x1_0000_0000), SECCOMP_RET_USER_NOTIF);
        assert_eq!(sendto(0x10), SECCOMP_RET_USER_NOTIF);
        for nr in [
            libc::SYS_sendmsg,
            libc::SYS_sendmmsg,
            libc::SYS_bind,
            libc::SYS_listen,
        ] {
            assert_eq!(
                judge(&ENFORCE, nr, &[3, 0, 0, 0]),
                SECCOMP_RET_USER_NOTIF,
                "{nr}"
            );
        }
        let quiet = FilterSpec {
            trap_connect: false,
            ..ENFORCE
        };
        assert_eq!(
            judge(&quiet, libc::SYS_sendto, &[3, 0x1000, 10, 0, 0x2000, 16]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(
            judge(&quiet, libc::SYS_sendmsg, &[3, 0x1000, 0]),
            SECCOMP_RET_ALLOW
        );
    }

    #[test]
    fn hot_calls_are_allowed() {
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_close,
            libc::SYS_exit,
            libc::SYS_exit_group,
            libc::SYS_mmap,
            libc::SYS_futex,
            libc::SYS_getpid,
            libc::SYS_personality,
            libc::SYS_fstat,
        ] {
            assert_eq!(
                judge(&ENFORCE, nr, &[0, 0, 0, 0]),
                SECCOMP_RET_ALLOW,
                "{}",
                nr
            );
        }
    }

    #[test]
    fn metadata_through_a_descriptor_is_trapped() {
        for nr in [
            libc::SYS_fchmod,
            libc::SYS_fchown,
            libc::SYS_fsetxattr,
            libc::SYS_fremovexattr,
        ] {
            assert_eq!(
                judge(&ENFORCE, nr, &[3, 0, 0, 0]),
                SECCOMP_RET_USER_NOTIF,
                "{nr}"
            );
        }
    }

    #[test]
    fn every_trapped_call_notifies() {
        for &(nr, name) in trapped_syscalls() {
            // open/openat notify for write flags, sendto for a destination; the others
            // whatever their arguments.
            let args = [0, libc::O_WRONLY as u64, libc::O_WRONLY as u64, 0, 0x1000];
            assert_eq!(judge(&ENFORCE, nr, &args), SECCOMP_RET_USER_NOTIF, "{name}");
        }
        assert!(trapped_syscalls().iter().any(|&(_, n)| n == "unlinkat"));
        assert_eq!(
            judge(&ENFORCE, libc::SYS_unlinkat, &[]),
            SECCOMP_RET_USER_NOTIF
        );
    }

    #[test]
    fn learning_traps_read_only_opens_too() {
        let learn = FilterSpec {
            trap_reads: true,
            ..ENFORCE
        };
        for flags in [
            libc::O_RDONLY,
            libc::O_RDONLY | libc::O_DIRECTORY,
            libc::O_WRONLY,
        ] {
            assert_eq!(
                judge(&learn, libc::SYS_openat, &[0, 0, flags as u64, 0]),
                SECCOMP_RET_USER_NOTIF
            );
        }
        assert_eq!(judge(&learn, libc::SYS_ptrace, &[]), EPERM);
        assert_eq!(judge(&learn, libc::SYS_read, &[]), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn observe_mode_traps_but_denies_nothing() {
        let observe = FilterSpec {
            deny_list: false,
            ..ENFORCE
        };
        assert_eq!(
            judge(&observe, libc::SYS_io_uring_setup, &[]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(judge(&observe, libc::SYS_clone3, &[]), SECCOMP_RET_ALLOW);
        assert_eq!(
            judge(&observe, libc::SYS_unlinkat, &[]),
            SECCOMP_RET_USER_NOTIF
        );
        let mut data = call(libc::SYS_read, &[]);
        data.arch = 0x4000_0003;
        assert_eq!(
            run(&build(&observe).unwrap(), &data),
            SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn disabled_traps_allow() {
        let quiet = FilterSpec {
            trap_exec: false,
            trap_connect: false,
            ..ENFORCE
        };
        assert_eq!(judge(&quiet, libc::SYS_execve, &[]), SECCOMP_RET_ALLOW);
        assert_eq!(judge(&quiet, libc::SYS_connect, &[]), SECCOMP_RET_ALLOW);
        let none = FilterSpec {
            notify: false,
            ..ENFORCE
        };
        assert_eq!(judge(&none, libc::SYS_unlinkat, &[]), SECCOMP_RET_ALLOW);
        assert_eq!(
            judge(&none, libc::SYS_openat, &[0, 0, libc::O_WRONLY as u64]),
            SECCOMP_RET_ALLOW
        );
        assert_eq!(judge(&none, libc::SYS_ptrace, &[]), EPERM);
    }

    #[test]
    fn programs_are_short_and_every_jump_lands_inside() {
        for notify in [false, true] {
            for deny_list in [false, true] {
                let spec = FilterSpec {
                    notify,
                    deny_list,
                    ..ENFORCE
                };
                let prog = build(&spec).unwrap();
                assert!(prog.len() < BPF_MAXINSNS);
                for (i, ins) in prog.iter().enumerate() {
                    if ins.code & 0x07 != BPF_JMP {
                        continue;
                    }
                    let targets = if ins.code & 0xf0 == BPF_JA {
                        vec![ins.k as usize]
                    } else {
                        vec![usize::from(ins.jt), usize::from(ins.jf)]
                    };
                    for off in targets {
                        assert!(i + 1 + off < prog.len(), "jump at {i} leaves the program");
                    }
                }
                assert_eq!(
                    prog.last().map(|i| i.code),
                    Some(0x06),
                    "ends with a return"
                );
            }
        }
    }

    #[test]
    fn names_cover_trapped_and_denied_calls() {
        assert_eq!(syscall_name(libc::SYS_unlinkat), "unlinkat");
        assert_eq!(syscall_name(libc::SYS_ptrace), "ptrace");
        assert_eq!(syscall_name(libc::SYS_clone3), "clone3");
        assert_eq!(syscall_name(452), "fchmodat2");
        assert_eq!(syscall_name(libc::SYS_read), "unknown");
        for &(nr, name) in trapped_syscalls().iter().chain(denied_syscalls()) {
            assert_eq!(syscall_name(nr), name);
            assert!(!name.starts_with("SYS_"));
        }
    }

    /// Random numbers and arguments: the verdict is always one of the four the program can give,
    /// and any call outside the lists is allowed whatever its arguments.
    #[test]
    fn random_calls_get_a_known_verdict() {
        let prog = build(&ENFORCE).unwrap();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let listed = |nr: i64| {
            trapped_syscalls()
                .iter()
                .chain(denied_syscalls())
                .any(|&(n, _)| n == nr)
        };
        for _ in 0..20_000 {
            let nr = (next() % 520) as i64;
            let args = [next(), next(), next(), next(), next(), next()];
            let verdict = run(&prog, &call(nr, &args));
            assert!(
                [
                    SECCOMP_RET_ALLOW,
                    SECCOMP_RET_USER_NOTIF,
                    EPERM,
                    ret_errno(libc::ENOSYS)
                ]
                .contains(&verdict),
                "nr {nr}: {verdict:#x}"
            );
            if !listed(nr) {
                assert_eq!(verdict, SECCOMP_RET_ALLOW, "nr {nr}");
            }
        }
    }

    /// The dispatch is a binary search: every number, listed or not, reaches its verdict in a
    /// dozen instructions or so (it was up to 130 as a chain), and the two ends of each run of
    /// numbers sharing a target get that target (no number leaks into its neighbour's run).
    #[test]
    fn every_number_is_dispatched_in_a_few_steps() {
        let prog = build(&ENFORCE).unwrap();
        let listed: Vec<i64> = trapped_syscalls()
            .iter()
            .chain(denied_syscalls())
            .map(|&(nr, _)| nr)
            .collect();
        let mut deepest = 0;
        for nr in 0..1024 {
            // Arguments that make every argument block take its longest path.
            let (verdict, steps) = run_counting(&prog, &call(nr, &[1, 0, 0, 0, 0, 0]));
            deepest = deepest.max(steps);
            if !listed.contains(&nr) {
                assert_eq!(verdict, SECCOMP_RET_ALLOW, "nr {nr}");
            } else if let Some(s) = NATIVE.iter().find(|s| s.nr == nr) {
                if matches!(s.treatment, Treatment::Trap(_)) {
                    assert_eq!(verdict, SECCOMP_RET_USER_NOTIF, "{}", s.name);
                }
                if s.treatment == Treatment::Deny(libc::EPERM) {
                    assert_eq!(verdict, EPERM, "{}", s.name);
                }
            }
        }
        assert!(deepest <= 20, "a call runs {deepest} instructions");
    }

    #[test]
    fn no_number_is_both_trapped_and_denied() {
        for &(nr, name) in trapped_syscalls() {
            assert!(!denied_syscalls().iter().any(|&(d, _)| d == nr), "{name}");
        }
    }
}
