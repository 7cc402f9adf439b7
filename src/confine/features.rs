//! What the running kernel offers guard: probed, never assumed. `guard doctor` prints it, and
//! `guard exec` records the same facts in its run-start event.

use std::os::fd::AsFd;

use serde::Serialize;

use crate::sys;

/// One kernel feature and whether this machine has it.
#[derive(Debug, Clone, Serialize)]
pub struct Feature {
    pub name: &'static str,
    pub available: bool,
    /// What guard uses it for.
    pub purpose: &'static str,
    /// What happens without it, and what to do.
    pub without: &'static str,
    pub detail: String,
}

/// Everything `guard doctor` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Features {
    pub kernel: String,
    pub arch: &'static str,
    pub landlock_abi: Option<u32>,
    pub features: Vec<Feature>,
}

const ALLOW_ALL: libc::sock_filter = libc::sock_filter {
    code: 0x06, // BPF_RET | BPF_K
    jt: 0,
    jf: 0,
    k: libc::SECCOMP_RET_ALLOW,
};

/// Probe seccomp listener features in a throwaway child (the filter must not land on guard).
/// Bits of the exit status: 1 listener, 2 SYNC_WAKE_UP, 4 ADDFD, 8 ADDFD_FLAG_SEND.
fn probe_listener() -> u8 {
    match sys::process::fork() {
        Ok(sys::process::Forked::Child) => {
            let mut bits = 0u8;
            if nix::sys::prctl::set_no_new_privs().is_ok() {
                if let Ok(fd) = sys::notify::install_filter_with_listener(&[ALLOW_ALL]) {
                    bits |= 1;
                    let sizes = sys::notify::notif_sizes().unwrap_or(sys::NotifSizes {
                        notif: 80,
                        resp: 24,
                        data: 64,
                    });
                    let l = sys::Listener::new(fd, sizes);
                    if l.set_sync_wake_up().is_ok() {
                        bits |= 2;
                    }
                    // A bogus id: ENOENT once the ioctl and its flags are understood.
                    let stdin = std::io::stdin();
                    if l.addfd(u64::MAX, stdin.as_fd(), false, false)
                        .err()
                        .and_then(|e| e.raw_os_error())
                        == Some(libc::ENOENT)
                    {
                        bits |= 4;
                    }
                    if l.addfd(u64::MAX, stdin.as_fd(), false, true)
                        .err()
                        .and_then(|e| e.raw_os_error())
                        == Some(libc::ENOENT)
                    {
                        bits |= 8;
                    }
                }
            }
            sys::process::exit_now(i32::from(bits))
        }
        Ok(sys::process::Forked::Parent { child }) => {
            match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code as u8,
                _ => 0,
            }
        }
        Err(_) => 0,
    }
}

fn yes_no(b: bool) -> String {
    if b {
        "yes".into()
    } else {
        "no".into()
    }
}

/// Probe the kernel. Forks once (for the listener probes); call before starting threads.
pub fn probe() -> Features {
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let abi = sys::process::landlock_abi();
    let bits = probe_listener();
    let sizes = sys::notify::notif_sizes();
    let pidfd_getfd = sys::process::pidfd_open(std::process::id() as i32)
        .and_then(|p| sys::process::pidfd_getfd(p.as_fd(), 1))
        .is_ok();
    let openat2 = std::fs::File::open("/")
        .and_then(|root| {
            sys::process::openat2(
                root.as_fd(),
                c".",
                libc::O_PATH as u64,
                0,
                libc::RESOLVE_BENEATH,
            )
        })
        .is_ok();
    let abi_at_least = |n: u32| abi.is_some_and(|a| a >= n);
    let f = |name, available, purpose, without, detail: String| Feature {
        name,
        available,
        purpose,
        without,
        detail,
    };
    let features = vec![
        f("landlock", abi.is_some(), "read/write/execute roots: the hard filesystem boundary",
          "no filesystem boundary: only the supervisor's judgement (run `guard exec -p observe` to audit only); enable Landlock (lsm=landlock, Linux 5.13+)",
          abi.map(|a| format!("ABI {a}")).unwrap_or_else(|| "absent or disabled".into())),
        f("landlock-refer", abi_at_least(2), "renames and links across directories inside write roots (ABI 2)",
          "cross-directory rename/link inside the workspace fails with EXDEV", String::new()),
        f("landlock-truncate", abi_at_least(3), "truncate() bounded to write roots (ABI 3)",
          "truncate is judged by the supervisor only", String::new()),
        f("landlock-net-tcp", abi_at_least(4), "TCP connect/bind port rules (ABI 4)",
          "network connects are judged by the supervisor only", String::new()),
        f("landlock-ioctl-dev", abi_at_least(5), "ioctl on device files bounded (ABI 5)",
          "device ioctls are not bounded by Landlock", String::new()),
        f("landlock-scope", abi_at_least(6), "signals and abstract unix sockets scoped to the sandbox (ABI 6)",
          "the sandbox can signal processes outside it owned by the same user, and reach abstract sockets", String::new()),
        f("seccomp-notify", bits & 1 != 0, "the supervisor judges trapped calls (Linux 5.0)",
          "guard cannot run: it needs seccomp user notification", sizes.map(|s| format!("notif {} / resp {} / data {} bytes", s.notif, s.resp, s.data)).unwrap_or_default()),
        f("sync-wake-up", bits & 2 != 0, "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: faster round trips (Linux 6.6)",
          "each judged call costs more (a cross-CPU wake-up)", yes_no(bits & 2 != 0)),
        f("addfd", bits & 4 != 0, "SECCOMP_IOCTL_NOTIF_ADDFD: inject files opened by the supervisor (Linux 5.9)",
          "opens cannot be emulated; write-opens are continued instead", String::new()),
        f("addfd-send", bits & 8 != 0, "SECCOMP_ADDFD_FLAG_SEND: inject and answer atomically (Linux 5.14)",
          "injection and answer take two ioctls", String::new()),
        f("pidfd-getfd", pidfd_getfd, "use the caller's directory fds as the caller sees them (Linux 5.6)",
          "dirfd-relative paths are resolved through /proc only", String::new()),
        f("openat2", openat2, "resolve paths beneath the workspace without races (Linux 5.6)",
          "emulated calls cannot be confined to the workspace by the kernel", String::new()),
    ];
    Features {
        kernel,
        arch: std::env::consts::ARCH,
        landlock_abi: abi,
        features,
    }
}
