//! Credentials of the calling *thread*, changed with raw system calls: setfsuid, setfsgid,
//! setgroups and capset act on the calling thread only, whereas glibc's wrappers of the
//! set*id family broadcast the change to every thread of the process. The supervisor's
//! workers use these to perform one call with a sandboxed caller's credentials and then put
//! their own back (see `crate::creds`).
//!
//! Also here: the resource limit of another process that the kernel applies to a truncate
//! (RLIMIT_FSIZE), the signal it then sends (tgkill), and a pidfd for one thread.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two 32-bit halves.
const CAP_V3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// A thread's three capability sets, as 64-bit masks (bit N: capability N).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapSets {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
}

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// capget(2) for thread `tid` (0: the calling thread).
pub fn capget(tid: u32) -> io::Result<CapSets> {
    let mut header = CapHeader {
        version: CAP_V3,
        pid: i32::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: the header is a valid v3 header and `data` has room for the two structures a
    // v3 capget writes; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(CapSets {
        effective: join(data[0].effective, data[1].effective),
        permitted: join(data[0].permitted, data[1].permitted),
        inheritable: join(data[0].inheritable, data[1].inheritable),
    })
}

/// capset(2) on the calling thread only (pid 0). The kernel refuses (EPERM) a permitted set
/// larger than the current one and an effective set outside the new permitted set.
pub fn capset(sets: &CapSets) -> io::Result<()> {
    let mut header = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let split = |v: u64| (v as u32, (v >> 32) as u32);
    let (e0, e1) = split(sets.effective);
    let (p0, p1) = split(sets.permitted);
    let (i0, i1) = split(sets.inheritable);
    let data = [
        CapData {
            effective: e0,
            permitted: p0,
            inheritable: i0,
        },
        CapData {
            effective: e1,
            permitted: p1,
            inheritable: i1,
        },
    ];
    // SAFETY: a valid v3 header and the two data structures a v3 capset reads; the kernel
    // only reads them (and may write the header's version, which is ours).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// setfsuid(2) on the calling thread; returns the previous fsuid. The call cannot report an
/// error: read the result back (`setfsuid(u32::MAX)` changes nothing and returns the current
/// value) to know whether it took.
pub fn setfsuid(uid: u32) -> u32 {
    // SAFETY: an integer argument; the raw system call changes this thread's fsuid only.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) as u32 }
}

/// setfsgid(2) on the calling thread; returns the previous fsgid (see [`setfsuid`]).
pub fn setfsgid(gid: u32) -> u32 {
    // SAFETY: an integer argument; the raw system call changes this thread's fsgid only.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) as u32 }
}

/// setgroups(2) on the calling thread only (the raw system call: glibc's wrapper would set
/// the groups of every thread of guard).
pub fn setgroups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: the kernel reads `groups.len()` gid_t values from the slice, which outlives the
    // call.
    let rc = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's supplementary groups.
pub fn getgroups() -> io::Result<Vec<u32>> {
    // Asked for the count first: room for the most a thread may have (65536) is a quarter of a
    // megabyte to map and unmap. Only the thread itself changes its groups.
    // SAFETY: a size of 0 asks for the count only; the kernel writes nothing.
    let count = unsafe { libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<u32>()) };
    if count < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups = vec![0u32; count as usize];
    // SAFETY: the kernel writes at most `groups.len()` gid_t values into the buffer.
    let rc = unsafe { libc::syscall(libc::SYS_getgroups, groups.len(), groups.as_mut_ptr()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(rc as usize);
    Ok(groups)
}

/// The file-size limit (RLIMIT_FSIZE, soft) of the process thread `tid` belongs to;
/// `u64::MAX` for no limit.
pub fn fsize_limit(tid: u32) -> io::Result<u64> {
    let mut old = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    let pid = i32::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: no new limit is set (null), and `old` is a valid rlimit64 the kernel writes.
    let rc = unsafe { libc::prlimit64(pid, libc::RLIMIT_FSIZE, std::ptr::null(), &mut old) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old.rlim_cur)
}

/// tgkill(2): send `sig` to thread `tid` of process `tgid`.
pub fn tgkill(tgid: u32, tid: u32, sig: i32) -> io::Result<()> {
    // SAFETY: integer arguments only.
    let rc = unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for one thread rather than a thread group.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;

/// A pidfd for thread `tid` itself (Linux 6.9); fails with EINVAL on older kernels.
pub fn pidfd_open_thread(tid: u32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments; returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: pidfd_open just returned this new descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether the task behind `pidfd` still exists (alive or a zombie not yet reaped): signal 0
/// checks without sending. Its id cannot have been given to another task while it does.
pub fn task_exists(pidfd: BorrowedFd<'_>) -> bool {
    // SAFETY: signal 0 with a null siginfo sends nothing; integer and null arguments only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_credentials_read_back() {
        let caps = capget(0).expect("capget");
        assert_eq!(caps.effective & !caps.permitted, 0);
        // Setting what we have changes nothing and succeeds.
        capset(&caps).expect("capset");
        let fsuid = setfsuid(u32::MAX);
        assert_eq!(fsuid, nix::unistd::geteuid().as_raw());
        assert_eq!(setfsgid(u32::MAX), nix::unistd::getegid().as_raw());
        assert!(getgroups().is_ok());
        let me = std::process::id();
        assert!(fsize_limit(me).is_ok());
    }

    #[test]
    fn a_thread_pidfd_outlives_its_thread_as_gone() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32)
                .expect("send");
        });
        let tid = rx.recv().expect("tid");
        let Ok(fd) = pidfd_open_thread(tid) else {
            // Older kernels, or the thread already gone: nothing to check.
            t.join().expect("join");
            return;
        };
        t.join().expect("join");
        // join returns when the thread has cleared its id, a moment before the kernel
        // releases it: wait for that.
        let gone = (0..5000).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1));
            !task_exists(std::os::fd::AsFd::as_fd(&fd))
        });
        assert!(gone, "the thread's task stays");
        let me = pidfd_open_thread(nix::unistd::gettid().as_raw() as u32).expect("self");
        assert!(task_exists(std::os::fd::AsFd::as_fd(&me)));
    }
}
