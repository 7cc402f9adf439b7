//! connect(2) on a raw socket address, for the supervisor's emulated connect: the address bytes
//! were copied from the caller once and are passed to the kernel as they are.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// connect(2) with `addr` as the raw `struct sockaddr` bytes.
pub fn connect_raw(sock: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // The kernel copies at most `len` bytes from `addr`; an unaligned `struct sockaddr` is fine
    // because it only reads bytes. Keep a local aligned copy anyway.
    let mut storage: libc::sockaddr_storage = {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    };
    let n = addr
        .len()
        .min(std::mem::size_of::<libc::sockaddr_storage>());
    // SAFETY: `storage` has room for `n` bytes and does not overlap `addr`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            addr.as_ptr(),
            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
            n,
        )
    };
    // SAFETY: `storage` holds `len` initialised bytes of a socket address; connect only reads.
    let rc = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr>(),
            len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
