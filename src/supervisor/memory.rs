//! Reading the trapped caller's memory with process_vm_readv.
//!
//! Every read is bounded; strings are read a page at a time so that a string which ends just
//! before an unmapped page is still read, and one that never ends is refused. The caller must
//! check the notification id after the read (`Listener::id_valid`): until then, the pid may
//! belong to a different process.

use std::io::{self, IoSliceMut};

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

const PAGE: usize = 4096;
/// PATH_MAX, including the NUL.
pub const PATH_MAX: usize = 4096;
/// The kernel's MAX_ARG_STRLEN.
pub const ARG_MAX_LEN: usize = 128 * 1024;

/// Read exactly `len` bytes at `addr` in process `pid`.
pub fn read_bytes(pid: u32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut buf = vec![0u8; len];
    let n = process_vm_readv(
        Pid::from_raw(pid as i32),
        &mut [IoSliceMut::new(&mut buf)],
        &[RemoteIoVec {
            base: addr as usize,
            len,
        }],
    )?;
    if n != len {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

/// Read a NUL-terminated string of at most `max` bytes (NUL included) at `addr`.
/// `ENAMETOOLONG` when no NUL is found within `max` bytes; `EFAULT` when memory ends first.
pub fn read_cstr(pid: u32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut out = Vec::new();
    let mut cur = addr;
    while out.len() < max {
        let to_page_end = PAGE - (cur as usize % PAGE);
        let chunk = to_page_end.min(max - out.len());
        let mut buf = vec![0u8; chunk];
        let n = process_vm_readv(
            Pid::from_raw(pid as i32),
            &mut [IoSliceMut::new(&mut buf)],
            &[RemoteIoVec {
                base: cur as usize,
                len: chunk,
            }],
        )?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        cur = cur
            .checked_add(n as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

/// Read a NULL-terminated array of pointers (argv) and the strings they point to.
/// Bounded by `max_args` entries and `max_total` bytes of strings: `E2BIG` beyond.
pub fn read_argv(
    pid: u32,
    addr: u64,
    max_args: usize,
    max_total: usize,
) -> io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    if addr == 0 {
        // Linux accepts a NULL argv (as an empty one).
        return Ok(out);
    }
    let mut total = 0usize;
    for i in 0..max_args {
        let raw = read_bytes(pid, addr + (i as u64) * 8, 8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(&raw);
        let p = u64::from_ne_bytes(w);
        if p == 0 {
            return Ok(out);
        }
        let s = read_cstr(pid, p, ARG_MAX_LEN.min(max_total - total + 1)).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENAMETOOLONG) {
                io::Error::from_raw_os_error(libc::E2BIG)
            } else {
                e
            }
        })?;
        total += s.len() + 1;
        out.push(s);
        if total > max_total {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
    }
    Err(io::Error::from_raw_os_error(libc::E2BIG))
}
