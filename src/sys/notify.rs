//! seccomp user notification: installing a filter with a listener, and the listener ioctls
//! (RECV, SEND, ID_VALID, SET_FLAGS, ADDFD).
//!
//! Buffer sizes come from `SECCOMP_GET_NOTIF_SIZES`, never from the header: a newer kernel may
//! hand out larger structures, and RECV refuses a buffer that is not zeroed.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): wake the supervisor on the caller's CPU.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
/// `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` is not used: a trapped call stays interruptible.
const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// Sizes of the notification structures as this kernel defines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifSizes {
    pub notif: usize,
    pub resp: usize,
    pub data: usize,
}

/// Ask the kernel for its notification structure sizes (Linux 5.0).
pub fn notif_sizes() -> io::Result<NotifSizes> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes exactly one `struct seccomp_notif_sizes` to the
    // pointer, which points to a live, properly aligned local of that type.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(NotifSizes {
        notif: usize::from(sizes.seccomp_notif),
        resp: usize::from(sizes.seccomp_notif_resp),
        data: usize::from(sizes.seccomp_data),
    })
}

/// Install `prog` on the calling thread with `SECCOMP_FILTER_FLAG_NEW_LISTENER` and return the
/// listener. The caller must already have set no_new_privs. Async-signal-safe: no allocation.
pub fn install_filter_with_listener(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points to `len` valid sock_filter entries that outlive the call; the kernel
    // copies the program and only reads through the pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: on success the kernel returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One received notification, copied out of the kernel's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notif {
    pub id: u64,
    pub pid: u32,
    pub nr: i32,
    pub arch: u32,
    pub ip: u64,
    pub args: [u64; 6],
}

/// The listener side of a seccomp filter, owned by the supervisor.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    sizes: NotifSizes,
}

impl Listener {
    pub fn new(fd: OwnedFd, sizes: NotifSizes) -> Self {
        Listener { fd, sizes }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// Ask the kernel to wake the supervisor synchronously on the trapping CPU (Linux 6.6).
    pub fn set_sync_wake_up(&self) -> io::Result<()> {
        // SAFETY: SET_FLAGS takes the flag word by value; no memory is passed.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receive one notification. Blocks unless the caller polled first. `ENOENT` means the
    /// trapped task went away before it could be read (not an error for the loop).
    pub fn recv(&self) -> io::Result<Notif> {
        // u64 words keep the buffer aligned for the structure; zeroed as RECV requires.
        let words = self
            .sizes
            .notif
            .max(std::mem::size_of::<libc::seccomp_notif>())
            .div_ceil(8);
        let mut buf = [0u64; 32];
        let buf = buf
            .get_mut(..words)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        // SAFETY: `buf` is zeroed, 8-byte aligned and at least as large as the kernel's
        // `struct seccomp_notif` (checked against NOTIF_SIZES above); the kernel writes at most
        // that many bytes.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                buf.as_mut_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // Layout (stable ABI prefix): id u64 | pid u32 | flags u32 | nr i32 | arch u32 |
        // ip u64 | args [u64; 6].
        let w = |i: usize| buf.get(i).copied().unwrap_or(0);
        let mut args = [0u64; 6];
        for (i, a) in args.iter_mut().enumerate() {
            *a = w(4 + i);
        }
        Ok(Notif {
            id: w(0),
            pid: (w(1) & 0xffff_ffff) as u32,
            nr: (w(2) & 0xffff_ffff) as u32 as i32,
            arch: (w(2) >> 32) as u32,
            ip: w(3),
            args,
        })
    }

    /// Answer a notification: `error` is 0 for success with return value `val`, else a negative
    /// errno; `cont` lets the kernel carry the call out itself.
    pub fn respond(&self, id: u64, val: i64, error: i32, cont: bool) -> io::Result<()> {
        let words = self
            .sizes
            .resp
            .max(std::mem::size_of::<libc::seccomp_notif_resp>())
            .div_ceil(8);
        let mut buf = [0u64; 8];
        let buf = buf
            .get_mut(..words)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        // Layout: id u64 | val i64 | error i32 | flags u32.
        buf[0] = id;
        buf[1] = val as u64;
        let flags = if cont {
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
        } else {
            0
        };
        buf[2] = u64::from(error as u32) | (u64::from(flags) << 32);
        // SAFETY: `buf` is an aligned, initialised `struct seccomp_notif_resp` of the kernel's
        // size; the kernel only reads it.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                buf.as_mut_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// True while the notification `id` is still pending (the task has not died or been
    /// interrupted). Checked after every read of the caller's memory.
    pub fn id_valid(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads one u64 through the pointer, which points to a live local.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id as *mut u64,
            )
        };
        rc == 0
    }

    /// Whether this kernel has ADDFD and ADDFD_FLAG_SEND, asked with an id that cannot be
    /// pending: ENOENT means the ioctl and its flags were understood.
    pub fn probe_addfd(&self) -> (bool, bool) {
        let Ok(null) = std::fs::File::open("/dev/null") else {
            return (false, false);
        };
        use std::os::fd::AsFd;
        let understood = |send| {
            self.addfd(u64::MAX, null.as_fd(), false, send)
                .err()
                .and_then(|e| e.raw_os_error())
                == Some(libc::ENOENT)
        };
        (understood(false), understood(true))
    }

    /// Install `src` into the trapped task (`SECCOMP_IOCTL_NOTIF_ADDFD`). With `send`, the
    /// kernel also answers the notification with the new fd number (Linux 5.14). Returns the fd
    /// number in the target.
    pub fn addfd(
        &self,
        id: u64,
        src: BorrowedFd<'_>,
        cloexec: bool,
        send: bool,
    ) -> io::Result<i32> {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: if send {
                libc::SECCOMP_ADDFD_FLAG_SEND as u32
            } else {
                0
            },
            srcfd: src.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the argument is a valid `struct seccomp_notif_addfd` that the kernel reads.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD,
                &addfd as *const libc::seccomp_notif_addfd,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc)
    }
}
