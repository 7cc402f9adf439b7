//! Socket addresses as connect(2) passes them, decoded into the policy's [`NetAddr`]; and the
//! address guard itself connects to (a relative unix socket path made absolute).

use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::policy::NetAddr;

use super::target;

/// The address to connect to, as bytes for the kernel: a relative unix socket path is made
/// absolute (guard connects from its own cwd, not the caller's).
pub fn absolute_unix(raw: &[u8], addr: &NetAddr) -> Vec<u8> {
    if let NetAddr::Unix(p) = addr {
        let bytes = p.as_os_str().as_bytes();
        // sun_path holds 108 bytes including the NUL.
        if bytes.len() < 108 {
            let mut out = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
            out.extend_from_slice(bytes);
            out.push(0);
            return out;
        }
    }
    raw.to_vec()
}

/// Decode a `struct sockaddr` of `raw.len()` bytes (as given to connect). Unix paths that are
/// relative are resolved against the caller's cwd.
pub fn decode_sockaddr(raw: &[u8], pid: u32) -> io::Result<NetAddr> {
    let einval = || io::Error::from_raw_os_error(libc::EINVAL);
    let family = u16::from_ne_bytes([
        *raw.first().ok_or_else(einval)?,
        *raw.get(1).ok_or_else(einval)?,
    ]);
    match i32::from(family) {
        libc::AF_UNSPEC => Ok(NetAddr::Unspecified),
        libc::AF_INET => {
            let b = raw.get(2..8).ok_or_else(einval)?;
            let port = u16::from_be_bytes([b[0], b[1]]);
            let ip = std::net::Ipv4Addr::new(b[2], b[3], b[4], b[5]);
            Ok(NetAddr::Inet((ip, port).into()))
        }
        libc::AF_INET6 => {
            let b = raw.get(2..28).ok_or_else(einval)?;
            let port = u16::from_be_bytes([b[0], b[1]]);
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&b[6..22]);
            let ip = std::net::Ipv6Addr::from(octets);
            Ok(NetAddr::Inet((ip, port).into()))
        }
        libc::AF_UNIX => {
            let path = raw.get(2..).unwrap_or(&[]);
            match path.first() {
                None => Ok(NetAddr::Unspecified),
                Some(0) => Ok(NetAddr::Abstract(path[1..].to_vec())),
                Some(_) => {
                    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                    let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&path[..end]));
                    let abs = if p.is_absolute() {
                        p.to_path_buf()
                    } else {
                        target::caller_cwd(pid)?.join(p)
                    };
                    Ok(NetAddr::Unix(target::lexical(&abs)))
                }
            }
        }
        other => Ok(NetAddr::Other(other as u16)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_ipv4_and_ipv6() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&8080u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(
            decode_sockaddr(&v4, 1).expect("v4"),
            NetAddr::Inet("127.0.0.1:8080".parse().expect("addr"))
        );
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&443u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(
            decode_sockaddr(&v6, 1).expect("v6"),
            NetAddr::Inet("[::1]:443".parse().expect("addr"))
        );
    }

    #[test]
    fn decodes_unix_abstract_and_rejects_garbage() {
        let mut a = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(b"\0name");
        assert_eq!(
            decode_sockaddr(&a, 1).expect("abstract"),
            NetAddr::Abstract(b"name".to_vec())
        );
        let mut p = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        p.extend_from_slice(b"/run/x.sock\0");
        assert_eq!(
            decode_sockaddr(&p, 1).expect("path"),
            NetAddr::Unix("/run/x.sock".into())
        );
        assert!(decode_sockaddr(&[2], 1).is_err());
        let mut short = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        short.push(1);
        assert!(decode_sockaddr(&short, 1).is_err());
    }
}
