//! Probing the kernel: the facts that need no listener ([`Kernel::probe`], a handful of system
//! calls, no fork), and the listener features, asked of a real listener ([`probe_listener`]):
//! the run's own, or a throwaway one in a child for `guard doctor`.

use std::os::fd::AsFd;

use crate::sys;

/// The facts about the kernel that need no listener: a few system calls, no fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// `uname -r`.
    pub release: String,
    /// The kernel's Landlock ABI (0: none, or disabled).
    pub landlock_abi: u8,
    /// The notification structure sizes, or the errno of SECCOMP_GET_NOTIF_SIZES.
    pub notif_sizes: Result<sys::NotifSizes, i32>,
    /// pidfd_getfd(2) worked on this process.
    pub pidfd_getfd: bool,
    /// openat2(2) with RESOLVE_BENEATH worked.
    pub openat2: bool,
}

impl Kernel {
    /// Probe the running kernel.
    pub fn probe() -> Kernel {
        let release = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default();
        let landlock_abi = sys::process::landlock_abi()
            .map(|a| u8::try_from(a).unwrap_or(u8::MAX))
            .unwrap_or(0);
        let notif_sizes =
            sys::notify::notif_sizes().map_err(|e| e.raw_os_error().unwrap_or(libc::ENOSYS));
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
        Kernel {
            release,
            landlock_abi,
            notif_sizes,
            pidfd_getfd,
            openat2,
        }
    }
}

/// What a seccomp listener of this kernel accepts, probed on a listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerCaps {
    /// `None` when not tried (switched off); else whether SET_FLAGS accepted SYNC_WAKE_UP, or
    /// the errno it gave.
    pub sync_wake_up: Option<Result<(), i32>>,
    /// SECCOMP_IOCTL_NOTIF_ADDFD is understood.
    pub addfd: bool,
    /// SECCOMP_ADDFD_FLAG_SEND is understood.
    pub addfd_send: bool,
}

/// Probe `listener`: set SYNC_WAKE_UP on it unless `sync_wake_up` is false (on a run's
/// listener that is the setting itself), and ask ADDFD with an id that cannot be pending.
pub fn probe_listener(listener: &sys::Listener, sync_wake_up: bool) -> ListenerCaps {
    let (addfd, addfd_send) = listener.probe_addfd();
    ListenerCaps {
        sync_wake_up: sync_wake_up.then(|| {
            listener
                .set_sync_wake_up()
                .map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL))
        }),
        addfd,
        addfd_send,
    }
}

/// A filter program that allows everything, for the throwaway listener.
const ALLOW_ALL: libc::sock_filter = libc::sock_filter {
    code: 0x06, // BPF_RET | BPF_K
    jt: 0,
    jf: 0,
    k: libc::SECCOMP_RET_ALLOW,
};

/// Probe the listener features in a throwaway child (the filter must not land on this
/// process). `None` when no listener could be installed. Forks: for `guard doctor` only.
pub(super) fn probe_listener_in_child() -> Option<ListenerCaps> {
    match sys::process::fork_single_threaded() {
        Ok(sys::process::Forked::Child) => {
            // Bits of the exit status: 1 listener, 2 SYNC_WAKE_UP, 4 ADDFD, 8 ADDFD_FLAG_SEND.
            let mut bits = 0u8;
            if nix::sys::prctl::set_no_new_privs().is_ok() {
                if let Ok(fd) = sys::notify::install_filter_with_listener(&[ALLOW_ALL]) {
                    bits |= 1;
                    let sizes = sys::notify::notif_sizes().unwrap_or(sys::NotifSizes {
                        notif: 80,
                        resp: 24,
                        data: 64,
                    });
                    let caps = probe_listener(&sys::Listener::new(fd, sizes), true);
                    for (on, bit) in [
                        (caps.sync_wake_up == Some(Ok(())), 2),
                        (caps.addfd, 4),
                        (caps.addfd_send, 8),
                    ] {
                        if on {
                            bits |= bit;
                        }
                    }
                }
            }
            sys::process::exit_now(i32::from(bits))
        }
        Ok(sys::process::Forked::Parent { child }) => {
            let bits = match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None) {
                Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => code as u8,
                _ => 0,
            };
            (bits & 1 != 0).then_some(ListenerCaps {
                sync_wake_up: Some(if bits & 2 != 0 {
                    Ok(())
                } else {
                    Err(libc::EINVAL)
                }),
                addfd: bits & 4 != 0,
                addfd_send: bits & 8 != 0,
            })
        }
        Err(_) => None,
    }
}
