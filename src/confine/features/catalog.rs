//! The catalogue of kernel features guard uses: each one's stable name (the word `guard doctor`
//! prints and `run-start` lists), the Landlock ABI or Linux release that brings it, what guard
//! uses it for and what happens without it. Facts only; the statuses are computed in
//! [`super::Features`].

/// A kernel feature guard uses. [`Feature::name`] is its stable name, the one `guard doctor`
/// prints and `run-start` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Landlock filesystem roots (ABI 1).
    Landlock,
    /// Renames and links across directories (ABI 2).
    LandlockFsRefer,
    /// truncate() bounded (ABI 3).
    LandlockFsTruncate,
    /// TCP connect port rules (ABI 4).
    LandlockNetConnect,
    /// TCP bind port rules (ABI 4).
    LandlockNetBind,
    /// Device ioctls bounded (ABI 5).
    LandlockFsIoctlDev,
    /// Signals scoped to the sandbox (ABI 6).
    LandlockScopeSignal,
    /// Abstract unix sockets scoped to the sandbox (ABI 6).
    LandlockScopeAbstractUnix,
    /// Pathname unix socket connects bounded (ABI 9).
    LandlockFsResolveUnix,
    /// seccomp user notification: the supervisor exists at all.
    SeccompNotify,
    /// SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6).
    SyncWakeUp,
    /// SECCOMP_IOCTL_NOTIF_ADDFD (Linux 5.9).
    AddFd,
    /// SECCOMP_ADDFD_FLAG_SEND (Linux 5.14).
    AddFdSend,
    /// pidfd_getfd(2) (Linux 5.6).
    PidfdGetfd,
    /// openat2(2) (Linux 5.6).
    Openat2,
}

impl Feature {
    /// Every feature, in the order guard reports them.
    pub const ALL: [Feature; 15] = [
        Feature::Landlock,
        Feature::LandlockFsRefer,
        Feature::LandlockFsTruncate,
        Feature::LandlockNetConnect,
        Feature::LandlockNetBind,
        Feature::LandlockFsIoctlDev,
        Feature::LandlockScopeSignal,
        Feature::LandlockScopeAbstractUnix,
        Feature::LandlockFsResolveUnix,
        Feature::SeccompNotify,
        Feature::SyncWakeUp,
        Feature::AddFd,
        Feature::AddFdSend,
        Feature::PidfdGetfd,
        Feature::Openat2,
    ];

    /// The stable name.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Landlock => "landlock",
            Feature::LandlockFsRefer => "landlock-fs-refer",
            Feature::LandlockFsTruncate => "landlock-fs-truncate",
            Feature::LandlockNetConnect => "landlock-net-connect",
            Feature::LandlockNetBind => "landlock-net-bind",
            Feature::LandlockFsIoctlDev => "landlock-fs-ioctl-dev",
            Feature::LandlockScopeSignal => "landlock-scope-signal",
            Feature::LandlockScopeAbstractUnix => "landlock-scope-abstract-unix",
            Feature::LandlockFsResolveUnix => "landlock-fs-resolve-unix",
            Feature::SeccompNotify => "seccomp-notify",
            Feature::SyncWakeUp => "sync-wake-up",
            Feature::AddFd => "addfd",
            Feature::AddFdSend => "addfd-send",
            Feature::PidfdGetfd => "pidfd-getfd",
            Feature::Openat2 => "openat2",
        }
    }

    /// The Landlock ABI that brings this feature; `None` for the others.
    pub fn landlock_abi(self) -> Option<u8> {
        Some(match self {
            Feature::Landlock => 1,
            Feature::LandlockFsRefer => 2,
            Feature::LandlockFsTruncate => 3,
            Feature::LandlockNetConnect | Feature::LandlockNetBind => 4,
            Feature::LandlockFsIoctlDev => 5,
            Feature::LandlockScopeSignal | Feature::LandlockScopeAbstractUnix => 6,
            Feature::LandlockFsResolveUnix => 9,
            _ => return None,
        })
    }

    /// The first Linux release that has it; `None` for a feature newer than the releases guard
    /// knows (a machine without it is not counted as degraded by `guard doctor`).
    pub fn since(self) -> Option<&'static str> {
        Some(match self {
            Feature::Landlock => "5.13",
            Feature::LandlockFsRefer => "5.19",
            Feature::LandlockFsTruncate => "6.2",
            Feature::LandlockNetConnect | Feature::LandlockNetBind => "6.7",
            Feature::LandlockFsIoctlDev => "6.10",
            Feature::LandlockScopeSignal | Feature::LandlockScopeAbstractUnix => "6.12",
            Feature::LandlockFsResolveUnix => return None,
            Feature::SeccompNotify => "5.0",
            Feature::SyncWakeUp => "6.6",
            Feature::AddFd => "5.9",
            Feature::AddFdSend => "5.14",
            Feature::PidfdGetfd | Feature::Openat2 => "5.6",
        })
    }

    /// What guard uses it for.
    pub fn purpose(self) -> &'static str {
        match self {
            Feature::Landlock => "read/write/execute roots: the hard filesystem boundary",
            Feature::LandlockFsRefer => "renames and links across directories inside write roots",
            Feature::LandlockFsTruncate => "truncate() bounded to write roots",
            Feature::LandlockNetConnect => "TCP connect port rules",
            Feature::LandlockNetBind => "TCP bind port rules",
            Feature::LandlockFsIoctlDev => "ioctl on device files bounded",
            Feature::LandlockScopeSignal => {
                "signals scoped to the sandbox; the command cannot signal the sandbox's init"
            }
            Feature::LandlockScopeAbstractUnix => "abstract unix sockets scoped to the sandbox",
            Feature::LandlockFsResolveUnix => "connects to pathname unix sockets bounded to roots",
            Feature::SeccompNotify => "the supervisor judges trapped calls",
            Feature::SyncWakeUp => "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: faster round trips",
            Feature::AddFd => "SECCOMP_IOCTL_NOTIF_ADDFD: inject files opened by the supervisor",
            Feature::AddFdSend => "SECCOMP_ADDFD_FLAG_SEND: inject and answer atomically",
            Feature::PidfdGetfd => "use the caller's directory fds as the caller sees them",
            Feature::Openat2 => "resolve paths beneath a directory without races",
        }
    }

    /// What happens without it.
    pub fn without(self) -> &'static str {
        match self {
            Feature::Landlock => {
                "no filesystem boundary: only the supervisor's judgement (run `guard exec -p observe` to audit only)"
            }
            Feature::LandlockFsRefer => {
                "renaming or linking across directories is refused everywhere"
            }
            Feature::LandlockFsTruncate => "truncation is not restricted by landlock",
            Feature::LandlockNetConnect => "tcp connect is judged by the supervisor only",
            Feature::LandlockNetBind => "tcp bind ports are judged by the supervisor only",
            Feature::LandlockFsIoctlDev => "device ioctls are not restricted by landlock",
            Feature::LandlockScopeSignal => {
                "the sandbox can signal processes outside it owned by the same user, and the command can kill the sandbox's init"
            }
            Feature::LandlockScopeAbstractUnix => {
                "the sandbox can reach abstract unix sockets outside it"
            }
            Feature::LandlockFsResolveUnix => {
                "connecting to pathname unix sockets is not restricted by landlock"
            }
            Feature::SeccompNotify => "guard cannot run: it needs seccomp user notification",
            Feature::SyncWakeUp => "each judged call costs more (a cross-CPU wake-up)",
            Feature::AddFd => {
                "judged write-opens are continued, not performed by guard (raceable)"
            }
            Feature::AddFdSend => "injection and answer take two ioctls",
            Feature::PidfdGetfd => "dirfd-relative paths are resolved through /proc only",
            Feature::Openat2 => "emulated calls cannot be confined to a directory by the kernel",
        }
    }
}
