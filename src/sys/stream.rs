//! Writing to another process's output stream without ever waiting: pwritev2(2) with
//! `RWF_NOWAIT` at the file's current position, which fails with EAGAIN where a plain write
//! would block (a full pipe or socket), and EOPNOTSUPP where the file does not support it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Write `buf` to `fd` at its current position (appending where it was opened `O_APPEND`),
/// only if that needs no wait. Returns the bytes written.
pub fn write_nowait(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `iov` describes `buf`, which outlives the call and which the kernel only reads;
    // offset -1 means the file's current position.
    let rc = unsafe { libc::pwritev2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}
