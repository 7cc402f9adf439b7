//! `guard::supervisor::decode_sockaddr` on arbitrary bytes, as connect(2) would pass them.
//!
//! Properties: never panics; fewer than 2 bytes is an error; AF_UNSPEC is `Unspecified`;
//! AF_INET is an error below 8 bytes and otherwise the `Inet` address with exactly the port and
//! IP bytes of the input; AF_INET6 likewise below/above 28 bytes; AF_UNIX with no path is
//! `Unspecified`, with a leading NUL is `Abstract` with exactly the remaining bytes, with an
//! absolute path is a `Unix` path that is normalised and stops at the first NUL; any other
//! family is `Other(family)`. Relative unix paths are resolved against pid 1's cwd through /proc;
//! that may fail (an error is then the right answer) but must not panic.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;

use guard::policy::{normalize, NetAddr};
use guard::supervisor::decode_sockaddr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = decode_sockaddr(data, 1);
    if data.len() < 2 {
        assert!(
            decoded.is_err(),
            "{} bytes decoded to {decoded:?}",
            data.len()
        );
        return;
    }
    let family = i32::from(u16::from_ne_bytes([data[0], data[1]]));
    match family {
        libc::AF_UNSPEC => assert_eq!(decoded.ok(), Some(NetAddr::Unspecified)),
        libc::AF_INET => {
            if data.len() < 8 {
                assert!(decoded.is_err(), "short AF_INET decoded to {decoded:?}");
            } else {
                let ip = Ipv4Addr::new(data[4], data[5], data[6], data[7]);
                let port = u16::from_be_bytes([data[2], data[3]]);
                let want = SocketAddr::new(IpAddr::V4(ip), port);
                assert_eq!(decoded.ok(), Some(NetAddr::Inet(want)));
            }
        }
        libc::AF_INET6 => {
            if data.len() < 28 {
                assert!(decoded.is_err(), "short AF_INET6 decoded to {decoded:?}");
            } else {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&data[8..24]);
                let port = u16::from_be_bytes([data[2], data[3]]);
                let want = SocketAddr::new(IpAddr::V6(Ipv6Addr::from(octets)), port);
                match decoded {
                    Ok(NetAddr::Inet(got)) => {
                        assert_eq!(got.ip(), want.ip());
                        assert_eq!(got.port(), want.port());
                    }
                    other => panic!("AF_INET6 decoded to {other:?}"),
                }
            }
        }
        libc::AF_UNIX => {
            let path = &data[2..];
            match path.first() {
                None => assert_eq!(decoded.ok(), Some(NetAddr::Unspecified)),
                Some(0) => assert_eq!(decoded.ok(), Some(NetAddr::Abstract(path[1..].to_vec()))),
                Some(b'/') => {
                    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                    let Ok(NetAddr::Unix(got)) = decoded else {
                        panic!("absolute unix path decoded to {decoded:?}");
                    };
                    let bytes = got.as_os_str().as_bytes();
                    assert!(got.is_absolute(), "{got:?}");
                    assert!(!bytes.contains(&0), "NUL kept in {got:?}");
                    assert_eq!(normalize(&got), got, "not normalised: {got:?}");
                    let raw = std::path::Path::new(std::ffi::OsStr::from_bytes(&path[..end]));
                    assert_eq!(normalize(raw), got, "not the given path: {got:?}");
                }
                Some(_) => match decoded {
                    Ok(NetAddr::Unix(got)) => {
                        assert!(got.is_absolute(), "relative unix path kept: {got:?}");
                        assert!(!got.as_os_str().as_bytes().contains(&0), "NUL kept");
                    }
                    Ok(other) => panic!("relative unix path decoded to {other:?}"),
                    Err(_) => {}
                },
            }
        }
        other => assert_eq!(decoded.ok(), Some(NetAddr::Other(other as u16))),
    }
});
