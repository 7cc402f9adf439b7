//! Reading what a sendmsg or sendmmsg points to: each `struct msghdr`'s destination, its
//! iovecs and the bytes they cover (flattened into one payload, at most
//! [`PAYLOAD_MAX`](super::super::decode::PAYLOAD_MAX)), and its control messages; each level
//! in as few process_vm_readv calls as the iovec limit allows. Errors are the kernel's for
//! the same arguments (EINVAL for a destination longer than `sockaddr_storage`, EMSGSIZE for
//! too many iovecs, ENOBUFS for too much control data, EFAULT for memory that is not there).

use std::io;

use super::super::decode::{MSGHDR_LEN, PAYLOAD_MAX};
use super::super::memory;

/// The largest socket address (`struct sockaddr_storage`).
const NAME_MAX: usize = 128;
/// The kernel's cap on iovecs per message (UIO_MAXIOV).
const IOV_MAX: usize = 1024;
/// Control data above this is refused with ENOBUFS (the kernel's `optmem_max` is 20 KiB by
/// default; a larger setting is rare).
const CONTROL_MAX: usize = 64 * 1024;
/// `struct mmsghdr`: a msghdr, the kernel's `msg_len`, padding.
pub const MMSGHDR_LEN: usize = 64;

/// One message as the caller described it, copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Msg {
    /// The destination's raw `struct sockaddr` bytes, if it names one.
    pub name: Option<Vec<u8>>,
    /// The bytes of all its iovecs, in order (at most `PAYLOAD_MAX`).
    pub payload: Vec<u8>,
    /// How many bytes the caller asked to send (more than `payload` when capped).
    pub asked: usize,
    /// The control messages as the caller laid them out.
    pub control: Vec<u8>,
}

fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(w)
}

fn half(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

/// `pieces` of process `pid`, each read in full or failing with its own error.
fn read_all(pid: u32, pieces: &[(u64, usize)]) -> io::Result<Vec<Vec<u8>>> {
    memory::read_chunks(pid, pieces)
        .into_iter()
        .zip(pieces)
        .map(|(got, &(addr, len))| match got {
            Some(b) => Ok(b),
            None => memory::read_bytes(pid, addr, len),
        })
        .collect()
}

/// The messages the `struct msghdr`s `hdrs` (each [`MSGHDR_LEN`] bytes, already copied from
/// process `pid`) describe.
pub fn read_msgs(pid: u32, hdrs: &[&[u8]]) -> io::Result<Vec<Msg>> {
    struct Hdr {
        name: (u64, usize),
        iov: (u64, usize),
        control: (u64, usize),
    }
    let mut parsed = Vec::with_capacity(hdrs.len());
    for h in hdrs {
        if h.len() < MSGHDR_LEN {
            return Err(err(libc::EFAULT));
        }
        let (name, namelen) = (word(h, 0), half(h, 8) as usize);
        let (iov, iovlen) = (word(h, 16), word(h, 24));
        let (control, controllen) = (word(h, 32), word(h, 40));
        if namelen > NAME_MAX {
            return Err(err(libc::EINVAL));
        }
        if iovlen > IOV_MAX as u64 {
            return Err(err(libc::EMSGSIZE));
        }
        if controllen > CONTROL_MAX as u64 {
            return Err(err(libc::ENOBUFS));
        }
        let some = |addr: u64, len: usize| {
            if addr == 0 || len == 0 {
                (0, 0)
            } else {
                (addr, len)
            }
        };
        parsed.push(Hdr {
            name: some(name, namelen),
            iov: some(iov, iovlen as usize * 16),
            control: some(control, controllen as usize),
        });
    }
    // Names, iovec arrays and control data of every message, in one go.
    let pieces: Vec<(u64, usize)> = parsed
        .iter()
        .flat_map(|h| [h.name, h.iov, h.control])
        .filter(|p| p.1 > 0)
        .collect();
    let mut got = read_all(pid, &pieces)?.into_iter();
    let mut take = |p: (u64, usize)| if p.1 > 0 { got.next() } else { None };
    let mut msgs = Vec::with_capacity(parsed.len());
    let mut wanted: Vec<Vec<(u64, usize)>> = Vec::with_capacity(parsed.len());
    let mut budget = PAYLOAD_MAX;
    for h in &parsed {
        let name = take(h.name);
        let iov = take(h.iov).unwrap_or_default();
        let control = take(h.control).unwrap_or_default();
        let mut asked = 0usize;
        let mut spans = Vec::new();
        for v in iov.chunks_exact(16) {
            let (base, len) = (word(v, 0), word(v, 8) as usize);
            asked = asked.saturating_add(len);
            let len = len.min(budget);
            if len > 0 {
                spans.push((base, len));
                budget -= len;
            }
        }
        wanted.push(spans);
        msgs.push(Msg {
            name,
            payload: Vec::new(),
            asked,
            control,
        });
    }
    // The payloads, in one go.
    let all: Vec<(u64, usize)> = wanted.iter().flatten().copied().collect();
    let mut bytes = read_all(pid, &all)?.into_iter();
    for (m, spans) in msgs.iter_mut().zip(&wanted) {
        for _ in spans {
            m.payload.extend(bytes.next().unwrap_or_default());
        }
    }
    Ok(msgs)
}

/// The `struct mmsghdr` vector of sendmmsg: `vlen` headers at `vec` in process `pid`.
pub fn read_mmsg(pid: u32, vec: u64, vlen: u32) -> io::Result<Vec<Msg>> {
    if vlen == 0 {
        return Ok(Vec::new());
    }
    let raw = memory::read_bytes(pid, vec, vlen as usize * MMSGHDR_LEN)?;
    let hdrs: Vec<&[u8]> = raw
        .chunks_exact(MMSGHDR_LEN)
        .map(|c| &c[..MSGHDR_LEN])
        .collect();
    read_msgs(pid, &hdrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        std::process::id()
    }

    fn hdr(name: &[u8], iov: &[libc::iovec], control: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        let ptr = |s: &[u8]| {
            if s.is_empty() {
                0u64
            } else {
                s.as_ptr() as u64
            }
        };
        h.extend_from_slice(&ptr(name).to_ne_bytes());
        h.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        h.extend_from_slice(&[0; 4]);
        h.extend_from_slice(&(iov.as_ptr() as u64).to_ne_bytes());
        h.extend_from_slice(&(iov.len() as u64).to_ne_bytes());
        h.extend_from_slice(&ptr(control).to_ne_bytes());
        h.extend_from_slice(&(control.len() as u64).to_ne_bytes());
        h.extend_from_slice(&[0; 8]);
        h
    }

    fn iov(b: &[u8]) -> libc::iovec {
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        }
    }

    #[test]
    fn a_message_is_read_whole_and_flattened() {
        let (a, b) = (b"hello ".to_vec(), b"world".to_vec());
        let name = vec![2u8, 0, 0, 53, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        let control = vec![7u8; 24];
        let iovs = [iov(&a), iov(&b)];
        let h = hdr(&name, &iovs, &control);
        let msgs = read_msgs(me(), &[&h]).expect("reads");
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].name.as_deref(), Some(name.as_slice()));
        assert_eq!(msgs[0].payload, b"hello world");
        assert_eq!(msgs[0].asked, 11);
        assert_eq!(msgs[0].control, control);
        let bare = hdr(&[], &iovs[..1], &[]);
        let msgs = read_msgs(me(), &[&bare, &h]).expect("reads");
        assert_eq!(msgs[0].name, None);
        assert_eq!(msgs[0].payload, b"hello ");
        assert_eq!(msgs[1].payload, b"hello world");
    }

    #[test]
    fn the_kernels_errors_for_bad_headers() {
        let a = b"x".to_vec();
        let iovs = [iov(&a)];
        let mut h = hdr(&[], &iovs, &[]);
        h[8..12].copy_from_slice(&200u32.to_ne_bytes());
        h[0..8].copy_from_slice(&(a.as_ptr() as u64).to_ne_bytes());
        let e = read_msgs(me(), &[&h]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let mut h = hdr(&[], &iovs, &[]);
        h[24..32].copy_from_slice(&2000u64.to_ne_bytes());
        assert_eq!(
            read_msgs(me(), &[&h]).unwrap_err().raw_os_error(),
            Some(libc::EMSGSIZE)
        );
        let bad = [libc::iovec {
            iov_base: 8 as *mut libc::c_void,
            iov_len: 4,
        }];
        let h = hdr(&[], &bad, &[]);
        assert_eq!(
            read_msgs(me(), &[&h]).unwrap_err().raw_os_error(),
            Some(libc::EFAULT)
        );
    }
}
