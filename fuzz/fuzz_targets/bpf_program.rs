//! guard's seccomp program (`guard::confine::seccomp::build`), for all 16 `FilterSpec`s, run in
//! the classic-BPF interpreter (`guard::confine::bpf::run`) on `seccomp_data` from fuzz bytes.
//!
//! Input layout: byte 0 picks the spec, byte 1 says how to read nr and arch (a syscall from
//! guard's own lists, or raw; the native arch, or raw), then nr, arch, instruction pointer and
//! the six arguments, little endian, zero-padded.
//!
//! Properties: never panics; a foreign arch is KILL_PROCESS; on x86_64 an nr >= 0x40000000
//! (x32 bit, or negative) is KILL_PROCESS; open/openat whose flags lack O_WRONLY, O_RDWR,
//! O_CREAT and O_TRUNC is ALLOW (and with one of them, USER_NOTIF when trapping); every other
//! call gets exactly what an independent model of the documented filter says (deny list ->
//! EPERM, the conditional calls by their arguments, trapped calls -> USER_NOTIF, the rest ->
//! ALLOW); and the verdict does not depend on the instruction pointer or on the high halves
//! of the arguments.
#![no_main]

use std::sync::OnceLock;

use guard::confine::bpf::{
    run, SeccompData, SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_USER_NOTIF,
};
use guard::confine::seccomp::{
    build, denied_syscalls, trapped_syscalls, FilterSpec, AUDIT_ARCH_NATIVE,
};
use guard::confine::SockFilter;
use libfuzzer_sys::fuzz_target;

const EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
const ENOSYS: u32 = 0x0005_0000 | libc::ENOSYS as u32;
const WRITE_FLAGS: u32 = (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;
const NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u32;

fn spec(i: u8) -> FilterSpec {
    FilterSpec {
        notify: i & 1 != 0,
        deny_list: i & 2 != 0,
        trap_exec: i & 4 != 0,
        trap_connect: i & 8 != 0,
        trap_reads: i & 16 != 0,
    }
}

fn programs() -> &'static [Vec<SockFilter>] {
    static PROGRAMS: OnceLock<Vec<Vec<SockFilter>>> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        (0..32)
            .map(|i| build(&spec(i)).expect("every filter spec assembles"))
            .collect()
    })
}

/// Syscall numbers worth aiming at: everything guard names, plus a few it does not.
fn interesting() -> &'static [i64] {
    static NRS: OnceLock<Vec<i64>> = OnceLock::new();
    NRS.get_or_init(|| {
        let mut nrs: Vec<i64> = trapped_syscalls()
            .iter()
            .chain(denied_syscalls())
            .map(|&(nr, _)| nr)
            .collect();
        nrs.extend([
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_close,
            libc::SYS_getpid,
        ]);
        nrs
    })
}

/// What the documented filter returns for a native call with a number below the x32 bit.
fn model(spec: FilterSpec, d: &SeccompData) -> u32 {
    let nr = i64::from(d.nr);
    let lo = |i: usize| d.args[i] as u32;
    let named = |list: &[(i64, &str)], name: &str| list.iter().any(|&(n, s)| n == nr && s == name);
    let conditional = ["seccomp", "clone", "clone3", "ioctl"];
    if spec.deny_list {
        let denied = denied_syscalls();
        if denied
            .iter()
            .any(|&(n, s)| n == nr && !conditional.contains(&s))
        {
            return EPERM;
        }
    }
    if spec.notify {
        let trapped = trapped_syscalls().iter().any(|&(n, s)| {
            n == nr
                && match s {
                    "open" | "openat" => spec.trap_reads,
                    "execve" | "execveat" => spec.trap_exec,
                    "connect" => spec.trap_connect,
                    _ => true,
                }
        });
        if trapped {
            return SECCOMP_RET_USER_NOTIF;
        }
    }
    if spec.deny_list {
        let denied = denied_syscalls();
        if named(denied, "seccomp") {
            return if lo(0) == 1 && lo(1) & (1 << 3) != 0 {
                EPERM
            } else {
                SECCOMP_RET_ALLOW
            };
        }
        if named(denied, "clone") {
            return if lo(0) & NAMESPACES != 0 {
                EPERM
            } else {
                SECCOMP_RET_ALLOW
            };
        }
        if named(denied, "clone3") {
            return ENOSYS;
        }
        if named(denied, "ioctl") {
            let req = lo(1);
            let refused = req == libc::TIOCSTI as u32 || req == libc::TIOCLINUX as u32;
            return if refused { EPERM } else { SECCOMP_RET_ALLOW };
        }
    }
    if spec.notify {
        let flags_arg = match () {
            _ if named(trapped_syscalls(), "openat") => Some(2),
            _ if named(trapped_syscalls(), "open") => Some(1),
            _ => None,
        };
        if let Some(i) = flags_arg {
            if lo(i) & WRITE_FLAGS != 0 {
                return SECCOMP_RET_USER_NOTIF;
            }
        }
    }
    SECCOMP_RET_ALLOW
}

fuzz_target!(|data: &[u8]| {
    let mut buf = [0u8; 2 + 4 + 4 + 8 + 48];
    let n = data.len().min(buf.len());
    buf[..n].copy_from_slice(&data[..n]);
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));

    let spec_index = buf[0] & 31;
    let spec = spec(spec_index);
    let program = &programs()[usize::from(spec_index)];
    let nrs = interesting();
    let nr = if buf[1] & 1 == 0 {
        nrs[u32_at(2) as usize % nrs.len()] as i32
    } else {
        u32_at(2) as i32
    };
    let arch = if buf[1] & 2 == 0 {
        AUDIT_ARCH_NATIVE
    } else {
        u32_at(6)
    };
    let mut args = [0u64; 6];
    for (i, a) in args.iter_mut().enumerate() {
        *a = u64_at(18 + 8 * i);
    }
    let d = SeccompData {
        nr,
        arch,
        instruction_pointer: u64_at(10),
        args,
    };

    let got = run(program, &d);
    let low_only = SeccompData {
        instruction_pointer: 0,
        args: args.map(|a| a & 0xffff_ffff),
        ..d
    };
    assert_eq!(
        got,
        run(program, &low_only),
        "ip or high argument bits matter: {d:?}"
    );

    if arch != AUDIT_ARCH_NATIVE {
        assert_eq!(
            got, SECCOMP_RET_KILL_PROCESS,
            "foreign arch not killed: {spec:?} {d:?}"
        );
        return;
    }
    if cfg!(target_arch = "x86_64") && nr as u32 >= 0x4000_0000 {
        assert_eq!(
            got, SECCOMP_RET_KILL_PROCESS,
            "x32/negative nr not killed: {spec:?} {d:?}"
        );
        return;
    }
    let open_flags = match i64::from(nr) {
        libc::SYS_openat => Some(args[2] as u32),
        #[cfg(target_arch = "x86_64")]
        libc::SYS_open => Some(args[1] as u32),
        _ => None,
    };
    if let Some(flags) = open_flags {
        if flags & WRITE_FLAGS == 0 {
            assert_eq!(
                got, SECCOMP_RET_ALLOW,
                "read-only open not allowed: {spec:?} {d:?}"
            );
        } else if spec.notify {
            assert_eq!(
                got, SECCOMP_RET_USER_NOTIF,
                "writing open not trapped: {spec:?} {d:?}"
            );
        }
    }
    assert_eq!(
        got,
        model(spec, &d),
        "filter and model disagree: {spec:?} {d:?}"
    );
});
