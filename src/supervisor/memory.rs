//! Reading the trapped caller's memory with process_vm_readv.
//!
//! Every read is bounded; strings are read a page at a time so that a string which ends just
//! before an unmapped page is still read, and one that never ends is refused. The caller must
//! check the notification id after the read (`Listener::id_valid`): until then, the pid may
//! belong to a different process.
//!
//! [`read_chunks`] copies many pieces in one process_vm_readv; [`finish_cstr`] and
//! [`read_argv_from`] complete strings and argv from pieces read that way, with results equal
//! to those of [`read_cstr`] and [`read_argv`], which define them (and which they fall back to
//! whenever a piece was not delivered).

use std::io::{self, IoSliceMut};

use nix::sys::uio::{process_vm_readv, RemoteIoVec};
use nix::unistd::Pid;

const PAGE: usize = 4096;
/// The kernel's limit on iovecs per call (UIO_MAXIOV).
const IOV_MAX: usize = 1024;
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

/// The bytes from `addr` to the end of its page, at most `max`: the first piece of a string
/// read page by page.
pub fn first_chunk(addr: u64, max: usize) -> usize {
    (PAGE - addr as usize % PAGE).min(max)
}

/// Copy every piece `(addr, len)` of process `pid`'s memory with as few process_vm_readv calls
/// as the iovec limit allows (one, unless there are more than 1024 pieces). A piece is `None`
/// when it was not delivered in full (memory that ends, a process that is gone): the caller
/// then reads it on its own, for the exact error.
pub fn read_chunks(pid: u32, pieces: &[(u64, usize)]) -> Vec<Option<Vec<u8>>> {
    if let [(addr, len)] = *pieces {
        // The usual case, one piece: its buffer is the result (no copy, no list).
        let mut buf = vec![0u8; len];
        let remote = [RemoteIoVec {
            base: addr as usize,
            len,
        }];
        let got = read_into(pid, &mut buf, &remote);
        return vec![(len <= got).then_some(buf)];
    }
    let mut out = Vec::with_capacity(pieces.len());
    for batch in pieces.chunks(IOV_MAX) {
        let total: usize = batch.iter().map(|&(_, len)| len).sum();
        let mut buf = vec![0u8; total];
        let remote: Vec<RemoteIoVec> = batch
            .iter()
            .map(|&(addr, len)| RemoteIoVec {
                base: addr as usize,
                len,
            })
            .collect();
        let got = read_into(pid, &mut buf, &remote);
        let mut at = 0;
        for &(_, len) in batch {
            let end = at + len;
            out.push((end <= got).then(|| buf[at..end].to_vec()));
            at = end;
        }
    }
    out
}

/// One process_vm_readv of `remote` into `buf`: how many bytes came (0 on an error).
fn read_into(pid: u32, buf: &mut [u8], remote: &[RemoteIoVec]) -> usize {
    if buf.is_empty() {
        return 0;
    }
    process_vm_readv(
        Pid::from_raw(pid as i32),
        &mut [IoSliceMut::new(buf)],
        remote,
    )
    .unwrap_or(0)
}

/// Complete the string at `addr` of which `first` (read from `addr`) is the beginning: the
/// result [`read_cstr`]`(pid, addr, max)` gives, reading only what `first` lacks.
pub fn finish_cstr(pid: u32, addr: u64, mut first: Vec<u8>, max: usize) -> io::Result<Vec<u8>> {
    first.truncate(max);
    if let Some(end) = first.iter().position(|&b| b == 0) {
        first.truncate(end);
        return Ok(first);
    }
    if first.len() >= max {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    if first.is_empty() {
        return read_cstr(pid, addr, max);
    }
    let rest_at = addr
        .checked_add(first.len() as u64)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
    let rest = read_cstr(pid, rest_at, max - first.len())?;
    first.extend_from_slice(&rest);
    Ok(first)
}

/// [`read_argv`] of the array at `addr`, of which `first` (read from `addr`) is the beginning:
/// the pointers are read page by page, then the strings' first pieces in one go, then
/// whatever is left of each string on its own.
pub fn read_argv_from(
    pid: u32,
    addr: u64,
    first: Option<Vec<u8>>,
    max_args: usize,
    max_total: usize,
) -> io::Result<Vec<Vec<u8>>> {
    if addr == 0 {
        return Ok(Vec::new());
    }
    let Some(ptrs) = argv_pointers(pid, addr, first, max_args) else {
        // Too many, or an array that ends in unmapped memory: the exact reader says which.
        return read_argv(pid, addr, max_args, max_total);
    };
    // Most arguments are short: a first piece of up to 256 bytes holds them whole.
    let pieces: Vec<(u64, usize)> = ptrs.iter().map(|&p| (p, first_chunk(p, 256))).collect();
    let chunks = read_chunks(pid, &pieces);
    let mut out = Vec::with_capacity(ptrs.len());
    let mut total = 0usize;
    for (&p, chunk) in ptrs.iter().zip(chunks) {
        let max = ARG_MAX_LEN.min(max_total - total + 1);
        let s = match chunk {
            Some(c) => finish_cstr(pid, p, c, max),
            None => read_cstr(pid, p, max),
        }
        .map_err(|e| {
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
    Ok(out)
}

/// The pointers of a NULL-terminated array, fewer than `max_args`; `None` when the array is
/// longer or cannot be read in full.
fn argv_pointers(pid: u32, addr: u64, first: Option<Vec<u8>>, max_args: usize) -> Option<Vec<u64>> {
    let mut ptrs = Vec::new();
    let mut cur = addr;
    let mut chunk = first;
    loop {
        let bytes = match chunk.take() {
            Some(c) => c,
            None => {
                // At least one whole pointer, even where it crosses a page.
                let len = first_chunk(cur, (max_args - ptrs.len()) * 8).max(8);
                read_bytes(pid, cur, len).ok()?
            }
        };
        let words = bytes.len() / 8;
        for w in bytes.chunks_exact(8) {
            let p = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            if p == 0 {
                return Some(ptrs);
            }
            ptrs.push(p);
            if ptrs.len() >= max_args {
                return None;
            }
        }
        // (A first piece shorter than a pointer leaves `cur` where it is.)
        cur = cur.checked_add(words as u64 * 8)?;
    }
}
